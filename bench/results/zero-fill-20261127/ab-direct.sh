#!/bin/bash
# direct writes: zero fill (new) vs the commit before it (c88acd9: direct never filled), and the buffered default
B=/work/main/bench; D=/work/bench-data/zf; OUT=/tmp/zf/out4; mkdir -p $OUT
for r in 1 2 3; do
 for cell in "1024 1" "1024 16" "16384 1"; do
  set -- $cell; v=$1; t=$2; num=$(( t == 1 ? 10000000 : 4000000 ))
  for e in direct-new direct-c88 buffered-new; do
    case $e in
      direct-new) cmd="/tmp/zf/wb-direct bench --vlog_direct_writes=true";;
      direct-c88) cmd="/tmp/suite/wisckey-bench bench --vlog_direct_writes=true";;
      buffered-new) cmd="/tmp/zf/wb-direct bench";;
    esac
    rm -rf $D; sync; sleep 2
    res=$($B/cgexec.sh zf-$e 1G $cmd --benchmarks=fillsync --threads=$t --num=$num --value_size=$v --key_size=16 --seed=301 --quiet --db=$D 2>&1 | grep -E '^fillsync +:')
    echo "r$r v$v t$t $e $res" | tee -a $OUT/results.txt
  done
 done
done
rm -rf $D
