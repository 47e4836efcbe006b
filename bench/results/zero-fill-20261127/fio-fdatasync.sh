#!/usr/bin/env bash
# fio-fdatasync.sh: what one fdatasync costs after a 16 KiB write, three ways — appending
# to a new file, overwriting a file already written (zeros), and writing into fallocate'd
# (unwritten) space. 64 MiB each, psync, fdatasync after every write.
#   DATA_DIR=/work/bench-data bash fio-fdatasync.sh
set -euo pipefail
d=${DATA_DIR:-/work/bench-data}/fio-fdatasync
mkdir -p "$d"
one() { # name file
  fio --name="$1" --filename="$2" --rw=write --bs=16k --size=64m --fdatasync=1 \
    --ioengine=psync --output-format=normal | grep -E "^ *write: IOPS|^ *sync \(usec\)" | sed "s/^/$1: /"
}
for round in 1 2 3; do
  echo "round $round"
  rm -f "$d"/*; sync; sleep 1
  one append "$d/append"
  dd if=/dev/zero of="$d/overwrite" bs=1M count=64 conv=fsync status=none
  one overwrite "$d/overwrite"
  fallocate -l 64m "$d/fallocated"
  one fallocated "$d/fallocated"
done
rm -rf "$d"
