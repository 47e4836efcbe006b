#!/bin/bash
# always: two event loops (prototype WISCKEY_LOOPS=2 with --threads 1: the acceptor hands each connection to one of two current-thread loops, each committing its own rounds) vs one loop vs multi
cell() { tag=$1; shift; rm -rf /var/tmp/rbw; env $ENVS /tmp/st/wisckey-loops serve --db /var/tmp/rbw --port 16390 --appendfsync always $FLAGS >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -c 50 -r 100000 "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag [$*] /"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
for r in 1 2; do
  for c in "-t set,incr,get -d 1024 -P 1 -n 100000" "-t set,get -d 1024 -P 16 -n 300000" "-t set -d 16384 -P 16 -n 30000"; do
    ENVS="WISCKEY_LOOPS=2" FLAGS="--threads 1" cell loops2 $c | sed "s/^/r$r /"
    ENVS="X=1" FLAGS="--threads 1" cell loop1 $c | sed "s/^/r$r /"
    ENVS="X=1" FLAGS="" cell multi $c | sed "s/^/r$r /"
  done
done
