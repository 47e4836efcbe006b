#!/usr/bin/env bash
# run-side-by-side.sh: the same workload on every engine, each in its own cgroup-v1 memory
# limit, page cache dropped between the load and the read phase; prints a Markdown table.
#
# Parameters (environment):
#   NUM=2000000 READS=200000 VALUE_SIZE=1024 KEY_SIZE=16 SEED=301 MEM_LIMIT=1G
#   ENGINES="wisckey leveldb rocksdb rocksdb-blob badger"   LOAD=fillrandom READ=readrandom
#   REPEAT=1 (whole load+read per engine)   DATA_DIR=/work/bench-data (real disk, not tmpfs)
#   OUT_DIR=bench/results/<timestamp>   WISCKEY_BIN=$CARGO_TARGET_DIR/release/wisckey-bench
#   WISCKEY_FLAGS="" (extra flags for wisckey only, e.g. --value_threshold=0)
#   EXTRA_FLAGS="" (flags for every engine, e.g. "--seek_nexts=100" with READ=seekrandom,
#                   "--threads=16", "--histogram")
# Run bench/setup.sh first. Needs root (cgroups, drop_caches). Each DB is deleted after use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
NUM=${NUM:-2000000}
READS=${READS:-200000}
VALUE_SIZE=${VALUE_SIZE:-1024}
KEY_SIZE=${KEY_SIZE:-16}
SEED=${SEED:-301}
MEM_LIMIT=${MEM_LIMIT:-1G}
ENGINES=${ENGINES:-"wisckey leveldb rocksdb rocksdb-blob badger"}
LOAD=${LOAD:-fillrandom}
READ=${READ:-readrandom}
REPEAT=${REPEAT:-1}
OUT_DIR=${OUT_DIR:-$here/results/$(date -u +%Y%m%dT%H%M%SZ)}

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
mkdir -p "$OUT_DIR"
require_real_disk "$DATA_DIR"

peak_mem() { # engine -> peak MiB of its cgroup (v1 or v2, as bench/cgexec.sh made it)
  local f
  for f in /sys/fs/cgroup/memory/wisckey-bench-$1/memory.max_usage_in_bytes \
           /sys/fs/cgroup/wisckey-bench-$1/memory.peak; do
    [[ -r $f ]] && { awk '{printf "%.0f", $1/1048576}' "$f"; return; }
  done
  echo "?"
}

# ops/sec of benchmark $2 in file $1
ops_of() { awk -v b="$2" '$1==b && $2==":" {for(i=1;i<=NF;i++) if($i=="ops/sec;") print $(i-1)}' "$1" | head -1; }
# the I/O line after benchmark $2's line in file $1 (or after "total")
io_of() { awk -v b="$2" 'hit {print; exit} $1==b && $2==":" {hit=1}' "$1"; }
# the second I/O line (read amp, space amp, CPU) after benchmark $2's line in file $1
io2_of() { awk -v b="$2" 'hit==2 {print; exit} hit {hit++} $1==b && $2==":" {hit=1}' "$1"; }
field_of() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }
found_of() { sed -n 's/.*(\([0-9]*\) of [0-9]* found).*/\1/p' "$1" | head -1; }

common="--num=$NUM --reads=$READS --value_size=$VALUE_SIZE --key_size=$KEY_SIZE --seed=$SEED --quiet $EXTRA_FLAGS"
{
  echo "# side-by-side run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "NUM=$NUM READS=$READS VALUE_SIZE=$VALUE_SIZE KEY_SIZE=$KEY_SIZE MEM_LIMIT=$MEM_LIMIT"
  echo "ENGINES=$ENGINES LOAD=$LOAD READ=$READ REPEAT=$REPEAT DATA_DIR=$DATA_DIR ($fstype)"
  echo "WISCKEY_FLAGS=$WISCKEY_FLAGS EXTRA_FLAGS=$EXTRA_FLAGS"
} | tee "$OUT_DIR/params.txt"

rows=()
for rep in $(seq 1 "$REPEAT"); do
  for engine in $ENGINES; do
    cmd=$(engine_cmd "$engine")
    db=$DATA_DIR/$engine
    tag=$engine.r$rep
    rm -rf "$db"
    echo "== $engine (repeat $rep): $LOAD" | tee -a "$OUT_DIR/log.txt"
    drop_caches | tee -a "$OUT_DIR/log.txt"
    # shellcheck disable=SC2086
    "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $cmd $common --benchmarks="$LOAD" --db="$db" \
      > "$OUT_DIR/$tag.load.txt" 2>&1 || { echo "$engine load failed:"; tail "$OUT_DIR/$tag.load.txt"; }
    load_peak=$(peak_mem "$engine")
    cat "$OUT_DIR/$tag.load.txt"
    drop_caches | tee -a "$OUT_DIR/log.txt"
    echo "== $engine (repeat $rep): $READ" | tee -a "$OUT_DIR/log.txt"
    # shellcheck disable=SC2086
    "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $cmd $common --benchmarks="$READ" --db="$db" \
      --use_existing_db=1 > "$OUT_DIR/$tag.read.txt" 2>&1 || { echo "$engine read failed:"; tail "$OUT_DIR/$tag.read.txt"; }
    read_peak=$(peak_mem "$engine")
    cat "$OUT_DIR/$tag.read.txt"
    rm -rf "$db"
    lio=$(io_of "$OUT_DIR/$tag.load.txt" "$LOAD")
    tio=$(io_of "$OUT_DIR/$tag.load.txt" total)
    lio2=$(io2_of "$OUT_DIR/$tag.load.txt" "$LOAD")
    rio2=$(io2_of "$OUT_DIR/$tag.read.txt" "$READ")
    extra="$(field_of "$lio2" space_amp)|$(field_of "$lio2" cpu)|$(field_of "$rio2" ra)|$(field_of "$rio2" ra_process)|$(field_of "$rio2" cpu)"
    rows+=("$engine|$rep|$(ops_of "$OUT_DIR/$tag.load.txt" "$LOAD")|$(field_of "$lio" wa)|$(field_of "$lio" wa_process)|$(field_of "$tio" wa_process)|$(field_of "$tio" db_size)|$load_peak|$(ops_of "$OUT_DIR/$tag.read.txt" "$READ")|$(found_of "$OUT_DIR/$tag.read.txt")|$read_peak|$extra")
  done
done

# Ratios against wisckey's first repeat.
base_load= base_read=
for r in "${rows[@]}"; do
  IFS='|' read -r e rep lo _ _ _ _ _ ro _ _ _ _ _ _ _ <<<"$r"
  if [[ $e == wisckey && -z $base_load ]]; then base_load=$lo base_read=$ro; fi
done
{
  echo
  echo "| engine | rep | $LOAD ops/s | WA device | WA process | WA process incl. close | DB size MiB | space amp | CPU (load) | peak MiB (load) | $READ ops/s | found | RA device | RA process | CPU (read) | peak MiB (read) | $LOAD vs wisckey | $READ vs wisckey |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for r in "${rows[@]}"; do
    IFS='|' read -r e rep lo wa wap wat size lpk ro found rpk sa lcpu ra rap rcpu <<<"$r"
    echo "| $e | $rep | $lo | $wa | $wap | $wat | $size | $sa | $lcpu | $lpk | $ro | $found | $ra | $rap | $rcpu | $rpk | $(ratio "$lo" "$base_load") | $(ratio "$ro" "$base_read") |"
  done
} | tee "$OUT_DIR/summary.md"
echo "raw outputs in $OUT_DIR"
