#!/usr/bin/env bash
# Before/after of the performance issue's levers, side by side with the peers, in one run:
# fillrandom and YCSB A (load + run in one process, YCSB's order) at one value size, each
# engine in its own memory cgroup, page cache dropped before every phase, engines
# interleaved round by round so that the machine's drift hits all of them alike.
#
#   WISCKEY_BEFORE_BIN=/path/to/old/wisckey-bench bench/run-levers.sh
#
# The "before" binary is any earlier build of wisckey-bench (e.g. `git worktree add
# /tmp/old <commit> && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p
# wisckey-bench`). Peers come from bench/setup.sh (bench/build/{leveldb,rocksdb}_bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
NUM=${NUM:-1000000}
VALUE=${VALUE:-1024}
OPS=${OPS:-50000}
ROUNDS=${ROUNDS:-2}
MEM_LIMIT=${MEM_LIMIT:-512M}
ENGINES=${ENGINES:-"wisckey-before wisckey rocksdb-blob leveldb-pread"}
PHASES=${PHASES:-"fillrandom ycsb-a"}
OUT_DIR=${OUT_DIR:-$here/results/levers-$(date -u +%Y%m%dT%H%M%SZ)}
. "$here/lib.sh"
require_real_disk "$DATA_DIR"
mkdir -p "$OUT_DIR"

cmd_of() {
  case $1 in
    wisckey-before) echo "${WISCKEY_BEFORE_BIN:?set WISCKEY_BEFORE_BIN} bench" ;;
    wisckey-nocache) echo "$WISCKEY_BIN bench --value_cache_size=0" ;;
    *) engine_cmd "$1" ;;
  esac
}

{
  echo "# levers run $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD)"
  echo "NUM=$NUM VALUE=$VALUE OPS=$OPS ROUNDS=$ROUNDS MEM_LIMIT=$MEM_LIMIT ENGINES=$ENGINES PHASES=$PHASES"
  echo "WISCKEY_BIN=$WISCKEY_BIN WISCKEY_FLAGS=$WISCKEY_FLAGS"
  echo "WISCKEY_BEFORE_BIN=${WISCKEY_BEFORE_BIN:-} load: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT_DIR/params.txt"

for round in $(seq 1 "$ROUNDS"); do
  for engine in $ENGINES; do
    cmd=$(cmd_of "$engine")
    for phase in $PHASES; do
      rm -rf "${DATA_DIR:?}/levers-$engine"
      drop_caches
      log=$OUT_DIR/$engine.$phase.r$round.txt
      case $phase in
        fillrandom) flags="--benchmarks=fillrandom --num=$NUM --value_size=$VALUE" ;;
        ycsb-a) flags="--ycsb=a --num=$NUM --reads=$OPS --record_size=$VALUE" ;;
      esac
      # shellcheck disable=SC2086
      /usr/bin/time -f "cpu_user_s=%U cpu_sys_s=%S" "$here/cgexec.sh" "$engine" "$MEM_LIMIT" \
        $cmd $flags --db="$DATA_DIR/levers-$engine" > "$log" 2>&1 \
        || { echo "$engine $phase failed:"; tail -5 "$log"; }
      echo "r$round $engine $phase: $(awk '/ops\/sec/ {for (i = 1; i <= NF; i++) if ($i ~ /^ops\/sec/) print $1, $(i-1)}' "$log" | paste -sd';') $(grep cpu_user "$log")" \
        | tee -a "$OUT_DIR/summary.txt"
    done
    rm -rf "${DATA_DIR:?}/levers-$engine"
  done
done
echo "raw outputs in $OUT_DIR"
