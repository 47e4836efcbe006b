#!/usr/bin/env bash
# run-scaling.sh: how wisckey's put, sync-put and get paths scale with threads on one machine.
# wisckey alone (no peers), no memory limit: the page cache holds the data, so this measures the
# CPU paths, locks and group commit, not the device. Meant for a machine with more cores than
# the 2-core VM the suite runs on.
#
#   fillrandom  --threads=T --num=NUM          (each thread NUM puts over key space 0..NUM)
#   fillsync    --threads=T --num=SYNC_NUM     (every put a sync write: group commit)
#   readrandom  --threads=T --reads=READS      (per thread, on a DB of NUM keys loaded once)
#
# Parameters (environment): THREADS="1 2 4 8 16" NUM=250000 SYNC_NUM=2000 READS=200000
#   PHASES="fill sync read" (any subset)
#   VALUE_SIZE=1024 DATA_DIR=/tmp/wisckey-scaling WISCKEY_BIN (default target/release)
#   BENCH_FLAGS (added to every run, e.g. "--gc_space_amp_target=inf" to keep GC out of reads)
#   OUT_DIR (default bench/results/scaling-<timestamp>)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
THREADS=${THREADS:-"1 2 4 8 16"}
NUM=${NUM:-250000}
SYNC_NUM=${SYNC_NUM:-2000}
READS=${READS:-200000}
VALUE_SIZE=${VALUE_SIZE:-1024}
DATA_DIR=${DATA_DIR:-/tmp/wisckey-scaling}
PHASES=${PHASES:-"fill sync read"}
WISCKEY_BIN=${WISCKEY_BIN:-$root/target/release/wisckey-bench}
OUT_DIR=${OUT_DIR:-$here/results/scaling-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT_DIR"
if [[ -e $DATA_DIR ]]; then
  echo "run-scaling.sh: $DATA_DIR exists; pick a DATA_DIR that does not (nothing is deleted)" >&2
  exit 1
fi
mkdir -p "$DATA_DIR"
{
  echo "# scaling run $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)"
  echo "PHASES=$PHASES THREADS=$THREADS NUM=$NUM SYNC_NUM=$SYNC_NUM READS=$READS VALUE_SIZE=$VALUE_SIZE DATA_DIR=$DATA_DIR BENCH_FLAGS=${BENCH_FLAGS:-}"
  echo "cpus=$(nproc) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
} | tee "$OUT_DIR/params.txt"

bench() { # name out-file flags...
  local out=$OUT_DIR/$1.txt
  shift
  # shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
  "$WISCKEY_BIN" bench --quiet --value_size="$VALUE_SIZE" ${BENCH_FLAGS:-} "$@" > "$out" 2>&1
  grep -E '^[a-z]+ +: .*ops/sec' "$out" | sed "s|^|$(basename "$out" .txt): |"
  grep -m1 -oE 'cpu=[0-9]+%' "$out" || true
}

has() { [[ " $PHASES " == *" $1 "* ]]; }
for t in $THREADS; do
  if has fill; then
    bench "fillrandom-${t}t" --benchmarks=fillrandom --threads="$t" --num="$NUM" --db="$DATA_DIR/fill-$t"
    rm -rf "$DATA_DIR/fill-$t" # this script's own scratch database
  fi
  if has sync; then
    bench "fillsync-${t}t" --benchmarks=fillrandom --sync=1 --threads="$t" --num="$SYNC_NUM" --db="$DATA_DIR/sync-$t"
    rm -rf "$DATA_DIR/sync-$t"
  fi
done
if has read; then
  bench load --benchmarks=fillrandom --threads=1 --num=$((NUM * 8)) --db="$DATA_DIR/read"
  for t in $THREADS; do
    bench "readrandom-${t}t" --benchmarks=readrandom --threads="$t" --num=$((NUM * 8)) --reads="$READS" \
      --use_existing_db=1 --db="$DATA_DIR/read"
  done
fi
rm -rf "$DATA_DIR"
echo "scaling done: $OUT_DIR"
