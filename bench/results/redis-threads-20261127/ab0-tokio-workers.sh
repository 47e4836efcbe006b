#!/bin/bash
# usage: ab.sh ROUNDS N ; always mode, 1 KiB, SET+INCR at -P 1
run_w() { # tag envs...
  tag=$1; shift
  rm -rf /var/tmp/rbw; env "$@" /tmp/st/wisckey serve --db /var/tmp/rbw --port 16390 --appendfsync always >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -t set,incr -P 1 -c 50 -d 1024 -r 100000 -n $N -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag /"
  cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat); echo "$tag cpu_s $cpu"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
run_r() {
  rm -rf /var/tmp/rbr; mkdir -p /var/tmp/rbr; redis-server --port 16391 --dir /var/tmp/rbr --appendonly yes --appendfsync always --save '' >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16391 -t set,incr -P 1 -c 50 -d 1024 -r 100000 -n $N -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/redis /"
  cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat); echo "redis cpu_s $cpu"
  redis-cli -p 16391 shutdown nosave >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbr; sync; sleep 2; }
N=$2
for r in $(seq 1 $1); do
  run_w w2 X=1 | sed "s/^/r$r /"
  run_w w1 TOKIO_WORKER_THREADS=1 | sed "s/^/r$r /"
  run_r | sed "s/^/r$r /"
done
