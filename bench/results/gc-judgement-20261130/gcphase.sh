#!/usr/bin/env bash
# usage: OUT=dir ROUNDS=n SIZES="1024" BINS="old:/path new:/path" gcphase.sh
set -euo pipefail
bench=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for vs in $SIZES; do
    num=$((384 * 1048576 / (16 + vs)))
    for pair in $BINS; do
      which=${pair%%:*}; bin=${pair#*:}
      db=${DATA_DIR:-/work/bench-data}/gcphase-$which
      rm -rf "$db"; sync; echo 3 > /proc/sys/vm/drop_caches
      "$bench/cgexec.sh" "gcphase-$which" 1G "$bin" bench --gc_space_amp_target=inf \
        --num="$num" --writes=$((3 * num)) --value_size="$vs" --key_size=16 --seed=301 \
        --benchmarks=fillseq,overwrite,gc --quiet --db="$db" \
        > "$OUT/gcphase-$vs-$r-$which.txt" 2>&1
      rm -rf "$db"
      echo "$vs $r $which: $(grep -E '^gc ' "$OUT/gcphase-$vs-$r-$which.txt" | head -1)"
    done
  done
done
