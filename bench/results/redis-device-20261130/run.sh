#!/bin/bash
# Issue 16's redis-benchmark grid on the lent 16-core machine, one command: the same grid as
# the 2-core VM's (bench/run-redis.sh, GET_X=10) with three servers interleaved per cell —
# `wisckey` = `wisckey serve --threads 1` (one event loop), `base` = the same binary with its
# default threads, and Debian's redis-server — then bench/run-redis-large.sh (8 GiB in a
# 1 GiB cgroup, REDIS=1) with whatever time is left. Binaries built on the VM and carried in
# .devbin (redis-server, redis-benchmark and redis-cli run through the VM's loader and
# libraries: .devbin/bin wrappers). Everything it writes lands in $OUT.
#   bash bench/results/redis-device-20261130/run.sh   (on the device machine, repo root)
set -u
T0=$(date +%s)
DEADLINE=${DEADLINE:-500} # seconds for the whole script
B=$(pwd)
D=$B/.devbin
export PATH=$D/bin:$PATH
DATA=/var/tmp/wk
[ "$(stat -f -c %T /var/tmp 2>/dev/null)" = tmpfs ] && DATA=$B/../wk-data
mkdir -p "$DATA"
{ date -u; nproc; free -g | head -2; df -T "$DATA" | tail -1; uname -r
  grep -m1 'model name' /proc/cpuinfo; cat /sys/fs/cgroup/cgroup.controllers 2>&1
  redis-server --version; command -v python3 bc awk; } > "$OUT/env.txt" 2>&1
touch "$OUT/.t0"
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
REV=${REV:-0ced617} WISCKEY_BIN=$D/real/wisckey WISCKEY_ARGS="--threads 1" \
  BASELINE_BIN=$D/real/wisckey BASE_REV="(default threads)" DB_ROOT=$DATA \
  N_1K=${N_1K:-50000} N_16K=${N_16K:-20000} GET_X=${GET_X:-10} \
  timeout -s INT $(( $(left) - ${LARGE_SECS:-90} )) bash bench/run-redis.sh > "$OUT/grid.log" 2>&1
echo "grid rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/env.txt"
if [ "$(left)" -gt 60 ]; then
  REV=${REV:-0ced617} WISCKEY_BIN=$D/real/wisckey DATA_DIR=$DATA REDIS=1 \
    timeout -s INT $(( $(left) - 10 )) bash bench/run-redis-large.sh > "$OUT/large.log" 2>&1
  echo "large rc=$? after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/env.txt"
fi
new=$(find bench/results -maxdepth 1 -name 'redis-*' -newer "$OUT/.t0")
tar czf "$OUT/results.tgz" $new
for d in $new; do tail -40 "$d/summary.txt"; done
