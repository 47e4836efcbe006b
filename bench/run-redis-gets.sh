#!/usr/bin/env bash
# run-redis-gets.sh: GETs that hit, against `wisckey serve` and redis-server, with the
# server's CPU time per GET. run-redis.sh's GET phase mostly misses (its SET phase writes
# N keys drawn from a 100,000-key space); here every server first gets 100,000 SETs over
# KEYS keys (-P 16), then GETS GETs over the same keys, so nearly every GET returns a value.
# CPU per GET (user + system of the server process, from /proc) is steadier on a shared
# machine than requests per second, which also depend on redis-benchmark's share of the
# cores. Servers run interleaved, ROUNDS times, `--appendfsync always` (reads never sync;
# the mode only matters for the preload). After the preload the script waits (up to 60 s)
# until the server is idle: the preload's overwrites start wisckey's value-log GC and
# redis-server's AOF rewrite, work that belongs to the writes, not to the GETs measured.
#
#   ROUNDS=3 KEYS=20000 GETS_1K=400000 GETS_16K=200000 bench/run-redis-gets.sh
#
# WISCKEY_BIN / BASELINE_BIN as in run-redis.sh (BASELINE_BIN adds a `base` server).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-20000}
GETS_1K=${GETS_1K:-400000}
GETS_16K=${GETS_16K:-200000}
CLIENTS=${CLIENTS:-50}
DB_ROOT=${DB_ROOT:-${TMPDIR:-/tmp}}
# `--appendfsync always` times fsyncs: on tmpfs they cost nothing and the figures mean nothing.
case $(stat -f -c %T "$DB_ROOT") in
  tmpfs | ramfs) echo "DB_ROOT=$DB_ROOT is in memory; set DB_ROOT to a directory on a real disk" >&2; exit 1 ;;
esac
PORT=${PORT:-16381}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
if [ -z "${WISCKEY_BIN:-}" ]; then
  (cd "$root" && cargo build --release -p wisckey-cli)
fi
out=$root/bench/results/redis-gets-$(date +%Y%m%d-%H%M)
mkdir -p "$out"
bin=$(mktemp -d)/wisckey
cp "${WISCKEY_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/wisckey}" "$bin"
engines=(wisckey redis)
if [ -n "${BASELINE_BIN:-}" ]; then
  base_bin=$(mktemp -d)/wisckey-base
  cp "$BASELINE_BIN" "$base_bin"
  engines=(wisckey redis base)
fi
{
  echo "# run-redis-gets.sh $(date -u +%Y-%m-%dT%H:%MZ): ROUNDS=$ROUNDS KEYS=$KEYS GETS_1K=$GETS_1K GETS_16K=$GETS_16K CLIENTS=$CLIENTS"
  echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB memory; data in $DB_ROOT ($(df -T "$DB_ROOT" | awk 'NR==2 {print $2}'))"
  echo "# $(redis-server --version | cut -d' ' -f1-3); wisckey ${REV:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}${BASELINE_BIN:+; base $BASELINE_BIN ${BASE_REV:-}}"
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
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CPU ticks of process $1 and its children (redis's AOF rewrite runs in a child).
busy_ticks() {
  local children
  children=$( { ps --ppid "$1" -o times= || true; } | awk '{s += $1} END {print s * 100 + 0}')
  echo $(( $(cpu_ticks "$1") + children ))
}
# Waits (at most 60 s) until process $1 and its children used under 3 ticks in a second.
wait_idle() {
  local a b
  for _ in $(seq 60); do
    a=$(busy_ticks "$1")
    sleep 1
    b=$(busy_ticks "$1")
    [ $((b - a)) -lt 3 ] && return 0
  done
  return 0
}

echo "round,engine,value,pipeline,gets,rps,cpu_us_per_get" > "$out/gets.csv"
for round in $(seq "$ROUNDS"); do
  for size in 1024 16384; do
    gets=$GETS_1K; [ "$size" = 16384 ] && gets=$GETS_16K
    for pipeline in 1 16; do
      for engine in "${engines[@]}"; do
        dir=$(mktemp -d "$DB_ROOT/redis-gets.XXXXXX")
        case $engine in
          wisckey) "$bin" serve --db "$dir" --port "$PORT" --appendfsync always 2>>"$out/server.log" & ;;
          base) "$base_bin" serve --db "$dir" --port "$PORT" --appendfsync always 2>>"$out/server.log" & ;;
          redis) redis-server --port "$PORT" --bind 127.0.0.1 --dir "$dir" --appendonly yes \
                   --appendfsync always --save '' --daemonize no --logfile "$out/server.log" & ;;
        esac
        server_pid=$!
        for _ in $(seq 100); do
          redis-cli -p "$PORT" PING >/dev/null 2>&1 && break
          sleep 0.1
        done
        redis-benchmark -p "$PORT" -t set -n 100000 -r "$KEYS" -c "$CLIENTS" -d "$size" -P 16 -q >/dev/null 2>&1
        wait_idle "$server_pid"
        before=$(cpu_ticks "$server_pid")
        rps=$(redis-benchmark -p "$PORT" -t get -n "$gets" -r "$KEYS" -c "$CLIENTS" -d "$size" \
                -P "$pipeline" --csv | tail -1 | cut -d, -f2 | tr -d '"')
        after=$(cpu_ticks "$server_pid")
        ticks=$(getconf CLK_TCK)
        cpu=$(python3 -c "print(f'{($after - $before) / $ticks * 1e6 / $gets:.2f}')")
        echo "$round,$engine,$size,$pipeline,$gets,$rps,$cpu" >> "$out/gets.csv"
        stop_server
        rm -rf "$dir"
        echo "round $round: $engine -d $size -P $pipeline: $rps GET/s, $cpu us CPU per GET"
      done
    done
  done
done

python3 - "$out/gets.csv" >> "$out/summary.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
engines = sorted({r["engine"] for r in rows}, key=["wisckey", "redis", "base"].index)
print()
print("Medians over rounds (lowest-highest). CPU: the server's user+system microseconds per GET.")
print()
head = " | ".join(f"{e} GET/s | {e} CPU us/GET" for e in engines)
print(f"| value | -P | {head} | wisckey/redis GET/s | wisckey/redis CPU |" + (" wisckey/base GET/s | wisckey/base CPU |" if "base" in engines else ""))
print("|---|---|" + "---|---|" * len(engines) + "---|---|" + ("---|---|" if "base" in engines else ""))
def med(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
for size in ("1024", "16384"):
    for pipe in ("1", "16"):
        pick = lambda e, f: [float(r[f]) for r in rows if (r["engine"], r["value"], r["pipeline"]) == (e, size, pipe)]
        cells = []
        for e in engines:
            cells += [f"{statistics.median(pick(e, 'rps')):,.0f}", f"{statistics.median(pick(e, 'cpu_us_per_get')):.2f}"]
        def ratio(a, b, f):
            by_round = {}
            for r in rows:
                if (r["value"], r["pipeline"]) == (size, pipe):
                    by_round.setdefault(r["round"], {})[r["engine"]] = float(r[f])
            return [d[a] / d[b] for d in by_round.values() if a in d and b in d and d[b] > 0]
        cells += [med(ratio("wisckey", "redis", "rps")), med(ratio("wisckey", "redis", "cpu_us_per_get"))]
        if "base" in engines:
            cells += [med(ratio("wisckey", "base", "rps")), med(ratio("wisckey", "base", "cpu_us_per_get"))]
        label = "1 KiB" if size == "1024" else "16 KiB"
        print(f"| {label} | {pipe} | " + " | ".join(cells) + " |")
PY
cat "$out/summary.txt"
