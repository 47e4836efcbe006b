#!/usr/bin/env bash
# threshold-sweep.sh: wisckey only; the effect of value_threshold on LOAD+READ (default
# fillrandom, page cache dropped, then readrandom, in a MEM_LIMIT cgroup) for each value
# size, with threshold 0 (every value separated into the value log) and threshold
# value_size+1 (every value inline in the LSM-tree). Runs run-side-by-side.sh per cell.
# Parameters: NUM=500000 READS=100000 SIZES="128 256 512 1024" MEM_LIMIT=1G REPEAT=1
#             OUT_DIR=bench/results/sweep-<timestamp>, plus those of run-side-by-side.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export NUM=${NUM:-500000} READS=${READS:-100000} MEM_LIMIT=${MEM_LIMIT:-1G}
SIZES=${SIZES:-"128 256 512 1024"}
REPEAT=${REPEAT:-1}
OUT_DIR=${OUT_DIR:-$here/results/sweep-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT_DIR"
table=$OUT_DIR/summary.md
{
  echo "NUM=$NUM READS=$READS MEM_LIMIT=$MEM_LIMIT REPEAT=$REPEAT $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "| value size | value_threshold | rep | fillrandom ops/s | WA process | WA incl. close | DB size MiB | readrandom ops/s |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|"
} > "$table"
for value_size in $SIZES; do
  for threshold in 0 $((value_size + 1)); do
    mode=separated
    ((threshold > value_size)) && mode=inline
    cell=$OUT_DIR/v$value_size-t$threshold
    echo "== value_size=$value_size value_threshold=$threshold ($mode)"
    ENGINES=wisckey VALUE_SIZE=$value_size REPEAT=$REPEAT OUT_DIR=$cell \
      WISCKEY_FLAGS="--value_threshold=$threshold" "$here/run-side-by-side.sh" > "$cell.log" 2>&1
    # Summary columns: engine rep load wa wap wat size peak read found peak ratio ratio.
    grep '^| wisckey |' "$cell/summary.md" |
      while IFS='|' read -r _ _ rep load _ wap wat db_size _ read _; do
        echo "| $value_size | $threshold ($mode) |$rep|$load|$wap|$wat|$db_size|$read|"
      done >> "$table"
  done
done
cat "$table"
