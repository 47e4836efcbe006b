#!/bin/bash
# rs.sh: readseq / seekrandom+100 with different read-ahead windows on one 2 GiB DB of 1 KiB values, 1 GiB cgroup
B=${B:-/tmp/rb/bench-head}; D=/work/bench-data/rs
if [[ ! -d $D ]]; then
  bash /work/main/bench/cgexec.sh rs 1G $B bench --benchmarks=fillrandom --num=2064888 --value_size=1024 --key_size=16 --seed=301 --db=$D 2>&1 | grep -A0 '^fillrandom'
  # settle: compactions
  bash /work/main/bench/cgexec.sh rs 1G $B bench --benchmarks=readrandom --num=2064888 --reads=20000 --value_size=1024 --key_size=16 --seed=302 --db=$D --use_existing_db 2>&1 | grep '^readrandom'
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for w in ${WINDOWS:-64 128 256}; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    out=$(bash /work/main/bench/cgexec.sh rs 1G $B bench --benchmarks=${BM:-readseq} ${EXTRA} --num=2064888 --reads=${READS:-100000} --value_size=1024 --key_size=16 --seed=303 --db=$D --use_existing_db --readahead_entries=$w 2>&1)
    echo "r$r w$w $(grep -E '^(readseq|seekrandom)' <<<"$out" | awk '{print $5,$6}') $(grep -o 'cpu=[^ ]* (user+sys [^ ]* s' <<<"$out" | head -1)"
  done
done
