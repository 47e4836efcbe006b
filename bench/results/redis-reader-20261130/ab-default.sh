#!/bin/bash
# The default (multi-threaded) server, old vs new, GET -P16 -c 50 after SETs, and redis-server:
# what the value-cache admission change does through the server. Usage: OLD=bin NEW=bin D=16384 N=200000 ROUNDS=3 bash ab-default.sh
. "$(dirname "$0")/ab-run.sh"
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always
  run new $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
