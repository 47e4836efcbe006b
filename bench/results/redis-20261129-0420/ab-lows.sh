#!/usr/bin/env bash
# The grid's lowest new/base cells again, longer and interleaved: 1 KiB, -P 1, -c 50,
# appendfsync always, INCR / MSET / SET / GET, 100,000 requests each, fresh server per run.
# NEW=<wisckey binary> BASE=<older wisckey binary> ROUNDS=3 bash ab-lows.sh
set -euo pipefail
port=16390
for round in $(seq 1 "${ROUNDS:-3}"); do
  for which in new base; do
    bin=$NEW; [ "$which" = base ] && bin=$BASE
    dir=$(mktemp -d -p /var/tmp)
    "$bin" serve --db "$dir/db" --port $port --appendfsync always >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
    echo "round $round $which: $(redis-benchmark -p $port -t set,get,incr,mset -P 1 -c 50 -d 1024 -n 100000 -r 100000 --csv | tr '\n' ' ')"
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
  done
done
