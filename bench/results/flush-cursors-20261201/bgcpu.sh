#!/bin/bash
# bgcpu.sh BIN TAG: 1M x 1 KiB fillrandom (GC off), then 3M overwrites (GC off unless TARGET) under perf record -F 999; prints samples per thread
B=$1; T=$2; D=/work/bench-data/bgcpu-$T
cd /work/main
rm -rf $D; sync; echo 3 > /proc/sys/vm/drop_caches
bash bench/cgexec.sh bgcpu 1G $B bench --db=$D --num=1000000 --value_size=1024 --key_size=16 --benchmarks=fillrandom --gc_space_amp_target=inf >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
bash bench/cgexec.sh bgcpu 1G perf record -F 999 -o /var/tmp/s59/bgcpu-$T.data -- $B bench --db=$D --num=1000000 --writes=${WRITES:-3000000} --value_size=1024 --key_size=16 --benchmarks=overwrite --use_existing_db=1 --gc_space_amp_target=${TARGET:-inf} 2>&1 | grep -E '^overwrite|cpu=|gc_runs' | sed 's/.*cpu=/cpu=/;s/auto_cluster.*//'
perf report -i /var/tmp/s59/bgcpu-$T.data --no-children --sort comm -g none --stdio -n 2>/dev/null | grep -E "^ +[0-9]" | head -4
rm -rf $D
