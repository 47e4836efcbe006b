#!/bin/bash
# perf stat of the server during a GET phase: cycles, instructions per GET
runs() { # name cmd...
  local name=$1; shift
  rm -rf /var/tmp/pg; mkdir -p /var/tmp/pg; sync; sleep 1
  "$@" 2>/dev/null & local pid=$!
  for i in $(seq 50); do redis-cli -p 16401 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 16401 -t set -n 50000 -r 50000 -d ${D:-1024} -P 16 -c 50 -q >/dev/null
  perf stat -e task-clock,cycles,instructions,context-switches -p $pid -o /tmp/p/stat-$name.txt &
  local sp=$!
  sleep 0.2
  local r=$(redis-benchmark -p 16401 -t get -n ${N:-600000} -r 50000 -d ${D:-1024} -P ${P:-16} -c 50 -q | tr '\r' '\n' | grep "requests per second" | tail -1)
  kill -INT $sp; wait $sp
  redis-cli -p 16401 shutdown nosave >/dev/null 2>&1; wait $pid
  local n=${N:-600000}
  echo "$name $r $(awk -v n=$n '/task-clock/{t=$1} /cycles/{c=$1} /instructions/{i=$1} /context-switches/{s=$1} END{gsub(",","",t);gsub(",","",c);gsub(",","",i);gsub(",","",s); printf "us/get=%.2f cyc/get=%.0f ins/get=%.0f cs/get=%.3f", t*1000/n, c/n, i/n, s/n}' /tmp/p/stat-$name.txt)"
}
for r in $(seq ${ROUNDS:-3}); do
  for m in ${MODES:-multi}; do
    extra=; [ $m = loop ] && extra="--threads 1"
    for b in $BINS; do
      runs "r$r-$m-${b%%=*}" ${b#*=} serve --db /var/tmp/pg --port 16401 --appendfsync always $extra
    done
  done
  [ -n "$REDIS" ] && runs "r$r-redis" redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no --logfile /tmp/p/redis.log
done
