#!/usr/bin/env bash
# run-redis-large.sh: `wisckey serve` holding a data set several times its memory limit,
# where redis-server (an in-memory store) cannot run at all: load it through the Redis
# protocol, then measure GET throughput and latency percentiles with redis-benchmark.
#
#   DATA_MIB=8192 MEM_LIMIT=1G bench/run-redis-large.sh
#
# The server runs in its own memory cgroup (bench/cgexec.sh: page cache included), so reads
# that miss its caches go to the disk. Keys are redis-benchmark's own `key:%012d`, written
# once each in order by `redis-cli --pipe` (values of VALUE bytes), so its `-r KEYS` GETs
# hit only existing keys. WISCKEY_BIN=/path/to/wisckey uses that binary instead of building
# this tree (REV names it in the summary). With REDIS=1, redis-server is then loaded the same
# way under the same limit, to show where it stops. Writes bench/results/redis-large-<date>/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
DATA_MIB=${DATA_MIB:-8192}
VALUE=${VALUE:-16384}
MEM_LIMIT=${MEM_LIMIT:-1G}
GETS=${GETS:-20000}
PORT=${PORT:-16390}
REDIS=${REDIS:-0}
. "$here/lib.sh"
require_real_disk "$DATA_DIR"
keys=$((DATA_MIB * 1024 * 1024 / VALUE))

for tool in redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-tools >/dev/null; }
done
if [[ -z ${WISCKEY_BIN:-} ]]; then
  (cd "$root" && cargo build --release -p wisckey-cli)
fi
out=$root/bench/results/redis-large-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
bin=$(mktemp -d)/wisckey # a private copy: a concurrent build must not replace it mid-run
cp "${WISCKEY_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/wisckey}" "$bin"
db=$DATA_DIR/redis-large
rm -rf "$db"

server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT
wait_ready() {
  for _ in $(seq 300); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  return 1
}
# RESP SET commands for keys 0..keys-1, values of VALUE bytes that differ per key.
generate() {
  python3 - "$keys" "$VALUE" <<'EOF'
import os, sys
keys, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
base = os.urandom(size)
for i in range(keys):
    key = b"key:%012d" % i
    value = i.to_bytes(8, "little") + base[8:]
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
EOF
}

{
  echo "# run-redis-large.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) wisckey ${REV:-$(git -C "$root" rev-parse --short HEAD)}"
  echo "DATA_MIB=$DATA_MIB VALUE=$VALUE keys=$keys MEM_LIMIT=$MEM_LIMIT GETS=$GETS DATA_DIR=$DATA_DIR ($fstype)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/summary.txt"

"$here/cgexec.sh" wisckey-serve "$MEM_LIMIT" "$bin" serve --db "$db" --port "$PORT" \
  --appendfsync everysec 2>>"$out/server.log" &
server_pid=$!
wait_ready
started=$(date +%s.%N)
generate | redis-cli -p "$PORT" --pipe > "$out/load.txt" 2>&1
loaded=$(date +%s.%N)
echo "load: $keys SETs of $VALUE B in $(awk "BEGIN { printf \"%.1f\", $loaded - $started }") s: $(tail -1 "$out/load.txt")" | tee -a "$out/summary.txt"
echo "dbsize: $(redis-cli -p "$PORT" DBSIZE); database on disk: $(du -sh "$db" | cut -f1)" | tee -a "$out/summary.txt"

# Cold reads: restart the server (its caches empty) and drop the page cache.
stop_server
drop_caches
"$here/cgexec.sh" wisckey-serve "$MEM_LIMIT" "$bin" serve --db "$db" --port "$PORT" \
  --appendfsync everysec 2>>"$out/server.log" &
server_pid=$!
wait_ready
for clients in 50 1; do
  redis-benchmark -p "$PORT" -t get -n "$GETS" -r "$keys" -d "$VALUE" -c "$clients" --csv \
    > "$out/get-c$clients.csv" 2>&1
  echo "GET, $clients clients, uniform over $keys keys (rps, avg, min, p50, p95, p99, max ms): $(tail -1 "$out/get-c$clients.csv")" | tee -a "$out/summary.txt"
done
echo "found: $(redis-cli -p "$PORT" GET key:000000000123 | wc -c) bytes for key:000000000123" | tee -a "$out/summary.txt"
peak=$(cat /sys/fs/cgroup/wisckey-bench-wisckey-serve/memory.peak 2>/dev/null || cat /sys/fs/cgroup/memory/wisckey-bench-wisckey-serve/memory.max_usage_in_bytes 2>/dev/null || echo "?")
echo "server cgroup peak memory (page cache included): $peak bytes" | tee -a "$out/summary.txt"
stop_server
rm -rf "$db"

if [[ $REDIS == 1 ]]; then
  command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
  rdir=$DATA_DIR/redis-large-redis
  rm -rf "$rdir" && mkdir -p "$rdir"
  "$here/cgexec.sh" redis-server "$MEM_LIMIT" redis-server --port "$PORT" --bind 127.0.0.1 \
    --dir "$rdir" --appendonly yes --appendfsync everysec --save '' --daemonize no \
    --logfile "$out/redis-server.log" &
  server_pid=$!
  wait_ready
  generate | timeout 600 redis-cli -p "$PORT" --pipe > "$out/redis-load.txt" 2>&1 || true
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "redis-server: alive after the load; dbsize $(redis-cli -p "$PORT" DBSIZE)" | tee -a "$out/summary.txt"
  else
    wait "$server_pid" 2>/dev/null || echo "redis-server exited with status $? during the load" | tee -a "$out/summary.txt"
    server_pid=
  fi
  echo "redis-cli --pipe: $(tail -2 "$out/redis-load.txt" | paste -sd' ')" | tee -a "$out/summary.txt"
  stop_server
  rm -rf "$rdir"
fi
echo "raw outputs in $out"
