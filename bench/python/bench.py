"""Side-by-side benchmark of Python bindings: wisckey vs plyvel (LevelDB) vs rocksdict
(RocksDB, and RocksDB with blob files), one process, one run. Random puts, random gets and a
full scan at several value sizes, plus the binding's per-call overhead (a get of one cached
key, as the median of several rounds, against a dict lookup + copy of a value of the same
size). Prints a markdown table with each engine's ops/s and its ratio to wisckey.

    python bench/python/bench.py [--num 200000] [--sizes 100,1024,16384] [--dir /tmp/x]
                                 [--engines wisckey,plyvel]

Install first (bench/python/run.sh does all of it): pip install crates/wisckey-py plyvel rocksdict
The datasets fit in memory: this measures the binding and the engine's CPU path, not the disk.
"""

import argparse
import os
import random
import shutil
import tempfile
import time

import wisckey


def open_wisckey(path):
    db = wisckey.DB(path)
    return db, db.put, db.get, lambda: db.iterator(), db.close


def open_plyvel(path):
    import plyvel

    db = plyvel.DB(path, create_if_missing=True)
    return db, db.put, db.get, lambda: db.iterator(), db.close


def open_rocksdict(path, blob=False):
    import rocksdict

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


def per_call(get, key, calls=100_000, rounds=7):
    """Seconds per `get(key)` of one cached key: the median of `rounds` rounds, so that a
    round slowed by another process on a shared machine does not decide the figure."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            get(key)
        times.append((time.perf_counter() - started) / calls)
    return sorted(times)[rounds // 2]


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
    hot_get = per_call(get, keys[0])
    close()
    shutil.rmtree(path, ignore_errors=True)
    return puts, gets, scan, hot_get


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,1024,16384")
    parser.add_argument("--dir", default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engines", default="wisckey,plyvel,rocksdict",
                        help="comma-separated: wisckey, plyvel, rocksdict (with and without blobs)")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="pybench-")
    os.makedirs(root, exist_ok=True)
    engines = {n: o for n, o in ENGINES.items() if n.split()[0] in args.engines.split(",")}
    print(f"wisckey from {wisckey.__file__}")
    print("| value size | engine | puts/s | gets/s | scan entries/s | hot get ns (× dict) | puts vs wisckey | gets vs wisckey |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in [int(s) for s in args.sizes.split(",")]:
        num = args.num if size <= 1024 else max(args.num // 10, 1000)
        # The floor of a per-call overhead: a dict lookup and a copy of a value this size
        # (the value is a bytearray, so bytes() copies it, as a get copies out of the engine).
        d = {b"%016d" % 0: bytearray(os.urandom(size))}
        dict_get = per_call(lambda k: bytes(d[k]), b"%016d" % 0)
        print(f"| {size} | dict lookup + copy | | | | {dict_get * 1e9:,.0f} (1.0×) | | |")
        results = {}
        for name, opener in engines.items():
            results[name] = measure(name, opener, root, num, size, args.seed)
        ours = results.get("wisckey", next(iter(results.values())))
        for name, (puts, gets, scan, hot) in results.items():
            print(
                f"| {size} | {name} | {puts:,.0f} | {gets:,.0f} | {scan:,.0f} | "
                f"{hot * 1e9:,.0f} ({hot / dict_get:.1f}×) | {puts / ours[0]:.2f} | {gets / ours[1]:.2f} |"
            )
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
