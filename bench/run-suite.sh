#!/usr/bin/env bash
# run-suite.sh: the full benchmark suite of docs/BENCHMARKS.md, every engine side by side in
# one run, each process in its own memory cgroup (bench/cgexec.sh), page cache dropped before every
# phase; ends with `wisckey-bench report` over all of it (REPORT.md + SVG charts in $OUT_DIR).
#
# First the device's ceilings with bench/fio.sh into $OUT_DIR/fio (the report's Targets table
# reads them), and a shorter fio again at the end into $OUT_DIR/fio-end: this VM's virtual
# disk has measured 873 MB/s and 3.6 GB/s sequential write on different boots, so a ceiling
# is only meaningful from the same boot as the run it judges.
#
# Per value size (folder $OUT_DIR/v<size>), per engine:
#   fillseq (fresh DB, then deleted); fillrandom (fresh DB), settle (settle() in lib.sh), and on
#   that DB: readrandom with 1 thread (--histogram), readrandom with 16 threads, seekrandom
#   with --seek_nexts=100, readseq.
#   Engines with a read variant (wisckey -> wisckey-noreadahead, leveldb -> leveldb-pread,
#   badger -> badger-madv) then run the same four read phases on the same DB with the
#   variant (same on-disk format, so the load is not repeated): stock mmap and pread /
#   MADV_RANDOM both get reported, and wisckey with scan read-ahead off.
#   At each of $SYNC_SIZES, first `fillsync` (every put a sync write; NUM/1000 puts per
#   thread) with 1 and with 16 threads, each on a fresh DB (tags fillsync, fillsync16).
#   Engines in $GC_VARIANTS (wisckey -> wisckey-gc: --gc_space_amp_target=1.2, and
#   wisckey -> wisckey-nogc: GC off, the baseline) then measure loads with GC running: each
#   variant gets a fresh DB preloaded by an unmeasured fillrandom with GC off (seed SEED+3,
#   output <variant>.preload.log: the report does not read it; the log then holds ~0.8 GiB of
#   garbage at ~1.6x the live data, over wisckey-gc's target), then `overwrite` of NUM puts
#   (the measured phase, tag overwrite) with the variant's GC setting: GC collects the
#   preload's garbage and the overwrites' while the puts run. Every wisckey phase prints a
#   gc_runs= line with what background GC did during it.
#   Engines in $FILL_VARIANTS (wisckey -> wisckey-direct: --vlog_direct_writes=true;
#   wisckey -> wisckey-writethrough: --write_through_to_os=true, every non-sync put handed to
#   the OS before it is acknowledged, as the peers' WALs do) then run the fills again,
#   fillsync (not for -writethrough: sync puts reach the disk either way) and fillrandom, each
#   on a fresh DB: the option side by side with the default in one run (reads are not
#   repeated: the option changes only writes).
#   Engines in $REORG_VARIANTS then reorganise the loaded DB once more, after all the read
#   phases above (tag reorganise), and read it again under the variant's name: wisckey ->
#   wisckey-clustered (Db::cluster_values of every key, then Db::gc: values in key order),
#   rocksdb-blob -> rocksdb-blob-compacted (a full CompactRange with
#   --blob_gc_age_cutoff=1.0: every blob rewritten in key order). Peers' reorganised
#   variants are not "best peer" in the report's targets (the default wisckey is not
#   reorganised).
# Then YCSB A-F (bench/run-ycsb.sh) at each of $YCSB_SIZES into $OUT_DIR/ycsb-<size>, plus
# YCSB A on an aged DB for wisckey-gc (GC busy) and wisckey-nogc (GC off): run-ycsb.sh's
# AGED_ENGINES, RECORDS unmeasured operations of A with GC off after the load, then a run
# phase of max(OPS, 100000) operations (AGED_OPS).
# Then value-log GC under sustained overwrites side by side with the peers' GC
# (bench/run-gc.sh into $OUT_DIR/gc: $GC_OVERWRITE_X x overwrites of 384 MiB live, uniform,
# at $GC_SIZES; engines $GC_ENGINES, each with its GC on, and wisckey with GC off).
#
# Sizes: NUM = DATA_BYTES / (value size + key size) keys are written by each fill, so every
# value size writes the same bytes (default 2 GiB). fillrandom draws keys with replacement
# (db_bench's definition), so ~63% of them end up live: ~1.3 GiB live at the default, larger
# than the 1 GiB limit that also holds the engine's caches. Read counts shrink as values grow
# so each phase reads a comparable number of bytes from the device (see counts_for).
#
# Parameters (environment):
#   VALUE_SIZES="256 1024 4096 16384 65536" DATA_BYTES=2147483648 KEY_SIZE=16 SEED=301
#   ENGINES="wisckey leveldb rocksdb rocksdb-blob badger" MEM_LIMIT=1G
#   READ_VARIANTS="wisckey:wisckey-noreadahead leveldb:leveldb-pread badger:badger-madv"
#     (set empty to skip; wisckey-noreadahead = scan read-ahead off, to show its effect)
#   SKIP_CELLS="badger:256" (engine:value_size pairs not run. Badger at 256 B: values below its
#     ValueThreshold stay in its LSM-tree, its Go heap sits at the 1 GiB limit and fillseq ran
#     at ~5K puts/s, i.e. about an hour for the two fills; see docs/BENCHMARKS.md)
#   SYNC_SIZES="1024" SYNC_THREADS="1 16" (fillsync cells; SYNC_SIZES="" skips them)
#   GC_VARIANTS="wisckey:wisckey-gc wisckey:wisckey-nogc" (wisckey variants only: the preload
#     adds --gc_space_amp_target=inf; set empty to skip the with-GC-running loads)
#   FILL_VARIANTS="wisckey:wisckey-direct wisckey:wisckey-writethrough" (empty: skip the extra fills)
#   REORG_VARIANTS="wisckey:wisckey-clustered rocksdb-blob:rocksdb-blob-compacted" (empty: skip)
#   YCSB_SIZES="1024 16384" YCSB_DATA_BYTES=2147483648
#   YCSB_ENGINES="wisckey wisckey-gc wisckey-nogc leveldb-pread rocksdb rocksdb-blob badger-madv"
#   YCSB_ENGINE_WORKLOADS="wisckey-gc:a wisckey-nogc:a" YCSB_AGED_ENGINES="wisckey-gc wisckey-nogc"
#   RUN_GC=1 (0 skips run-gc.sh) GC_OVERWRITE_X=10 GC_SIZES="1024 16384"
#     GC_ENGINES="wisckey-gc wisckey-nogc rocksdb-blob-gc badger-gc-smallmt"
#   YCSB_OPS_1024=10000 YCSB_OPS_16384=2000 (run-phase operations per workload; for another
#     size set YCSB_OPS_<size>, default 2000)
#   SETTLE_ROUNDS=5 (unmeasured readrandom rounds after each load until compaction is done,
#     settle() in lib.sh, seeded SEED+1 so they do not read the measured readrandom's keys;
#     0 = measure right after the load, as runs before 2026-11-23 did; also passed to
#     run-ycsb.sh, which settles each YCSB load the same way)
#   READS16_FACTOR=10 (the 16-thread readrandom phase does 2 x READS x this many lookups in
#     all: with 2 x READS, as runs before 2026-11-27 20:59 UTC did, wisckey and BlobDB were
#     done in 0.13-0.46 s, too short to measure; at 10x they take about 1-4 s. Slow engines
#     may then meet READ_TIMEOUT: stock Badger at 1, 4 and 16 KiB, LevelDB at 1 KiB)
#   READ_TIMEOUT=120 (seconds; a read phase still running is killed and reported without a
#     figure: stock Badger's mmap'd seekrandom / readseq under the limit take many minutes)
#   FIO=1 (0 = no fio; the report then reads bench/results/fio/device.md if present)
#   SKIP_DBBENCH=0 SKIP_YCSB=0 SKIP_FILLSEQ=0   OUT_DIR=bench/results/suite-<timestamp>
#   DATA_DIR, WISCKEY_BIN, WISCKEY_FLAGS, EXTRA_FLAGS as in lib.sh
# Run bench/setup.sh first. Needs root (cgroups, drop_caches). Each DB is deleted after use;
# the largest at once is a GC-off DB of ~4.2 GiB (the overwrite after a preload, and
# run-gc.sh's wisckey-nogc), so DATA_DIR needs ~5 GiB free.
# At the defaults this took 62 minutes on a 2-core VM with one SSD (2026-11-23 10:05 run: fio
# 2 min, db_bench part 43 min, YCSB 1 KiB 11 min, YCSB 16 KiB 6 min, final fio 1 min), before
# the fillsync, GC and reorganised cells; at four sizes (no 256 B) with all of them, 60
# minutes (2026-11-30 18:51 run: fio 2 min, db_bench part 40 min, YCSB 12 min, run-gc.sh
# 5 min, final fio 1 min).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
VALUE_SIZES=${VALUE_SIZES:-"256 1024 4096 16384 65536"}
DATA_BYTES=${DATA_BYTES:-2147483648}
KEY_SIZE=${KEY_SIZE:-16}
SEED=${SEED:-301}
MEM_LIMIT=${MEM_LIMIT:-1G}
ENGINES=${ENGINES:-"wisckey leveldb rocksdb rocksdb-blob badger"}
READ_VARIANTS=${READ_VARIANTS-"wisckey:wisckey-noreadahead leveldb:leveldb-pread badger:badger-madv"}
SKIP_CELLS=${SKIP_CELLS-"badger:256"}
YCSB_SIZES=${YCSB_SIZES:-"1024 16384"}
YCSB_DATA_BYTES=${YCSB_DATA_BYTES:-2147483648}
YCSB_ENGINES=${YCSB_ENGINES:-"wisckey wisckey-gc wisckey-nogc leveldb-pread rocksdb rocksdb-blob badger-madv"}
YCSB_ENGINE_WORKLOADS=${YCSB_ENGINE_WORKLOADS-"wisckey-gc:a wisckey-nogc:a"}
YCSB_AGED_ENGINES=${YCSB_AGED_ENGINES-"wisckey-gc wisckey-nogc"}
RUN_GC=${RUN_GC:-1}
GC_OVERWRITE_X=${GC_OVERWRITE_X:-10}
GC_SIZES=${GC_SIZES:-"1024 16384"}
GC_ENGINES=${GC_ENGINES:-"wisckey-gc wisckey-nogc rocksdb-blob-gc badger-gc-smallmt"}
SYNC_SIZES=${SYNC_SIZES-"1024"}
SYNC_THREADS=${SYNC_THREADS:-"1 16"}
GC_VARIANTS=${GC_VARIANTS-"wisckey:wisckey-gc wisckey:wisckey-nogc"}
FILL_VARIANTS=${FILL_VARIANTS-"wisckey:wisckey-direct wisckey:wisckey-writethrough"}
REORG_VARIANTS=${REORG_VARIANTS-"wisckey:wisckey-clustered rocksdb-blob:rocksdb-blob-compacted"}
YCSB_OPS_1024=${YCSB_OPS_1024:-10000}
YCSB_OPS_16384=${YCSB_OPS_16384:-2000}
SKIP_DBBENCH=${SKIP_DBBENCH:-0}
SKIP_YCSB=${SKIP_YCSB:-0}
SKIP_FILLSEQ=${SKIP_FILLSEQ:-0}
FIO=${FIO:-1}
SETTLE_ROUNDS=${SETTLE_ROUNDS:-5}
READ_TIMEOUT=${READ_TIMEOUT:-120}
READS16_FACTOR=${READS16_FACTOR:-10}
OUT_DIR=${OUT_DIR:-$here/results/suite-$(date -u +%Y%m%dT%H%M%SZ)}

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
mkdir -p "$OUT_DIR"
require_real_disk "$DATA_DIR"

# value size -> "reads seeks readseq_entries": readrandom ops (16 threads run twice as many
# in total), seekrandom seeks (each reads up to 100 entries), readseq entries.
counts_for() {
  local v=$1
  if ((v <= 1024)); then echo "20000 500 100000"
  elif ((v <= 4096)); then echo "10000 200 50000"
  elif ((v <= 16384)); then echo "4000 50 12000"
  else echo "2000 20 3000"
  fi
}

paired_with() { # "a:b c:d ..." engine -> what the engine is paired with, or nothing
  local pair
  for pair in $1; do
    [[ ${pair%%:*} == "$2" ]] && echo "${pair#*:}"
  done
  return 0
}
variant_of() { paired_with "$READ_VARIANTS" "$1"; }    # its read variant
gc_variants_of() { paired_with "$GC_VARIANTS" "$1"; }  # its with-GC-running variants
fill_variants_of() { paired_with "$FILL_VARIANTS" "$1"; } # its fill-only variants
reorg_variant_of() { paired_with "$REORG_VARIANTS" "$1"; } # its reorganised-DB variant
reorganise_flags() { # the benchmarks that reorganise a loaded DB, per reorganised variant
  case $1 in
    wisckey-clustered) echo "--benchmarks=clustervalues,gc --gc_space_amp_target=inf" ;;
    *-compacted) echo "--benchmarks=compact" ;;
    *) echo "unknown reorganised variant $1" >&2; return 1 ;;
  esac
}

# fillsync_cells ENGINE DB: fillsync at each of $SYNC_THREADS on a fresh DB, where this value
# size is one of $SYNC_SIZES.
fillsync_cells() {
  local threads tag
  [[ " $SYNC_SIZES " == *" $value_size "* ]] || return 0
  for threads in $SYNC_THREADS; do
    tag=fillsync
    ((threads > 1)) && tag=fillsync$threads
    run "$1" "$tag" 0 --benchmarks=fillsync --threads="$threads" --db="$2"
    rm -rf "$2"
  done
}

# run ENGINE PHASE-TAG TIMEOUT FLAGS...: one process in the engine's cgroup, output to
# $dir/<engine>.r1.<tag>.txt, its report lines echoed. TIMEOUT seconds (0: none) caps the
# process; a killed phase keeps its header and gets a last line saying so (no figure).
run() {
  local engine=$1 tag=$2 limit=$3 cmd out rc=0
  shift 3
  cmd=$(engine_cmd "$engine")
  out=$dir/$engine.r1.$tag.txt
  drop_caches >> "$dir/log.txt"
  echo "== $(date -u +%H:%M:%S) $engine $tag: $*" | tee -a "$dir/log.txt"
  # shellcheck disable=SC2086
  timeout --signal=KILL "$limit" "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $cmd $common --seed="$SEED" "$@" > "$out" 2>&1 || rc=$?
  if ((rc == 137 && limit > 0)); then
    echo "run-suite.sh: killed after $limit s (READ_TIMEOUT): no result" | tee -a "$out" "$dir/log.txt"
  elif ((rc != 0)); then
    echo "$engine $tag failed (exit $rc):"
    tail -5 "$out"
  fi
  last_run_rc=$rc
  grep -E '^[a-z]+ +: .*ops/sec' "$out" || true
}

# preload VARIANT DB: an unmeasured fillrandom with GC off (a later flag wins) into a fresh
# DB, seeded SEED+3 (not the measured phases' seed); output $dir/<variant>.preload.log (not a
# .txt: the report does not read it)
preload() {
  local variant=$1 db=$2 out=$dir/$1.preload.log
  drop_caches >> "$dir/log.txt"
  echo "== $(date -u +%H:%M:%S) $variant preload: fillrandom, GC off" | tee -a "$dir/log.txt"
  # shellcheck disable=SC2046,SC2086
  if ! "$here/cgexec.sh" "$variant" "$MEM_LIMIT" $(engine_cmd "$variant") $common --seed=$((SEED + 3)) \
    --benchmarks=fillrandom --db="$db" --gc_space_amp_target=inf > "$out" 2>&1; then
    echo "$variant preload failed:"
    tail -5 "$out"
    return 1
  fi
  grep -E '^fillrandom +: .*ops/sec|space_amp' "$out" || true
}

read_phases() { # engine db
  local engine=$1 db=$2 limit=$READ_TIMEOUT
  run "$engine" readrandom "$limit" --benchmarks=readrandom --threads=1 --reads="$reads" --db="$db" --use_existing_db=1 --histogram
  run "$engine" readrandom16 "$limit" --benchmarks=readrandom --threads=16 --reads=$((reads * 2 * READS16_FACTOR / 16)) --db="$db" --use_existing_db=1
  run "$engine" seekrandom "$limit" --benchmarks=seekrandom --seek_nexts=100 --reads="$seeks" --db="$db" --use_existing_db=1
  run "$engine" readseq "$limit" --benchmarks=readseq --reads="$seq_entries" --db="$db" --use_existing_db=1
}

{
  echo "# suite run $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)"
  echo "VALUE_SIZES=$VALUE_SIZES DATA_BYTES=$DATA_BYTES KEY_SIZE=$KEY_SIZE SEED=$SEED MEM_LIMIT=$MEM_LIMIT"
  echo "ENGINES=$ENGINES READ_VARIANTS=$READ_VARIANTS SKIP_CELLS=$SKIP_CELLS"
  echo "SETTLE_ROUNDS=$SETTLE_ROUNDS READ_TIMEOUT=$READ_TIMEOUT SYNC_SIZES=$SYNC_SIZES SYNC_THREADS=$SYNC_THREADS GC_VARIANTS=$GC_VARIANTS FILL_VARIANTS=$FILL_VARIANTS REORG_VARIANTS=$REORG_VARIANTS"
  echo "YCSB_SIZES=$YCSB_SIZES YCSB_DATA_BYTES=$YCSB_DATA_BYTES YCSB_ENGINES=$YCSB_ENGINES YCSB_ENGINE_WORKLOADS=$YCSB_ENGINE_WORKLOADS YCSB_AGED_ENGINES=$YCSB_AGED_ENGINES"
  echo "RUN_GC=$RUN_GC GC_OVERWRITE_X=$GC_OVERWRITE_X GC_SIZES=$GC_SIZES GC_ENGINES=$GC_ENGINES"
  echo "DATA_DIR=$DATA_DIR ($fstype) WISCKEY_FLAGS=$WISCKEY_FLAGS EXTRA_FLAGS=$EXTRA_FLAGS"
} | tee "$OUT_DIR/params.txt"

if [[ $FIO == 1 ]]; then
  DATA_DIR=$DATA_DIR MEM_LIMIT=$MEM_LIMIT OUT_DIR=$OUT_DIR/fio "$here/fio.sh"
fi

dirs=()
if [[ $SKIP_DBBENCH != 1 ]]; then
  for value_size in $VALUE_SIZES; do
    dir=$OUT_DIR/v$value_size
    mkdir -p "$dir"
    num=$((DATA_BYTES / (value_size + KEY_SIZE)))
    read -r reads seeks seq_entries <<<"$(counts_for "$value_size")"
    seq_entries=$((seq_entries < num ? seq_entries : num))
    all_engines=$ENGINES
    for engine in $ENGINES; do
      variant=$(variant_of "$engine")
      [[ -n $variant ]] && all_engines+=" $variant"
      for variant in $(gc_variants_of "$engine"); do all_engines+=" $variant"; done
      for variant in $(fill_variants_of "$engine"); do all_engines+=" $variant"; done
      variant=$(reorg_variant_of "$engine")
      [[ -n $variant ]] && all_engines+=" $variant"
    done
    {
      echo "# db_bench suite $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)"
      echo "NUM=$num VALUE_SIZE=$value_size KEY_SIZE=$KEY_SIZE SEED=$SEED MEM_LIMIT=$MEM_LIMIT"
      echo "READS=$reads READS_16_THREADS_TOTAL=$((reads * 2 * READS16_FACTOR / 16 * 16)) READS16_FACTOR=$READS16_FACTOR SEEKS=$seeks SEEK_NEXTS=100 READSEQ_ENTRIES=$seq_entries"
      echo "ENGINES=$all_engines DATA_DIR=$DATA_DIR ($fstype)"
      echo "WISCKEY_FLAGS=$WISCKEY_FLAGS EXTRA_FLAGS=$EXTRA_FLAGS"
    } > "$dir/params.txt"
    # no --seed here: the measured phases add --seed=$SEED (run), the settle rounds SEED+1
    common="--num=$num --value_size=$value_size --key_size=$KEY_SIZE --quiet $EXTRA_FLAGS"
    for engine in $ENGINES; do
      if [[ " $SKIP_CELLS " == *" $engine:$value_size "* ]]; then
        echo "== $engine at $value_size B: skipped (SKIP_CELLS)" | tee -a "$dir/log.txt"
        continue
      fi
      db=$DATA_DIR/$engine
      rm -rf "$db"
      fillsync_cells "$engine" "$db"
      if [[ $SKIP_FILLSEQ != 1 ]]; then
        run "$engine" fillseq 0 --benchmarks=fillseq --db="$db"
        rm -rf "$db"
      fi
      run "$engine" fillrandom 0 --benchmarks=fillrandom --db="$db"
      variant=$(variant_of "$engine")
      if ((last_run_rc != 0)); then
        # Reads of a partial DB would publish figures of another data set.
        echo "== $engine at $value_size B: fillrandom failed; its read phases skipped" |
          tee -a "$dir/log.txt"
      else
        # settle through the pread / MADV_RANDOM variant where there is one: same DB, and a
        # stock mmap engine's thrashing reads would make each round take minutes
        # (settle, lib.sh: readrandom rounds with seed SEED+1, not the measured readrandom's
        # stream, so they do not read its keys ahead of it)
        if ((SETTLE_ROUNDS > 0)); then
          # shellcheck disable=SC2086
          settle "${variant:-$engine}" "$db" "$dir/${variant:-$engine}" $common --seed=$((SEED + 1)) \
            --benchmarks=readrandom --threads=1 --reads="$reads"
        fi
        read_phases "$engine" "$db"
        [[ -n $variant ]] && read_phases "$variant" "$db"
        reorg_variant=$(reorg_variant_of "$engine")
        if [[ -n $reorg_variant ]]; then
          # shellcheck disable=SC2046
          run "$reorg_variant" reorganise 0 $(reorganise_flags "$reorg_variant") --use_existing_db=1 --db="$db"
          read_phases "$reorg_variant" "$db"
        fi
      fi
      rm -rf "$db"
      for gc_variant in $(gc_variants_of "$engine"); do
        db=$DATA_DIR/$gc_variant
        rm -rf "$db"
        preload "$gc_variant" "$db" && run "$gc_variant" overwrite 0 --benchmarks=overwrite --use_existing_db=1 --db="$db"
        rm -rf "$db"
      done
      for fill_variant in $(fill_variants_of "$engine"); do
        db=$DATA_DIR/$fill_variant
        rm -rf "$db"
        if [[ $fill_variant != *-writethrough ]]; then fillsync_cells "$fill_variant" "$db"; fi
        run "$fill_variant" fillrandom 0 --benchmarks=fillrandom --db="$db"
        rm -rf "$db"
      done
    done
    dirs+=("$dir")
  done
fi

if [[ $SKIP_YCSB != 1 ]]; then
  for size in $YCSB_SIZES; do
    ops_var=YCSB_OPS_$size
    RECORDS=$((YCSB_DATA_BYTES / (size + KEY_SIZE))) OPS=${!ops_var:-2000} RECORD_SIZE=$size \
      KEY_SIZE=$KEY_SIZE SEED=$SEED MEM_LIMIT=$MEM_LIMIT ENGINES=$YCSB_ENGINES \
      SETTLE_ROUNDS=$SETTLE_ROUNDS READ_TIMEOUT=$READ_TIMEOUT \
      ENGINE_WORKLOADS=$YCSB_ENGINE_WORKLOADS AGED_ENGINES=$YCSB_AGED_ENGINES \
      OUT_DIR=$OUT_DIR/ycsb-$size "$here/run-ycsb.sh" | tee -a "$OUT_DIR/ycsb.log"
    dirs+=("$OUT_DIR/ycsb-$size")
  done
fi

if [[ $RUN_GC == 1 ]]; then
  # its own summary.md and charts in $OUT_DIR/gc (bench/gc_report.py); the report below does
  # not read that folder
  WISCKEY_BIN=$WISCKEY_BIN ENGINES=$GC_ENGINES VALUE_SIZES=$GC_SIZES DISTRIBUTIONS=uniform \
    OVERWRITE_X=$GC_OVERWRITE_X KEY_SIZE=$KEY_SIZE SEED=$SEED MEM_LIMIT=$MEM_LIMIT SETUP=0 \
    OUT_DIR=$OUT_DIR/gc "$here/run-gc.sh" | tee -a "$OUT_DIR/gc.log" ||
    echo "run-gc.sh failed: see $OUT_DIR/gc.log"
fi

if [[ $FIO == 1 ]]; then
  # informative only (drift within the boot): its failure must not cost the report
  DATA_DIR=$DATA_DIR MEM_LIMIT=$MEM_LIMIT OUT_DIR=$OUT_DIR/fio-end RUNTIME=10 "$here/fio.sh" ||
    echo "fio at the end failed; the report uses the ceiling measured at the start"
fi
echo "# suite finished $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$OUT_DIR/params.txt"

device=()
if [[ -f $OUT_DIR/fio/device.md ]]; then
  device=(--device "$OUT_DIR/fio/device.md")
elif [[ -f $here/results/fio/device.md ]]; then
  device=(--device "$here/results/fio/device.md")
fi
"$WISCKEY_BIN" report "${dirs[@]}" --out "$OUT_DIR" "${device[@]}"
echo "suite done: $OUT_DIR/REPORT.md"
