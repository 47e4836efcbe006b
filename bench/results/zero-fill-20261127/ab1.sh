#!/bin/bash
# fillsync A/B: zero fill on (new default) / off (new, 0) / base binary / leveldb / rocksdb
B=/work/main/bench
D=/work/bench-data/zf
OUT=${OUT:-/tmp/zf/out}; mkdir -p $OUT
ROUNDS=${ROUNDS:-3}
for r in $(seq 1 $ROUNDS); do
 for v in 1024 16384; do
  for t in 1 16; do
   num=$(( t == 1 ? 10000000 : 4000000 ))
   for e in new off base leveldb rocksdb; do
    case $e in
      new) cmd="/tmp/zf/wb-new bench";; off) cmd="/tmp/zf/wb-new bench --vlog_zero_fill_size=0";;
      base) cmd="/tmp/zf/wb-base bench";; leveldb) cmd="$B/build/leveldb_bench";; rocksdb) cmd="$B/build/rocksdb_bench";;
    esac
    rm -rf $D; sync; sleep 2
    res=$($B/cgexec.sh zf-$e 1G $cmd --benchmarks=fillsync --threads=$t --num=$num --value_size=$v --key_size=16 --seed=301 --quiet --db=$D 2>&1 | grep -E '^fillsync +:')
    echo "r$r v$v t$t $e $res" | tee -a $OUT/results.txt
   done
  done
 done
done
rm -rf $D
