#!/usr/bin/env bash
# fio.sh: the device's own ceilings on the disk holding DATA_DIR, as the physical limit every
# benchmark report is read against: sequential write MB/s (1 MiB blocks) over a laid-out
# file, sequential append MB/s to a new file (1 MiB blocks, iodepth 1 and 8, timed with the
# final fsync: what a log that always appends gets, since the file system allocates every
# block it writes; on some VMs this is half the overwrite rate), 4 KiB random reads/s at
# iodepth 1 and 32. Direct I/O when the filesystem supports it (else buffered, with the page
# cache dropped first; said in the table). Prints a Markdown table, writes fio's JSON per
# job and device.md to OUT_DIR, removes its test files.
#
# Parameters (environment):
#   DATA_DIR=/work/bench-data  SIZE=4G (test file)  RUNTIME=30 (seconds per job, 3 jobs + layout)
#   APPEND_SIZE=2G (bytes each append job writes to its new file; 0 skips the append jobs)
#   MEM_LIMIT=1G (one more append job, buffered, inside a memory cgroup of this size through
#   bench/cgexec.sh, as the suite runs every engine: the limit makes the kernel write back
#   while the job writes, which on some VMs beats O_DIRECT appends; empty or no cgroup: skipped)
#   OUT_DIR=bench/results/fio-<timestamp>  ENGINE=io_uring|libaio (default: first that works)
# Needs root for apt-get (only when fio is missing) and for drop_caches (optional).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DATA_DIR=${DATA_DIR:-/work/bench-data}
SIZE=${SIZE:-4G}
RUNTIME=${RUNTIME:-30}
APPEND_SIZE=${APPEND_SIZE:-2G}
MEM_LIMIT=${MEM_LIMIT-1G}
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
appendfile=$DATA_DIR/fio-appendfile
trap 'rm -f "$testfile" "$appendfile"' EXIT

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
# Appends to a file that does not exist yet: every block is newly allocated, as in a value-log
# segment. The pause after removing it lets a `discard` mount finish trimming first.
append_depths=()
if [[ $APPEND_SIZE != 0 ]]; then
  append_depths=(1 8)
  for depth in "${append_depths[@]}"; do
    rm -f "$appendfile"
    sync
    sleep 2
    fio --name="append-qd$depth" --filename="$appendfile" --size="$APPEND_SIZE" --rw=write \
      --bs=1M --iodepth="$depth" --direct="$direct" --ioengine="$ENGINE" --end_fsync=1 \
      --output-format=json >"$OUT_DIR/fio-append-qd$depth.json"
  done
  rm -f "$appendfile"
  sync
  sleep 2
  if [[ -n $MEM_LIMIT ]] && "$here/cgexec.sh" fio "$MEM_LIMIT" fio --name=append-buffered \
    --filename="$appendfile" --size="$APPEND_SIZE" --rw=write --bs=1M --direct=0 \
    --ioengine=psync --end_fsync=1 --output-format=json >"$OUT_DIR/fio-append-buffered.json"; then
    append_depths+=(buffered)
  else
    echo "fio.sh: no buffered append row (MEM_LIMIT empty or no memory cgroup)" >&2
    rm -f "$OUT_DIR/fio-append-buffered.json"
  fi
  rm -f "$appendfile"
fi
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
append_mbs() { # depth or "buffered" -> MB/s of that append job
  local file=$OUT_DIR/fio-append-qd$1.json
  [[ $1 == buffered ]] && file=$OUT_DIR/fio-append-buffered.json
  awk -v k="$(json_num "$file" write.bw)" 'BEGIN{printf "%.1f", k*1024/1e6}'
}
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
  for depth in "${append_depths[@]}"; do
    if [[ $depth == buffered ]]; then
      echo "| sequential append to a new file, buffered in a $MEM_LIMIT memory cgroup, 1 MiB blocks | $(append_mbs buffered) MB/s |"
    else
      echo "| sequential append to a new file, 1 MiB blocks, iodepth $depth | $(append_mbs "$depth") MB/s |"
    fi
  done
  echo "| 4 KiB random read, iodepth 1 | $qd1 IOPS (mean latency $lat1 µs) |"
  echo "| 4 KiB random read, iodepth 32 | $qd32 IOPS |"
} | tee "$OUT_DIR/device.md"
echo "fio JSON in $OUT_DIR"
