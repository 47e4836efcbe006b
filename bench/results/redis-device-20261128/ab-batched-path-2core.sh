#!/bin/bash
# A/B of the batched write path: base vs new, interleaved, fresh server and DB per cell.
# usage: ab.sh ROUNDS ; prints: round bin mode P test rps cpu_s
cd /var/tmp/ab
R=${1:-3}
cell() { # bin mode P test n
  local bin=$1 mode=$2 P=$3 t=$4 n=$5
  rm -rf /var/tmp/ab/dbx; sync; sleep 2
  ./$bin serve --db /var/tmp/ab/dbx --port 6391 --appendfsync $mode >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 50); do redis-cli -p 6391 ping >/dev/null 2>&1 && break; sleep 0.1; done
  local out=$(redis-benchmark -p 6391 -t $t -P $P -c 50 -n $n -r 100000 -d 1024 --csv 2>/dev/null | tail -1)
  local cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
  redis-cli -p 6391 shutdown nosave >/dev/null 2>&1; wait $pid
  echo "$r $bin $mode $P $t $(echo $out | cut -d, -f2 | tr -d '"') $cpu"
}
for r in $(seq $R); do
  for bin in wisckey-base-s wisckey-new-s; do
    cell $bin everysec 16 incr 1500000
    cell $bin everysec 16 set 1000000
    cell $bin always 16 incr 1000000
    cell $bin always 1 incr 200000
  done
done
