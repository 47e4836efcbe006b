#!/bin/bash
cd /var/tmp/ab
cell() { # name P cmd...
  local name=$1 P=$2; shift 2
  rm -rf /var/tmp/ab/ms; mkdir -p /var/tmp/ab/ms; sync; sleep 2
  "$@" >/dev/null 2>&1 & local pid=$!
  for i in $(seq 50); do redis-cli -p 16402 ping >/dev/null 2>&1 && break; sleep 0.1; done
  local c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local r=$(redis-benchmark -p 16402 -t mset -n ${N:-20000} -r 100000 -d 16384 -P $P -c 50 --csv | tail -1 | cut -d, -f2 | tr -d '"')
  local c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  redis-cli -p 16402 shutdown nosave >/dev/null 2>&1; wait $pid
  echo "$round $name P$P rps=$r cpu_s=$(awk -v a=$c0 -v b=$c1 'BEGIN{printf "%.2f",(b-a)/100}')"
}
for round in $(seq ${ROUNDS:-2}); do
 for P in 1 16; do
  cell multi $P ./wisckey-cur-s serve --db /var/tmp/ab/ms/db --port 16402 --appendfsync always
  cell loop $P ./wisckey-cur-s serve --db /var/tmp/ab/ms/db --port 16402 --appendfsync always --threads 1
  cell redis $P redis-server --port 16402 --bind 127.0.0.1 --dir /var/tmp/ab/ms --appendonly yes --appendfsync always --save '' --daemonize no
 done
done
