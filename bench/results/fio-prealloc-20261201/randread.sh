#!/usr/bin/env bash
# 4 KiB random reads of a laid-out 4 GiB file on DATA_DIR, O_DIRECT io_uring, 10 s per depth:
# does a deeper queue than the suite's 32 lift the random-read ceiling?
set -euo pipefail
DATA_DIR=${DATA_DIR:-/work/bench-data}
out=${OUT:-$(cd "$(dirname "$0")" && pwd)}; mkdir -p "$out"
cd "$DATA_DIR"
fio --name=layout --filename=fr --size=4G --rw=write --bs=1M --direct=1 --ioengine=io_uring \
  --iodepth=8 --output-format=json >/dev/null
for d in 16 32 64 128; do
  fio --name=r --filename=fr --size=4G --rw=randread --bs=4k --iodepth=$d --direct=1 \
    --ioengine=io_uring --runtime=10 --time_based --output-format=json >"$out/randread-qd$d.json"
  echo "depth $d: $(python3 -c "import json,sys;j=json.load(open(sys.argv[1]));print(round(j['jobs'][0]['read']['iops']))" "$out/randread-qd$d.json") IOPS"
done
rm -f fr
