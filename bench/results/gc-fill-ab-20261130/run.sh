#!/usr/bin/env bash
# The suite's 4 KiB fillrandom (2 GiB, 1 GiB cgroup, page cache dropped before each) with the
# default GC target and with --gc_space_amp_target=1.2 (the suite's wisckey-gc), interleaved.
# As root, from the repository root: BIN=<wisckey-bench> ROUNDS=3 bash bench/results/gc-fill-ab-20261130/run.sh
set -euo pipefail
BIN=${BIN:?} ROUNDS=${ROUNDS:-3} VS=${VS:-4096} NUM=${NUM:-522247}
out=$(dirname "$0")
for r in $(seq 1 "$ROUNDS"); do
  for variant in default gc12; do
    flags=""; [[ $variant == gc12 ]] && flags="--gc_space_amp_target=1.2"
    rm -rf /work/bench-data/ab; sync; echo 3 > /proc/sys/vm/drop_caches
    # shellcheck disable=SC2086
    bench/cgexec.sh ab 1G "$BIN" bench $flags --benchmarks=fillrandom --num=$NUM --value_size=$VS \
      --key_size=16 --quiet --seed=301 --db=/work/bench-data/ab > "$out/$variant.v$VS.r$r.txt" 2>&1
    echo "round $r $variant: $(grep -E '^fillrandom' "$out/$variant.v$VS.r$r.txt") $(grep -o 'cpu=[^)]*)' "$out/$variant.v$VS.r$r.txt" | head -1)"
  done
done
rm -rf /work/bench-data/ab
