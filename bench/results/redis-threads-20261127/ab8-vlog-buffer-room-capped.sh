#!/bin/bash
# always: the vlog buffer keeping its room (keep) vs the build before (final); multi (default) and --threads 1; large-round cells and a small control
cell() { tag=$1; bin=$2; shift 2; rm -rf /var/tmp/rbw; "$bin" serve --db /var/tmp/rbw --port 16390 --appendfsync always $FLAGS >/dev/null 2>&1 & pid=$!; sleep 0.7
  redis-benchmark -p 16390 -c 50 -r 100000 "$@" -q 2>&1 | tr '\r' '\n' | grep "requests per second" | sed "s/^/$tag${FLAGS:+ loop} [$*] /"
  echo "$tag${FLAGS:+ loop} [$*] cpu_s $(awk '{print ($14+$15)/100}' /proc/$pid/stat)"
  redis-cli -p 16390 shutdown >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/rbw; sync; sleep 2; }
for r in 1 2; do
  for c in "-t set -d 16384 -P 16 -n 30000"; do
    for FLAGS in "" "--threads 1"; do
      cell keep /tmp/st/wisckey-keep2 $c | sed "s/^/r$r /"
      cell final /tmp/st/wisckey-final $c | sed "s/^/r$r /"
    done
  done
done
