# lib.sh: helpers shared by the benchmark scripts (sourced, not run).
# Callers set $here (this directory) and $root (the repository) before sourcing it; settle()
# also reads their $SETTLE_ROUNDS, $READ_TIMEOUT and $MEM_LIMIT.

# Parameters every runner shares (override from the environment).
DATA_DIR=${DATA_DIR:-/work/bench-data}
WISCKEY_BIN=${WISCKEY_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/wisckey-bench}
WISCKEY_FLAGS=${WISCKEY_FLAGS:-}
EXTRA_FLAGS=${EXTRA_FLAGS:-}

# Refuses a DATA_DIR in memory (tmpfs/ramfs): the page cache would answer instead of the
# disk. Sets $fstype.
require_real_disk() {
  mkdir -p "$1"
  fstype=$(stat -f -c %T "$1")
  if [[ $fstype == tmpfs || $fstype == ramfs ]]; then
    echo "DATA_DIR=$1 is on $fstype; pick a directory on a real disk" >&2
    exit 1
  fi
}

# engine name -> command prefix of its benchmark program
engine_cmd() {
  case $1 in
    wisckey) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS" ;;
    wisckey-noreadahead) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --readahead_entries=0" ;;
    # GC's target set below what a load leaves: a fillrandom of the suite ends at ~1.6x space
    # amp, above this target. run-suite.sh measures it on DBs that already hold garbage (an
    # overwrite after a preload, YCSB A after aging), beside wisckey-nogc on DBs built alike;
    # each phase's gc_runs= line says what GC did. Longer runs: bench/run-gc.sh
    wisckey-gc) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --gc_space_amp_target=1.2" ;;
    wisckey-nogc) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --gc_space_amp_target=inf" ;;
    # the value log written O_DIRECT (Options::vlog_direct_writes), off by default
    wisckey-direct) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --vlog_direct_writes=true" ;;
    # every write handed to the OS before it is acknowledged (Options::write_through_to_os),
    # as the peers' WALs do: the durability-equal variant of the non-sync fills
    wisckey-writethrough) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --write_through_to_os=true" ;;
    # write-through with each write-out a pwrite, not a copy into the mapped log
    # (Options::vlog_mapped_writes = false): the before of the mapped write-outs
    wisckey-writethrough-pwrite) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --write_through_to_os=true --vlog_mapped_writes=false" ;;
    # the same with an earlier build (before/after runs: WISCKEY_BEFORE_BIN)
    wisckey-before) echo "${WISCKEY_BEFORE_BIN:?set WISCKEY_BEFORE_BIN} bench $WISCKEY_FLAGS" ;;
    wisckey-writethrough-before) echo "${WISCKEY_BEFORE_BIN:?set WISCKEY_BEFORE_BIN} bench $WISCKEY_FLAGS --write_through_to_os=true" ;;
    # the loaded DB after Db::cluster_values + Db::gc (run-suite.sh REORG_VARIANTS)
    wisckey-clustered) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS" ;;
    # no clustering triggered by scans (Options::auto_cluster_ratio = 0)
    wisckey-noautocluster) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --auto_cluster_ratio=0" ;;
    # LevelDB with the 64 MiB memtable the other engines use (suites before 2026-12-01 ran
    # its default 4 MiB: variant leveldb-4m)
    leveldb | leveldb-64m) echo "$here/build/leveldb_bench --write_buffer_size=67108864" ;;
    leveldb-pread) echo "$here/build/leveldb_bench --pread --write_buffer_size=67108864" ;;
    leveldb-4m) echo "$here/build/leveldb_bench" ;;
    rocksdb) echo "$here/build/rocksdb_bench" ;;
    rocksdb-blob) echo "$here/build/rocksdb_bench --blob" ;;
    # BlobDB's DB after a full compaction that rewrites every blob file in key order
    rocksdb-blob-compacted) echo "$here/build/rocksdb_bench --blob --blob_gc_age_cutoff=1.0" ;;
    badger) echo "$here/build/badger_bench" ;;
    badger-madv) echo "$here/build/badger_bench --madv_random" ;;
    # sync writes through WithSyncWrites(true) (Badger's own group commit) instead of the
    # default db.Sync() after each Update, which measured faster on this machine
    # (bench/results/badger-syncwrites-20261201)
    badger-syncwrites) echo "$here/build/badger_bench --with_sync_writes=true" ;;
    *) echo "unknown engine $1" >&2; return 1 ;;
  esac
}

# Writes dirty pages back and drops the page cache (root only); says so either way.
drop_caches() {
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
    echo "page cache dropped"
  else
    echo "NOTE: could not drop the page cache (not permitted); reads may hit cached pages"
  fi
}

# settle ENGINE DB LOG_PREFIX FLAGS...: unmeasured read rounds on a freshly loaded DB until a
# round's process wrote less than 8 MiB, i.e. the compaction debt the load left behind is paid
# before any read phase is measured (at most $SETTLE_ROUNDS rounds, each killed after
# $READ_TIMEOUT s; LevelDB's seek-triggered compactions mean it may never reach the
# threshold). Without this the first phase after a load shares the device with up to GBs of
# leftover compaction writes (and in run-suite.sh the read variants, run later on the same DB,
# look faster than the stock engine). Each round is one process in the engine's cgroup ($MEM_LIMIT):
# `engine_cmd ENGINE` FLAGS --db=DB --use_existing_db=1, output in LOG_PREFIX.settle<N>.log,
# one summary line per round appended to LOG_PREFIX's folder's log.txt. FLAGS say what to
# read; callers give them a seed other than the measured phases' (SEED+1), so the rounds do
# not read the measured key stream ahead of it. A round's writes: the "process wrote" of its
# `total :` block (db_bench mode: open to close, work finished by close included) or of its
# `ycsb-<w>-run` phase (YCSB mode prints no total); none (a killed round): "?", next round.
settle() {
  local engine=$1 db=$2 prefix=$3 round wrote log
  shift 3
  for ((round = 1; round <= SETTLE_ROUNDS; round++)); do
    log=$prefix.settle$round.log
    # shellcheck disable=SC2046
    timeout --signal=KILL "$READ_TIMEOUT" "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $(engine_cmd "$engine") "$@" \
      --db="$db" --use_existing_db=1 > "$log" 2>&1 || true
    wrote=$(awk '/^total / || /^ycsb-[a-f]-run +: .*ops\/sec/ {t = 1}
                 t && /process wrote/ {match($0, /process wrote [0-9.]+/); print substr($0, RSTART + 14, RLENGTH - 14); exit}' "$log")
    echo "   settle round $round ($engine): process wrote ${wrote:-?} MiB" | tee -a "$(dirname "$prefix")/log.txt"
    [[ -n $wrote ]] && awk -v w="$wrote" 'BEGIN { exit !(w < 8) }' && return 0
  done
  return 0
}

# a / b with two decimals, or "-" when either is missing or b is 0
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
