//! Parsers for the files a benchmark results folder holds: `params.txt` (the run's
//! parameters as `KEY=VALUE` tokens), the raw per-engine outputs `<engine>.r<rep>.<phase>.txt`
//! (db_bench-style report lines, the `wa=` / `ra=` amplification lines after each, and the
//! `--histogram` block), and an optional `device.md` from bench/fio.sh.
//!
//! Tolerant by design: unknown lines and files are skipped, missing fields stay `None`; a
//! file that holds no benchmark line yields no run. Pure functions, no shared state.

use std::collections::BTreeMap;

/// The run's parameters from `params.txt`.
#[derive(Debug, Default, Clone)]
pub struct Params {
    /// The `# ... run <date>` header's last word, when present.
    pub date: Option<String>,
    /// `KEY=VALUE` pairs in file order; values may contain spaces (`ENGINES=a b c`).
    pub vars: Vec<(String, String)>,
}

impl Params {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `--histogram` block: microseconds per op.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub count: u64,
    pub average: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// (percentile in %, microseconds), ascending.
    pub percentiles: Vec<(f64, f64)>,
}

/// One benchmark's report line and the amplification figures printed after it.
#[derive(Debug, Clone, Default)]
pub struct BenchResult {
    pub name: String,
    pub micros_per_op: f64,
    pub ops_per_sec: f64,
    pub found: Option<(u64, u64)>,
    pub fields: BTreeMap<String, f64>,
    pub histogram: Option<Histogram>,
    /// YCSB: one line per operation type after the run line.
    pub op_latencies: Vec<OpLatency>,
}

/// A YCSB operation line: `  read   : count 5000  found 5000  p50 5.69  p99 78.23  p99.9 4113.33  (us)`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpLatency {
    pub op: String,
    pub count: u64,
    /// Microseconds.
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

impl BenchResult {
    /// An amplification / CPU field (`wa`, `wa_process`, `ra`, `space_amp`, `cpu`, `db_size`).
    pub fn field(&self, name: &str) -> Option<f64> {
        self.fields.get(name).copied()
    }
}

/// One raw output file: which engine, its header, its benchmarks.
#[derive(Debug, Clone, Default)]
pub struct RunFile {
    pub engine: String,
    /// The header's `engine:` line (name, version, options).
    pub engine_line: Option<String>,
    pub value_size: Option<u64>,
    pub results: Vec<BenchResult>,
}

pub fn parse_params(text: &str) -> Params {
    let mut params = Params::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('#') {
            if params.date.is_none() {
                params.date = header.split_whitespace().last().map(str::to_string);
            }
            continue;
        }
        for token in line.split_whitespace() {
            match token.split_once('=') {
                Some((key, value)) if is_param_key(key) => {
                    params.vars.push((key.to_string(), value.to_string()));
                }
                _ => {
                    if let Some((_, value)) = params.vars.last_mut() {
                        if !value.is_empty() {
                            value.push(' ');
                        }
                        value.push_str(token);
                    }
                }
            }
        }
    }
    params
}

fn is_param_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// `<engine>.r<rep>.<phase>.txt` -> (engine, repeat, phase); `<engine>.<phase>.txt` (run-ycsb.sh
/// names files `<engine>.<workload>.txt`) -> (engine, 1, phase); other names -> the stem as the
/// engine, repeat 1, phase "run" (a tolerant guess for outputs of other scripts).
pub fn split_file_name(name: &str) -> Option<(String, u32, String)> {
    let stem = name.strip_suffix(".txt")?;
    let parts: Vec<&str> = stem.split('.').collect();
    match parts.as_slice() {
        [engine, rep, phase] => {
            if let Some(Ok(repeat)) = rep.strip_prefix('r').map(str::parse) {
                return Some((engine.to_string(), repeat, phase.to_string()));
            }
        }
        [engine, phase] if !engine.is_empty() && !phase.is_empty() => {
            return Some((engine.to_string(), 1, phase.to_string()));
        }
        _ => {}
    }
    Some((stem.to_string(), 1, "run".to_string()))
}

/// Parses one raw output. A run with more than one thread (`threads:` header) names its
/// results `<benchmark>/<threads>t` (e.g. `readrandom/16t`), so that a folder holding the
/// same benchmark at 1 and 16 threads keeps them apart instead of averaging them.
pub fn parse_run(engine: &str, text: &str) -> RunFile {
    let mut run = RunFile {
        engine: engine.to_string(),
        ..RunFile::default()
    };
    let mut threads = 1u64;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("threads:") {
            threads = rest.trim().parse().unwrap_or(1);
        } else if let Some(rest) = line.strip_prefix("engine:") {
            run.engine_line = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("values:") {
            run.value_size = rest.split_whitespace().next().and_then(|v| v.parse().ok());
        } else if let Some(mut result) = parse_report_line(line) {
            while let Some(next) = lines.peek() {
                let trimmed = next.trim_start();
                // wisckey adds a `gc_runs=` line under a phase's counters; the operation
                // latencies come after it.
                if trimmed.starts_with("wa=")
                    || trimmed.starts_with("ra=")
                    || trimmed.starts_with("gc_runs=")
                {
                    collect_fields(trimmed, &mut result.fields);
                } else if let Some(op) = parse_op_latency(trimmed) {
                    result.op_latencies.push(op);
                } else if trimmed.starts_with("Microseconds per op") {
                    let block: Vec<&str> = lines.clone().skip(1).take(3).collect();
                    result.histogram = parse_histogram(&block);
                } else if !(trimmed.starts_with("Count:")
                    || trimmed.starts_with("Min:")
                    || trimmed.starts_with("Percentiles:")
                    || trimmed.starts_with("--")
                    || trimmed.starts_with('[')
                    || trimmed.is_empty())
                {
                    break;
                }
                lines.next();
            }
            if threads > 1 && result.name != "total" {
                result.name = format!("{}/{threads}t", result.name);
            }
            run.results.push(result);
        }
    }
    run
}

/// `name : X micros/op Y ops/sec[; Z MB/s][ (F of N found)]`; `total : whole run...` too.
fn parse_report_line(line: &str) -> Option<BenchResult> {
    let (name, rest) = line.split_once(" : ")?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let value_before = |unit: &str| -> Option<f64> {
        let at = words.iter().position(|w| w.trim_end_matches(';') == unit)?;
        words.get(at.checked_sub(1)?)?.parse().ok()
    };
    let mut result = BenchResult {
        name: name.to_string(),
        ..BenchResult::default()
    };
    if name == "total" {
        return Some(result);
    }
    result.micros_per_op = value_before("micros/op")?;
    result.ops_per_sec = value_before("ops/sec")?;
    if let Some(open) = rest.find('(') {
        let inner: Vec<&str> = rest[open + 1..].split_whitespace().collect();
        if let [found, "of", total, ..] = inner.as_slice() {
            if let (Ok(f), Ok(t)) = (found.parse(), total.parse()) {
                result.found = Some((f, t));
            }
        }
    }
    Some(result)
}

/// `key=1.23`, `key=90%` tokens (`n/a` values are skipped), and the process counter's bytes
/// (`(process wrote X MiB)` as `process_wrote_mib`, likewise `process_read_mib`): present even
/// when the ratio is n/a, as in a read phase that a peer's background compaction writes in.
fn collect_fields(line: &str, fields: &mut BTreeMap<String, f64>) {
    let words: Vec<&str> = line.split_whitespace().collect();
    for (i, token) in words.iter().enumerate() {
        if let Some((key, value)) = token.split_once('=') {
            if let Ok(v) = value.trim_end_matches('%').parse::<f64>() {
                fields.insert(key.to_string(), v);
            }
        }
        if let ["(process", verb @ ("wrote" | "read"), amount, "MiB)", ..] = &words[i..] {
            if let Ok(v) = amount.parse::<f64>() {
                fields.insert(format!("process_{verb}_mib"), v);
            }
        }
    }
}

/// `<op> : count N [found F] p50 X p99 Y p99.9 Z (us)`; `None` for any other line.
fn parse_op_latency(line: &str) -> Option<OpLatency> {
    let (op, rest) = line.split_once(" : ")?;
    let op = op.trim();
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    if op.is_empty() || op.contains(char::is_whitespace) || tokens.first() != Some(&"count") {
        return None;
    }
    let after = |name: &str| -> Option<f64> {
        let at = tokens.iter().position(|t| *t == name)?;
        tokens.get(at + 1)?.parse().ok()
    };
    Some(OpLatency {
        op: op.to_string(),
        count: after("count")? as u64,
        p50: after("p50")?,
        p99: after("p99")?,
        p999: after("p99.9")?,
    })
}

/// The three lines after `Microseconds per op:`.
fn parse_histogram(block: &[&str]) -> Option<Histogram> {
    let text = block.join(" ");
    let words: Vec<&str> = text.split_whitespace().collect();
    let after = |label: &str| -> Option<f64> {
        let at = words.iter().position(|w| *w == label)?;
        words.get(at + 1)?.parse().ok()
    };
    let mut percentiles = Vec::new();
    for pair in words.windows(2) {
        if let Some(p) = pair[0].strip_prefix('P').and_then(|p| p.strip_suffix(':')) {
            if let (Ok(p), Ok(v)) = (p.parse::<f64>(), pair[1].parse::<f64>()) {
                percentiles.push((p, v));
            }
        }
    }
    Some(Histogram {
        count: after("Count:")? as u64,
        average: after("Average:")?,
        min: after("Min:")?,
        median: after("Median:")?,
        max: after("Max:")?,
        percentiles,
    })
}

/// bench/fio.sh's `device.md`: the table rows as (measure, value).
pub fn parse_device_table(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
            match cells.as_slice() {
                [measure, value] if !measure.contains("---") && measure.trim() != "measure" => {
                    Some((measure.trim().to_string(), value.trim().to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn results_file(rel: &str) -> String {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../bench/results")
            .join(rel);
        std::fs::read_to_string(&path).expect("bench/results files are committed")
    }

    #[test]
    fn params_of_final_run_keep_multi_word_values() {
        let params = parse_params(&results_file("final-2m/params.txt"));
        assert_eq!(params.date.as_deref(), Some("2026-11-22T04:04:06Z"));
        assert_eq!(params.get("NUM"), Some("2000000"));
        assert_eq!(
            params.get("ENGINES"),
            Some("wisckey leveldb rocksdb rocksdb-blob")
        );
        assert_eq!(params.get("DATA_DIR"), Some("/work/bench-data (ext2/ext3)"));
        assert_eq!(params.get("WISCKEY_FLAGS"), Some(""));
    }

    #[test]
    fn process_bytes_are_kept_when_the_ratio_is_not_applicable() {
        let text = "readrandom   :      90.3 micros/op 11074 ops/sec;    7.0 MB/s (12614 of 20000 found)\n               wa=n/a (device vda wrote 481.0 MiB / user 0.0 MiB) wa_process=n/a (process wrote 479.9 MiB) db_size=2295.7 MiB\n               ra=55.664 (device vda read 1201.1 MiB / user 19.6 MiB) ra_process=55.664 (process read 1093.0 MiB) space_amp=n/a cpu=115% (user+sys 2.08 s / wall 1.81 s)\n";
        let run = parse_run("rocksdb", text);
        let read = &run.results[0];
        assert_eq!(read.field("wa_process"), None);
        assert_eq!(read.field("process_wrote_mib"), Some(479.9));
        assert_eq!(read.field("process_read_mib"), Some(1093.0));
        assert_eq!(read.field("ra_process"), Some(55.664));
    }

    #[test]
    fn wisckey_load_file_gives_throughput_and_amplification() {
        let run = parse_run("wisckey", &results_file("final-2m/wisckey.r1.load.txt"));
        assert_eq!(run.value_size, Some(1024));
        assert!(run
            .engine_line
            .as_deref()
            .unwrap_or("")
            .starts_with("wisckey"));
        let names: Vec<&str> = run.results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["fillrandom", "total"]);
        let fill = &run.results[0];
        assert_eq!(fill.ops_per_sec, 186609.0);
        assert_eq!(fill.micros_per_op, 5.331);
        assert_eq!(fill.field("wa"), Some(1.037));
        assert_eq!(fill.field("space_amp"), Some(1.640));
        assert_eq!(fill.field("cpu"), Some(90.0));
        assert_eq!(fill.field("ra"), None, "n/a is absent, not zero");
        assert_eq!(fill.field("process_wrote_mib"), Some(2057.1));
        assert_eq!(run.results[1].field("db_size"), Some(2067.1));
    }

    #[test]
    fn peer_read_file_gives_found_counts_and_read_amp() {
        let run = parse_run("leveldb", &results_file("final-2m/leveldb.r1.read.txt"));
        let read = &run.results[0];
        assert_eq!(read.name, "readrandom");
        assert_eq!(read.found, Some((126251, 200000)));
        assert!(read.field("ra").is_some_and(|ra| ra > 100.0));
        assert!(read.field("cpu").is_some());
    }

    #[test]
    fn every_committed_raw_output_parses() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/results");
        let mut dirs: Vec<String> = [
            "final-2m",
            "full",
            "small",
            "small-seekrandom",
            "badger-2k",
            "repeat",
        ]
        .map(String::from)
        .to_vec();
        // the full suites: every v<size>/ and ycsb-<size>/ folder (YCSB outputs included)
        for suite in std::fs::read_dir(&root).expect("results folder") {
            let suite = suite.expect("dir entry").file_name();
            let suite = suite.to_string_lossy();
            if !suite.starts_with("suite-") {
                continue;
            }
            for sub in std::fs::read_dir(root.join(&*suite)).expect("suite folder") {
                let sub = sub.expect("dir entry");
                if sub.path().is_dir() {
                    dirs.push(format!("{suite}/{}", sub.file_name().to_string_lossy()));
                }
            }
        }
        let mut checked = 0;
        for dir in &dirs {
            for entry in std::fs::read_dir(root.join(dir)).expect("committed folder") {
                let name = entry.expect("dir entry").file_name();
                let name = name.to_string_lossy();
                let Some((engine, _rep, _phase)) = split_file_name(&name) else {
                    continue;
                };
                if !name.contains(".r1.") && !dir.contains("/ycsb-") {
                    continue;
                }
                let text = results_file(&format!("{dir}/{name}"));
                let run = parse_run(&engine, &text);
                // full/badger.r1.read.txt holds only a header: that run died (see its log).
                let expected = text.matches(" micros/op ").count();
                let parsed = run.results.iter().filter(|r| r.ops_per_sec > 0.0).count();
                assert_eq!(parsed, expected, "{dir}/{name}: report lines parsed");
                checked += parsed;
            }
        }
        assert!(checked > 300, "only {checked} report lines found");
    }

    #[test]
    fn file_names_split_into_engine_repeat_phase() {
        assert_eq!(
            split_file_name("rocksdb-blob.r2.read.txt"),
            Some(("rocksdb-blob".into(), 2, "read".into()))
        );
        assert_eq!(
            split_file_name("badger-madv.e.txt"),
            Some(("badger-madv".into(), 1, "e".into()))
        );
        assert_eq!(
            split_file_name("console.txt"),
            Some(("console".into(), 1, "run".into()))
        );
        assert_eq!(split_file_name("summary.md"), None);
    }

    #[test]
    fn histogram_block_and_ycsb_lines_parse() {
        let text =
            "readrandom   :       2.000 micros/op 500000 ops/sec;  1.0 MB/s (5 of 10 found)\n\
                    Microseconds per op:\n\
                    Count: 10  Average: 2.0000  StdDev: 0.50\n\
                    Min: 1.000  Median: 2.000  Max: 9.000\n\
                    Percentiles: P50: 2.00 P75: 2.50 P99: 8.00 P99.9: 9.00 P99.99: 9.00\n\
                    \x20              wa=n/a (device) db_size=1.0 MiB\n\
                    ycsb-a-run   :      10.000 micros/op 100000 ops/sec\n\
                    \x20              gc_runs=2 (segments collected 3, read 1.0 MiB)\n\
                    \x20 read   : count 5  p50 1.00  p99 2.00  p99.9 3.00  (us)\n";
        let run = parse_run("wisckey", text);
        assert_eq!(run.results.len(), 2);
        let hist = run.results[0].histogram.clone().expect("histogram parsed");
        assert_eq!(hist.count, 10);
        assert_eq!(hist.max, 9.0);
        assert_eq!(hist.percentiles.len(), 5);
        assert_eq!(hist.percentiles[3], (99.9, 9.0));
        assert_eq!(run.results[0].field("db_size"), Some(1.0));
        assert_eq!(run.results[1].name, "ycsb-a-run");
        assert_eq!(run.results[1].ops_per_sec, 100000.0);
        assert_eq!(run.results[1].field("gc_runs"), Some(2.0));
        assert_eq!(
            run.results[1].op_latencies,
            vec![OpLatency {
                op: "read".into(),
                count: 5,
                p50: 1.0,
                p99: 2.0,
                p999: 3.0
            }]
        );
    }

    #[test]
    fn ycsb_operation_lines_with_found_counts_parse_and_others_do_not() {
        let op = parse_op_latency(
            "read   : count 5000  found 4990  p50 5.69  p99 78.23  p99.9 4113.33  (us)",
        )
        .expect("op line");
        assert_eq!((op.op.as_str(), op.count, op.p999), ("read", 5000, 4113.33));
        assert!(parse_op_latency("readrandom   :       2.000 micros/op 500000 ops/sec").is_none());
        assert!(parse_op_latency("scan : count x p50 1").is_none());
    }

    #[test]
    fn multi_threaded_results_are_named_by_thread_count() {
        let one =
            "threads:    1\nreadrandom   :      27.045 micros/op 36974 ops/sec;   23.1 MB/s\n";
        let many =
            "threads:    16\nreadrandom   :       2.000 micros/op 500000 ops/sec;  10.0 MB/s\n\
                    total        : whole run from open to close\n";
        assert_eq!(parse_run("wisckey", one).results[0].name, "readrandom");
        let run = parse_run("wisckey", many);
        let names: Vec<&str> = run.results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["readrandom/16t", "total"]);
        assert_eq!(run.results[0].ops_per_sec, 500000.0);
    }

    #[test]
    fn garbage_yields_nothing_and_does_not_panic() {
        let run = parse_run("x", "a : b c\n : \nfoo : 1 micros/op\n\u{0}\u{1}");
        assert!(run.results.is_empty());
        assert!(parse_histogram(&["Count: x"]).is_none());
        assert!(parse_params("=\n==\n#").vars.is_empty());
    }

    #[test]
    fn device_table_rows() {
        let rows = parse_device_table("| measure | value |\n|---|---:|\n| seq | 1 MB/s |\n");
        assert_eq!(rows, [("seq".to_string(), "1 MB/s".to_string())]);
    }
}
