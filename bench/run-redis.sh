#!/usr/bin/env bash
# run-redis.sh: redis-benchmark against `wisckey serve` and Debian's redis-server, one run.
# Servers: wisckey with --appendfsync always and everysec; redis-server with appendonly yes
# and appendfsync always and everysec (no RDB snapshots). Each on 127.0.0.1 with a fresh
# data directory under DB_ROOT. Workload: redis-benchmark -t set,get,mset,incr -c 50, with
# -P 1 and -P 16, values of 1 KiB and 16 KiB (-d), keys drawn from -r KEYSPACE.
#
#   N_1K=20000 N_16K=5000 KEYSPACE=100000 bench/run-redis.sh
#
# Installs redis-server and redis-tools with apt when missing (needs root). Writes one CSV
# per run and summary.txt (requests per second, p50/p99 ms; wisckey/redis ratios) to
# bench/results/redis-<date>/.
#
# SETTLE_SECS=2: pause after each server's data directory is deleted (see the loop).
# GET_X=1: GETs per cell as a multiple of N (then -t set, -t get, -t mset,incr run one
# after the other). GETs take no sync, so at N_16K=20000 a pipelined GET cell lasts under
# 0.1 s and its ratio moved 0.3-0.9 between runs; GET_X=10 made it last 0.4-0.8 s.
#
# Before/after in one run: BASELINE_BIN=/path/to/an/older/wisckey adds a third server,
# `base`, run right after wisckey and redis for every cell (interleaved, so a noisy
# machine hits all three alike), and a wisckey/base column. WISCKEY_BIN=/path/to/wisckey
# uses that binary instead of building this tree (REV names it in the summary).
# WISCKEY_ARGS / BASELINE_ARGS: extra `wisckey serve` flags for either, e.g.
# WISCKEY_ARGS="--threads 1" BASELINE_BIN=<the same binary> compares two ways of serving.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
N_1K=${N_1K:-20000}
N_16K=${N_16K:-5000}
KEYSPACE=${KEYSPACE:-100000}
CLIENTS=${CLIENTS:-50}
GET_X=${GET_X:-1}
DB_ROOT=${DB_ROOT:-${TMPDIR:-/tmp}}
# `--appendfsync always` times fsyncs: on tmpfs they cost nothing and the figures mean nothing.
case $(stat -f -c %T "$DB_ROOT") in
  tmpfs | ramfs) echo "DB_ROOT=$DB_ROOT is in memory; set DB_ROOT to a directory on a real disk" >&2; exit 1 ;;
esac
PORT=${PORT:-16380}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
if [ -z "${WISCKEY_BIN:-}" ]; then
  (cd "$root" && cargo build --release -p wisckey-cli)
fi
out=$root/bench/results/redis-$(date +%Y%m%d-%H%M)
mkdir -p "$out"
# A private copy: a concurrent build must not replace the binary mid-run.
bin=$(mktemp -d)/wisckey
cp "${WISCKEY_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/wisckey}" "$bin"
base_bin=
servers=("wisckey always" "redis always" "wisckey everysec" "redis everysec")
if [ -n "${BASELINE_BIN:-}" ]; then
  base_bin=$(mktemp -d)/wisckey-base
  cp "$BASELINE_BIN" "$base_bin"
  servers=("wisckey always" "redis always" "base always"
           "wisckey everysec" "redis everysec" "base everysec")
fi

{
  echo "# run-redis.sh $(date -u +%Y-%m-%dT%H:%MZ): N_1K=$N_1K N_16K=$N_16K GET_X=$GET_X KEYSPACE=$KEYSPACE CLIENTS=$CLIENTS"
  echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB memory; data in $DB_ROOT ($(df -T "$DB_ROOT" | awk 'NR==2 {print $2}'))"
  echo "# $(redis-server --version | cut -d' ' -f1-3); wisckey ${REV:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}${WISCKEY_ARGS:+ ($WISCKEY_ARGS)}${BASELINE_BIN:+; base $BASELINE_BIN ${BASE_REV:-}${BASELINE_ARGS:+ ($BASELINE_ARGS)}}"
} > "$out/summary.txt"

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap stop_server EXIT

start_server() { # engine fsync dir
  case $1 in
    # shellcheck disable=SC2086 # the extra flags are meant to be split into words
    wisckey) "$bin" serve --db "$3" --port "$PORT" --appendfsync "$2" ${WISCKEY_ARGS:-} 2>>"$out/server.log" & ;;
    # shellcheck disable=SC2086
    base) "$base_bin" serve --db "$3" --port "$PORT" --appendfsync "$2" ${BASELINE_ARGS:-} 2>>"$out/server.log" & ;;
    redis) redis-server --port "$PORT" --bind 127.0.0.1 --dir "$3" --appendonly yes \
             --appendfsync "$2" --save '' --daemonize no --logfile "$out/server.log" & ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do
    redis-cli -p "$PORT" PING >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server $1 did not start" >&2
  exit 1
}

# rb TESTS N: one redis-benchmark run of the current cell, CSV on stdout.
rb() {
  redis-benchmark -p "$PORT" -t "$1" -n "$2" -r "$KEYSPACE" -c "$CLIENTS" \
    -d "$size" -P "$pipeline" --csv
}

for size in 1024 16384; do
  n=$N_1K; [ "$size" = 16384 ] && n=$N_16K
  for pipeline in 1 16; do
    for server in "${servers[@]}"; do
      set -- $server
      dir=$(mktemp -d "$DB_ROOT/redis-bench.XXXXXX")
      start_server "$1" "$2" "$dir"
      csv=$out/$1-$2-d$size-P$pipeline.csv
      if [ "$GET_X" = 1 ]; then
        rb set,get,mset,incr "$n" > "$csv"
      else
        # One CSV header: the later runs' first lines dropped.
        { rb set "$n"; rb get $((n * GET_X)) | tail -n +2; rb mset,incr "$n" | tail -n +2; } > "$csv"
      fi
      stop_server
      rm -rf "$dir"
      # The root file system is mounted with `discard`: right after a deletion the device
      # trims, and the next server's first syncs were slower (2026-11-26: the server run
      # right after redis-server ran at 0.74-0.84 of the one after it, until this pause).
      sync
      sleep "${SETTLE_SECS:-2}"
      echo "done: $1 $2 -d $size -P $pipeline"
    done
  done
done

python3 - "$out" >> "$out/summary.txt" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.csv"))):
    engine, fsync, size, pipe = os.path.basename(path)[:-4].split("-")
    with open(path) as f:
        for r in csv.DictReader(f):
            test = r["test"].split(" ")[0]
            rows[(size, pipe, fsync, test, engine)] = (float(r["rps"]), r.get("p50_latency_ms", ""), r.get("p99_latency_ms", ""))
has_base = any(k[4] == "base" for k in rows)
print()
if has_base:
    print("| value | -P | appendfsync | test | wisckey rps | redis rps | wisckey/redis | base rps | base/redis | wisckey/base | wisckey p50/p99 ms | redis p50/p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
else:
    print("| value | -P | appendfsync | test | wisckey rps | redis rps | wisckey/redis | wisckey p50/p99 ms | redis p50/p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
for size in ("d1024", "d16384"):
    for pipe in ("P1", "P16"):
        for fsync in ("always", "everysec"):
            for test in ("SET", "GET", "MSET", "INCR"):
                w = rows.get((size, pipe, fsync, test, "wisckey"))
                r = rows.get((size, pipe, fsync, test, "redis"))
                if not w or not r:
                    continue
                b = rows.get((size, pipe, fsync, test, "base"))
                if has_base and b:
                    print(f"| {size[1:]} | {pipe[1:]} | {fsync} | {test} | {w[0]:.0f} | {r[0]:.0f} | {w[0]/r[0]:.2f} | {b[0]:.0f} | {b[0]/r[0]:.2f} | {w[0]/b[0]:.2f} | {w[1]}/{w[2]} | {r[1]}/{r[2]} |")
                else:
                    print(f"| {size[1:]} | {pipe[1:]} | {fsync} | {test} | {w[0]:.0f} | {r[0]:.0f} | {w[0]/r[0]:.2f} | {w[1]}/{w[2]} | {r[1]}/{r[2]} |")
PY
cat "$out/summary.txt"
