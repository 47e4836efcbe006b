#!/bin/bash
# The default (multi-threaded) server, old vs new, GET -P16 -c 50 after SETs, and redis-server:
# what the value-cache admission change does through the server. Usage: OLD=bin NEW=bin D=16384 N=200000 ROUNDS=3 bash ab-default.sh
run() { local name=$1; shift
  rm -rf /var/tmp/pg; mkdir -p /var/tmp/pg; sync; sleep 1
  "$@" >/dev/null 2>&1 & local pid=$!
  for i in $(seq 50); do redis-cli -p 16401 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 16401 -t set -n 50000 -r 50000 -d ${D:-1024} -P 16 -c 50 -q >/dev/null
  local c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local r=$(redis-benchmark -p 16401 -t get -n ${N:-600000} -r 50000 -d ${D:-1024} -P ${P:-16} -c 50 -q | tr '\r' '\n' | grep "requests per second" | tail -1)
  local c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  redis-cli -p 16401 shutdown nosave >/dev/null 2>&1; wait
  echo "$name $r cpu_ticks=$((c1-c0))"; }
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always
  run new $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
