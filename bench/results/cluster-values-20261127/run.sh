#!/usr/bin/env bash
# The 1 KiB scan targets of issue 13 before and after `wisckey cluster` (Db::cluster_values
# + GC), side by side with BlobDB (readseq, seekrandom+100) and leveldb-pread (YCSB E), in
# the suite's setting: 2 GiB of 16-byte keys and 1 KiB values, seed 301, every process in
# a 1 GiB memory cgroup (bench/cgexec.sh), page cache dropped before each phase.
# Usage (root): WB=<wisckey-bench> CLI=<wisckey> OUT=<dir> bash run.sh
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)   # bench/
D=${DATA_DIR:-/work/bench-data}
OUT=${OUT:-$(dirname "$0")}
num=2064888
common="--num=$num --value_size=1024 --key_size=16 --seed=301 --quiet"
ycsb="--num=$num --reads=10000 --record_size=1024 --key_size=16 --threads=1 --seed=301 --quiet"
log=$OUT/log.txt
phase() { # tag engine cmd...: one process in the engine's cgroup, cold
  local tag=$1 engine=$2
  shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
  echo "== $(date -u +%H:%M:%S) $tag: $*" | tee -a "$log"
  /usr/bin/time -f "time: wall %e s, user %U s, sys %S s" "$here/cgexec.sh" "$engine" 1G "$@" > "$OUT/$tag.txt" 2>&1
  grep -E '^[a-z0-9-]+ +: |^examined|^collected|^value log|^time:' "$OUT/$tag.txt" | tee -a "$log"
}
reads() { # tag-prefix engine cmd...
  local p=$1 e=$2
  shift 2
  for r in 1 2; do
    phase "$p.readseq.r$r" "$e" "$@" --benchmarks=readseq --reads=100000 --use_existing_db=1
    phase "$p.seekrandom.r$r" "$e" "$@" --benchmarks=seekrandom --seek_nexts=100 --reads=500 --use_existing_db=1
  done
}
: > "$log"
# wisckey: load, settle, reads; cluster (+ GC); reads again
rm -rf "$D/cl-wisckey"; sync; sleep 2
phase wisckey.fill wisckey "$WB" bench $common --benchmarks=fillrandom --db="$D/cl-wisckey"
phase wisckey.settle wisckey "$WB" bench $common --benchmarks=readrandom --reads=20000 --use_existing_db=1 --db="$D/cl-wisckey"
reads wisckey.before wisckey "$WB" bench $common --db="$D/cl-wisckey"
phase wisckey.cluster wisckey "$CLI" cluster --db "$D/cl-wisckey"
reads wisckey.after wisckey "$WB" bench $common --db="$D/cl-wisckey"
# BlobDB (the suite's rocksdb-blob): load, settle, reads
rm -rf "$D/cl-blob"; sync; sleep 2
phase blob.fill rocksdb-blob "$here/build/rocksdb_bench" --blob $common --benchmarks=fillrandom --db="$D/cl-blob"
phase blob.settle rocksdb-blob "$here/build/rocksdb_bench" --blob $common --benchmarks=readrandom --reads=20000 --use_existing_db=1 --db="$D/cl-blob"
reads blob rocksdb-blob "$here/build/rocksdb_bench" --blob $common --db="$D/cl-blob"
rm -rf "$D/cl-blob"
# YCSB E: wisckey load+run, cluster, run again; leveldb-pread load+run
rm -rf "$D/cl-wisckey"; sync; sleep 2
phase wisckey.ycsb-e wisckey "$WB" bench $ycsb --ycsb=e --db="$D/cl-wisckey"
phase wisckey.ycsb-e.cluster wisckey "$CLI" cluster --db "$D/cl-wisckey"
phase wisckey.ycsb-e.after wisckey "$WB" bench $ycsb --ycsb=e --use_existing_db=1 --db="$D/cl-wisckey"
rm -rf "$D/cl-wisckey"
rm -rf "$D/cl-leveldb"; sync; sleep 2
phase leveldb-pread.ycsb-e leveldb-pread "$here/build/leveldb_bench" --pread $ycsb --ycsb=e --db="$D/cl-leveldb"
rm -rf "$D/cl-leveldb"
