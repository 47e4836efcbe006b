"""Side-by-side benchmark of Python bindings: wisckey vs plyvel (LevelDB) vs rocksdict
(RocksDB, and RocksDB with blob files), one process, one run. Random puts, random gets and a
full scan at several value sizes, plus the binding's per-call overhead (a get of one cached
key against a dict lookup + copy). Prints a markdown table with each engine's ops/s and its
ratio to wisckey.

    python bench/python/bench.py [--num 200000] [--sizes 100,1024,16384] [--dir /tmp/x]

Install first (bench/python/run.sh does all of it): pip install crates/wisckey-py plyvel rocksdict
The datasets fit in memory: this measures the binding and the engine's CPU path, not the disk.
"""

import argparse
import os
import random
import shutil
import tempfile
import time

import plyvel
import rocksdict
import wisckey


def open_wisckey(path):
    db = wisckey.DB(path)
    return db, db.put, db.get, lambda: db.iterator(), db.close


def open_plyvel(path):
    db = plyvel.DB(path, create_if_missing=True)
    return db, db.put, db.get, lambda: db.iterator(), db.close


def open_rocksdict(path, blob=False):
    options = rocksdict.Options(raw_mode=True)
    if blob:
        options.set_enable_blob_files(True)
        options.set_min_blob_size(64)  # wisckey's value_threshold
    db = rocksdict.Rdict(path, options)
    return db, db.put, db.get, lambda: db.items(), db.close


ENGINES = {
    "wisckey": open_wisckey,
    "plyvel (LevelDB)": open_plyvel,
    "rocksdict (RocksDB)": open_rocksdict,
    "rocksdict (RocksDB, blob files)": lambda p: open_rocksdict(p, blob=True),
}


def measure(name, opener, root, num, size, seed):
    path = os.path.join(root, name.split()[0] + ("-blob" if "blob" in name else "") + "-%d" % size)
    shutil.rmtree(path, ignore_errors=True)
    rng = random.Random(seed)
    keys = [b"%016d" % i for i in range(num)]
    pool = rng.randbytes(max(1 << 20, size * 2))
    values = [pool[(i * 7919) % (len(pool) - size):][:size] for i in range(num)]
    order = list(range(num))
    rng.shuffle(order)
    db, put, get, items, close = opener(path)
    started = time.perf_counter()
    for i in order:
        put(keys[i], values[i])
    puts = num / (time.perf_counter() - started)
    reads = [rng.randrange(num) for _ in range(num)]
    started = time.perf_counter()
    for i in reads:
        if get(keys[i]) is None:
            raise SystemExit(f"{name}: key {i} missing")
    gets = num / (time.perf_counter() - started)
    started = time.perf_counter()
    scanned = sum(1 for _ in items())
    scan = scanned / (time.perf_counter() - started)
    if scanned != num:
        raise SystemExit(f"{name}: scan saw {scanned} of {num}")
    # Per-call overhead: one cached key, many times.
    hot = keys[0]
    calls = 200_000
    started = time.perf_counter()
    for _ in range(calls):
        get(hot)
    hot_get = (time.perf_counter() - started) / calls
    close()
    shutil.rmtree(path, ignore_errors=True)
    return puts, gets, scan, hot_get


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024,16384")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="pybench-")
    os.makedirs(root, exist_ok=True)
    # The floor of a per-call overhead: a dict lookup and a copy of the value.
    d = {b"%016d" % 0: os.urandom(100)}
    k = b"%016d" % 0
    calls = 200_000
    started = time.perf_counter()
    for _ in range(calls):
        bytes(d[k])
    dict_get = (time.perf_counter() - started) / calls
    print(f"dict lookup + copy: {dict_get * 1e9:.0f} ns per call")
    print()
    print("| value size | engine | puts/s | gets/s | scan entries/s | hot get ns (× dict) | puts vs wisckey | gets vs wisckey |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in [int(s) for s in args.sizes.split(",")]:
        num = args.num if size <= 1024 else max(args.num // 10, 1000)
        results = {}
        for name, opener in ENGINES.items():
            results[name] = measure(name, opener, root, num, size, args.seed)
        ours = results["wisckey"]
        for name, (puts, gets, scan, hot) in results.items():
            print(
                f"| {size} | {name} | {puts:,.0f} | {gets:,.0f} | {scan:,.0f} | "
                f"{hot * 1e9:,.0f} ({hot / dict_get:.1f}×) | {puts / ours[0]:.2f} | {gets / ours[1]:.2f} |"
            )
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
