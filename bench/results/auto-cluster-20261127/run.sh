#!/usr/bin/env bash
# Sustained YCSB E at 1 KiB: does scan-triggered clustering (Options::auto_cluster_ratio,
# default 1.0) pay off, side by side with the same engine without it and leveldb-pread?
# Per engine: a fresh load of RECORDS records (+1,000 E operations), then a long E run of
# LONG_OPS operations on that DB (scans earn ranges passes as they go), then the suite's
# E cell size (SHORT_OPS) on the same DB, twice. Every phase its own process in the 1 GiB
# cgroup, page cache dropped before it. Run as root from the repository root:
#   WISCKEY_BIN=<stripped copy> OUT=bench/results/auto-cluster-20261127/<run> \
#     bash bench/results/auto-cluster-20261127/run.sh
set -euo pipefail
here=$(pwd)/bench
root=$(pwd)
. "$here/lib.sh"
OUT=${OUT:?}
RECORDS=${RECORDS:-2064888} LONG_OPS=${LONG_OPS:-100000} SHORT_OPS=${SHORT_OPS:-10000}
ENGINES=${ENGINES:-"wisckey wisckey-noautocluster leveldb-pread"}
mkdir -p "$OUT"
common="--num=$RECORDS --record_size=1024 --key_size=16 --threads=1 --quiet"
phase() { # engine tag flags...
  local engine=$1 tag=$2; shift 2
  drop_caches > /dev/null; sleep 1
  echo "== $(date -u +%H:%M:%S) $engine $tag $*" | tee -a "$OUT/log.txt"
  # shellcheck disable=SC2046
  "$here/cgexec.sh" "$engine" 1G $(engine_cmd "$engine") $common --ycsb=e --db="$DATA_DIR/ac-$engine" "$@" \
    > "$OUT/$engine.$tag.txt" 2>&1
  grep -E "ycsb-e-(load|run) +:|auto_cluster_passes=" "$OUT/$engine.$tag.txt" | tee -a "$OUT/log.txt"
}
for engine in $ENGINES; do
  rm -rf "${DATA_DIR:?}/ac-$engine"; sync; sleep 2
  # Seeds differ per phase, so the short runs do not replay the long run's first scans.
  phase "$engine" load --reads=1000 --seed=301
  phase "$engine" long --reads="$LONG_OPS" --use_existing_db=1 --seed=302
  phase "$engine" short1 --reads="$SHORT_OPS" --use_existing_db=1 --seed=303
  phase "$engine" short2 --reads="$SHORT_OPS" --use_existing_db=1 --seed=304
  du -sm "$DATA_DIR/ac-$engine" | tee -a "$OUT/log.txt"
  rm -rf "${DATA_DIR:?}/ac-$engine"; sync; sleep 2
done
