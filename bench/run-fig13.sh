#!/usr/bin/env bash
# run-fig13.sh: WiscKey's Figure 13 at reduced scale, with wisckey's own value-log GC.
# For each delete percentage (25, 50, 75, 100) and GC off / on: random-load KEYS values of
# VALUE bytes, delete that percentage of the keys, random-load KEYS values again; report the
# second load's throughput (the paper: 10-35% lower with GC) and the database size after.
# Runs `crates/wisckey/examples/fig13.rs` under a memory limit (bench/cgexec.sh, needs root;
# MEM_LIMIT=none runs without one) so the page cache cannot hold the data set.
#
#   KEYS=262144 VALUE=4096 MEM_LIMIT=256M bench/run-fig13.sh
#
# Writes bench/results/fig13-<date>/results.txt. Each database lives in a fresh temporary
# directory under DB_ROOT (default: the system temp dir), removed after its run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
KEYS=${KEYS:-262144}
VALUE=${VALUE:-4096}
MEM_LIMIT=${MEM_LIMIT:-256M}
DB_ROOT=${DB_ROOT:-${TMPDIR:-/tmp}}
(cd "$root" && cargo build --release -p wisckey --example fig13)
bin=${CARGO_TARGET_DIR:-$root/target}/release/examples/fig13
out=$root/bench/results/fig13-$(date +%Y%m%d-%H%M)
mkdir -p "$out"
{
  echo "# run-fig13.sh $(date -u +%Y-%m-%dT%H:%MZ): KEYS=$KEYS VALUE=$VALUE MEM_LIMIT=$MEM_LIMIT"
  echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB memory; db in $DB_ROOT"
} > "$out/results.txt"
for pct in 25 50 75 100; do
  for gc in off on; do
    scratch=$(mktemp -d "$DB_ROOT/wisckey-fig13.XXXXXX")
    if [[ $MEM_LIMIT == none ]]; then
      "$bin" "$scratch/db" "$KEYS" "$VALUE" "$pct" "$gc" | tee -a "$out/results.txt"
    else
      bash "$here/cgexec.sh" fig13 "$MEM_LIMIT" "$bin" "$scratch/db" "$KEYS" "$VALUE" "$pct" "$gc" |
        tee -a "$out/results.txt"
    fi
    rm -rf "$scratch"
  done
done
echo "run-fig13.sh: results in $out/results.txt"
