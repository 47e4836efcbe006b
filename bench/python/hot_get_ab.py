"""Per-call cost of two builds of the wisckey module, interleaved in one process, beside a
dict lookup + copy: `get` of one cached key, `key in db`, and `get` of a missing key.

Interleaving the two builds round by round (the order alternating) and taking medians is
what lets a change of tens of nanoseconds show on a shared, noisy machine, where two runs
of bench.py minutes apart differ by more than that.

    python bench/python/hot_get_ab.py BEFORE_SITE_PACKAGES AFTER_SITE_PACKAGES [SIZE]

Each SITE_PACKAGES holds an installed wisckey wheel (e.g. two virtual environments).
"""

import glob
import importlib.machinery
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time

ROUNDS, CALLS = 15, 50_000


def load(site_packages):
    """The wisckey extension in `site_packages`, loaded under its own name, unregistered so
    that the other build can be loaded beside it."""
    so = glob.glob(os.path.join(site_packages, "wisckey", "wisckey*.so"))[0]
    loader = importlib.machinery.ExtensionFileLoader("wisckey", so)
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("wisckey", so, loader=loader))
    loader.exec_module(module)
    sys.modules.pop("wisckey", None)
    return module


def ns_per_call(f, arg):
    started = time.perf_counter()
    for _ in range(CALLS):
        f(arg)
    return (time.perf_counter() - started) / CALLS * 1e9


def main():
    builds = {"before": load(sys.argv[1]), "after": load(sys.argv[2])}
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    root = tempfile.mkdtemp(prefix="hot-get-ab-")
    dbs = {}
    for name, module in builds.items():
        db = module.DB(os.path.join(root, name))
        for i in range(1000):
            db.put(b"%016d" % i, bytes([i % 256]) * size)
        dbs[name] = db
    key = b"%016d" % 7
    d = {key: bytearray(os.urandom(size))}  # bytes() of a bytearray copies it
    calls = {
        "get (cached)": lambda db: (db.get, key),
        "key in db": lambda db: (db.__contains__, key),
        "get (missing)": lambda db: (db.get, b"missing"),
    }
    times = {}
    for r in range(ROUNDS):
        times.setdefault("dict", []).append(ns_per_call(lambda k: bytes(d[k]), key))
        for call, make in calls.items():
            for name in ("before", "after") if r % 2 else ("after", "before"):
                f, arg = make(dbs[name])
                times.setdefault((call, name), []).append(ns_per_call(f, arg))
    print(f"{size}-byte values; medians of {ROUNDS} interleaved rounds of {CALLS:,} calls, ns")
    print(f"dict lookup + copy: {statistics.median(times['dict']):.0f}")
    for call in calls:
        before = statistics.median(times[(call, "before")])
        after = statistics.median(times[(call, "after")])
        print(f"{call}: before {before:.0f}, after {after:.0f} ({after - before:+.0f})")
    for db in dbs.values():
        db.close()
    shutil.rmtree(root)


if __name__ == "__main__":
    main()
