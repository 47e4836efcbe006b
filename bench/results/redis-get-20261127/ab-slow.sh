#!/bin/bash
# A/B: default SLOW_INLINE (500us wall) vs effectively disabled; GET -P16 1KiB, 50 clients
run() { # name env...
  local name=$1; shift
  rm -rf /var/tmp/pg; sync; sleep 1
  env "$@" /tmp/p/wk-tmp serve --db /var/tmp/pg --port 16401 --appendfsync always 2>/tmp/p/srv-$name.log &
  sleep 1.5
  redis-benchmark -p 16401 -t set -n 50000 -r 50000 -d 1024 -P 16 -c 50 -q >/dev/null
  local r=$(redis-benchmark -p 16401 -t get -n 600000 -r 50000 -d 1024 -P 16 -c 50 -q | tr '\r' '\n' | grep "requests per second" | tail -1)
  redis-cli -p 16401 shutdown nosave >/dev/null 2>&1; wait
  echo "$name $r slow=$(grep -c slow /tmp/p/srv-$name.log) $(tail -1 /tmp/p/srv-$name.log)"
}
for r in 1 2 3; do run default X=1; run noslow TMP_SLOW_US=100000000; done
