#!/usr/bin/env bash
# A/B of GC's flush before a victim leaves the log (the replay head passes its relocations):
# bench/run-gc.sh's wisckey-gc cells, the binary before (OLD) and after (NEW) the change
# alternated, ROUNDS rounds, each run its own OUT_DIR (TAG-R-old, TAG-R-new; TAG defaults to
# round) under this folder. run-gc.sh's own variables (OVERWRITE_X, VALUE_SIZES,
# DISTRIBUTIONS, ...) pass through. As root. Summaries: each run's summary.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${OLD:?binary of wisckey-bench before}" "${NEW:?binary after}"
ROUNDS=${ROUNDS:-2}
TAG=${TAG:-round}
for r in $(seq 1 "$ROUNDS"); do
  for which in old new; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    ENGINES=wisckey-gc SETUP=0 WISCKEY_BIN=$bin OUT_DIR="$here/$TAG-$r-$which" \
      bash "$here/../../run-gc.sh"
  done
done
