#!/usr/bin/env bash
# Second pass, every engine given its own whole-key-space reorganisation before reading:
# wisckey `clustervalues` (Db::cluster_values, timed alone with GC off) then `wisckey gc`;
# BlobDB (--blob_gc_age_cutoff=1.0, so compaction rewrites every blob file in key order)
# and leveldb-pread the peers' `compact` benchmark (CompactRange, bottommost forced).
# Same setting as run.sh. Usage (root): WB=... CLI=... PEERS=<dir with the peers built from
# bench/peers/> OUT=<dir> bash run2.sh
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)   # bench/
D=${DATA_DIR:-/work/bench-data}
OUT=${OUT:-$(dirname "$0")}
PEERS=${PEERS:-$here/build}
num=2064888
common="--num=$num --value_size=1024 --key_size=16 --seed=301 --quiet"
ycsb="--num=$num --reads=10000 --record_size=1024 --key_size=16 --threads=1 --seed=301 --quiet"
log=$OUT/log2.txt
phase() { # tag engine cmd...: one process in the engine's cgroup, cold
  local tag=$1 engine=$2
  shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
  echo "== $(date -u +%H:%M:%S) $tag: $*" | tee -a "$log"
  /usr/bin/time -f "time: wall %e s, user %U s, sys %S s" "$here/cgexec.sh" "$engine" 1G "$@" > "$OUT/2.$tag.txt" 2>&1
  grep -E '^[a-z0-9-]+ +: |^examined|^collected|^value log|^time:|wa=' "$OUT/2.$tag.txt" | grep -v '^total' | tee -a "$log"
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
blob="$PEERS/rocksdb_bench --blob --blob_gc_age_cutoff=1.0"
rm -rf "$D/cl-blob"; sync; sleep 2
phase blob.fill rocksdb-blob $blob $common --benchmarks=fillrandom --db="$D/cl-blob"
phase blob.settle rocksdb-blob $blob $common --benchmarks=readrandom --reads=20000 --use_existing_db=1 --db="$D/cl-blob"
reads blob.before rocksdb-blob $blob $common --db="$D/cl-blob"
phase blob.compact rocksdb-blob $blob $common --benchmarks=compact,stats --use_existing_db=1 --db="$D/cl-blob"
reads blob.after rocksdb-blob $blob $common --db="$D/cl-blob"
rm -rf "$D/cl-blob"

rm -rf "$D/cl-wisckey"; sync; sleep 2
phase wisckey.fill wisckey "$WB" bench $common --benchmarks=fillrandom --db="$D/cl-wisckey"
phase wisckey.settle wisckey "$WB" bench $common --benchmarks=readrandom --reads=20000 --use_existing_db=1 --db="$D/cl-wisckey"
phase wisckey.cluster wisckey "$WB" bench $common --gc_space_amp_target=inf --benchmarks=clustervalues --use_existing_db=1 --db="$D/cl-wisckey"
phase wisckey.gc wisckey "$CLI" gc --db "$D/cl-wisckey" --no-compact
reads wisckey.after wisckey "$WB" bench $common --db="$D/cl-wisckey"
rm -rf "$D/cl-wisckey"

rm -rf "$D/cl-leveldb"; sync; sleep 2
phase leveldb-pread.ycsb-e leveldb-pread "$PEERS/leveldb_bench" --pread $ycsb --ycsb=e --db="$D/cl-leveldb"
phase leveldb-pread.compact leveldb-pread "$PEERS/leveldb_bench" --pread $common --benchmarks=compact,stats --use_existing_db=1 --db="$D/cl-leveldb"
phase leveldb-pread.ycsb-e.after leveldb-pread "$PEERS/leveldb_bench" --pread $ycsb --ycsb=e --use_existing_db=1 --db="$D/cl-leveldb"
rm -rf "$D/cl-leveldb"

rm -rf "$D/cl-wisckey"; sync; sleep 2
phase wisckey.ycsb-e wisckey "$WB" bench $ycsb --ycsb=e --db="$D/cl-wisckey"
phase wisckey.ycsb-e.cluster wisckey "$CLI" cluster --db "$D/cl-wisckey"
phase wisckey.ycsb-e.after wisckey "$WB" bench $ycsb --ycsb=e --use_existing_db=1 --db="$D/cl-wisckey"
rm -rf "$D/cl-wisckey"
