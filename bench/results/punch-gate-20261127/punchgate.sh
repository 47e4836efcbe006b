#!/usr/bin/env bash
# Background punching gated by the space-amp target: old (wb-old) vs new (wb-new) binaries,
# 2 GiB fillrandom loads in the suite's 1 GiB cgroup, interleaved; ROUNDS rounds per value size.
set -u
cd /work/main
D=/var/tmp/ab/pg; mkdir -p $D
OUT=${OUT:-/var/tmp/ab/punchgate}; mkdir -p $OUT
for round in $(seq 1 ${ROUNDS:-3}); do
  for vs in ${SIZES:-16384 4096}; do
    num=$((2147483648 / (vs + 16)))
    for b in old new; do
      rm -rf $D/db; sync; sleep 2
      f=$OUT/$b.v$vs.r$round.txt
      bash bench/cgexec.sh ab-pg 1G /var/tmp/ab/wb-$b bench --num=$num --value_size=$vs --key_size=16 --seed=301 --quiet --benchmarks=fillrandom --db=$D/db > $f 2>&1
      echo "r$round v$vs $b: $(grep -o '[0-9]* ops/sec' $f) $(grep -o 'punched [0-9.]* MiB' $f | head -1) $(grep -o 'cpu=[^)]*)' $f | head -1) $(grep -o 'db_size=[0-9.]* MiB' $f | head -1) $(grep -o 'space_amp=[0-9.]*' $f | head -1)"
    done
  done
done
rm -rf $D/db
