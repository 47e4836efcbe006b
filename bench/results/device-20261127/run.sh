#!/bin/bash
# Issue 13's device-bound targets on the lent 16-core machine (its own disk), one command:
# dd ceilings (append to a new file O_DIRECT / buffered, overwrite), fillrandom of 2 GiB at
# 4 / 16 / 64 KiB (wisckey buffered and O_DIRECT log, Badger, RocksDB) in a 1 GiB memory
# cgroup, readseq / seekrandom against BlobDB at 1 and 64 KiB, and the readseq 64 KiB A/B of
# the consumer-allocated read-ahead buffers (wb-head = before, wb-new = after).
# Binaries built on the 2-core VM, carried in .devbin (peers run through the VM's loader and
# libraries). Writes everything to $OUT.
set -u
T0=$(date +%s)
D=$(cd "$(dirname "$0")/../../.." && pwd)/.devbin
B=$(cd "$(dirname "$0")/../.." && pwd)
L="$D/lib/ld-linux-x86-64.so.2 --library-path $D/lib"
DATA=/var/tmp/wk
[ "$(stat -f -c %T /var/tmp 2>/dev/null)" = tmpfs ] && DATA=$B/../wk-data
mkdir -p $DATA
log=$OUT/log.txt
{ date -u; nproc; free -g | head -2; df -T $DATA | tail -1; uname -r; grep -m1 'model name' /proc/cpuinfo
  mount | grep " $(df --output=target $DATA | tail -1) " ; cat /sys/fs/cgroup/cgroup.controllers 2>&1; } > $OUT/env.txt 2>&1
cg=1; $B/cgexec.sh probe 1G true 2>>$OUT/env.txt || cg=0
echo "cgroup=$cg" >> $OUT/env.txt
el() { echo $(( $(date +%s) - T0 )); }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; }
eng() { # name -> command
  case $1 in
    wisckey) echo "$D/wb-new bench" ;; wisckey-head) echo "$D/wb-head bench" ;;
    wisckey-direct) echo "$D/wb-new bench --vlog_direct_writes=true" ;;
    badger) echo "$D/badger_bench" ;; rocksdb) echo "$L $D/rocksdb_bench" ;;
    rocksdb-blob) echo "$L $D/rocksdb_bench --blob" ;;
  esac
}
run() { # tag engine limit_s flags...
  local tag=$1 e=$2 lim=$3; shift 3
  local pre=""; [ $cg = 1 ] && pre="$B/cgexec.sh $e 1G"
  echo "== $(el)s $tag $e $*" >> $log
  timeout -s KILL $lim $pre $(eng $e) --key_size=16 --seed=301 --quiet "$@" > $OUT/cur.txt 2>&1
  echo "rc=$?" >> $log; cat $OUT/cur.txt >> $OUT/full.txt
  local res; res=$(grep -E '^[a-z]+ +: .*ops/sec' $OUT/cur.txt | head -1)
  echo "$tag $e | $res" | tee -a $OUT/results.txt
}
# 1. device ceilings with dd (fio is not on that machine)
for i in 1 2; do
  rm -f $DATA/dd.bin; sync
  echo "dd append direct r$i: $(timeout 60 dd if=/dev/zero of=$DATA/dd.bin bs=1M count=2048 oflag=direct conv=fsync 2>&1 | tail -1)" | tee -a $OUT/results.txt
  echo "dd overwrite direct r$i: $(timeout 60 dd if=/dev/zero of=$DATA/dd.bin bs=1M count=2048 oflag=direct conv=notrunc,fsync 2>&1 | tail -1)" | tee -a $OUT/results.txt
  rm -f $DATA/dd.bin; sync
  echo "dd append buffered+fsync r$i: $(timeout 60 dd if=/dev/zero of=$DATA/dd.bin bs=1M count=2048 conv=fsync 2>&1 | tail -1)" | tee -a $OUT/results.txt
  rm -f $DATA/dd.bin; sync; sleep 1
done
# 2. fills, 2 GiB each
fills() { # round
  for V in 4096 16384 65536; do
    N=$(( 2147483648 / (V + 16) ))
    for e in wisckey wisckey-direct badger rocksdb; do
      rm -rf $DATA/db; drop
      run "fill$V.r$1" $e 90 --benchmarks=fillrandom --num=$N --value_size=$V --db=$DATA/db
    done
  done
  rm -rf $DATA/db; sync
}
fills 1
# 3. scans against BlobDB at 64 and 1 KiB
for V in 65536 1024; do
  N=$(( 2147483648 / (V + 16) ))
  for e in wisckey rocksdb-blob; do
    rm -rf $DATA/$e; drop
    run "load$V" $e 120 --benchmarks=fillrandom --num=$N --value_size=$V --db=$DATA/$e
  done
  for r in 1 2; do
    if [ $V = 65536 ]; then
      for e in wisckey-head wisckey rocksdb-blob; do
        d=$DATA/${e#wisckey-head}; [ $e = wisckey-head ] && d=$DATA/wisckey
        drop; run "readseq$V.r$r" $e 60 --benchmarks=readseq --reads=3000 --num=$N --value_size=$V --db=$d --use_existing_db=1
      done
      # cached: the CPU path on 16 cores (one unmeasured pass first fills the page cache;
      # the run of 2026-11-27 lacked it, so its first "cached" head figure was a cold read)
      $D/wb-new bench --key_size=16 --seed=301 --quiet --benchmarks=readseq --reads=12000 --num=$N --value_size=$V --db=$DATA/wisckey --use_existing_db=1 > /dev/null 2>&1
      for e in wisckey-head wisckey; do
        run "readseq$V-cached.r$r" $e 60 --benchmarks=readseq --reads=12000 --num=$N --value_size=$V --db=$DATA/wisckey --use_existing_db=1
      done
    else
      for e in wisckey rocksdb-blob; do
        drop; run "readseq$V.r$r" $e 60 --benchmarks=readseq --reads=100000 --num=$N --value_size=$V --db=$DATA/$e --use_existing_db=1
        drop; run "seekrandom$V.r$r" $e 60 --benchmarks=seekrandom --seek_nexts=100 --reads=500 --num=$N --value_size=$V --db=$DATA/$e --use_existing_db=1
      done
    fi
  done
  rm -rf $DATA/wisckey $DATA/rocksdb-blob; sync
  [ $(el) -gt 330 ] && break
done
# 4. a second round of fills if time allows
[ $(el) -lt 300 ] && fills 2
echo "done in $(el)s" | tee -a $OUT/results.txt
