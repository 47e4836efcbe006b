#!/bin/bash
# wisckey serve with glibc malloc (OLD) / with mimalloc (NEW) / redis-server AOF always,
# interleaved: 50,000 SETs then N GETs (-P ${P:-16} -c 50), D-byte values, the server's CPU
# ticks over the GETs (ab-run.sh of redis-reader-20261130).
# Usage: OLD=bin NEW=bin D=1024 N=600000 ROUNDS=3 [ARGS="--threads 1"] [P=16] bash ab-alloc.sh
. "$(dirname "$0")/../redis-reader-20261130/ab-run.sh"
for r in $(seq ${ROUNDS:-3}); do
  run old $OLD serve --db /var/tmp/pg --port 16401 --appendfsync always ${ARGS---threads 1}
  run new $NEW serve --db /var/tmp/pg --port 16401 --appendfsync always ${ARGS---threads 1}
  run redis redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no
done
