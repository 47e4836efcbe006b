#!/usr/bin/env python3
"""Medians over several bench/run-redis.sh runs: per cell, wisckey/redis (and wisckey/base
when the runs have a baseline) as `median (lowest-highest)`, in a markdown table.

    bench/redis-medians.py bench/results/redis-20261126-0449 bench/results/redis-20261126-0500 ...
"""
import csv
import glob
import os
import statistics
import sys


def rates(run_dir):
    """{(size, pipe, fsync, test, engine): requests per second} of one run."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, "*.csv")):
        engine, fsync, size, pipe = os.path.basename(path)[:-4].split("-")
        with open(path) as f:
            for row in csv.DictReader(f):
                out[(size, pipe, fsync, row["test"].split(" ")[0], engine)] = float(row["rps"])
    return out


def cell(values):
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    runs = [rates(d) for d in sys.argv[1:]]
    if not runs:
        sys.exit("usage: redis-medians.py RUN_DIR...")
    has_base = any(k[4] == "base" for run in runs for k in run)
    tests = ("SET", "GET", "MSET", "INCR")
    print(f"{len(runs)} runs; per cell: median (lowest-highest) of wisckey/redis"
          + (", then of wisckey/base" if has_base else ""))
    print()
    print("| value | -P | appendfsync | " + " | ".join(tests) + " |")
    print("|---|---|---|" + "---|" * len(tests))
    for size in ("d1024", "d16384"):
        for pipe in ("P1", "P16"):
            for fsync in ("always", "everysec"):
                cells = []
                for test in tests:
                    def ratios(other):
                        return [run[(size, pipe, fsync, test, "wisckey")] / run[(size, pipe, fsync, test, other)]
                                for run in runs
                                if (size, pipe, fsync, test, "wisckey") in run
                                and (size, pipe, fsync, test, other) in run]
                    text = cell(ratios("redis"))
                    if has_base:
                        text += f"; vs base {cell(ratios('base'))}"
                    cells.append(text)
                label = "1 KiB" if size == "d1024" else "16 KiB"
                print(f"| {label} | {pipe[1:]} | {fsync} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
