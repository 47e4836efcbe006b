//! Tests for the Markdown report writer.
use super::super::parse::{parse_params, parse_run};
use super::*;
use std::path::PathBuf;

fn dir(name: &str, params: &str, files: &[(&str, &str)]) -> ResultsDir {
    ResultsDir {
        path: PathBuf::from(name),
        params: parse_params(params),
        params_text: params.to_string(),
        runs: files
            .iter()
            .map(|(engine, text)| parse_run(engine, text))
            .collect(),
    }
}

const HIST: &str = "Microseconds per op:\nCount: 10  Average: 2.0  StdDev: 0.5\nMin: 1.0  Median: 2.0  Max: 9.0\nPercentiles: P50: 2.00 P75: 2.50 P99: 8.00 P99.9: 9.00 P99.99: 9.00\n";

fn line(name: &str, ops: u32) -> String {
    format!("{name} : 1.0 micros/op {ops} ops/sec; 1.0 MB/s\n  wa=1.500 (x) wa_process=2.000 (y) db_size=3.0 MiB\n")
}

#[test]
fn ratios_vs_wisckey_and_leveldb_are_computed() {
    let d = dir(
        "d",
        "ENGINES=leveldb wisckey\n",
        &[
            ("wisckey", &line("fillrandom", 200)),
            ("leveldb", &line("fillrandom", 50)),
        ],
    );
    let report = build(&[d], None, "m");
    assert!(
        report.markdown.contains("| wisckey | 200 |"),
        "{}",
        report.markdown
    );
    assert!(
        report.markdown.contains("| leveldb | 0.25 |"),
        "{}",
        report.markdown
    );
    assert!(
        report.markdown.contains("| wisckey | 4.00 |"),
        "{}",
        report.markdown
    );
    assert!(
        report
            .markdown
            .contains("| fillrandom | wisckey | 1.500 | 2.000 |"),
        "{}",
        report.markdown
    );
    let wisckey_row = report.markdown.find("| wisckey |").expect("row");
    assert!(
        wisckey_row < report.markdown.find("| leveldb |").expect("row"),
        "wisckey first"
    );
}

#[test]
fn value_sizes_ycsb_and_histograms_produce_their_charts() {
    let ycsb = format!(
        "{}{HIST}{}",
        line("fillrandom", 100),
        line("ycsb-a-run", 300)
    );
    let small = dir(
        "v256",
        "VALUE_SIZE=256\n",
        &[("wisckey", &ycsb), ("leveldb", &line("ycsb-a-run", 100))],
    );
    let large = dir(
        "v4096",
        "VALUE_SIZE=4096\n",
        &[("wisckey", &line("fillrandom", 30))],
    );
    let report = build(
        &[small, large],
        Some("| measure | value |\n|---|---:|\n| seq write | 100 MB/s |\n"),
        "m",
    );
    let names: Vec<&str> = report.charts.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "throughput.svg",
        "throughput-fillrandom-by-value-size.svg",
        "write-amplification.svg",
        "ycsb-normalised.svg",
        "latency-cdf.svg",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        report.markdown.contains("300 (3.00)"),
        "{}",
        report.markdown
    );
    assert!(
        report.markdown.contains("seq write: 100 MB/s"),
        "{}",
        report.markdown
    );
    assert!(
        report.markdown.contains("| 8.00 | 9.00 |"),
        "{}",
        report.markdown
    );
}

#[test]
fn repeats_are_averaged_and_counted() {
    let d = dir(
        "d",
        "",
        &[
            ("wisckey", &line("fillrandom", 100)),
            ("wisckey", &line("fillrandom", 300)),
        ],
    );
    let report = build(&[d], None, "m");
    assert!(
        report.markdown.contains("| wisckey | 200 (mean of 2) |"),
        "{}",
        report.markdown
    );
}
