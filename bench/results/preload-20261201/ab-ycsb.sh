#!/usr/bin/env bash
# ab-ycsb.sh: YCSB A-F at 1 KiB (the suite's shape: 2 GiB of records, 10,000 operations per
# run phase, cold, 1 GiB cgroup) for two wisckey binaries, interleaved ROUNDS times.
# BASE=<binary without the table preload> NEW=<binary with it> OUT=<dir>
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for v in base new; do
    bin=$BASE; [[ $v == new ]] && bin=$NEW
    WISCKEY_BIN=$bin ENGINES=wisckey RECORDS=2064888 OPS=10000 RECORD_SIZE=1024 \
      OUT_DIR=$OUT/$v-$r "$here/run-ycsb.sh" > "$OUT/$v-$r.log" 2>&1
    echo "$v-$r $(for w in a b c f d e; do awk -v b="ycsb-$w-run" '$1==b {for(i=1;i<=NF;i++) if($i=="ops/sec") printf "%s=%s ", substr(b,6,1), $(i-1)}' "$OUT/$v-$r/wisckey.$w.txt"; done)"
  done
done
