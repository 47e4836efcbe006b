#!/bin/bash
# GET A/B between binaries: $BINS (name=path ...), modes multi/loop; D, P, N, ROUNDS env
source <(sed -n '/^run()/,/^}/p' "$(dirname "$0")/ab-get.sh")
for r in $(seq ${ROUNDS:-3}); do
  for m in ${MODES:-multi loop}; do
    extra=; [ $m = loop ] && extra="--threads 1"
    for b in $BINS; do
      run "r$r $m ${b%%=*}" ${b#*=} serve --db /var/tmp/pg --port 16401 --appendfsync always $extra
    done
  done
  [ -n "$REDIS" ] && run "r$r redis" redis-server --port 16401 --bind 127.0.0.1 --dir /var/tmp/pg --appendonly yes --appendfsync always --save '' --daemonize no --logfile /tmp/p/redis.log
done
