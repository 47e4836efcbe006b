#!/usr/bin/env python3
"""Medians (lowest-highest) of new/base, new/redis and base/redis per cell over raw*.txt."""
import collections, glob, re, statistics as st
d = {}
rounds = set()
for off, fn in enumerate(sorted(glob.glob('raw*.txt'))):
    for line in open(fn):
        m = re.match(r'round (\d+) size (\d+) P (\d+) (\w+): (.*) cpu=([\d.]+)s', line)
        if not m:
            continue
        r, size, p, w, rest, cpu = m.groups()
        r = f"{fn}:{r}"
        rounds.add(r)
        for k, v in re.findall(r'(SET|INCR|MSET) ?(?:\(10 keys\))?=([\d.]+)', rest):
            d[(size, p, k, w, r)] = float(v)
        d[(size, p, 'cpu', w, r)] = float(cpu)
def span(xs):
    return f"{st.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
for size in ['1024', '16384']:
    for p in ['1', '16']:
        for k in ['SET', 'INCR', 'MSET', 'cpu']:
            rs = [r for r in sorted(rounds) if all((size, p, k, w, r) in d for w in ('new', 'base', 'redis'))]
            ratio = lambda a, b: [d[(size, p, k, a, r)] / d[(size, p, k, b, r)] for r in rs]
            print(f"{size:>5} -P{p:<2} {k:4} n={len(rs)}  new/base {span(ratio('new','base'))}  "
                  f"new/redis {span(ratio('new','redis'))}  base/redis {span(ratio('base','redis'))}")
