#!/usr/bin/env bash
# Background GC under sustained overwrites, the binary before (OLD: punches all ready dead
# ranges first in every round) and after (NEW: collects victims first, punches after,
# unless the disk is short) the change, alternated: bench/run-gc.sh with wisckey-gc only,
# uniform overwrites of OVERWRITE_XS times the 384 MiB live data, 1 and 16 KiB values, each
# run in its own 1 GiB cgroup with the page cache dropped. Outputs: x<N>-<old|new>/ in OUT
# (default: this folder). As root: OLD=... NEW=... bash run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../.." && pwd)
: "${OLD:?}" "${NEW:?}"
for x in ${OVERWRITE_XS:-20 3}; do
  for which in old new; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    ENGINES=wisckey-gc OVERWRITE_X=$x DISTRIBUTIONS=uniform SETUP=0 WISCKEY_BIN=$bin \
      OUT_DIR="${OUT:-$here}/x$x-$which" bash "$bench/run-gc.sh"
  done
done
