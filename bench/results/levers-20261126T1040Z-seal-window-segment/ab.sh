#!/bin/bash
# ab.sh VALUE_SIZE ROUNDS : fillrandom 2 GiB in a 1 GiB cgroup, head vs seal interleaved
vs=$1; rounds=$2; num=$((2147483648 / (vs + 16)))
for r in $(seq 1 $rounds); do
  for b in head seal; do
    rm -rf /work/bench-data/ab; sync; echo 3 > /proc/sys/vm/drop_caches
    out=$(bash /work/main/bench/cgexec.sh ab 1G /tmp/rb/bench-$b bench --benchmarks=fillrandom --num=$num --value_size=$vs --key_size=16 --seed=301 --db=/work/bench-data/ab 2>&1)
    echo "v$vs r$r $b $(grep '^fillrandom' <<<"$out" | awk '{print $5, $7, $8}') $(grep -o 'cpu=[^ ]* (user+sys [^ ]* s' <<<"$out" | head -1)"
  done
done
rm -rf /work/bench-data/ab
