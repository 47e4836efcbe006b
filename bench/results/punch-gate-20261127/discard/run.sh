#!/usr/bin/env bash
# Does punching holes in an UNCACHED file (written O_DIRECT, page cache dropped: no cached
# pages to free) slow a concurrent append? ext4 here is mounted with `discard`.
set -u
D=/work/bench-data/disc; mkdir -p $D
for round in 1 2 3; do
  for mode in alone punch; do
    rm -f $D/a $D/b; sync; sleep 1
    dd if=/dev/urandom of=$D/a bs=1M count=512 oflag=direct status=none
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
    if [ $mode = punch ]; then (sleep 0.3; python3 /var/tmp/ab/disc/punch.py $D/a 4096 65536) & fi
    r=$(dd if=/dev/zero of=$D/b bs=1M count=2048 oflag=direct 2>&1 | tail -1)
    wait
    echo "r$round $mode direct-append: $r"
    rm -f $D/a $D/b; sync; sleep 1
    dd if=/dev/urandom of=$D/a bs=1M count=512 oflag=direct status=none
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
    if [ $mode = punch ]; then (sleep 0.3; python3 /var/tmp/ab/disc/punch.py $D/a 4096 65536) & fi
    r=$(bash /work/main/bench/cgexec.sh disc 1G dd if=/dev/zero of=$D/b bs=1M count=2048 conv=fdatasync 2>&1 | tail -1)
    wait
    echo "r$round $mode buffered-append-in-1G-cgroup: $r"
  done
done
rm -rf $D
