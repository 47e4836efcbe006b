#!/bin/bash
# like ab-reader.sh: old (pool), reader threads 1 and 2 (WISCKEY_READERS), redis
. "$(dirname "$0")/ab-run.sh"
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always --threads 1
  WISCKEY_READERS=1 run new1 $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always --threads 1
  WISCKEY_READERS=2 run new2 $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always --threads 1
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
