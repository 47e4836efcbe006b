#!/usr/bin/env bash
# Larger values: what a pass does at 16 KiB (records under the 64 KiB keep-threshold: moved)
# and 64 KiB (records at or over it: left in place, the pass is one scan). wisckey only, the
# suite's setting (2 GiB, seed 301, 1 GiB cgroup, page cache dropped before each phase).
# Usage (root): WB=... CLI=... OUT=<dir> bash run3.sh
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)   # bench/
D=${DATA_DIR:-/work/bench-data}
OUT=${OUT:-$(dirname "$0")}
log=$OUT/log3.txt
phase() { # tag cmd...
  local tag=$1
  shift
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
  echo "== $(date -u +%H:%M:%S) $tag: $*" | tee -a "$log"
  /usr/bin/time -f "time: wall %e s, user %U s, sys %S s" "$here/cgexec.sh" wisckey 1G "$@" > "$OUT/3.$tag.txt" 2>&1
  grep -E '^[a-z0-9-]+ +: |^collected|^value log|^time:|wa=' "$OUT/3.$tag.txt" | grep -v '^total' | tee -a "$log"
}
: > "$log"
for size in 16384 65536; do
  num=$((2147483648 / (size + 16)))
  entries=$((size == 16384 ? 12000 : 3000))
  common="--num=$num --value_size=$size --key_size=16 --seed=301 --quiet"
  db=$D/cl-wisckey-$size
  rm -rf "$db"; sync; sleep 2
  phase "v$size.fill" "$WB" bench $common --benchmarks=fillrandom --db="$db"
  phase "v$size.settle" "$WB" bench $common --benchmarks=readrandom --reads=4000 --use_existing_db=1 --db="$db"
  for r in 1 2; do
    phase "v$size.before.readseq.r$r" "$WB" bench $common --benchmarks=readseq --reads=$entries --use_existing_db=1 --db="$db"
  done
  phase "v$size.cluster" "$WB" bench $common --gc_space_amp_target=inf --benchmarks=clustervalues --use_existing_db=1 --db="$db"
  phase "v$size.gc" "$CLI" gc --db "$db" --no-compact
  for r in 1 2; do
    phase "v$size.after.readseq.r$r" "$WB" bench $common --benchmarks=readseq --reads=$entries --use_existing_db=1 --db="$db"
  done
  rm -rf "$db"
done
