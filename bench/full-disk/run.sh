#!/usr/bin/env bash
# A full disk on a real file system, through `wisckey serve`: per round, a fresh ext4 loop
# device (SIZE, default 160M), filled with 16 KiB SETs (--appendfsync always) until
# refused; two thirds of the keys deleted; how soon a SET is accepted again; 400 more SETs;
# SHUTDOWN, restart, every acknowledged SET read back. Needs root (losetup via mount -o
# loop). INFO=1 prints the engine's space figures, STATS=1 `wisckey stats` at the end.
#   cargo build --release -p wisckey-cli && sudo bench/full-disk/run.sh 1 2 3
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d /var/tmp/wisckey-full-disk.XXXXXX)"
img="$work/img"; mnt="$work/mnt"
bin="${WISCKEY_BIN:-$here/../../target/release/wisckey}"
for r in "${@:-1}"; do
  rm -f "$img"; truncate -s "${SIZE:-160M}" "$img"; mkfs.ext4 -q -F "$img"
  mkdir -p "$mnt"; mount -o loop "$img" "$mnt"
  echo "round $r:"
  WISCKEY_BIN="$bin" python3 "$here/serve-full-ext4.py" "$mnt" || echo "round $r: the script failed"
  if [ -n "${STATS:-}" ]; then "$bin" stats --db "$mnt/db" 2>&1 | sed -n '/value log/,$p'; fi
  df -k "$mnt" | tail -1
  umount "$mnt"
done
rm -rf "$work"
