#!/bin/bash
# Unpipelined 1 KiB cells, always, multi-threaded default: 5894a22 (wisckey-base-s) against
# this session's final server (wisckey-g-s), interleaved, fresh server and DB per cell.
cd /var/tmp/ab
cell() { # bin tests n
  local bin=$1 t=$2 n=$3
  rm -rf /var/tmp/ab/dbx; sync; sleep 2
  ./$bin serve --db /var/tmp/ab/dbx --port 6391 --appendfsync always >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 50); do redis-cli -p 6391 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 6391 -t $t -P 1 -c 50 -n $n -r 100000 -d 1024 --csv 2>/dev/null | tail -n +2 | tr -d '"' > /tmp/cell.csv
  local cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
  redis-cli -p 6391 shutdown nosave >/dev/null 2>&1; wait $pid
  awk -F, -v r=$r -v b=$bin -v c=$cpu '{print r, b, $1, $2, c}' /tmp/cell.csv
}
for r in $(seq ${ROUNDS:-4}); do
  for bin in wisckey-base-s wisckey-g-s; do
    cell $bin set,get,incr 150000
  done
done
