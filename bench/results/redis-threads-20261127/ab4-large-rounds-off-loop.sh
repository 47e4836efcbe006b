#!/bin/bash
# usage: ab5.sh ROUNDS ; always; variants: new2 (big rounds off the loop), new (all rounds on the loop), base (executor thread)
cell() { # bin tag args...
  bin=$1; tag=$2; shift 2
  rm -rf /var/tmp/rbw; $bin serve --db /var/tmp/rbw --port 16390 --appendfsync always >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -c 50 -r 100000 "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag [$*] /"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
for r in $(seq 1 $1); do
  for c in "-t set -d 16384 -P 16 -n 30000" "-t mset -d 16384 -P 1 -n 5000" "-t set,incr -d 1024 -P 1 -n 100000" "-t mset -d 1024 -P 16 -n 30000"; do
    for v in new2 new base; do
      cell /tmp/st/wisckey-$v $v $c | sed "s/^/r$r /"
    done
  done
done
