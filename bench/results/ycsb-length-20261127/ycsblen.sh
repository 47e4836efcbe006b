#!/usr/bin/env bash
# YCSB A/B/C at 1 KiB, wisckey vs BlobDB: the suite's 10,000 run-phase ops against 100,000,
# two rounds each, alternating lengths. Same records as the suite (2 GiB of 1 KiB records).
set -u
cd /work/main
for round in 1 2; do
  for ops in 10000 100000; do
    OUT=/var/tmp/ab/ycsblen/r$round-ops$ops
    RECORDS=2064888 OPS=$ops RECORD_SIZE=1024 ENGINES="wisckey rocksdb-blob" WORKLOADS="a b c" \
      WISCKEY_BIN=/var/tmp/ab/wb-new OUT_DIR=$OUT bash bench/run-ycsb.sh > $OUT.log 2>&1
    echo "== round $round ops $ops"; grep -A6 "ops/sec" $OUT.log | head -8
  done
done
