#!/usr/bin/env bash
# usage: ROUNDS=2 SIZES="1024 16384" BINS="old:/p new:/p" TAG=x [OUT_PREFIX=/var/tmp/s57] ab.sh
set -uo pipefail
cd /work/main
for r in $(seq 1 "$ROUNDS"); do
  for pair in $BINS; do
    which=${pair%%:*}; bin=${pair#*:}
    out=${OUT_PREFIX:-/var/tmp/s57}/rg-$TAG-$which-$r
    rm -rf "$out"
    OUT_DIR=$out ENGINES=wisckey-gc SETUP=0 OVERWRITE_X=10 DISTRIBUTIONS=uniform \
      VALUE_SIZES="$SIZES" WISCKEY_BIN=$bin bash bench/run-gc.sh > $out.log 2>&1
    echo "== $which $r"; grep "^| wisckey-gc" $out/summary.md | cut -d'|' -f2-10
  done
done
