#!/usr/bin/env bash
# fio.sh: the device's own ceilings on the disk holding DATA_DIR, as the physical limit every
# benchmark report is read against: sequential write MB/s (1 MiB blocks), 4 KiB random
# reads/s at iodepth 1 and 32. Direct I/O when the filesystem supports it (else buffered,
# with the page cache dropped first; said in the table). Prints a Markdown table, writes
# fio's JSON per job and device.md to OUT_DIR, removes its test file.
#
# Parameters (environment):
#   DATA_DIR=/work/bench-data  SIZE=4G (test file)  RUNTIME=30 (seconds per job, 3 jobs + layout)
#   OUT_DIR=bench/results/fio-<timestamp>  ENGINE=io_uring|libaio (default: first that works)
# Needs root for apt-get (only when fio is missing) and for drop_caches (optional).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DATA_DIR=${DATA_DIR:-/work/bench-data}
SIZE=${SIZE:-4G}
RUNTIME=${RUNTIME:-30}
OUT_DIR=${OUT_DIR:-$here/results/fio-$(date -u +%Y%m%dT%H%M%SZ)}
ENGINE=${ENGINE:-}

if ! command -v fio >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio
fi
mkdir -p "$DATA_DIR" "$OUT_DIR"
fstype=$(stat -f -c %T "$DATA_DIR")
if [[ $fstype == tmpfs || $fstype == ramfs ]]; then
  echo "DATA_DIR=$DATA_DIR is on $fstype; pick a directory on a real disk" >&2
  exit 1
fi
testfile=$DATA_DIR/fio-testfile
trap 'rm -f "$testfile"' EXIT

# Pick an async engine and whether O_DIRECT works, with a tiny probe job.
probe() { # engine direct -> success?
  fio --name=probe --filename="$testfile" --size=4M --rw=randread --bs=4k --ioengine="$1" \
    --direct="$2" --iodepth=1 --io_size=64k --output-format=terse >/dev/null 2>&1
}
direct=1
if [[ -z $ENGINE ]]; then
  for e in io_uring libaio; do
    if probe "$e" 1; then ENGINE=$e; break; fi
  done
fi
if [[ -z $ENGINE ]]; then
  ENGINE=libaio
  probe "$ENGINE" 1 || direct=0
elif ! probe "$ENGINE" 1; then
  direct=0
fi
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

common=(--filename="$testfile" --size="$SIZE" --direct="$direct" --ioengine="$ENGINE"
  --runtime="$RUNTIME" --time_based --group_reporting --output-format=json)
# Lay the file out fully first so the read jobs read real blocks, not holes.
fio --name=layout --filename="$testfile" --size="$SIZE" --rw=write --bs=1M --direct="$direct" \
  --ioengine="$ENGINE" --iodepth=8 --end_fsync=1 --output-format=json >"$OUT_DIR/fio-layout.json"
drop_caches
fio --name=seqwrite "${common[@]}" --rw=write --bs=1M --iodepth=8 --end_fsync=1 \
  >"$OUT_DIR/fio-seqwrite.json"
drop_caches
fio --name=randread-qd1 "${common[@]}" --rw=randread --bs=4k --iodepth=1 \
  >"$OUT_DIR/fio-randread-qd1.json"
drop_caches
fio --name=randread-qd32 "${common[@]}" --rw=randread --bs=4k --iodepth=32 \
  >"$OUT_DIR/fio-randread-qd32.json"

# fio JSON: jobs[0].write.bw (KiB/s), jobs[0].read.iops, clat_ns.percentile.
json_num() { # file dotted.path -> the value under jobs[0]
  python3 -c 'import json,sys
j=json.load(open(sys.argv[1]))["jobs"][0]
v=j
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}
seq_mbs=$(awk -v k="$(json_num "$OUT_DIR/fio-seqwrite.json" write.bw)" 'BEGIN{printf "%.1f", k*1024/1e6}')
qd1=$(awk -v v="$(json_num "$OUT_DIR/fio-randread-qd1.json" read.iops)" 'BEGIN{printf "%.0f", v}')
qd32=$(awk -v v="$(json_num "$OUT_DIR/fio-randread-qd32.json" read.iops)" 'BEGIN{printf "%.0f", v}')
lat1=$(awk -v v="$(json_num "$OUT_DIR/fio-randread-qd1.json" read.clat_ns.mean)" 'BEGIN{printf "%.1f", v/1000}')
dev=$(df --output=source "$DATA_DIR" | tail -1)
{
  echo "# device ceilings (fio $(fio --version)) $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "DATA_DIR=$DATA_DIR on $dev ($fstype), test file $SIZE, ${RUNTIME}s per job," \
    "ioengine=$ENGINE, direct=$direct"
  echo
  echo "| measure | value |"
  echo "|---|---:|"
  echo "| sequential write, 1 MiB blocks, iodepth 8 | $seq_mbs MB/s |"
  echo "| 4 KiB random read, iodepth 1 | $qd1 IOPS (mean latency $lat1 µs) |"
  echo "| 4 KiB random read, iodepth 32 | $qd32 IOPS |"
} | tee "$OUT_DIR/device.md"
echo "fio JSON in $OUT_DIR"
