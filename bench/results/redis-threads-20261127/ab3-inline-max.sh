#!/bin/bash
# GET-focused: single loop with inline max 32 (as before) vs 4 vs multi; set,get at -P 16 and -P 1
source <(sed -n '/^run_w()/,/^  redis-cli -p 16390/p' /tmp/st/ab2.sh; echo '}')
for r in $(seq 1 $1); do
  for P in 16 1; do
    N=$(( P == 1 ? 100000 : 300000 ))
    run_w multi $P $N X=1 | sed "s/^/r$r /"
    run_w single $P $N WISCKEY_SINGLE_LOOP=1 | sed "s/^/r$r /"
    run_w single-in4 $P $N WISCKEY_SINGLE_LOOP=1 WISCKEY_INLINE_MAX=4 | sed "s/^/r$r /"
  done
done
