//! Builds REPORT.md and the chart SVGs from parsed results folders: throughput by engine and
//! benchmark (and by value size when folders differ in it), ratios vs wisckey and vs LevelDB,
//! write/read/space amplification and CPU, YCSB normalised to LevelDB, latency percentiles
//! and CDFs from `--histogram` blocks, plus machine, versions, parameters and dates.
//!
//! Repeats of the same engine and benchmark in one folder are averaged (the table says how
//! many). Missing figures print as `-`. Pure: returns text, writes nothing.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::parse::{self, BenchResult};
use super::svg::{self, BarChart, LineChart};
use super::ResultsDir;

pub struct Report {
    pub markdown: String,
    /// (file name, SVG text).
    pub charts: Vec<(String, String)>,
}

/// One table column: a benchmark in one folder.
#[derive(Clone, PartialEq)]
struct Column {
    dir: usize,
    bench: String,
    label: String,
    value_size: Option<u64>,
}

struct Model<'a> {
    engines: Vec<String>,
    columns: Vec<Column>,
    /// (column index, engine) -> every repeat's result.
    cells: BTreeMap<(usize, String), Vec<&'a BenchResult>>,
}

impl Model<'_> {
    fn results(&self, column: usize, engine: &str) -> &[&BenchResult] {
        self.cells
            .get(&(column, engine.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    fn mean(
        &self,
        column: usize,
        engine: &str,
        pick: impl Fn(&BenchResult) -> Option<f64>,
    ) -> Option<f64> {
        let values: Vec<f64> = self
            .results(column, engine)
            .iter()
            .filter_map(|r| pick(r))
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }

    fn ops(&self, column: usize, engine: &str) -> Option<f64> {
        self.mean(column, engine, |r| Some(r.ops_per_sec))
    }
}

fn build_model(dirs: &[ResultsDir]) -> Model<'_> {
    let mut engines: Vec<String> = Vec::new();
    for dir in dirs {
        let listed = dir.params.get("ENGINES").unwrap_or("");
        let found = dir.runs.iter().map(|r| r.engine.as_str());
        for engine in listed.split_whitespace().chain(found) {
            if !engines.iter().any(|e| e == engine) && dir.runs.iter().any(|r| r.engine == engine) {
                engines.push(engine.to_string());
            }
        }
    }
    if let Some(at) = engines.iter().position(|e| e == "wisckey") {
        let wisckey = engines.remove(at);
        engines.insert(0, wisckey);
    }
    // Columns: per folder, benchmarks in db_bench's usual order (loads, then reads), others
    // after them in order of appearance.
    let mut columns: Vec<Column> = Vec::new();
    for (d, dir) in dirs.iter().enumerate() {
        let mut benches: Vec<(usize, String, Option<u64>)> = Vec::new();
        for run in &dir.runs {
            for result in measured(run) {
                if !benches.iter().any(|(_, b, _)| *b == result.name) {
                    let rank = bench_rank(&result.name).unwrap_or(usize::MAX);
                    let value_size = dir.value_size().or(run.value_size);
                    benches.push((rank, result.name.clone(), value_size));
                }
            }
        }
        benches.sort_by_key(|(rank, _, _)| *rank); // stable: unranked keep their order
        for (_, bench, value_size) in benches {
            let label = if dirs.len() == 1 {
                bench.clone()
            } else {
                format!("{bench} ({})", dir_name(dir))
            };
            columns.push(Column {
                dir: d,
                bench,
                label,
                value_size,
            });
        }
    }
    let mut cells: BTreeMap<(usize, String), Vec<&BenchResult>> = BTreeMap::new();
    for (d, dir) in dirs.iter().enumerate() {
        for run in &dir.runs {
            for result in measured(run) {
                if let Some(index) = columns
                    .iter()
                    .position(|c| c.dir == d && c.bench == result.name)
                {
                    cells
                        .entry((index, run.engine.clone()))
                        .or_default()
                        .push(result);
                }
            }
        }
    }
    Model {
        engines,
        columns,
        cells,
    }
}

/// A run's benchmark results, without the whole-run `total` line and empty results.
fn measured(run: &parse::RunFile) -> impl Iterator<Item = &BenchResult> {
    run.results
        .iter()
        .filter(|r| r.name != "total" && r.ops_per_sec > 0.0)
}

/// Position of a benchmark in the report's column order; `None` for names it does not know.
/// Multi-threaded variants (`readrandom/16t`) follow their single-threaded benchmark.
fn bench_rank(bench: &str) -> Option<usize> {
    const ORDER: [&str; 13] = [
        "fillseq",
        "fillrandom",
        "overwrite",
        "fillsync",
        "readrandom",
        "readmissing",
        "multireadrandom",
        "seekrandom",
        "readseq",
        "readreverse",
        "readwhilewriting",
        "deleterandom",
        "stats",
    ];
    let (base, threaded) = match bench.split_once('/') {
        Some((base, _)) => (base, 1),
        None => (bench, 0),
    };
    if let Some(i) = ORDER.iter().position(|b| *b == base) {
        return Some(i * 2 + threaded);
    }
    // ycsb-<w>-load before ycsb-<w>-run, workloads alphabetically.
    let w = base.strip_prefix("ycsb-")?;
    let (workload, phase) = w.split_once('-')?;
    let letter = workload.bytes().next()?;
    Some(100 + usize::from(letter) * 2 + usize::from(phase == "run"))
}

fn dir_name(dir: &ResultsDir) -> String {
    dir.path.file_name().map_or_else(
        || dir.path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b).and_then(|(a, b)| (b > 0.0).then(|| a / b))
}

fn table_header(out: &mut String, first: &str, columns: &[String]) {
    let _ = writeln!(out, "| {first} | {} |", columns.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(columns.len()));
}

/// One row per engine, one column per benchmark column.
fn engine_table(out: &mut String, model: &Model, value: impl Fn(usize, &str) -> String) {
    let labels: Vec<String> = model.columns.iter().map(|c| c.label.clone()).collect();
    table_header(out, "engine", &labels);
    for engine in &model.engines {
        let cells: Vec<String> = (0..model.columns.len()).map(|c| value(c, engine)).collect();
        let _ = writeln!(out, "| {engine} | {} |", cells.join(" | "));
    }
    out.push('\n');
}

pub fn build(dirs: &[ResultsDir], device: Option<&str>, machine: &str) -> Report {
    let model = build_model(dirs);
    let mut md = String::new();
    let mut charts = Vec::new();
    let names: Vec<String> = dirs.iter().map(dir_name).collect();
    let _ = writeln!(md, "# Benchmark report: {}\n", names.join(", "));
    let paths: Vec<String> = dirs.iter().map(|d| d.path.display().to_string()).collect();
    let _ = writeln!(
        md,
        "Generated by `wisckey-bench report {}`.\n",
        paths.join(" ")
    );
    let _ = writeln!(
        md,
        "- machine (where the report was generated; the runs are assumed to be from it): {machine}"
    );
    for (dir, name) in dirs.iter().zip(&names) {
        let _ = writeln!(
            md,
            "- `{name}`: run {}, value size {} B",
            dir.params.date.as_deref().unwrap_or("(date unknown)"),
            cell(dir.value_size().map(|v| v as f64), 0)
        );
    }
    let _ = writeln!(md, "\n## Device ceilings (fio)\n");
    match device {
        Some(text) => {
            for (measure, value) in parse::parse_device_table(text) {
                let _ = writeln!(md, "- {measure}: {value}");
            }
        }
        None => md.push_str("Not measured with this run (see bench/fio.sh).\n"),
    }

    targets_section(&model, dirs, device, &mut md);

    md.push_str("\n## Throughput (ops/s)\n\n");
    let counts = |c: usize, e: &str| match model.results(c, e).len() {
        0 | 1 => String::new(),
        n => format!(" (mean of {n})"),
    };
    if dirs.len() == 1 {
        engine_table(&mut md, &model, |c, e| {
            format!("{}{}", cell(model.ops(c, e), 0), counts(c, e))
        });
    } else {
        per_folder_tables(&model, dirs, &mut md);
    }
    without_result_section(dirs, &mut md);
    md.push_str("![throughput](throughput.svg)\n\n");
    charts.push(("throughput.svg".to_string(), throughput_chart(&model)));
    charts.extend(value_size_charts(&model, &mut md));

    if dirs.len() == 1 {
        for base in ["wisckey", "leveldb"] {
            if model.engines.iter().any(|e| e == base) {
                let _ = writeln!(md, "## Throughput relative to {base} (engine ÷ {base})\n");
                engine_table(&mut md, &model, |c, e| {
                    cell(ratio(model.ops(c, e), model.ops(c, base)), 2)
                });
            }
        }
    }

    amplification_table(&mut md, &model, dirs.len() == 1);
    if let Some(svg) = write_amp_chart(&model) {
        md.push_str("![write amplification](write-amplification.svg)\n\n");
        charts.push(("write-amplification.svg".to_string(), svg));
    }
    if let Some(svg) = ycsb_section(&model, &mut md) {
        md.push_str("![YCSB normalised](ycsb-normalised.svg)\n\n");
        charts.push(("ycsb-normalised.svg".to_string(), svg));
    }
    if let Some(svg) = ycsb_latency_section(&model, &mut md) {
        md.push_str("![YCSB p99 latency](ycsb-p99-latency.svg)\n\n");
        charts.push(("ycsb-p99-latency.svg".to_string(), svg));
    }
    if let Some(svg) = latency_section(&model, &mut md) {
        md.push_str("![latency CDF](latency-cdf.svg)\n\n");
        charts.push(("latency-cdf.svg".to_string(), svg));
    }

    md.push_str("## Versions\n\n");
    let mut seen = Vec::new();
    for run in dirs.iter().flat_map(|d| &d.runs) {
        if let Some(line) = &run.engine_line {
            if !seen.contains(line) {
                let _ = writeln!(md, "- {}: `{line}`", run.engine);
                seen.push(line.clone());
            }
        }
    }
    md.push_str("\n## Parameters (params.txt)\n\n");
    for (dir, name) in dirs.iter().zip(&names) {
        let _ = writeln!(
            md,
            "`{name}`:\n\n```\n{}\n```\n",
            dir.params_text.trim_end()
        );
    }
    Report {
        markdown: md,
        charts,
    }
}

/// Outputs that produced no figure, each with its last line (the script's timeout message,
/// or the engine's error), so an empty cell above has its reason next to it.
fn without_result_section(dirs: &[ResultsDir], md: &mut String) {
    if dirs.iter().all(|d| d.without_result.is_empty()) {
        return;
    }
    md.push_str("## Phases without a figure\n\nRaw outputs holding no benchmark line (their cells above are empty), with the output's last line:\n\n");
    for dir in dirs {
        for (file, last) in &dir.without_result {
            let _ = writeln!(md, "- `{}/{file}`: {last}", dir_name(dir));
        }
    }
    md.push('\n');
}

/// One table per results folder: engines × that folder's benchmarks, each cell the ops/s and,
/// for peers, wisckey's throughput divided by the peer's (above 1: wisckey is faster).
fn per_folder_tables(model: &Model, dirs: &[ResultsDir], md: &mut String) {
    md.push_str("One table per results folder. In brackets: wisckey ÷ that engine (above 1.00 wisckey is faster).\n\n");
    for (d, dir) in dirs.iter().enumerate() {
        let columns: Vec<usize> = (0..model.columns.len())
            .filter(|c| model.columns[*c].dir == d)
            .collect();
        if columns.is_empty() {
            continue;
        }
        let _ = writeln!(
            md,
            "### {} (values of {} B)\n",
            dir_name(dir),
            cell(dir.value_size().map(|v| v as f64), 0)
        );
        let labels: Vec<String> = columns
            .iter()
            .map(|c| model.columns[*c].bench.clone())
            .collect();
        table_header(md, "engine", &labels);
        for engine in &model.engines {
            if columns.iter().all(|c| model.results(*c, engine).is_empty()) {
                continue;
            }
            let cells: Vec<String> = columns
                .iter()
                .map(|c| {
                    let ops = model.ops(*c, engine);
                    if engine == "wisckey" || ops.is_none() {
                        cell(ops, 0)
                    } else {
                        format!(
                            "{} ({})",
                            cell(ops, 0),
                            cell(ratio(model.ops(*c, "wisckey"), ops), 2)
                        )
                    }
                })
                .collect();
            let _ = writeln!(md, "| {engine} | {} |", cells.join(" | "));
        }
        md.push('\n');
    }
}

/// The performance goals of the benchmark issue, each checked against the figures in the
/// report: which cell, wisckey's figure, the reference, the ratio, and whether it is met.
/// "Best peer" is the fastest other engine in that cell, peers' read variants included, wisckey's
/// own variants and peers' reorganised (`-compacted`) databases excluded. Targets whose
/// cells did not run are listed as not measured.
fn targets_section(model: &Model, dirs: &[ResultsDir], device: Option<&str>, md: &mut String) {
    if !model.engines.iter().any(|e| e == "wisckey") {
        return;
    }
    let columns_of = |bench: &str, min_size: u64| -> Vec<usize> {
        (0..model.columns.len())
            .filter(|c| {
                let column = &model.columns[*c];
                column.bench == bench && column.value_size.is_some_and(|v| v >= min_size)
            })
            .collect()
    };
    let best_peer = |c: usize| -> Option<(String, f64)> {
        model
            .engines
            .iter()
            // wisckey's own variants (e.g. wisckey-noreadahead) are not peers, nor are
            // peers' reorganised databases (the default wisckey is not reorganised).
            .filter(|e| !e.starts_with("wisckey") && !e.ends_with("-compacted"))
            .filter_map(|e| model.ops(c, e).map(|ops| (e.clone(), ops)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let label = |c: usize| {
        let column = &model.columns[c];
        format!(
            "{} @ {} B",
            column.bench,
            cell(column.value_size.map(|v| v as f64), 0)
        )
    };
    let mut rows: Vec<String> = Vec::new();
    let mut row = |target: &str,
                   at: String,
                   ours: String,
                   reference: String,
                   r: Option<f64>,
                   goal: f64,
                   at_least: bool| {
        let met = match r {
            None => "not measured",
            Some(r) if (at_least && r >= goal) || (!at_least && r <= goal) => "met",
            Some(_) => "**missed**",
        };
        rows.push(format!(
            "| {target} | {at} | {ours} | {reference} | {} | {met} |",
            cell(r, 2)
        ));
    };
    // The default wisckey keeps non-sync puts up to `vlog_flush_interval` in its own buffer,
    // where the peers' WALs hand each write to the OS; `wisckey-writethrough` is as durable as
    // they are, so where it ran its load targets get a row of their own ("as durable").
    let load_engines: Vec<(&str, &str)> =
        [("wisckey", ""), ("wisckey-writethrough", ", as durable")]
            .into_iter()
            .filter(|(e, _)| *e == "wisckey" || model.engines.iter().any(|m| m == e))
            .collect();
    let at_engine = |c: usize, engine: &str| match engine {
        "wisckey" => label(c),
        _ => format!("{} ({engine})", label(c)),
    };
    for c in columns_of("fillrandom", 1024) {
        let peer = best_peer(c);
        for (engine, durability) in &load_engines {
            row(
                &format!("random load ≥ 3× best peer (≥ 1 KiB{durability})"),
                at_engine(c, engine),
                cell(model.ops(c, engine), 0),
                peer.as_ref()
                    .map_or("-".into(), |(e, ops)| format!("{e} {ops:.0}")),
                ratio(model.ops(c, engine), peer.as_ref().map(|p| p.1)),
                3.0,
                true,
            );
        }
    }
    for c in columns_of("fillrandom", 1024)
        .into_iter()
        .filter(|c| model.columns[*c].value_size == Some(1024))
    {
        let base = ["leveldb", "leveldb-pread"]
            .into_iter()
            .find(|e| model.ops(c, e).is_some());
        let base_ops = base.and_then(|e| model.ops(c, e));
        for (engine, durability) in &load_engines {
            row(
                &format!("random load ≥ 15× LevelDB (1 KiB{durability})"),
                at_engine(c, engine),
                cell(model.ops(c, engine), 0),
                base.map_or("-".into(), |e| format!("{e} {}", cell(base_ops, 0))),
                ratio(model.ops(c, engine), base_ops),
                15.0,
                true,
            );
        }
    }
    // MB/s of the device rows whose measure starts with `prefix`, the fastest if several.
    let device_mb = |prefix: &str| -> Option<f64> {
        parse::parse_device_table(device?)
            .into_iter()
            .filter(|(measure, _)| measure.starts_with(prefix))
            .filter_map(|(_, value)| value.split_whitespace().next()?.parse::<f64>().ok())
            .max_by(f64::total_cmp)
    };
    // The overwrite of a laid-out file is the issue's ceiling; appending to new blocks, what
    // a log does, can be much slower on the same device, so both are shown. (target,
    // ceiling, whether the row shows when the ceiling is missing: a device.md from before
    // fio.sh measured appends has no append rows, which is not worth a row of its own.)
    let ceilings = [
        (
            "load ≥ 80% of fio sequential write (≥ 16 KiB)",
            device_mb("sequential write"),
            true,
        ),
        (
            "load ≥ 80% of fio append to a new file (≥ 16 KiB)",
            device_mb("sequential append"),
            false,
        ),
    ];
    for c in columns_of("fillrandom", 16384) {
        let column = &model.columns[c];
        let key_size = dirs[column.dir]
            .params
            .get("KEY_SIZE")
            .and_then(|k| k.parse::<f64>().ok())
            .unwrap_or(16.0);
        let mb = model
            .ops(c, "wisckey")
            .zip(column.value_size)
            .map(|(ops, v)| ops * (v as f64 + key_size) / 1e6);
        for (target, ceiling, shown_without_ceiling) in ceilings {
            if ceiling.is_none() && !shown_without_ceiling {
                continue;
            }
            row(
                target,
                label(c),
                mb.map_or("-".into(), |mb| format!("{mb:.1} MB/s")),
                ceiling.map_or("fio not measured".into(), |d| format!("fio {d:.1} MB/s")),
                ratio(mb, ceiling),
                0.8,
                true,
            );
        }
    }
    for c in columns_of("fillrandom", 1024) {
        let wa = model.mean(c, "wisckey", |r| {
            r.field("wa_process").or_else(|| r.field("wa"))
        });
        row(
            "write amplification ≤ 1.1 (≥ 1 KiB)",
            label(c),
            cell(wa, 3),
            "1.1".into(),
            wa,
            1.1,
            false,
        );
    }
    for bench in ["readrandom", "readrandom/16t"] {
        for c in columns_of(bench, 0) {
            let peer = best_peer(c);
            row(
                "random lookups ≥ best peer (1 and 16 threads)",
                label(c),
                cell(model.ops(c, "wisckey"), 0),
                peer.as_ref()
                    .map_or("-".into(), |(e, ops)| format!("{e} {ops:.0}")),
                ratio(model.ops(c, "wisckey"), peer.map(|p| p.1)),
                1.0,
                true,
            );
        }
    }
    for c in columns_of("seekrandom", 1024)
        .into_iter()
        .filter(|c| model.columns[*c].value_size == Some(1024))
    {
        let blob = model.ops(c, "rocksdb-blob");
        row(
            "seekrandom+100 ≥ 4× RocksDB BlobDB (1 KiB)",
            label(c),
            cell(model.ops(c, "wisckey"), 0),
            format!("rocksdb-blob {}", cell(blob, 0)),
            ratio(model.ops(c, "wisckey"), blob),
            4.0,
            true,
        );
    }
    for c in (0..model.columns.len()).filter(|c| {
        let b = &model.columns[*c].bench;
        b.starts_with("ycsb-") && b.ends_with("-run")
    }) {
        let peer = best_peer(c);
        row(
            "YCSB A–F ahead of every peer",
            label(c),
            cell(model.ops(c, "wisckey"), 0),
            peer.as_ref()
                .map_or("-".into(), |(e, ops)| format!("{e} {ops:.0}")),
            ratio(model.ops(c, "wisckey"), peer.map(|p| p.1)),
            1.0,
            true,
        );
    }
    if rows.is_empty() {
        return;
    }
    md.push_str("\n## Targets\n\nThe benchmark issue's performance goals, checked against this report's figures. Ratio = wisckey ÷ reference (for write amplification: wisckey's own figure, process counters). Best peer = the fastest other engine in that cell, peers' read variants included (wisckey's own variants and peers' `-compacted` databases are not peers).\n\n");
    md.push_str(
        "| target | cell | wisckey | reference | ratio | |\n|---|---|---:|---:|---:|---|\n",
    );
    for r in rows {
        let _ = writeln!(md, "{r}");
    }
}

fn throughput_chart(model: &Model) -> String {
    svg::bar_chart(&BarChart {
        title: "Throughput by engine and benchmark (log scale)",
        y_label: "ops/s",
        categories: model.columns.iter().map(|c| c.label.clone()).collect(),
        series: model
            .engines
            .iter()
            .map(|e| {
                (
                    e.clone(),
                    (0..model.columns.len()).map(|c| model.ops(c, e)).collect(),
                )
            })
            .collect(),
        log_scale: true,
        reference: None,
    })
}

/// One chart per benchmark measured at two or more value sizes.
fn value_size_charts(model: &Model, md: &mut String) -> Vec<(String, String)> {
    // Every folder repeats the benchmark names, so keep each name's first appearance only.
    let mut benches: Vec<&str> = Vec::new();
    for column in &model.columns {
        if !benches.contains(&column.bench.as_str()) {
            benches.push(column.bench.as_str());
        }
    }
    let mut charts = Vec::new();
    for bench in benches {
        let mut sizes: Vec<u64> = model
            .columns
            .iter()
            .filter(|c| c.bench == bench)
            .filter_map(|c| c.value_size)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < 2 {
            continue;
        }
        let series = model
            .engines
            .iter()
            .map(|e| {
                let values = sizes
                    .iter()
                    .map(|size| {
                        let per_dir: Vec<f64> = model
                            .columns
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.bench == bench && c.value_size == Some(*size))
                            .filter_map(|(i, _)| model.ops(i, e))
                            .collect();
                        (!per_dir.is_empty())
                            .then(|| per_dir.iter().sum::<f64>() / per_dir.len() as f64)
                    })
                    .collect();
                (e.clone(), values)
            })
            // Read variants have no load figures: leave them out rather than as empty slots.
            .filter(|(_, values): &(String, Vec<Option<f64>>)| values.iter().any(Option::is_some))
            .collect();
        let name = format!("throughput-{}-by-value-size.svg", bench.replace('/', "-"));
        let title = format!("{bench}: throughput by value size (log scale)");
        charts.push((
            name.clone(),
            svg::bar_chart(&BarChart {
                title: &title,
                y_label: "ops/s",
                categories: sizes.iter().map(|s| format!("{s} B")).collect(),
                series,
                log_scale: true,
                reference: None,
            }),
        ));
        let _ = writeln!(md, "![{bench} by value size]({name})\n");
    }
    charts
}

/// With `every_benchmark` false (several folders) only loads, overwrites and readrandom are
/// listed, to keep the table readable; the raw outputs hold the figures of every phase.
fn amplification_table(md: &mut String, model: &Model, every_benchmark: bool) {
    md.push_str("## Amplification and CPU\n\nWA = bytes written ÷ user bytes (device counter, and the process's own I/O counters); RA likewise for reads; space amp = DB size ÷ live logical bytes (fresh loads only: a phase on an existing DB does not know its live bytes); CPU = user+sys ÷ wall (100% = one core). Written MiB = what the process wrote during the phase (process counter): in a read phase, background compaction sharing the device with the reads.");
    if !every_benchmark {
        md.push_str(
            " Loads, overwrites and readrandom only; every other phase's figures are in its raw output.",
        );
    }
    md.push_str("\n\n| benchmark | engine | WA device | WA process | written MiB | RA device | RA process | space amp | DB MiB | CPU % |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (c, column) in model.columns.iter().enumerate() {
        let b = column.bench.as_str();
        let listed =
            b.starts_with("fill") || b.ends_with("-load") || b == "overwrite" || b == "readrandom";
        if !(every_benchmark || listed) {
            continue;
        }
        for engine in &model.engines {
            if model.results(c, engine).is_empty() {
                continue;
            }
            let f = |name: &str, decimals: usize| {
                cell(model.mean(c, engine, |r| r.field(name)), decimals)
            };
            let _ = writeln!(
                md,
                "| {} | {engine} | {} | {} | {} | {} | {} | {} | {} | {} |",
                column.label,
                f("wa", 3),
                f("wa_process", 3),
                f("process_wrote_mib", 1),
                f("ra", 3),
                f("ra_process", 3),
                f("space_amp", 3),
                f("db_size", 1),
                f("cpu", 0)
            );
        }
    }
    md.push('\n');
}

fn write_amp_chart(model: &Model) -> Option<String> {
    let wa =
        |c: usize, e: &str| model.mean(c, e, |r| r.field("wa_process").or_else(|| r.field("wa")));
    let columns: Vec<usize> = (0..model.columns.len())
        .filter(|c| model.engines.iter().any(|e| wa(*c, e).is_some()))
        .collect();
    if columns.is_empty() {
        return None;
    }
    Some(svg::bar_chart(&BarChart {
        title: "Write amplification (process I/O counters; device where absent)",
        y_label: "bytes written / user bytes",
        categories: columns
            .iter()
            .map(|c| model.columns[*c].label.clone())
            .collect(),
        series: model
            .engines
            .iter()
            .map(|e| (e.clone(), columns.iter().map(|c| wa(*c, e)).collect()))
            .collect(),
        log_scale: false,
        reference: Some(1.0),
    }))
}

/// YCSB `ycsb-<w>-run` throughput per workload, normalised to LevelDB as in the paper's Fig. 15
/// (to the first engine when LevelDB did not run; the chart title says which).
fn ycsb_section(model: &Model, md: &mut String) -> Option<String> {
    let columns = ycsb_run_columns(model);
    if columns.is_empty() {
        return None;
    }
    let engines = engines_with_results(model, &columns);
    // Stock LevelDB as in the paper's Fig. 15; its pread variant when only that one ran YCSB.
    let base = ["leveldb", "leveldb-pread"]
        .into_iter()
        .find(|b| engines.contains(b))
        .or_else(|| engines.first().copied())?;
    let _ = writeln!(md, "## YCSB (run phase, ops/s; in brackets ÷ {base})\n");
    let labels: Vec<String> = columns
        .iter()
        .map(|c| model.columns[*c].label.clone())
        .collect();
    table_header(md, "engine", &labels);
    for engine in &engines {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| {
                format!(
                    "{} ({})",
                    cell(model.ops(*c, engine), 0),
                    cell(ratio(model.ops(*c, engine), model.ops(*c, base)), 2)
                )
            })
            .collect();
        let _ = writeln!(md, "| {engine} | {} |", cells.join(" | "));
    }
    md.push('\n');
    let title = format!("YCSB throughput normalised to {base}");
    Some(svg::bar_chart(&BarChart {
        title: &title,
        y_label: &format!("ops/s ÷ {base}"),
        categories: labels
            .iter()
            .map(|l| l.replace("ycsb-", "").replace("-run", "").to_uppercase())
            .collect(),
        series: engines
            .iter()
            .map(|e| {
                (
                    e.to_string(),
                    columns
                        .iter()
                        .map(|c| ratio(model.ops(*c, e), model.ops(*c, base)))
                        .collect(),
                )
            })
            .collect(),
        log_scale: false,
        reference: Some(1.0),
    }))
}

/// The `ycsb-<w>-run` columns, in table order.
fn ycsb_run_columns(model: &Model) -> Vec<usize> {
    (0..model.columns.len())
        .filter(|c| {
            let b = &model.columns[*c].bench;
            b.starts_with("ycsb-") && b.ends_with("-run")
        })
        .collect()
}

/// Engines with a result in at least one of `columns` (the db_bench-only variants of a mixed
/// report would otherwise fill the YCSB tables with empty rows).
fn engines_with_results<'m>(model: &'m Model, columns: &[usize]) -> Vec<&'m str> {
    model
        .engines
        .iter()
        .filter(|e| columns.iter().any(|c| !model.results(*c, e).is_empty()))
        .map(String::as_str)
        .collect()
}

/// YCSB per-operation latencies (run phase): a table per results folder, rows = workload and
/// operation, one `p50 / p99 / p99.9` cell per engine; and a bar chart of every p99.
fn ycsb_latency_section(model: &Model, md: &mut String) -> Option<String> {
    let columns = ycsb_run_columns(model);
    let engines = engines_with_results(model, &columns);
    let latencies = |c: usize, e: &str| {
        model
            .results(c, e)
            .first()
            .map_or(&[][..], |r| r.op_latencies.as_slice())
    };
    if columns
        .iter()
        .all(|c| engines.iter().all(|e| latencies(*c, e).is_empty()))
    {
        return None;
    }
    md.push_str("## YCSB latency (run phase, µs: p50 / p99 / p99.9 per operation type)\n\n");
    let mut categories = Vec::new();
    let mut p99s: Vec<Vec<Option<f64>>> = vec![Vec::new(); engines.len()];
    let header: Vec<String> = engines.iter().map(|e| e.to_string()).collect();
    let mut last_dir = None;
    for c in &columns {
        let column = &model.columns[*c];
        if last_dir != Some(column.dir) {
            if last_dir.is_some() {
                md.push('\n');
            }
            last_dir = Some(column.dir);
            let _ = writeln!(
                md,
                "Values of {} B:\n",
                cell(column.value_size.map(|v| v as f64), 0)
            );
            table_header(md, "workload / op", &header);
        }
        let mut ops: Vec<&str> = Vec::new();
        for e in &engines {
            for l in latencies(*c, e) {
                if !ops.contains(&l.op.as_str()) {
                    ops.push(&l.op);
                }
            }
        }
        let workload = column
            .bench
            .trim_start_matches("ycsb-")
            .trim_end_matches("-run")
            .to_uppercase();
        for op in ops {
            let label = format!("{workload} {op}");
            let cells: Vec<String> = engines
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let found = latencies(*c, e).iter().find(|l| l.op == op);
                    p99s[i].push(found.map(|l| l.p99));
                    found.map_or("-".to_string(), |l| {
                        format!("{:.1} / {:.1} / {:.1}", l.p50, l.p99, l.p999)
                    })
                })
                .collect();
            let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
            let size = column
                .value_size
                .map_or(String::new(), |v| format!(" @{v}"));
            categories.push(format!("{label}{size}"));
        }
    }
    md.push('\n');
    Some(svg::bar_chart(&BarChart {
        title: "YCSB p99 latency per operation (log scale; lower is better)",
        y_label: "µs",
        categories,
        series: header.into_iter().zip(p99s).collect(),
        log_scale: true,
        reference: None,
    }))
}

/// Percentile table and a CDF through (min, 0), the printed percentiles and (max, 1).
fn latency_section(model: &Model, md: &mut String) -> Option<String> {
    let mut series = Vec::new();
    let mut rows = String::new();
    for (c, column) in model.columns.iter().enumerate() {
        for engine in &model.engines {
            let Some(h) = model
                .results(c, engine)
                .iter()
                .find_map(|r| r.histogram.as_ref())
            else {
                continue;
            };
            let p = |q: f64| {
                cell(
                    h.percentiles
                        .iter()
                        .find(|(pq, _)| (*pq - q).abs() < 1e-9)
                        .map(|(_, v)| *v),
                    2,
                )
            };
            let _ = writeln!(
                rows,
                "| {} | {engine} | {} | {:.2} | {} | {} | {} | {:.2} |",
                column.label,
                h.count,
                h.average,
                p(50.0),
                p(99.0),
                p(99.9),
                h.max
            );
            let mut points = vec![(h.min, 0.0)];
            points.extend(h.percentiles.iter().map(|(q, v)| (*v, q / 100.0)));
            points.push((h.max, 1.0));
            series.push((format!("{engine} {}", column.label), points));
        }
    }
    if series.is_empty() {
        return None;
    }
    md.push_str("## Latency (µs per op, from --histogram)\n\n| benchmark | engine | count | mean | P50 | P99 | P99.9 | max |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    md.push_str(&rows);
    md.push('\n');
    Some(svg::line_chart(&LineChart {
        title: "Latency CDF (through the printed percentiles)",
        x_label: "µs per op (log scale)",
        y_label: "fraction of ops",
        series,
        log_x: true,
    }))
}

#[cfg(test)]
mod tests;
