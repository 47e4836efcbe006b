#!/usr/bin/env bash
# fillsync at 1 KiB, one thread, as the suite runs it (NUM = 2 GiB / 1040 B, so num/1000 =
# 2,064 synced puts, about 0.3 s) and ten times longer, for wisckey (default and
# --vlog_direct_writes) and RocksDB, engines interleaved in every round, each on a fresh DB.
# Run from the repository root as root, after bench/setup.sh. Output: this folder (fio-sync.txt
# is the fio loop quoted in docs/BENCHMARKS.md, run by hand after this script).
set -euo pipefail
here=$(pwd)/bench
out=$here/results/fillsync-20261128
. "$here/lib.sh"
MEM_LIMIT=1G
db=$DATA_DIR/fillsync-ab
ROUNDS=${ROUNDS:-3}
for round in $(seq 1 "$ROUNDS"); do
  for num in 2064888 20648881; do
    for engine in wisckey wisckey-direct rocksdb; do
      rm -rf "$db"; sync; sleep 2
      f=$out/$engine.n$num.r$round.txt
      # shellcheck disable=SC2046
      "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $(engine_cmd "$engine") --benchmarks=fillsync \
        --num="$num" --value_size=1024 --key_size=16 --seed=301 --threads=1 --db="$db" > "$f" 2>&1
      echo "$round $num $engine $(grep -E '^fillsync' "$f")"
    done
  done
done
rm -rf "$db"
