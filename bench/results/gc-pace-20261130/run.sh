#!/usr/bin/env bash
# Background GC under sustained overwrites, the binary before (OLD: collects first, writers
# slowed by the old 1 ms "losing ground" delay) and after (NEW: writers paced to GC's
# measured freeing rate, gc::pace) the change, alternated: the same A/B as
# ../gc-punch-order-20261130/run.sh (run-gc.sh, wisckey-gc only, uniform overwrites of
# OVERWRITE_XS times the 384 MiB live data, 1 and 16 KiB values, 1 GiB cgroup), outputs
# x<N>-<old|new>/ here. As root: OLD=... NEW=... bash run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=$here exec bash "$here/../gc-punch-order-20261130/run.sh"
