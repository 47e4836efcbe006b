#!/usr/bin/env bash
# Explicit GC (`Db::gc` without compacting first, the bench tool's `gc` benchmark) after a
# fill and 3x uniform overwrites with background GC off, the binary before (OLD) and after
# (NEW) GC's flush before a victim's removal alternated, ROUNDS rounds, at 1 KiB and 16 KiB
# (384 MiB live, as bench/run-gc.sh), each run in its own 1 GiB cgroup on a fresh database
# with the page cache dropped. Outputs: gcphase-<size>-<round>-<old|new>.txt in OUT (default:
# this folder). As root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
: "${OLD:?}" "${NEW:?}"
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-$here}
DATA_DIR=${DATA_DIR:-/work/bench-data}
for r in $(seq 1 "$ROUNDS"); do
  for vs in 1024 16384; do
    num=$((384 * 1048576 / (16 + vs)))
    for which in old new; do
      bin=$OLD; [[ $which == new ]] && bin=$NEW
      db=$DATA_DIR/gcphase-$which
      rm -rf "$db"; sync; echo 3 > /proc/sys/vm/drop_caches
      "$bench/cgexec.sh" "gcphase-$which" 1G "$bin" bench --gc_space_amp_target=inf \
        --num="$num" --writes=$((3 * num)) --value_size="$vs" --key_size=16 --seed=301 \
        --benchmarks=fillseq,overwrite,gc --quiet --db="$db" \
        > "$OUT/gcphase-$vs-$r-$which.txt" 2>&1
      rm -rf "$db"
    done
  done
done
