#!/usr/bin/env bash
# YCSB E at 1 KiB (the suite's cell: 2 GiB loaded, 1 GiB cgroup, 10,000 operations, each run
# phase cold in its own process) with the base and new builds interleaved on one loaded DB,
# and the same with 100,000 operations (the cache warms during the run).
# Usage: BASE=... NEW=... DATA=... ROUNDS=3 ycsb-e.sh   (as root)
set -u
here=$(cd "$(dirname "$0")/../../.." && pwd)
C="--num=2064888 --record_size=1024 --key_size=16 --quiet"
ROUNDS=${ROUNDS:-3}
db=$DATA/ycsb-e
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
cg() { "$here/bench/cgexec.sh" ycsb-e 1G "$@"; }
rm -rf "$db"
cg "$BASE" bench $C --ycsb=e --ycsb_load_only=1 --seed=301 --db="$db" | grep -E 'load +:' || true
for settle in 1 2; do
  cg "$BASE" bench $C --ycsb=c --use_existing_db=1 --reads=20000 --threads=1 --seed=302 --db="$db" > /dev/null
done
for ops in 10000 100000; do
  for round in $(seq "$ROUNDS"); do
    for side in base new; do
      bin=$BASE; [[ $side == new ]] && bin=$NEW
      drop
      printf '%s ops, round %s, %s: ' "$ops" "$round" "$side"
      cg "$bin" bench $C --ycsb=e --use_existing_db=1 --reads="$ops" --threads=1 --seed=301 --db="$db" |
        grep -E -- '-run +:' | awk '{print $5, "ops/sec"}'
    done
  done
done
rm -rf "$db"
