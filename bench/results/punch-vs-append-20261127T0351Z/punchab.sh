#!/usr/bin/env bash
# fio buffered append in the 1G cgroup: alone, while another process (same cgroup) punches 64 KiB holes
# in a cached 512 MiB file, or while it makes the same fallocate calls as no-ops (mode 1: KEEP_SIZE only)
D=/work/bench-data
for r in 1 2 3; do
  for mode in alone punching noop; do
    rm -f $D/pa $D/victim; sync; sleep 2
    # the victim file, written (so cached) inside the same cgroup, as a segment would be
    /work/main/bench/cgexec.sh fio 1G dd if=/dev/urandom of=$D/victim bs=1M count=512 status=none conv=fdatasync
    if [[ $mode != alone ]]; then FLAG=3; [[ $mode == noop ]] && FLAG=1;
      ( FLAG=$FLAG /usr/bin/time -f "[loop %e s]" /work/main/bench/cgexec.sh fio 1G python3 -c '
import os, ctypes, ctypes.util
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
fd = os.open("/work/bench-data/victim", os.O_RDWR)
for i in range(0, 512*1024*1024, 131072):
    if libc.fallocate(fd, int(os.environ["FLAG"]), ctypes.c_long(i), ctypes.c_long(65536)) != 0: raise OSError(ctypes.get_errno(), "punch")
' ) &
      pid=$!
    fi
    echo -n "r$r $mode: "
    /work/main/bench/cgexec.sh fio 1G fio --name=a --filename=$D/pa --size=2G --rw=write --bs=1M --ioengine=psync --direct=0 --end_fsync=1 --output-format=terse 2>/dev/null | awk -F';' '{printf "%.0f MB/s ", $48*1024/1e6}'
    [[ $mode != alone ]] && wait $pid
    echo
  done
done
rm -f $D/pa $D/victim
