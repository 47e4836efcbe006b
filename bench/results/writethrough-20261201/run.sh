#!/usr/bin/env bash
# Non-sync fillrandom at 1 KiB, the suite's size (2 GiB of data, 16-byte keys, seed 301,
# each process in a 1 GiB memory cgroup, page cache dropped before each), three rounds
# interleaved: wisckey as shipped (non-sync writes wait up to vlog_flush_interval = 10 ms in
# the log's user-space buffer), wisckey with --write_through_to_os (every write handed to the
# OS before it is acknowledged, as the peers' WALs do), and RocksDB, the best peer of the cell.
#   WISCKEY_BIN=<stripped wisckey-bench> ROUNDS=3 bash bench/results/writethrough-20261201/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
root=$(dirname "$here")
source "$here/lib.sh"
out=$(dirname "$0")
DATA=${DATA_DIR:-/work/bench-data}/writethrough
ROUNDS=${ROUNDS:-3}
num=$((2147483648 / (1024 + 16)))
mkdir -p "$DATA"
for round in $(seq 1 "$ROUNDS"); do
  for engine in wisckey wisckey-writethrough rocksdb; do
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
