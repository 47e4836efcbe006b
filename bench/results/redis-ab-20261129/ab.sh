#!/usr/bin/env bash
# Interleaved A/B of two `wisckey serve` binaries (OLD, NEW) on the 2-core VM:
# per round and binary a fresh server (--appendfsync everysec, default threads), then
# redis-benchmark -c 50 -d 1024: SET -P 16 (100,000), GET -P 16 (600,000), INCR -P 1 (100,000),
# SET -P 1 (100,000). Prints requests/s per test.
set -euo pipefail
OLD=${OLD:?}; NEW=${NEW:?}; ROUNDS=${ROUNDS:-3}; PORT=${PORT:-16390}
run() {
  local bin=$1 dir; dir=$(mktemp -d /var/tmp/ab44.XXXX)
  "$bin" serve --db "$dir/db" --port "$PORT" --appendfsync everysec >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
  local rb="redis-benchmark -p $PORT -c 50 -d 1024 -r 100000 --csv -q"
  local set16 get16 incr1 set1
  set16=$($rb -t set -P 16 -n 100000 | tail -1 | cut -d, -f2)
  get16=$($rb -t get -P 16 -n 600000 | tail -1 | cut -d, -f2)
  incr1=$($rb -t incr -n 100000 | tail -1 | cut -d, -f2)
  set1=$($rb -t set -n 100000 | tail -1 | cut -d, -f2)
  redis-cli -p "$PORT" shutdown >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  echo "$set16 $get16 $incr1 $set1"
}
echo "round bin set_P16 get_P16 incr_P1 set_P1"
for r in $(seq "$ROUNDS"); do
  for b in old new; do
    if [ "$b" = old ]; then bin=$OLD; else bin=$NEW; fi
    echo "$r $b $(run "$bin")"
  done
done
