#!/usr/bin/env bash
# run-aged-ycsb-a.sh: YCSB A on an aged wisckey database with GC busy (--gc_space_amp_target
# 1.2) and with GC off, two interleaved rounds (wisckey only; as root: cgroup, drop_caches).
# Ages it once with GC off: 1M records of 1 KiB loaded, then 1M operations of A (500k
# updates: ~0.5 GiB of garbage, space amplification ~1.55); each measurement runs 100,000
# operations of A on a fresh copy of that database, page cache dropped. Needs ~4 GiB free.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${WISCKEY_BIN:-${CARGO_TARGET_DIR:-$(dirname "$here")/target}/release/wisckey-bench}
D=${DATA_DIR:-/work/bench-data}
rm -rf $D/aged $D/aged-base
# age: load 1M x 1 KiB + 1M ops of A (500k updates) with GC off
$B bench --ycsb=a --num=1000000 --reads=1000000 --record_size=1024 --key_size=16 --seed=301 --quiet --db=$D/aged-base --gc_space_amp_target=inf --mem_limit=1G | grep -E 'ycsb-a-(load|run)|space_amp' | head -4
du -sh $D/aged-base
# BASELINE_BIN (optional): another wisckey-bench, run with GC busy beside this one's.
variants="1.2 inf"
[ -n "${BASELINE_BIN:-}" ] && variants="baseline-1.2 1.2 inf"
for round in 1 2; do
  for v in $variants; do
    g=${v#baseline-}; bin=$B; [ "$v" != "$g" ] && bin=$BASELINE_BIN
    rm -rf $D/aged; cp -a $D/aged-base $D/aged; sync; echo 3 > /proc/sys/vm/drop_caches
    echo "== round $round $v"
    $bin bench --ycsb=a --use_existing_db=1 --num=1000000 --reads=100000 --record_size=1024 --key_size=16 --seed=302 --quiet --db=$D/aged --gc_space_amp_target=$g --mem_limit=1G | grep -E 'ycsb-a-run|gc_runs|read +:|update +:'
  done
done
rm -rf $D/aged $D/aged-base
