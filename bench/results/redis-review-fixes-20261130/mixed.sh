#!/bin/bash
# One-loop server (`--threads 1`), MODE=$1: 50 unpipelined SET clients beside 50 pipelined
# (-P 16) GET clients, 1 KiB values, after 50,000 SETs; prints both rates, INFO slow_read_batches,
# the server's thread count and CPU ticks. BIN (default /var/tmp/wk-s52). Usage: bash mixed.sh always
mode=$1; rm -rf /var/tmp/mix; mkdir -p /var/tmp/mix
${BIN:-/var/tmp/wk-s52} serve --db /var/tmp/mix --port 16411 --appendfsync $mode --threads 1 >/dev/null 2>&1 & pid=$!
for i in $(seq 50); do redis-cli -p 16411 ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p 16411 -t set -n 50000 -r 50000 -d 1024 -P 16 -c 50 -q >/dev/null
c0=$(awk '{print $14+$15}' /proc/$pid/stat)
redis-benchmark -p 16411 -t set -n 100000 -r 50000 -d 1024 -P 1 -c 50 -q 2>/dev/null | tr '\r' '\n' | grep "per second" | tail -1 > /tmp/mix-set.txt & sp=$!
g=$(redis-benchmark -p 16411 -t get -n 600000 -r 50000 -d 1024 -P 16 -c 50 -q | tr '\r' '\n' | grep "per second" | tail -1)
wait $sp
c1=$(awk '{print $14+$15}' /proc/$pid/stat)
echo "$mode | $g | $(cat /tmp/mix-set.txt) | $(redis-cli -p 16411 info stats | grep -E 'slow_read' | tr -d '\r') threads=$(ls /proc/$pid/task | wc -l) cpu_ticks=$((c1-c0))"
redis-cli -p 16411 shutdown nosave >/dev/null 2>&1; wait $pid; rm -rf /var/tmp/mix
