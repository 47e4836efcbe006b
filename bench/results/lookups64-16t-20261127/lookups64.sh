#!/usr/bin/env bash
# 64 KiB, 16-thread random lookups: wisckey vs BlobDB at the suite's size (250/thread) and 10x (2500/thread)
set -u
cd /work/main
B=bench
common="--num=32760 --value_size=65536 --key_size=16 --seed=301 --quiet"
W="/var/tmp/ab/wb bench"
R="$B/build/rocksdb_bench --blob"
D=/var/tmp/ab/data; mkdir -p $D
for e in w r; do
  cmd=$W; [ $e = r ] && cmd=$R
  rm -rf $D/$e; sync; sleep 2
  bash $B/cgexec.sh ab-$e 1G $cmd $common --benchmarks=fillrandom --db=$D/$e > /var/tmp/ab/$e.fill.txt 2>&1
  grep ops/sec /var/tmp/ab/$e.fill.txt
  for s in 1 2 3; do bash $B/cgexec.sh ab-$e 1G $cmd $common --benchmarks=readrandom --threads=1 --reads=2000 --db=$D/$e --use_existing_db=1 > /var/tmp/ab/$e.settle$s.txt 2>&1; done
done
for round in 1 2 3; do
  for e in w r; do
    cmd=$W; [ $e = r ] && cmd=$R
    for per in 250 2500; do
      sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
      bash $B/cgexec.sh ab-$e 1G $cmd $common --benchmarks=readrandom --threads=16 --reads=$per --db=$D/$e --use_existing_db=1 > /var/tmp/ab/$e.r$round.p$per.txt 2>&1
      echo "round $round $e per=$per: $(grep ops/sec /var/tmp/ab/$e.r$round.p$per.txt) $(grep -o 'cpu=[^)]*)' /var/tmp/ab/$e.r$round.p$per.txt | head -1)"
    done
  done
done
