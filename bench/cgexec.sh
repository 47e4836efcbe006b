#!/usr/bin/env bash
# cgexec.sh NAME LIMIT CMD...: runs CMD inside the cgroup-v1 memory cgroup
# /sys/fs/cgroup/memory/wisckey-bench-NAME with memory.limit_in_bytes=LIMIT (e.g. 1G).
# The cgroup is created if missing and its peak-usage counter reset; the shell moves itself
# into the cgroup and then execs CMD, so CMD and every thread it starts are limited (page
# cache it dirties or reads is charged too). Needs root and the v1 memory controller.
set -euo pipefail
name=$1 limit=$2
shift 2
cg=/sys/fs/cgroup/memory/wisckey-bench-$name
mkdir -p "$cg"
echo "$limit" > "$cg/memory.limit_in_bytes"
echo 0 > "$cg/memory.max_usage_in_bytes" 2>/dev/null || true
echo 0 > "$cg/memory.failcnt" 2>/dev/null || true
echo $$ > "$cg/cgroup.procs"
exec "$@"
