#!/usr/bin/env bash
# run.sh BIN DBDIR OUT [extra flags]: cold YCSB E run phase (50,000 ops)
set -e
BIN=$1 DB=$2 OUT=$3; shift 3
cd /work/main
common="--num=2064888 --record_size=1024 --key_size=16 --quiet"
sync; echo 3 > /proc/sys/vm/drop_caches
bench/cgexec.sh wk 1G $BIN bench $common --reads=50000 --threads=1 --seed=301 --db=$DB --ycsb=e --use_existing_db=1 "$@" > $OUT 2>&1
grep -E "ops/sec|cpu=|auto_cluster|count" $OUT
