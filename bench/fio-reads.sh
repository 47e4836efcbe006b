#!/usr/bin/env bash
# fio-reads.sh: the device's random-read ceilings at the access patterns of wisckey's scans,
# to judge the scan targets of issue 13 against (bench/fio.sh measures only 4 KiB at depth
# 1 and 32). Every job is O_DIRECT io_uring on a laid-out 4 GiB file on the disk holding
# DATA_DIR (an upper bound for buffered reads, which add page-cache work):
#
#   - 4 KiB random reads at depth 32, 64, 128 and 256: a scan of random-order 1 KiB values
#     reads one 4 KiB page per value, with up to 256 reads in flight (the read-ahead window);
#   - bursts of 100 random 4 KiB reads, each burst submitted at once and waited for whole
#     before the next (fio's iodepth_batch_complete_min): `seekrandom` with 100 nexts reads
#     its 100 values that way, one seek after another, so bursts/s bounds seeks/s;
#   - 16 KiB and 64 KiB random reads at depth 32 and 128 (MB/s): scans of those values;
#   - the same reads *buffered* (through the page cache, POSIX_FADV_RANDOM, as wisckey and
#     the peers read), 4, 16 and 64 KiB, two jobs at depth 16 each (one per core: a
#     buffered read costs the submitting core the page-cache work, so one job is CPU-bound).
#
#   DATA_DIR=/work/bench-data RUNTIME=15 OUT_DIR=bench/results/fio-reads-<ts> bench/fio-reads.sh
#
# TABLE_ONLY=1 OUT_DIR=<an earlier run> rebuilds the table from that run's JSON.
#
# Prints a Markdown table (also OUT_DIR/reads.md) and keeps fio's JSON per job. Removes its
# test file. Needs root only for drop_caches (optional) and apt-get when fio is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DATA_DIR=${DATA_DIR:-/work/bench-data}
SIZE=${SIZE:-4G}
RUNTIME=${RUNTIME:-15}
OUT_DIR=${OUT_DIR:-$here/results/fio-reads-$(date -u +%Y%m%dT%H%M%SZ)}

if ! command -v fio >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio
fi
mkdir -p "$DATA_DIR" "$OUT_DIR"
testfile=$DATA_DIR/fio-reads-testfile
common=(--filename="$testfile" --size="$SIZE" --direct=1 --ioengine=io_uring
  --runtime="$RUNTIME" --time_based --group_reporting --output-format=json --rw=randread)
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
job() { # name extra-args...
  local name=$1
  shift
  drop_caches
  fio --name="$name" "${common[@]}" "$@" >"$OUT_DIR/$name.json"
}

if [[ -z ${TABLE_ONLY:-} ]]; then
  if [[ -e $testfile ]]; then
    echo "$testfile exists (another run?); remove it first" >&2
    exit 1
  fi
  trap 'rm -f "$testfile"' EXIT
  fio --name=layout --filename="$testfile" --size="$SIZE" --rw=write --bs=1M --direct=1 \
    --ioengine=io_uring --iodepth=8 --end_fsync=1 --output-format=json >"$OUT_DIR/layout.json"
  for qd in 32 64 128 256; do job "rand4k-qd$qd" --bs=4k --iodepth="$qd"; done
  job burst100 --bs=4k --iodepth=100 --iodepth_batch_submit=100 --iodepth_batch_complete_min=100
  for bs in 16k 64k; do
    for qd in 32 128; do job "rand$bs-qd$qd" --bs="$bs" --iodepth="$qd"; done
  done
  for bs in 4k 16k 64k; do
    job "buffered$bs" --bs="$bs" --iodepth=16 --numjobs=2 --direct=0 --fadvise_hint=random
  done
fi

read_stat() { # job path (under jobs[0].read, keys separated by /) -> value
  python3 -c 'import json,sys
v=json.load(open(sys.argv[1]))["jobs"][0]["read"]
for k in sys.argv[2].split("/"): v=v[k]
print(v)' "$OUT_DIR/$1.json" "$2"
}
iops() { awk -v v="$(read_stat "$1" iops)" 'BEGIN{printf "%.0f", v}'; }
mbs() { awk -v v="$(read_stat "$1" bw_bytes)" 'BEGIN{printf "%.1f", v/1e6}'; }
p99_us() { awk -v v="$(read_stat "$1" clat_ns/percentile/99.000000)" 'BEGIN{printf "%.0f", v/1000}'; }
{
  echo "# random-read ceilings (fio $(fio --version)), jobs run $(date -u -r "$OUT_DIR/burst100.json" +%Y-%m-%dT%H:%MZ)"
  echo
  echo "DATA_DIR=$DATA_DIR on $(df --output=source "$DATA_DIR" | tail -1), test file $SIZE," \
    "${RUNTIME}s per job, io_uring, O_DIRECT unless buffered"
  echo
  echo "| pattern | reads/s | MB/s | p99 latency |"
  echo "|---|---:|---:|---:|"
  for qd in 32 64 128 256; do
    echo "| 4 KiB, depth $qd | $(iops "rand4k-qd$qd") | $(mbs "rand4k-qd$qd") | $(p99_us "rand4k-qd$qd") µs |"
  done
  b=$(iops burst100)
  echo "| 4 KiB, bursts of 100 (each waited for whole) | $b (= $(awk -v v="$b" 'BEGIN{printf "%.0f", v/100}') bursts/s) | $(mbs burst100) | $(p99_us burst100) µs |"
  for bs in 16k 64k; do
    for qd in 32 128; do
      echo "| ${bs%k} KiB, depth $qd | $(iops "rand$bs-qd$qd") | $(mbs "rand$bs-qd$qd") | $(p99_us "rand$bs-qd$qd") µs |"
    done
  done
  for bs in 4k 16k 64k; do
    if [[ -f $OUT_DIR/buffered$bs.json ]]; then
      echo "| ${bs%k} KiB, buffered, 2 jobs × depth 16 | $(iops "buffered$bs") | $(mbs "buffered$bs") | $(p99_us "buffered$bs") µs |"
    fi
  done
} | tee "$OUT_DIR/reads.md"
