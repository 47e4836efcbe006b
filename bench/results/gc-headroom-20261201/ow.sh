#!/usr/bin/env bash
# usage: BINS="old:/p new:/p" ROUNDS=2 SIZES=1024 TARGET=1.2 OUT=dir ow.sh
set -euo pipefail
bench=/work/main/bench
D=/work/bench-data/ow-ab
mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
  for v in $SIZES; do
    num=$((2147483648 / (v + 16)))
    for pair in $BINS; do
      which=${pair%%:*}; B=${pair#*:}
      rm -rf "$D"; sync; echo 3 > /proc/sys/vm/drop_caches
      "$bench/cgexec.sh" ow-ab 1G "$B" bench --num=$num --value_size=$v --key_size=16 --quiet \
        --seed=304 --benchmarks=fillrandom --gc_space_amp_target=inf --db="$D" > /dev/null
      sync; echo 3 > /proc/sys/vm/drop_caches
      "$bench/cgexec.sh" ow-ab 1G "$B" bench --num=$num --value_size=$v --key_size=16 --quiet \
        --seed=301 --benchmarks=overwrite --use_existing_db=1 --gc_space_amp_target=$TARGET --db="$D" > "$OUT/ow-$v-$round-$which.txt" 2>&1
      echo "$round $v $which: $(grep -E '^overwrite' "$OUT/ow-$v-$round-$which.txt") | $(grep -o 'gc_runs=.*' "$OUT/ow-$v-$round-$which.txt" | head -1)"
    done
  done
done
rm -rf "$D"
