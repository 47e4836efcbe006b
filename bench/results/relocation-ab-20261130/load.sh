#!/usr/bin/env bash
# load.sh BIN DBDIR: load 2,064,888 1 KiB records (YCSB E load), then one settle round
set -e
BIN=$1 DB=$2
cd /work/main
rm -rf "$DB"
common="--num=2064888 --record_size=1024 --key_size=16 --quiet"
sync; echo 3 > /proc/sys/vm/drop_caches
bench/cgexec.sh wk 1G $BIN bench $common --reads=50000 --threads=1 --seed=301 --db=$DB --ycsb=e --ycsb_load_only=1 > /tmp/e/load.txt 2>&1
grep ops/sec /tmp/e/load.txt
for r in 1 2; do sync; echo 3 > /proc/sys/vm/drop_caches
bench/cgexec.sh wk 1G $BIN bench $common --db=$DB --use_existing_db=1 --ycsb=c --threads=1 --reads=20000 --seed=302 > /tmp/e/settle$r.txt 2>&1
grep "process wrote" /tmp/e/settle$r.txt | sed 's/.*wa_process/wa_process/' ; done
