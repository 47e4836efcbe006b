#!/usr/bin/env bash
# LevelDB's non-sync fillrandom at 1 KiB with its default 4 MiB memtable (as every suite ran
# it) and with the 64 MiB the other engines use, the suite's parameters (2 GiB, 16-byte keys,
# seed 301, 1 GiB memory cgroup, caches dropped before each process), ROUNDS rounds interleaved.
#   ROUNDS=1 bash bench/results/leveldb-memtable-20261201/run.sh
# ENGINES (default "leveldb-4m leveldb-64m") adds others side by side, e.g. wisckey.
# (The runs here named the 4 MiB variant `leveldb`, then its name in bench/lib.sh.)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
root=$(dirname "$here")
source "$here/lib.sh"
out=$(dirname "$0")
DATA=${DATA_DIR:-/work/bench-data}/leveldb-memtable
ROUNDS=${ROUNDS:-1}
num=$((2147483648 / (1024 + 16)))
mkdir -p "$DATA"
for round in $(seq 1 "$ROUNDS"); do
  for engine in ${ENGINES:-leveldb-4m leveldb-64m}; do
    rm -rf "$DATA/db"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    # shellcheck disable=SC2046
    "$here/cgexec.sh" "$engine" 1G $(engine_cmd "$engine") --num=$num --value_size=1024 \
      --key_size=16 --quiet --seed=301 --benchmarks=fillrandom --db="$DATA/db" \
      > "$out/$engine.r$round.txt" 2>&1
    echo "round $round $engine: $(grep -E '^fillrandom +:' "$out/$engine.r$round.txt")"
  done
done
rm -rf "$DATA"
