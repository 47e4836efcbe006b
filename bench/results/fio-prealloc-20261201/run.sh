#!/usr/bin/env bash
# Does reserving a new file's blocks ahead (fallocate) let appends reach the overwrite
# ceiling? 3 GiB per job, 1 MiB O_DIRECT io_uring writes, timed with the final fsync, on
# DATA_DIR (ext4 on /dev/vda here): a new file with fio's --fallocate=none (every write
# extends the file), native (fallocate(0): unwritten extents, size set ahead) and keep
# (KEEP_SIZE, what the value log's `vlog_preallocate_size` does), at depth 1 and 8; then
# the same file overwritten at depth 8 (its blocks now written), as bench/fio.sh's ceiling.
set -euo pipefail
DATA_DIR=${DATA_DIR:-/work/bench-data}
out=${OUT:-$(cd "$(dirname "$0")" && pwd)}; mkdir -p "$out"
cd "$DATA_DIR"
mbs() { python3 -c "import json,sys;j=json.load(open(sys.argv[1]));print(round(j['jobs'][0]['write']['bw']*1024/1e6,1))" "$1"; }
for mode in none native keep; do
  for d in 1 8; do
    rm -f fa; sync; sleep 1
    fio --name=a --filename=fa --size=3G --rw=write --bs=1M --iodepth=$d --direct=1 \
      --ioengine=io_uring --end_fsync=1 --fallocate=$mode --output-format=json >"$out/fa-$mode-$d.json"
    echo "new file, fallocate=$mode, depth $d: $(mbs "$out/fa-$mode-$d.json") MB/s"
  done
done
fio --name=a --filename=fa --size=3G --rw=write --bs=1M --iodepth=8 --direct=1 \
  --ioengine=io_uring --end_fsync=1 --output-format=json >"$out/fa-over.json"
echo "overwrite of the written file, depth 8: $(mbs "$out/fa-over.json") MB/s"
rm -f fa
