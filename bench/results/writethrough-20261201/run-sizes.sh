#!/usr/bin/env bash
# run.sh at the suite's larger value sizes: non-sync fillrandom, 2 GiB of data, 16-byte keys,
# seed 301, 1 GiB memory cgroup, page cache dropped before each process; rounds interleaved:
# wisckey as shipped, wisckey --write_through_to_os, and the cell's best peer in the latest
# suite (RocksDB at 4 KiB, Badger at 16 and 64 KiB).
#   WISCKEY_BIN=<stripped wisckey-bench> ROUNDS=2 bash bench/results/writethrough-20261201/run-sizes.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
root=$(dirname "$here")
source "$here/lib.sh"
out=$(dirname "$0")
DATA=${DATA_DIR:-/work/bench-data}/writethrough
ROUNDS=${ROUNDS:-2}
mkdir -p "$DATA"
for size in 4096 16384 65536; do
  peer=badger
  ((size == 4096)) && peer=rocksdb
  num=$((2147483648 / (size + 16)))
  for round in $(seq 1 "$ROUNDS"); do
    for engine in wisckey wisckey-writethrough "$peer"; do
      rm -rf "$DATA/db"
      sync
      echo 3 > /proc/sys/vm/drop_caches
      # shellcheck disable=SC2046
      "$here/cgexec.sh" "$engine" 1G $(engine_cmd "$engine") --num=$num --value_size=$size \
        --key_size=16 --quiet --seed=301 --benchmarks=fillrandom --db="$DATA/db" \
        > "$out/$engine.v$size.r$round.txt" 2>&1
      echo "v$size round $round $engine: $(grep -E '^fillrandom +:' "$out/$engine.v$size.r$round.txt")"
    done
  done
done
rm -rf "$DATA"
