#!/bin/bash
# usage: ab3.sh ROUNDS ; always mode, 1 KiB, SET+INCR at -P 1 (200K) and -P 16 (600K)
OUT=/tmp/rb/out3; mkdir -p $OUT
run_w() { # bin tag P N
  rm -rf /var/tmp/rbw; $1 serve --db /var/tmp/rbw --port 16390 --appendfsync always >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -t set,incr -P $3 -c 50 -d 1024 -r 100000 -n $4 -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$2 P$3 /"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
run_r() { # P N
  rm -rf /var/tmp/rbr; mkdir -p /var/tmp/rbr; redis-server --port 16391 --dir /var/tmp/rbr --appendonly yes --appendfsync always --save '' >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16391 -t set,incr -P $1 -c 50 -d 1024 -r 100000 -n $2 -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/redis P$1 /"
  redis-cli -p 16391 shutdown nosave >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbr; sync; sleep 2; }
for r in $(seq 1 $1); do
  for P in 1 16; do
    N=$(( P == 1 ? 200000 : 600000 ))
    run_w /tmp/zf/wisckey-new new $P $N | sed "s/^/r$r /"
    run_w /tmp/rb/wisckey base $P $N | sed "s/^/r$r /"
    run_r $P $N | sed "s/^/r$r /"
  done
done | tee -a $OUT/results.txt
