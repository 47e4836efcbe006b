#!/bin/bash
# GET -P16 1 KiB after 50,000 SETs (the grid's data, all in the memtable), server CPU of the
# GET phase only; and INCR -P16 everysec over 20,000 keys (kept in the memtable), CPU of the
# INCR phase. base = d48f380 (wisckey-new-s), pf = prefetching build. Interleaved.
cd /var/tmp/ab
run() { # bin test mode r n
  local bin=$1 t=$2 mode=$3 rr=$4 n=$5
  rm -rf /var/tmp/ab/pg; sync; sleep 2
  ./$bin serve --db /var/tmp/ab/pg --port 16401 --appendfsync $mode >/dev/null 2>&1 & local pid=$!
  for i in $(seq 50); do redis-cli -p 16401 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 16401 -t set -n 50000 -r $rr -d 1024 -P 16 -c 50 -q >/dev/null
  local c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local r=$(redis-benchmark -p 16401 -t $t -n $n -r $rr -d 1024 -P 16 -c 50 --csv | tail -1 | cut -d, -f2 | tr -d '"')
  local c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  redis-cli -p 16401 shutdown nosave >/dev/null 2>&1; wait $pid
  echo "$round $bin $t $mode rps=$r cpu_us_per_op=$(awk -v a=$c0 -v b=$c1 -v n=$n 'BEGIN{printf "%.2f", (b-a)*10000/n}')"
}
for round in $(seq ${ROUNDS:-4}); do
  for bin in wisckey-new-s wisckey-pf-s; do
    run $bin get always 50000 1200000
    run $bin incr everysec 20000 1500000
  done
done
