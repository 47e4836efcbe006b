#!/usr/bin/env bash
# A/B of reading a scan's first read-ahead batch on the scan's own thread when the page cache
# holds it (new) against the build before (base). Needs two stripped or unstripped
# wisckey-bench binaries and two databases built with the suite's 1 KiB parameters:
#   C="--num=2064888 --value_size=1024 --key_size=16 --quiet --seed=301"
#   cgexec.sh f1 1G $BIN bench $C --benchmarks=fillrandom --db=$DATA/f1        # fresh: values in write order
#   cgexec.sh sk 1G $BIN bench $C --benchmarks=fillrandom --db=$DATA/sk
#   cgexec.sh sk 1G $BIN bench $C --benchmarks=clustervalues,gc --gc_space_amp_target=inf --db=$DATA/sk --use_existing_db=1
# Usage: BASE=... NEW=... DATA=... ROUNDS=3 ab.sh   (as root: drops the page cache)
set -u
here=$(cd "$(dirname "$0")/../../.." && pwd)
C="--num=2064888 --value_size=1024 --key_size=16 --quiet --seed=301"
ROUNDS=${ROUNDS:-3}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
run() { # name bin db flags...
  local name=$1 bin=$2 db=$3; shift 3
  "$here/bench/cgexec.sh" "$name" 1G "$bin" bench $C --db="$DATA/$db" --use_existing_db=1 "$@" 2>&1 |
    grep -E '^(seekrandom|readseq) ' | awk '{printf "%s ", $5}'
}
for round in $(seq "$ROUNDS"); do
  for side in base new; do
    bin=$BASE; [[ $side == new ]] && bin=$NEW
    printf '%s %s | clustered warm seeks x3: ' "$round" "$side"
    run sk "$bin" sk --benchmarks=seekrandom,seekrandom,seekrandom --seek_nexts=100 --reads=1000
    printf '| clustered cold seek 500: '; drop; run sk "$bin" sk --benchmarks=seekrandom --seek_nexts=100 --reads=500
    printf '| clustered cold readseq: '; drop; run sk "$bin" sk --benchmarks=readseq --reads=100000
    printf '| fresh cold seek 500: '; drop; run f1 "$bin" f1 --benchmarks=seekrandom --seek_nexts=100 --reads=500
    printf '| fresh cold readseq: '; drop; run f1 "$bin" f1 --benchmarks=readseq --reads=100000
    # Seeks among the first 200,000 keys (a later --num wins): 200 MB of scattered values,
    # cached after the first phase. Clustering triggered by scans off, or these seeks
    # would put the range in key order for every later phase (they did, in a first run).
    printf '| fresh warm seeks x4 (200,000 keys): '
    run f1 "$bin" f1 --num=200000 --auto_cluster_ratio=0 --benchmarks=seekrandom,seekrandom,seekrandom,seekrandom --seek_nexts=100 --reads=2000
    echo
  done
done
