#!/bin/bash
# always, 1 KiB, -P 1 -c 50: set,incr (and get) on the default (multi-threaded) server:
# OLD = 8306282, NEW = the synced round waiting up to 100 us for the previous round's
# connections; plus redis-server AOF always. Usage: OLD=... NEW=... bash ab.sh [ROUNDS]
cell() { tag=$1; bin=$2; shift 2; rm -rf /var/tmp/rbw; "$bin" serve --db /var/tmp/rbw --port 16390 --appendfsync always "$@" >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -t set,incr,get -P 1 -c 50 -d 1024 -r 100000 -n 100000 -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag /"
  echo "$tag cpu_s $(awk '{print ($14+$15)/100}' /proc/$pid/stat)"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
redis_cell() { rm -rf /var/tmp/rbr; mkdir -p /var/tmp/rbr; redis-server --port 16391 --dir /var/tmp/rbr --appendonly yes --appendfsync always --save '' >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16391 -t set,incr,get -P 1 -c 50 -d 1024 -r 100000 -n 100000 -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/redis /"
  echo "redis cpu_s $(awk '{print ($14+$15)/100}' /proc/$pid/stat)"
  redis-cli -p 16391 shutdown nosave >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbr; sync; sleep 2; }
for r in $(seq 1 ${1:-4}); do
  cell old "$OLD" 2>&1 | sed "s/^/r$r /"
  cell new "$NEW" 2>&1 | sed "s/^/r$r /"
  redis_cell | sed "s/^/r$r /"
done
