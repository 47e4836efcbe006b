#!/bin/bash
# A/B: d48f380 (wisckey-new-s) vs the prefetching build (wisckey-pf-s), interleaved, fresh
# server and DB per cell. prints: round bin mode P test rps server_cpu_s(cell)
cd /var/tmp/ab
R=${1:-3}
cell() { # bin mode P tests n
  local bin=$1 mode=$2 P=$3 t=$4 n=$5
  rm -rf /var/tmp/ab/dbx; sync; sleep 2
  ./$bin serve --db /var/tmp/ab/dbx --port 6391 --appendfsync $mode >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 50); do redis-cli -p 6391 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 6391 -t $t -P $P -c 50 -n $n -r 100000 -d 1024 --csv 2>/dev/null | tail -n +2 | tr -d '"' > /tmp/cell.csv
  local cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
  redis-cli -p 6391 shutdown nosave >/dev/null 2>&1; wait $pid
  awk -F, -v r=$r -v b=$bin -v m=$mode -v p=$P -v c=$cpu '{print r, b, m, p, $1, $2, c}' /tmp/cell.csv
}
for r in $(seq $R); do
  for bin in wisckey-new-s wisckey-pf-s; do
    cell $bin always 16 set,get 600000
    cell $bin everysec 16 incr 1500000
    cell $bin always 16 incr 1000000
    cell $bin always 1 get 200000
  done
done
