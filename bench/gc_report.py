#!/usr/bin/env python3
"""gc_report.py OUT_DIR: turns the logs of bench/run-gc.sh into
- timeseries.csv: one row per `progress:` line (every run, both phases), with live bytes,
  space amplification (allocated DB bytes / live bytes) and the interval's ops/s;
- summary.md: per value size and distribution, one row per engine for the overwrite phase;
- gc-v<size>-<distribution>.svg: space amplification and throughput over the overwrite phase.
Only the standard library; reads OUT_DIR/runs.csv, params.txt and <run>.txt."""
import csv
import html
import os
import re
import sys

PROGRESS = re.compile(r"^progress: t=([\d.]+) bench=(\w+) ops=(\d+) db_bytes=(\d+)(?: gc_rewrites=(\d+))?")
REPORT = re.compile(r"^(fillseq|overwrite)\s+:\s+[\d.]+ micros/op (\d+) ops/sec")
COLORS = ["#1f77b4", "#aec7e8", "#d62728", "#2ca02c", "#98df8a", "#9467bd", "#8c564b"]


def parse_run(path):
    samples, ops_per_sec, io, total_db, gc_line = [], {}, {}, None, ""
    last_bench, in_total = None, False
    with open(path) as f:
        for line in f:
            m = PROGRESS.match(line)
            if m:
                samples.append({"t": float(m[1]), "bench": m[2], "ops": int(m[3]),
                                "db_bytes": int(m[4]),
                                "gc_rewrites": int(m[5]) if m[5] else None})
                continue
            m = REPORT.match(line)
            if m:
                ops_per_sec[m[1]] = float(m[2])
                last_bench = m[1]
                continue
            if line.startswith("total "):
                in_total = True
                continue
            if line.startswith("gc: "):
                gc_line = line.strip()
            wa = re.search(r"\bwa_process=([\d.]+)", line)
            size = re.search(r"db_size=([\d.]+) MiB", line)
            if size:
                if in_total:
                    total_db = float(size[1])
                elif last_bench and wa:
                    io[last_bench] = (float(wa[1]), float(size[1]))
    return samples, ops_per_sec, io, total_db, gc_line


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def main(out):
    runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
    key_size = int(re.search(r"KEY_SIZE=(\d+)", open(os.path.join(out, "params.txt")).read())[1])
    rows, results = [], []
    for r in runs:
        vs, num, writes = int(r["value_size"]), int(r["num"]), int(r["writes"])
        entry = key_size + vs
        samples, ops_per_sec, io, total_db, gc_line = parse_run(os.path.join(out, r["run"] + ".txt"))
        over = [s for s in samples if s["bench"] == "overwrite"]
        res = dict(r, ops_per_sec=ops_per_sec.get("overwrite"),
                   fill_ops_per_sec=ops_per_sec.get("fillseq"), wa=None, db_end=None,
                   db_close=total_db, amp_max=None, amp_steady=None, amp_end=None,
                   steady_ops=None, series=[], settle=[], gc_line=gc_line, complete=False)
        # Overwrite start: its last line's time minus its wall time (ops / reported ops/s).
        t_start = None
        if over and res["ops_per_sec"]:
            t_start = over[-1]["t"] - over[-1]["ops"] / res["ops_per_sec"]
            res["complete"] = over[-1]["ops"] == writes
        elif over:
            t_start = over[0]["t"] - 1.0
        prev = {}
        for s in samples:
            phase = s["bench"]
            live = (s["ops"] if phase == "fillseq" else num) * entry
            if phase in ("overwrite", "settle") and t_start is not None:
                t_phase = s["t"] - t_start
            else:
                t_phase = s["t"]
            p = prev.get(phase)
            if p is None:
                p = (t_start, 0) if phase == "overwrite" and t_start is not None else (0.0, 0)
            dt = t_phase - p[0]
            rate = (s["ops"] - p[1]) / dt if dt > 1e-3 and phase != "settle" else None
            prev[phase] = (t_phase, s["ops"])
            amp = s["db_bytes"] / live if live else None
            rows.append([r["run"], vs, r["distribution"], r["engine"], phase, f"{s['t']:.3f}",
                         f"{t_phase:.3f}", s["ops"], s["db_bytes"], live, fmt(amp, 4),
                         fmt(rate, 1), "" if s["gc_rewrites"] is None else s["gc_rewrites"]])
            if phase == "overwrite":
                res["series"].append((t_phase, amp, rate))
            elif phase == "settle":
                res["settle"].append((t_phase, amp, None))
        if over:
            dur = res["series"][-1][0]
            amps = [a for _, a, _ in res["series"]]
            res["amp_max"] = max(amps)
            tail = [(t, a) for t, a, _ in res["series"] if t >= dur * 2 / 3]
            res["amp_steady"] = sum(a for _, a in tail) / len(tail)
            res["amp_end"] = amps[-1]
            res["db_end"] = over[-1]["db_bytes"] / 1048576
            # Steady-state throughput: ops over the samples of the last third.
            pts = [(t, s["ops"]) for (t, _, _), s in zip(res["series"], over) if t >= dur * 2 / 3]
            first = [(t, s["ops"]) for (t, _, _), s in zip(res["series"], over) if t < dur * 2 / 3]
            if first and pts:
                t0, o0 = first[-1]
                t1, o1 = pts[-1]
                res["steady_ops"] = (o1 - o0) / (t1 - t0) if t1 > t0 else None
        res["amp_settled"] = res["settle"][-1][1] if res["settle"] else None
        res["settle_min"] = min((a for _, a, _ in res["settle"]), default=None)
        if "overwrite" in io:
            res["wa"] = io["overwrite"][0]
        results.append(res)

    with open(os.path.join(out, "timeseries.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "value_size", "distribution", "engine", "phase", "t_since_open_s",
                    "t_in_phase_s", "ops_in_phase", "db_bytes_allocated", "live_bytes",
                    "space_amp", "interval_ops_per_s", "badger_gc_rewrites"])
        w.writerows(rows)

    params = open(os.path.join(out, "params.txt")).read().strip()
    lines = ["# Value-log GC under sustained overwrites", "", "```", params, "```", "",
             "Per cell: fillseq of `num` keys (all live), then `overwrite` of `writes` puts. "
             "Figures are for the overwrite phase. *space amp* = allocated bytes of the DB "
             "directory / live bytes (`num` x (key + value)), sampled every interval; *steady* "
             "= mean over the last third of the phase (space amp) or ops done in the last "
             "third / its duration (throughput). *vs no-GC* = overwrite ops/s / wisckey-nogc's "
             "in the same cell. *DB end* = last sample before the phase ended; *DB closed* = "
             "after close (background work finished). *WA* = bytes the process wrote "
             "(/proc/self/io) / user bytes during the overwrite phase (the tool's "
             "`wa_process=`; the device counter would also count other processes). Peak = cgroup peak "
             "memory, page cache included. *after settle* = space amp at the end of the idle "
             "period after the overwrites (DB still open, background work going on); "
             "the charts show it to the right of each overwrite phase.", ""]
    for vs in dict.fromkeys(int(r["value_size"]) for r in results):
        for dist in dict.fromkeys(r["distribution"] for r in results):
            cell = [r for r in results if int(r["value_size"]) == vs and r["distribution"] == dist]
            if not cell:
                continue
            base = next((r["ops_per_sec"] for r in cell if r["engine"] == "wisckey-nogc"), None)
            c0 = cell[0]
            lines += [f"## {vs} B values, {dist} overwrites (num={c0['num']}, "
                      f"writes={c0['writes']}, live {int(c0['num']) * (key_size + vs) / 1048576:.0f} MiB)", "",
                      "| engine | overwrite ops/s | vs no-GC | steady ops/s | max space amp | "
                      "steady space amp | end space amp | after settle | DB end MiB | DB closed MiB | WA | "
                      "fillseq ops/s | peak MiB | rc | note |",
                      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
            for r in cell:
                ratio = r["ops_per_sec"] / base if base and r["ops_per_sec"] else None
                note = r["gc_line"].replace("gc:", "").strip()
                if not r["complete"]:
                    note = ("INCOMPLETE; " + note).strip("; ")
                lines.append(
                    f"| {r['engine']} | {fmt(r['ops_per_sec'], 0)} | {fmt(ratio)} | "
                    f"{fmt(r['steady_ops'], 0)} | {fmt(r['amp_max'])} | {fmt(r['amp_steady'])} | "
                    f"{fmt(r['amp_end'])} | {fmt(r['amp_settled'])} | {fmt(r['db_end'], 1)} | {fmt(r['db_close'], 1)} | "
                    f"{fmt(r['wa'], 3)} | {fmt(r['fill_ops_per_sec'], 0)} | {r['peak_mib']} | "
                    f"{r['rc']} | {note} |")
            svg = f"gc-v{vs}-{dist}.svg"
            write_svg(os.path.join(out, svg), cell, f"{vs} B values, {dist} overwrites")
            lines += ["", f"![space amplification and throughput, {vs} B {dist}]({svg})", ""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def write_svg(path, cell, title):
    """Two panels over the overwrite phase: space amplification, then interval ops/s."""
    width, left, right, ph, top, gap = 920, 70, 190, 260, 40, 60
    pw = width - left - right
    height = top + 2 * ph + gap + 50
    tmax = max((t for r in cell for t, _, _ in r["series"] + r["settle"]), default=1) or 1
    amax = max((a for r in cell for _, a, _ in r["series"] + r["settle"] if a), default=1)
    rmax = max((x for r in cell for _, _, x in r["series"] if x), default=1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15">'
           f'{html.escape(title)}: overwrite phase, then idle (settle) with the DB open</text>']

    def panel(y0, vmax, label, idx):
        vmax = nice(vmax)
        out.append(f'<rect x="{left}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        for i in range(6):
            v = vmax * i / 5
            y = y0 + ph - ph * i / 5
            out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        for i in range(6):
            t = tmax * i / 5
            x = left + pw * i / 5
            out.append(f'<text x="{x:.1f}" y="{y0 + ph + 16}" text-anchor="middle">{t:.{0 if tmax >= 10 else 1}f}</text>')
        out.append(f'<text x="{left + pw / 2}" y="{y0 + ph + 32}" text-anchor="middle">'
                   f'seconds since the overwrite phase began</text>')
        out.append(f'<text x="16" y="{y0 + ph / 2}" transform="rotate(-90 16 {y0 + ph / 2})" '
                   f'text-anchor="middle">{label}</text>')
        for k, r in enumerate(cell):
            pts = [(s[0], s[idx]) for s in r["series"] + r["settle"] if s[idx] is not None]
            if not pts:
                continue
            d = " ".join(f"{left + pw * t / tmax:.1f},{y0 + ph - ph * min(v, vmax) / vmax:.1f}"
                         for t, v in pts)
            out.append(f'<polyline points="{d}" fill="none" stroke="{COLORS[k % len(COLORS)]}" '
                       f'stroke-width="1.6"/>')
        return vmax

    panel(top, amax * 1.05, "space amplification", 1)
    panel(top + ph + gap, rmax * 1.05, "ops/s (per interval)", 2)
    for k, r in enumerate(cell):
        y = top + 14 + 18 * k
        out.append(f'<line x1="{left + pw + 14}" x2="{left + pw + 36}" y1="{y - 4}" y2="{y - 4}" '
                   f'stroke="{COLORS[k % len(COLORS)]}" stroke-width="3"/>')
        out.append(f'<text x="{left + pw + 42}" y="{y}">{html.escape(r["engine"])}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def nice(v):
    """Smallest of 1, 2, 2.5, 5 x 10^k at or above v."""
    if v <= 0:
        return 1
    k = 10 ** int(f"{v:e}".split("e")[1])
    for m in (1, 2, 2.5, 5, 10):
        if m * k >= v:
            return m * k
    return 10 * k


if __name__ == "__main__":
    main(sys.argv[1])
