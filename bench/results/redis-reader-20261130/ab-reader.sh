#!/bin/bash
# GET -P16, 50 clients, after SETs: loop server old (pool) / loop new (reader thread) / redis-server.
# Usage: OLD=bin NEW=bin D=1024 N=600000 ROUNDS=3 bash ab-reader.sh
. "$(dirname "$0")/ab-run.sh"
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always --threads 1
  run new $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always --threads 1
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
