#!/bin/bash
# YCSB C (zipfian reads, data in the page cache), one thread: OLD vs NEW wisckey-bench, interleaved.
# Usage: OLD=bin NEW=bin ROUNDS=5 bash ab-ycsb-c.sh
one() { tag=$1 bin=$2 size=$3 num=$4 reads=$5
  rm -rf /var/tmp/yc; "$bin" bench --ycsb c --record_size $size --num $num --reads $reads --db /var/tmp/yc 2>&1 \
    | awk -v t="$tag" -v s="$size" '/ycsb-c-run/ {r=$5} /cpu=/ {c=$0} /read   :/ {print t, "size", s, "ops/s", r, $6, $7, $8, $9}'
  rm -rf /var/tmp/yc; sync; sleep 1; }
for r in $(seq ${ROUNDS:-5}); do
  for s in "16384 60000 300000" "1024 600000 2000000"; do
    one "r$r old" $OLD $s; one "r$r new" $NEW $s
  done
done
