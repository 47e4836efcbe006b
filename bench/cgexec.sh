#!/usr/bin/env bash
# cgexec.sh NAME LIMIT CMD...: runs CMD inside the memory cgroup wisckey-bench-NAME with a
# hard memory limit of LIMIT (e.g. 1G; page cache the process reads or dirties is charged
# too). cgroup v2 (unified hierarchy with the memory controller: /sys/fs/cgroup/<group>,
# memory.max) or v1 (/sys/fs/cgroup/memory/<group>, memory.limit_in_bytes), whichever the
# machine has — the same rule as `wisckey-bench bench --mem_limit`. The cgroup is created if missing
# and its peak counter reset; the shell moves itself into it and then execs CMD, so CMD and
# every thread it starts are limited. Needs root. CGROUP_ROOT (default /sys/fs/cgroup) lets a
# test point it at a fake hierarchy.
set -euo pipefail
name=$1 limit=$2
shift 2
root=${CGROUP_ROOT:-/sys/fs/cgroup}
group=wisckey-bench-$name
if [[ -r $root/cgroup.controllers ]] && grep -qw memory "$root/cgroup.controllers"; then
  cg=$root/$group
  mkdir -p "$cg"
  echo "$limit" > "$cg/memory.max"
  echo 0 > "$cg/memory.peak" 2>/dev/null || true # resettable from Linux 6.12
elif [[ -d $root/memory ]]; then
  cg=$root/memory/$group
  mkdir -p "$cg"
  echo "$limit" > "$cg/memory.limit_in_bytes"
  echo 0 > "$cg/memory.max_usage_in_bytes" 2>/dev/null || true
  echo 0 > "$cg/memory.failcnt" 2>/dev/null || true
else
  echo "cgexec.sh: no memory cgroup under $root (need cgroup v2 with the memory controller, or v1 memory/)" >&2
  exit 1
fi
echo $$ > "$cg/cgroup.procs"
exec "$@"
