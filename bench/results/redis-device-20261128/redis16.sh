#!/bin/bash
# wisckey serve (multi-threaded default and --threads 1) against redis-server on the lent
# 16-core machine: redis-benchmark with 4 client threads, -c 50 -r 100000,
# SET/GET/INCR/MSET at -P 1 and 16, always and everysec, 1 KiB and 16 KiB values, two
# rounds, servers alternated in every cell. Binaries (and the loader and libraries they
# need) come in $D (the ignored .devbin/ folder); results go to $OUT, written as they come.
# TESTS, SIZES, PIPELINES, N1 / N16 (requests per test at 1 / 16 KiB), ROUNDS and CSV narrow
# it; the second pass ran
#   CSV=redis16-long.csv TESTS=set,get,incr SIZES=1024 PIPELINES=16 N1=2000000 ROUNDS=2
# (redis-benchmark's figures are counted in steps of ~250 ms: a test needs seconds).
set -u
D=${D:-$(pwd)/.devbin}
L="$D/lib/ld-linux-x86-64.so.2 --library-path $D/lib"
ROOT=${ROOT:-/var/tmp}
PORT=16390
ROUNDS=${ROUNDS:-2}
out=$OUT/${CSV:-redis16.csv}
echo "round,server,fsync,value,P,test,rps,p50,p99,server_cpu_s" > $out
{ nproc; df -T $ROOT | tail -1; uname -r; free -g | head -2; } > $OUT/machine.txt
cell() { # round server fsync value P n
  local round=$1 eng=$2 fs=$3 size=$4 P=$5 n=$6 dir pid c0 c1
  dir=$(mktemp -d $ROOT/r16.XXXX)
  case $eng in
    wisckey) $L $D/wisckey serve --db $dir/db --port $PORT --appendfsync $fs 2>>$OUT/server.log & ;;
    wisckey-loop) $L $D/wisckey serve --db $dir/db --port $PORT --appendfsync $fs --threads 1 2>>$OUT/server.log & ;;
    redis) $L $D/redis-server --port $PORT --bind 127.0.0.1 --dir $dir --appendonly yes \
      --appendfsync $fs --save '' --daemonize no --logfile $OUT/redis.log & ;;
  esac
  pid=$!
  for i in $(seq 100); do $L $D/redis-cli -p $PORT PING >/dev/null 2>&1 && break; sleep 0.1; done
  c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  timeout 90 $L $D/redis-benchmark -p $PORT -t ${TESTS:-set,get,incr,mset} -n $n -c 50 -d $size -r 100000 \
    -P $P --threads 4 --csv 2>/dev/null | tail -n +2 | tr -d '"' > $OUT/cell.csv
  c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  awk -F, -v r=$round -v e=$eng -v f=$fs -v s=$size -v p=$P -v c=$(awk -v a=$c0 -v b=$c1 'BEGIN{printf "%.2f", (b-a)/100}') \
    '{print r","e","f","s","p","$1","$2","$6","$8","c}' $OUT/cell.csv >> $out
  $L $D/redis-cli -p $PORT SHUTDOWN NOSAVE >/dev/null 2>&1
  wait $pid 2>/dev/null; rm -rf $dir; sync
}
for round in $(seq $ROUNDS); do
  for fs in always everysec; do
    for size in ${SIZES:-1024 16384}; do
      for P in ${PIPELINES:-1 16}; do
        if [ $size = 1024 ]; then n=${N1:-200000}; else n=${N16:-20000}; fi
        for eng in wisckey wisckey-loop redis; do
          cell $round $eng $fs $size $P $n
        done
      done
    done
  done
done
cat $out
