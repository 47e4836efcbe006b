#!/bin/bash
# fillrandom 16 KiB (the suite's cell: 2 GiB, seed 301, 1 GiB cgroup, page cache dropped),
# fresh DB each run, interleaved: A = $A_BIN, B = $B_BIN, $ROUNDS rounds. Needs root.
here=$(cd "$(dirname "$0")/../../.." && pwd)/bench
db=${DB:-/work/bench-data/ab-fill16k}
for r in $(seq "${ROUNDS:-3}"); do
  for v in A B; do
    bin=$A_BIN; [ $v = B ] && bin=$B_BIN
    rm -rf "$db"; sync; sleep 2; echo 3 > /proc/sys/vm/drop_caches
    out=$("$here/cgexec.sh" wisckey 1G "$bin" bench --benchmarks=fillrandom --db="$db" --num=130944 \
      --value_size=16384 --key_size=16 --seed=301 --quiet 2>&1)
    echo "r$r $v $(echo "$out" | grep -E '^fillrandom +:' | awk '{print $5, "ops/s"}') $(echo "$out" | grep -o 'punched [0-9.]* MiB' | head -1)"
  done
done
rm -rf "$db"
