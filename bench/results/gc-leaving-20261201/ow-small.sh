#!/bin/bash
# ow.sh BIN TAG: preload 1M x 1 KiB fillrandom GC off, then overwrite 3M at target 1.2, in a 1 GiB cgroup
B=$1; T=$2; D=/work/bench-data/ow-$T
rm -rf $D
sync; echo 3 > /proc/sys/vm/drop_caches
bash "$(dirname "$0")/../../cgexec.sh" ow 1G $B bench --db=$D --num=1000000 --value_size=1024 --key_size=16 --benchmarks=fillrandom --gc_space_amp_target=inf >/dev/null 2>&1
sync; echo 3 > /proc/sys/vm/drop_caches
bash "$(dirname "$0")/../../cgexec.sh" ow 1G $B bench --db=$D --num=1000000 --writes=${WRITES:-3000000} --value_size=1024 --key_size=16 --benchmarks=overwrite --use_existing_db=1 --gc_space_amp_target=${TARGET:-1.2} 2>&1 | grep -E '^overwrite|gc_runs|wa=' | head -3
du -sm $D | cut -f1
rm -rf $D
