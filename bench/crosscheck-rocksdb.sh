#!/usr/bin/env bash
# crosscheck-rocksdb.sh: runs RocksDB's own db_bench (Debian rocksdb-tools) and our
# bench/build/rocksdb_bench on the same fillrandom + readrandom, same options, and prints
# both ops/sec and their ratio (ours / db_bench). They should agree within ~20%; the options
# below are pinned on both sides so that they do (db_bench's defaults differ: snappy
# compression, no Bloom filter, 8 MiB cache).
#
# Parameters (environment):
#   NUM=500000 READS=100000 VALUE_SIZE=1024 KEY_SIZE=16 CACHE_SIZE=67108864 BLOOM_BITS=10
#   SEED=301 REPEAT=1 DATA_DIR=/work/bench-data OUT_DIR=bench/results/crosscheck-<timestamp>
# Each side: fillrandom in one process (WAL on, no sync, one thread, compression none), then
# the page cache is dropped and readrandom runs in a second process on the closed DB
# (--use_existing_db=1). Reading a closed, cold DB gives both sides the same state: reading
# right after the fill in the same process measures how far background compaction got, and
# on a shared machine other jobs' drop_caches make "warm" reads randomly cold.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
NUM=${NUM:-500000}
READS=${READS:-100000}
VALUE_SIZE=${VALUE_SIZE:-1024}
KEY_SIZE=${KEY_SIZE:-16}
CACHE_SIZE=${CACHE_SIZE:-67108864}
BLOOM_BITS=${BLOOM_BITS:-10}
SEED=${SEED:-301}
REPEAT=${REPEAT:-1}
OUT_DIR=${OUT_DIR:-$here/results/crosscheck-$(date -u +%Y%m%dT%H%M%SZ)}

need=()
for p in rocksdb-tools librocksdb-dev g++; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
db_bench=$(command -v rocksdb_db_bench || command -v db_bench || true)
[[ -n $db_bench ]] || { echo "no db_bench binary after installing rocksdb-tools" >&2; exit 1; }
ours=$here/build/rocksdb_bench
if [[ ! -x $ours || $here/peers/rocksdb_bench.cc -nt $ours || $here/peers/bench_common.h -nt $ours ]]; then
  mkdir -p "$here/build"
  g++ -O2 -std=c++17 -Wall -o "$ours" "$here/peers/rocksdb_bench.cc" -lrocksdb -lpthread
fi
mkdir -p "$DATA_DIR" "$OUT_DIR"

common="--num=$NUM --reads=$READS --value_size=$VALUE_SIZE \
--key_size=$KEY_SIZE --cache_size=$CACHE_SIZE --bloom_bits=$BLOOM_BITS --threads=1 --seed=$SEED"
# db_bench's own defaults made explicit where ours (RocksDB's Options defaults) agree, and
# overridden where they don't (compression, cache, Bloom filter).
dbb_flags="--compression_type=none --disable_wal=false --sync=false --write_buffer_size=67108864 \
--max_write_buffer_number=2 --max_background_jobs=2 --statistics=false --stats_interval_seconds=0"
ops_of() { awk -v b="$2" '$1==b && $2==":" {for(i=1;i<=NF;i++) if($i=="ops/sec;" || $i=="ops/sec") print $(i-1)}' "$1" | head -1; }

{
  echo "# RocksDB cross-check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "db_bench: $db_bench ($(dpkg -s rocksdb-tools 2>/dev/null | sed -n 's/^Version: //p'))"
  echo "common: $common"
  echo "db_bench only: $dbb_flags"
} | tee "$OUT_DIR/params.txt"

rows=()
for rep in $(seq 1 "$REPEAT"); do
  # Alternate which goes first so drift on a shared machine falls on both sides.
  order="db_bench ours"
  ((rep % 2 == 0)) && order="ours db_bench"
  for side in $order; do
    db=$DATA_DIR/crosscheck-$side
    rm -rf "$db"
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    out=$OUT_DIR/$side.r$rep.txt
    : >"$out"
    echo "== $side (repeat $rep)"
    for phase in "--benchmarks=fillrandom" "--benchmarks=readrandom --use_existing_db=1"; do
      if [[ $phase == *readrandom* ]]; then
        sync
        echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "NOTE: page cache not dropped" >>"$out"
      fi
      if [[ $side == db_bench ]]; then
        # db_bench seeds each invocation's thread-0 generator from --seed alone, so a read
        # process with the fill's seed would replay the fill's keys (100% found); a
        # different seed gives uniform keys like ours (~63% found after fillrandom).
        seed_flag=""
        [[ $phase == *readrandom* ]] && seed_flag="--seed=$((SEED + 1))"
        # shellcheck disable=SC2086
        "$db_bench" $common $dbb_flags $phase $seed_flag --db="$db" >>"$out" 2>&1
      else
        # shellcheck disable=SC2086
        "$ours" $common --quiet $phase --db="$db" >>"$out" 2>&1
      fi
    done
    grep -E "^(fillrandom|readrandom) " "$out" || tail "$out"
    rm -rf "$db"
  done
  rows+=("$rep|$(ops_of "$OUT_DIR/db_bench.r$rep.txt" fillrandom)|$(ops_of "$OUT_DIR/ours.r$rep.txt" fillrandom)|$(ops_of "$OUT_DIR/db_bench.r$rep.txt" readrandom)|$(ops_of "$OUT_DIR/ours.r$rep.txt" readrandom)")
done

{
  echo
  echo "| rep | fillrandom db_bench | fillrandom ours | ours / db_bench | readrandom db_bench | readrandom ours | ours / db_bench |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for r in "${rows[@]}"; do
    IFS='|' read -r rep fd fo rd ro <<<"$r"
    echo "| $rep | $fd | $fo | $(ratio "$fo" "$fd") | $rd | $ro | $(ratio "$ro" "$rd") |"
  done
} | tee "$OUT_DIR/summary.md"
echo "raw outputs in $OUT_DIR"
