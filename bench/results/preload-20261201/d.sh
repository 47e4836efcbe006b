#!/usr/bin/env bash
# d.sh BIN TAG [STRACE=1]: YCSB 1 KiB load + settle(1 C round) + a b c f, then D cold (optionally straced)
set -euo pipefail
BIN=$1 TAG=$2; CMD=${CMD:-"$BIN bench"}
here=/work/main/bench
DB=/work/bench-data/d-${DBTAG:-$TAG}
OUT=/var/tmp/s60/d-$TAG; mkdir -p $OUT
common="--num=2064888 --record_size=1024 --key_size=16 --quiet --reads=10000 --threads=1 --seed=301"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
if [[ ! -d $DB ]]; then
  drop; $here/cgexec.sh d 1G $CMD $common --db=$DB --ycsb=d --ycsb_load_only=1 > $OUT/load.txt 2>&1
  for r in 1 2; do drop; $here/cgexec.sh d 1G $CMD --num=2064888 --record_size=1024 --key_size=16 --quiet --reads=10000 --threads=1 --seed=302 --db=$DB --use_existing_db=1 --ycsb=c > $OUT/settle$r.txt 2>&1; done
  for w in a b c f; do drop; $here/cgexec.sh d 1G $CMD $common --db=$DB --use_existing_db=1 --ycsb=$w > $OUT/$w.txt 2>&1; done
fi
cp -a $DB $DB.snap 2>/dev/null || true
drop
if [[ -n ${WARM:-} ]]; then t0=$(date +%s%N); cat $DB/*.sst > /dev/null; echo "warm $(( ($(date +%s%N) - t0)/1000000 )) ms" >> /var/tmp/s60/warm.log; fi
if [[ ${STRACE:-0} == 1 ]]; then
  $here/cgexec.sh d 1G strace -f -y -e trace=pread64,preadv,preadv2,read,openat -o $OUT/strace.txt $CMD $common --db=$DB --use_existing_db=1 --ycsb=d > $OUT/d-strace.txt 2>&1
else
  a=$(awk '{print $1, $3}' /sys/block/vda/stat)
  $here/cgexec.sh d 1G $CMD $common --db=$DB --use_existing_db=1 --ycsb=d > $OUT/d.txt 2>&1
  b=$(awk '{print $1, $3}' /sys/block/vda/stat)
  echo "device reads: $a -> $b" | awk '{print "device read ios", $6-$3, "sectors", $7-$4}' >> $OUT/d.txt
fi
/var/tmp/s60/fc.sh ${DBTAG:-$TAG} >> $OUT/d.txt; rm -rf $DB; mv $DB.snap $DB
