#!/bin/bash
# usage: ab2.sh ROUNDS ; always, 1 KiB: set,incr,get at -P 1 (N=100000) and -P 16 (N=300000)
# wisckey as before (multi-thread runtime + executor thread) vs WISCKEY_SINGLE_LOOP=1 vs redis-server AOF always
run_w() { # tag P N envs...
  tag=$1; P=$2; N=$3; shift 3
  rm -rf /var/tmp/rbw; env "$@" /tmp/st/wisckey-sl serve --db /var/tmp/rbw --port 16390 --appendfsync always >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -t set,incr,get -P $P -c 50 -d 1024 -r 100000 -n $N -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag P$P /"
  cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat); echo "$tag P$P cpu_s $cpu"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
run_r() { # P N
  P=$1; N=$2
  rm -rf /var/tmp/rbr; mkdir -p /var/tmp/rbr; redis-server --port 16391 --dir /var/tmp/rbr --appendonly yes --appendfsync always --save '' >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16391 -t set,incr,get -P $P -c 50 -d 1024 -r 100000 -n $N -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/redis P$P /"
  cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat); echo "redis P$P cpu_s $cpu"
  redis-cli -p 16391 shutdown nosave >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbr; sync; sleep 2; }
for r in $(seq 1 $1); do
  for P in 1 16; do
    N=$(( P == 1 ? 100000 : 300000 ))
    run_w multi $P $N X=1 | sed "s/^/r$r /"
    run_w mtask $P $N WISCKEY_COMMIT_TASK=1 | sed "s/^/r$r /"
    run_w single $P $N WISCKEY_SINGLE_LOOP=1 | sed "s/^/r$r /"
    run_r $P $N | sed "s/^/r$r /"
  done
done
