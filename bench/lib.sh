# lib.sh: helpers shared by the benchmark scripts (sourced, not run).
# Callers set $here (this directory) and $root (the repository) before sourcing it.

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
    # GC made to work during a load: a fillrandom of the suite leaves ~1.65x space amp, above
    # this target, so background GC collects segments while the load runs
    wisckey-gc) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --gc_space_amp_target=1.2" ;;
    wisckey-nogc) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --gc_space_amp_target=inf" ;;
    # the value log written O_DIRECT (Options::vlog_direct_writes), off by default
    wisckey-direct) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --vlog_direct_writes=true" ;;
    # the loaded DB after Db::cluster_values + Db::gc (run-suite.sh REORG_VARIANTS)
    wisckey-clustered) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS" ;;
    # no clustering triggered by scans (Options::auto_cluster_ratio = 0)
    wisckey-noautocluster) echo "$WISCKEY_BIN bench $WISCKEY_FLAGS --auto_cluster_ratio=0" ;;
    leveldb) echo "$here/build/leveldb_bench" ;;
    leveldb-pread) echo "$here/build/leveldb_bench --pread" ;;
    rocksdb) echo "$here/build/rocksdb_bench" ;;
    rocksdb-blob) echo "$here/build/rocksdb_bench --blob" ;;
    # BlobDB's DB after a full compaction that rewrites every blob file in key order
    rocksdb-blob-compacted) echo "$here/build/rocksdb_bench --blob --blob_gc_age_cutoff=1.0" ;;
    badger) echo "$here/build/badger_bench" ;;
    badger-madv) echo "$here/build/badger_bench --madv_random" ;;
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

# a / b with two decimals, or "-" when either is missing or b is 0
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
