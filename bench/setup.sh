#!/usr/bin/env bash
# setup.sh: installs and builds everything bench/run-side-by-side.sh needs, idempotently:
# Debian packages for LevelDB / RocksDB / g++, the C++ peers, the Badger peer (Go module
# proxy) and the release `wisckey` binary. Outputs go to bench/build/ and $CARGO_TARGET_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
need=()
for p in libleveldb-dev librocksdb-dev rocksdb-tools g++; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
command -v go >/dev/null || { echo "setup.sh: Go toolchain not found (need go >= 1.24)" >&2; exit 1; }
mkdir -p "$here/build"
build_cc() { # name lib
  local out="$here/build/$1" src="$here/peers/$1.cc"
  if [[ ! -x $out || $src -nt $out || $here/peers/bench_common.h -nt $out ||
        $here/peers/bench_io.h -nt $out || $here/peers/ycsb.h -nt $out ]]; then
    g++ -O2 -std=c++17 -Wall -o "$out" "$src" "-l$2" -lpthread
  fi
}
build_cc leveldb_bench leveldb
build_cc rocksdb_bench rocksdb
(cd "$here/peers/badger" && go build -o "$here/build/badger_bench" .)
(cd "$root" && cargo build --release -p wisckey-bench -p wisckey-cli)
echo "setup.sh: peers in $here/build, wisckey in ${CARGO_TARGET_DIR:-$root/target}/release/wisckey-bench"
