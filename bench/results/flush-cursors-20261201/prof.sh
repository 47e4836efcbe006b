#!/bin/bash
# prof.sh BIN TAG: ow-small shape (1M x 1 KiB fillrandom GC off, 3M overwrites at target 1.2) with perf on the overwrite
B=$1; T=$2; D=/work/bench-data/prof-$T
cd /work/main
rm -rf $D; sync; echo 3 > /proc/sys/vm/drop_caches
bash bench/cgexec.sh prof 1G $B bench --db=$D --num=1000000 --value_size=1024 --key_size=16 --benchmarks=fillrandom --gc_space_amp_target=inf >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
bash bench/cgexec.sh prof 1G perf record -F 299 --call-graph dwarf,16384 -o /var/tmp/s59/perf-$T.data -- $B bench --db=$D --num=1000000 --writes=${WRITES:-3000000} --value_size=1024 --key_size=16 --benchmarks=overwrite --use_existing_db=1 --gc_space_amp_target=1.2 2>&1 | grep -E '^overwrite|gc_runs|cpu=' | head -3
rm -rf $D
