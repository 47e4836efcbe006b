#!/usr/bin/env bash
# fill-ab.sh: non-sync fillrandom side by side at the full suite's parameters (2 GiB of data,
# 16-byte keys, seed 301, each process in a 1 GiB memory cgroup, page cache dropped before
# each), ROUNDS rounds with the engines interleaved. Engines are bench/lib.sh's names.
#
#   OUT=<dir> VALUE_SIZES="1024" ENGINES="wisckey wisckey-writethrough rocksdb" ROUNDS=3 \
#     WISCKEY_BIN=<stripped wisckey-bench> bash bench/fill-ab.sh
#
# BENCHMARK=fillsync (default fillrandom) runs the suite's sync fill instead (NUM/1000 puts
# per thread), THREADS (default 1) writer threads; raw outputs then carry both in their names.
#
# ENGINES_<size> (e.g. ENGINES_4096="wisckey rocksdb") replaces ENGINES at that size. Raw
# outputs go to $OUT/<engine>.v<size>.r<round>.txt; one line per process is printed. Needs
# root (cgroup, drop_caches).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$here/lib.sh"
: "${OUT:?set OUT to the directory for the raw outputs}"
VALUE_SIZES=${VALUE_SIZES:-1024}
ENGINES=${ENGINES:-"wisckey wisckey-writethrough rocksdb"}
ROUNDS=${ROUNDS:-3}
BENCHMARK=${BENCHMARK:-fillrandom}
THREADS=${THREADS:-1}
# the names of the runs before BENCHMARK and THREADS existed stay as they were
tag=""
if [[ $BENCHMARK != fillrandom || $THREADS != 1 ]]; then tag=".$BENCHMARK.t$THREADS"; fi
DATA=${DATA_DIR:-/work/bench-data}/fill-ab
mkdir -p "$OUT" "$DATA"
require_real_disk "$DATA"
for size in $VALUE_SIZES; do
  engines_var=ENGINES_$size
  num=$((2147483648 / (size + 16)))
  for round in $(seq 1 "$ROUNDS"); do
    for engine in ${!engines_var:-$ENGINES}; do
      rm -rf "$DATA/db"
      sync
      echo 3 > /proc/sys/vm/drop_caches
      out=$OUT/$engine.v$size$tag.r$round.txt
      # shellcheck disable=SC2046
      "$here/cgexec.sh" "$engine" 1G $(engine_cmd "$engine") --num=$num --value_size=$size \
        --key_size=16 --quiet --seed=301 --benchmarks="$BENCHMARK" --threads="$THREADS" \
        --db="$DATA/db" > "$out" 2>&1
      echo "v$size$tag round $round $engine: $(grep -E "^$BENCHMARK +:" "$out")"
    done
  done
done
rm -rf "$DATA"
