#!/bin/bash
# Executor threads 1/2/4 of wisckey serve vs redis-server on the 16-core device; 1 KiB values,
# -c 50, SET/GET/INCR, -P 1 and 16, always and everysec, one round, redis-benchmark --threads 4.
set -u
D=$(cd "$(dirname "$0")" && pwd)
L="$D/lib/ld-linux-x86-64.so.2 --library-path $D/lib"
N=${N:-500000}
PORT=16390
out=$OUT/redis16x.csv
echo "engine,fsync,P,test,rps,p50,p99" > $out
nproc; uname -r
for fs in always everysec; do
 for P in 1 16; do
  for eng in wisckey:1 wisckey:2 wisckey:4 redis; do
   dir=$(mktemp -d /tmp/r16.XXXX)
   case $eng in
    wisckey:*) $D/wisckey serve --db $dir/db --port $PORT --appendfsync $fs --executor-threads ${eng#wisckey:} 2>>$OUT/server.log & ;;
    redis) $L $D/redis-server --port $PORT --bind 127.0.0.1 --dir $dir --appendonly yes --appendfsync $fs --save '' --daemonize no --logfile $OUT/redis.log & ;;
   esac
   pid=$!
   for i in $(seq 100); do $L $D/redis-cli -p $PORT PING >/dev/null 2>&1 && break; sleep 0.1; done
   c0=$(awk '{print $14+$15}' /proc/$pid/stat)
   $L $D/redis-benchmark -p $PORT -t set,get,incr -n $N -c 50 -d 1024 -r 100000 -P $P --threads 4 --csv 2>/dev/null | tail -n +2 | tr -d '"' | \
     awk -F, -v e=$eng -v f=$fs -v p=$P '{print e","f","p","$1","$2","$6","$8}' >> $out
   c1=$(awk '{print $14+$15}' /proc/$pid/stat)
   echo "$eng $fs P$P server_cpu_s=$(( (c1-c0) / 100 ))" >> $OUT/cpu.txt
   $L $D/redis-cli -p $PORT SHUTDOWN NOSAVE >/dev/null 2>&1; wait $pid 2>/dev/null; rm -rf $dir; sync; sleep 1
  done
 done
done
cat $out; cat $OUT/cpu.txt
