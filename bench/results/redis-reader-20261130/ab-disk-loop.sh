#!/bin/bash
# Pipelined GETs of data on disk, one event loop: OLD vs NEW `wisckey serve --threads 1` in a
# 256 MiB memory cgroup (page cache included) over 2 GiB of 16 KiB values, page cache dropped
# before each run. Usage (root, from the repository root): OLD=bin NEW=bin ROUNDS=2 [ARGS=] bash ab-disk-loop.sh
# (ARGS: the servers' options instead of `--threads 1`; empty for the default server;
# CMD: the measured redis-benchmark request instead of `-t get`, e.g. CMD="MGET
# key:__rand_int__ key:__rand_int__", the keys being `key:` and 12 digits)
set -u
db=/var/tmp/disk-loop; port=16402; keys=131072; size=16384
start() { bench/cgexec.sh disk-loop 256M "$1" serve --db $db --port $port --appendfsync everysec ${ARGS---threads 1} >/dev/null 2>&1 & pid=$!
  for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done; }
stop() { redis-cli -p $port shutdown >/dev/null 2>&1; wait $pid; }
rm -rf $db; start "$NEW"
python3 - $keys $size <<'PY' | redis-cli -p $port --pipe | tail -1
import os, sys
keys, size = int(sys.argv[1]), int(sys.argv[2]); out = sys.stdout.buffer; base = os.urandom(size)
for i in range(keys):
    key = b"key:%012d" % i; value = i.to_bytes(8, "little") + base[8:]
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
PY
echo "dbsize $(redis-cli -p $port dbsize)"; stop
for r in $(seq ${ROUNDS:-2}); do for tag in old new; do
  bin=$OLD; [ $tag = new ] && bin=$NEW
  sync; echo 3 > /proc/sys/vm/drop_caches; start "$bin"
  c0=$(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || echo 0)
  # shellcheck disable=SC2086 # CMD is a list of words
  res=$(redis-benchmark -p $port -n ${N:-40000} -r $keys -d $size -P 16 -c 50 --csv ${CMD:--t get} | tail -1)
  echo "r$r $tag $res"
  stop
done; done
rm -rf $db
