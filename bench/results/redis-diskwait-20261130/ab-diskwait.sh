#!/bin/bash
# GET -P16, 50 clients, after SETs: one-loop server before (wall time alone marks a read batch
# slow) / after (only when it read from the disk) / redis-server AOF always, interleaved.
# Usage: OLD=bin NEW=bin D=1024 N=600000 ROUNDS=3 [ARGS="--threads 1"] bash ab-diskwait.sh
. "$(dirname "$0")/../redis-reader-20261130/ab-run.sh"
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always ${ARGS---threads 1}
  run new $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always ${ARGS---threads 1}
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
