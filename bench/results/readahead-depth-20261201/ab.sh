#!/usr/bin/env bash
# Does a deeper scan read-ahead lift cold short scans at 1 KiB? seekrandom (100 nexts, SEEKS
# seeks, cold: page cache dropped, 1 GiB cgroup) on one fillrandom-loaded 1 KiB database
# (2,064,888 entries, the suite's shape), with `--readahead_threads` T (engine option
# `scan_readahead_threads`, default 32) for each T in THREADS, interleaved, ROUNDS rounds.
# Usage: BIN=target/release/wisckey-bench DB=/work/bench-data/sr bash ab.sh
set -euo pipefail
here=/work/main/bench
out=$(cd "$(dirname "$0")" && pwd)
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for r in $(seq ${ROUNDS:-3}); do
  for t in ${THREADS:-16 32 64}; do
    drop
    a=$(awk '{print $1}' /sys/block/vda/stat)
    $here/cgexec.sh sr 1G $BIN bench --num=2064888 --value_size=1024 --key_size=16 --quiet \
      --seed=$((400 + r)) --benchmarks=seekrandom --seek_nexts=100 --reads=${SEEKS:-2000} \
      --readahead_threads=$t --db=$DB --use_existing_db=1 --gc_space_amp_target=inf \
      > "$out/seek-t$t-r$r.txt" 2>&1
    b=$(awk '{print $1}' /sys/block/vda/stat)
    echo "round $r threads $t: $(grep -o '[0-9]* ops/sec' "$out/seek-t$t-r$r.txt") device reads $((b - a))"
  done
done
