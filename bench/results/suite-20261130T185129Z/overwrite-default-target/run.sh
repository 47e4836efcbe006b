#!/usr/bin/env bash
# The suite's "loads with GC running" cell (overwrite of NUM puts on a DB preloaded by a
# fillrandom with GC off) at GC's default target (1.5) beside GC off, 1 and 16 KiB, two rounds
# interleaved; each process in its 1 GiB cgroup, page cache dropped first (as root).
#   WISCKEY_BIN=<wisckey-bench> bash run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../.." && pwd)
B=${WISCKEY_BIN:?}
D=${DATA_DIR:-/work/bench-data}/ow-default
for round in 1 2; do
  for v in 1024 16384; do
    num=$((2147483648 / (v + 16)))
    for t in 1.5 inf; do
      rm -rf "$D"
      sync; echo 3 > /proc/sys/vm/drop_caches
      "$bench/cgexec.sh" ow-default 1G "$B" bench --num=$num --value_size=$v --key_size=16 --quiet \
        --seed=304 --benchmarks=fillrandom --gc_space_amp_target=inf --db="$D" > /dev/null
      sync; echo 3 > /proc/sys/vm/drop_caches
      echo "== round $round value $v target $t"
      "$bench/cgexec.sh" ow-default 1G "$B" bench --num=$num --value_size=$v --key_size=16 --quiet \
        --seed=301 --benchmarks=overwrite --use_existing_db=1 --gc_space_amp_target=$t --db="$D" |
        grep -E '^overwrite|db_size|gc_runs' | head -3
    done
  done
done
rm -rf "$D"
