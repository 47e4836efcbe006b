#!/bin/bash
B=/work/main/bench; D=/work/bench-data/zf; OUT=/tmp/zf/out2; mkdir -p $OUT
for r in 1 2 3; do
 for cell in "16384 16" "4096 16" "1024 16" "16384 1" "65536 1"; do
  set -- $cell; v=$1; t=$2; num=$(( t == 1 ? 10000000 : 4000000 ))
  for e in new off; do
    case $e in new) cmd="/tmp/zf/wb-new bench";; off) cmd="/tmp/zf/wb-new bench --vlog_zero_fill_size=0";; esac
    rm -rf $D; sync; sleep 2
    res=$($B/cgexec.sh zf-$e 1G $cmd --benchmarks=fillsync --threads=$t --num=$num --value_size=$v --key_size=16 --seed=301 --quiet --db=$D 2>&1 | grep -E '^fillsync +:')
    echo "r$r v$v t$t $e $res" | tee -a $OUT/results.txt
  done
 done
done
rm -rf $D
