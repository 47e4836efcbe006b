#!/usr/bin/env bash
# ow.sh BIN OUT: fillrandom 1M x 1 KiB then overwrite 3M with background GC (target 1.2), 1 GiB cgroup
set -e
BIN=$1 OUT=$2
cd /work/main
rm -rf /work/bench-data/ow
sync; echo 3 > /proc/sys/vm/drop_caches
bench/cgexec.sh wk 1G $BIN bench --benchmarks=fillrandom,overwrite --num=1000000 --writes=3000000 --value_size=1024 --key_size=16 --gc_space_amp_target=1.2 --histogram --db=/work/bench-data/ow > $OUT 2>&1
grep -E "^(fillrandom|overwrite) |gc_runs|p99|Percentiles" $OUT | head -20
rm -rf /work/bench-data/ow
