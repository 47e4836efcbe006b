#!/usr/bin/env bash
# run-gc.sh: value-log garbage collection under a sustained update-heavy load, every engine
# side by side in one run on one machine. Per value size and key distribution, each engine
# gets a fresh DB in its own 1 GiB memory cgroup (bench/cgexec.sh, page cache included, page
# cache dropped first), loads NUM keys with fillseq (so every key is live: live bytes =
# NUM x (KEY_SIZE + value size) ~ LIVE_MIB), then overwrites OVERWRITE_X x NUM times
# (`overwrite --writes`), uniform (db_bench's `next() % num`) or zipfian (YCSB's scrambled
# zipfian, theta 0.99, over the NUM keys: `--distribution=zipfian`). Every tool prints a
# `progress:` line every INTERVAL seconds (`--report_interval_secs`): seconds since open,
# ops done in the running benchmark, and the DB directory's allocated bytes (st_blocks x 512,
# so sparse preallocated files count for what they use). After the overwrites the DB stays
# open and idle for SETTLE_SECS (`--settle_secs`; background GC / compaction / Badger's GC
# loop go on), still sampled, then is closed. bench/gc_report.py turns the logs
# into timeseries.csv, summary.md and one SVG chart per value size and distribution.
#
# Engines (ENGINES):
#   wisckey-gc        wisckey, background value-log GC on: --gc_space_amp_target=1.5 (default)
#   wisckey-nogc      wisckey, GC off: --gc_space_amp_target=inf (the no-GC baseline)
#   rocksdb-blob-gc   RocksDB integrated BlobDB (--blob: enable_blob_files, min_blob_size=512,
#                     enable_blob_garbage_collection) with
#                     blob_garbage_collection_age_cutoff=0.25 and
#                     blob_garbage_collection_force_threshold=0.5. Why: RocksDB's integrated
#                     GC relocates, during compactions, the live blobs of the oldest
#                     age_cutoff fraction of blob files; 0.25 is RocksDB's default and the
#                     value its BlobDB documentation and the GC PR (#7694) describe. The force
#                     threshold (default 1.0 = off) exists for workloads where the SSTs that
#                     pin the oldest blob files are not compacted on their own ("sufficiently
#                     skewed workloads", RocksDB PR introducing it / advanced_options.h): when
#                     the garbage ratio of the oldest (age-eligible) blob files reaches it,
#                     targeted compactions of those SSTs are scheduled. An update-heavy run
#                     (and especially the zipfian one) is that case, so it is turned on; 0.5
#                     reclaims a blob file once half of it is garbage, the same ratio as
#                     Badger's recommended discardRatio below, and keeps the oldest files near
#                     2x their live bytes at worst.
#   badger-gc         Badger v4 with the GC loop its README recommends: a goroutine calls
#                     db.RunValueLogGC(0.5) on a ticker and again while it returns nil
#                     (--gc_loop --gc_discard_ratio=0.5 --gc_interval_secs=1; the README's
#                     example ticks every 5 minutes, scaled down to this run's ~1-minute
#                     phases). ValueLogFileSize scaled to 64 MiB (--vlog_file_size): Badger's
#                     default, 1 GiB, exceeds everything a run writes, and Badger never
#                     collects the file being written, so GC could not run at all.
#   badger-gc-smallmt badger-gc plus MemTableSize scaled to 4 MiB x 1024 / value size
#                     (--memtable_size): Badger learns which value-log bytes are garbage only
#                     from LSM compactions (discard stats), and with the stock 64 MiB memtable
#                     (which holds ~100-byte pointer entries) a run of this size flushes it
#                     about once and never compacts, so RunValueLogGC finds nothing. This
#                     variant makes Badger flush about every 40K puts at either value size.
#
# Parameters (environment):
#   LIVE_MIB=384  VALUE_SIZES="1024 16384"  DISTRIBUTIONS="uniform zipfian"  OVERWRITE_X=3
#   ENGINES="wisckey-gc wisckey-nogc rocksdb-blob-gc badger-gc badger-gc-smallmt"
#   KEY_SIZE=16 SEED=301 MEM_LIMIT=1G INTERVAL=0.25 SETTLE_SECS=20  DATA_DIR=/work/bench-data (real disk)
#   OUT_DIR=bench/results/gc-<UTC date>  SETUP=1 (run bench/setup.sh first; 0 skips it)
#   WISCKEY_BIN=$CARGO_TARGET_DIR/release/wisckey-bench
# Needs root (cgroups, drop_caches). Each DB is deleted after its run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
LIVE_MIB=${LIVE_MIB:-384}
VALUE_SIZES=${VALUE_SIZES:-"1024 16384"}
DISTRIBUTIONS=${DISTRIBUTIONS:-"uniform zipfian"}
OVERWRITE_X=${OVERWRITE_X:-3}
ENGINES=${ENGINES:-"wisckey-gc wisckey-nogc rocksdb-blob-gc badger-gc badger-gc-smallmt"}
KEY_SIZE=${KEY_SIZE:-16}
SEED=${SEED:-301}
MEM_LIMIT=${MEM_LIMIT:-1G}
INTERVAL=${INTERVAL:-0.25}
SETTLE_SECS=${SETTLE_SECS:-20}
SETUP=${SETUP:-1}
OUT_DIR=${OUT_DIR:-$here/results/gc-$(date -u +%Y%m%dT%H%M%SZ)}

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
if [[ $SETUP == 1 ]]; then "$here/setup.sh"; fi
mkdir -p "$OUT_DIR"
require_real_disk "$DATA_DIR"

gc_engine_cmd() { # engine value_size -> command prefix
  local b="$here/build/badger_bench --gc_loop --gc_interval_secs=1 --gc_discard_ratio=0.5 --vlog_file_size=$((64 << 20))"
  case $1 in
    wisckey-gc) echo "$WISCKEY_BIN bench --gc_space_amp_target=1.5" ;;
    wisckey-nogc) echo "$WISCKEY_BIN bench --gc_space_amp_target=inf" ;;
    rocksdb-blob-gc) echo "$here/build/rocksdb_bench --blob --blob_gc_age_cutoff=0.25 --blob_gc_force_threshold=0.5" ;;
    badger-gc) echo "$b" ;;
    badger-gc-smallmt) echo "$b --memtable_size=$(((4 << 20) * 1024 / $2))" ;;
    *) echo "unknown engine $1" >&2; return 1 ;;
  esac
}

peak_mem() { # cgroup name -> peak MiB (v1 or v2, as bench/cgexec.sh made it)
  local f
  for f in /sys/fs/cgroup/memory/wisckey-bench-$1/memory.max_usage_in_bytes \
           /sys/fs/cgroup/wisckey-bench-$1/memory.peak; do
    [[ -r $f ]] && { awk '{printf "%.0f", $1/1048576}' "$f"; return; }
  done
  echo "?"
}

{
  echo "# value-log GC run $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")$(git -C "$root" diff --quiet HEAD -- bench crates/wisckey-cli 2>/dev/null || echo ' (bench tool changes uncommitted, or no git checkout)')"
  echo "LIVE_MIB=$LIVE_MIB VALUE_SIZES=$VALUE_SIZES DISTRIBUTIONS=$DISTRIBUTIONS OVERWRITE_X=$OVERWRITE_X"
  echo "ENGINES=$ENGINES KEY_SIZE=$KEY_SIZE SEED=$SEED MEM_LIMIT=$MEM_LIMIT INTERVAL=$INTERVAL SETTLE_SECS=$SETTLE_SECS"
  echo "DATA_DIR=$DATA_DIR ($fstype) nproc=$(nproc) kernel=$(uname -r)"
} | tee "$OUT_DIR/params.txt"
echo "run,value_size,distribution,engine,num,writes,rc,wall_s,peak_mib" > "$OUT_DIR/runs.csv"

for vs in $VALUE_SIZES; do
  num=$((LIVE_MIB * 1048576 / (KEY_SIZE + vs)))
  writes=$((OVERWRITE_X * num))
  for dist in $DISTRIBUTIONS; do
    for engine in $ENGINES; do
      tag=v$vs.$dist.$engine
      db=$DATA_DIR/gc-$engine
      cmd=$(gc_engine_cmd "$engine" "$vs")
      rm -rf "$db"
      echo "== $tag: fillseq $num + overwrite $writes ($dist)" | tee -a "$OUT_DIR/log.txt"
      drop_caches | tee -a "$OUT_DIR/log.txt"
      t0=$(date +%s.%N)
      rc=0
      # shellcheck disable=SC2086
      "$here/cgexec.sh" "gc-$engine" "$MEM_LIMIT" $cmd --num="$num" --writes="$writes" \
        --value_size="$vs" --key_size="$KEY_SIZE" --seed="$SEED" --distribution="$dist" \
        --benchmarks=fillseq,overwrite --report_interval_secs="$INTERVAL" --settle_secs="$SETTLE_SECS" --quiet --db="$db" \
        > "$OUT_DIR/$tag.txt" 2>&1 || rc=$?
      wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
      peak=$(peak_mem "gc-$engine")
      ((rc == 0)) || { echo "$tag FAILED (rc=$rc):"; tail "$OUT_DIR/$tag.txt"; } | tee -a "$OUT_DIR/log.txt"
      grep -v '^progress:' "$OUT_DIR/$tag.txt" | grep -E '^(fillseq|overwrite|gc:) ' | tee -a "$OUT_DIR/log.txt" || true
      echo "$tag,$vs,$dist,$engine,$num,$writes,$rc,$wall,$peak" >> "$OUT_DIR/runs.csv"
      rm -rf "$db"
    done
  done
done

python3 "$here/gc_report.py" "$OUT_DIR"
echo "results in $OUT_DIR"
