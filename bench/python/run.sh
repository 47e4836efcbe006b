#!/usr/bin/env bash
# Builds the wisckey wheel into a virtual environment beside plyvel and rocksdict from PyPI,
# then runs bench/python/bench.py (arguments pass through). Results go to stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV:-${CARGO_TARGET_DIR:-$root/target}/bench-py-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$root/crates/wisckey-py" plyvel rocksdict
exec "$venv/bin/python" "$root/bench/python/bench.py" "$@"
