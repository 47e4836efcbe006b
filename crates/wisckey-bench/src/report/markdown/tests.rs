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
        without_result: Vec::new(),
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

fn ops_line(name: &str, ops: u32, wa_process: f64) -> String {
    format!("{name} : 1.0 micros/op {ops} ops/sec; 1.0 MB/s\n  wa=n/a (x) wa_process={wa_process:.3} (y) db_size=3.0 MiB\n")
}

fn engine_file(values: u32, lines: &[String]) -> String {
    format!("values:     {values} bytes each\n{}", lines.concat())
}

#[test]
fn targets_are_checked_against_the_best_peer_and_marked_met_or_missed() {
    let wisckey = engine_file(
        1024,
        &[
            ops_line("fillrandom", 300_000, 1.04),
            ops_line("readrandom", 900, 0.0),
            ops_line("seekrandom", 500, 0.0),
        ],
    );
    let leveldb = engine_file(
        1024,
        &[
            ops_line("fillrandom", 15_000, 8.0),
            ops_line("readrandom", 1_000, 0.0),
            ops_line("seekrandom", 400, 0.0),
        ],
    );
    let rocksdb = engine_file(
        1024,
        &[
            ops_line("fillrandom", 90_000, 2.4),
            ops_line("readrandom", 700, 0.0),
        ],
    );
    let blob = engine_file(1024, &[ops_line("seekrandom", 100, 0.0)]);
    // wisckey's own variant is faster but is not a peer, nor is a peer's reorganised DB.
    let variant = engine_file(1024, &[ops_line("readrandom", 5_000, 0.0)]);
    let compacted = engine_file(1024, &[ops_line("readrandom", 4_000, 0.0)]);
    let d = dir(
        "v1024",
        "VALUE_SIZE=1024\n",
        &[
            ("wisckey", &wisckey),
            ("leveldb", &leveldb),
            ("rocksdb", &rocksdb),
            ("rocksdb-blob", &blob),
            ("wisckey-noreadahead", &variant),
            ("rocksdb-blob-compacted", &compacted),
        ],
    );
    let report = build(&[d], None, "m").markdown;
    // 300000 / 90000 (best peer rocksdb) = 3.33: met; 300000 / 15000 = 20: met.
    assert!(
        report.contains("| random load ≥ 3× best peer (≥ 1 KiB) | fillrandom @ 1024 B | 300000 | rocksdb 90000 | 3.33 | met |"),
        "{report}"
    );
    assert!(
        report.contains("| random load ≥ 15× LevelDB (1 KiB) | fillrandom @ 1024 B | 300000 | leveldb 15000 | 20.00 | met |"),
        "{report}"
    );
    assert!(
        report.contains("| write amplification ≤ 1.1 (≥ 1 KiB) | fillrandom @ 1024 B | 1.040 | 1.1 | 1.04 | met |"),
        "{report}"
    );
    // 900 / 1000 (leveldb is the best reader): missed.
    assert!(
        report.contains("| readrandom @ 1024 B | 900 | leveldb 1000 | 0.90 | **missed** |"),
        "{report}"
    );
    // 500 / 100 = 5 ≥ 4.
    assert!(
        report.contains("| seekrandom @ 1024 B | 500 | rocksdb-blob 100 | 5.00 | met |"),
        "{report}"
    );
    // No 16 KiB run, no device figures: that target has no row at all.
    assert!(!report.contains("fio sequential write"), "{report}");
    // No wisckey-writethrough in the run: no "as durable" rows.
    assert!(!report.contains("as durable"), "{report}");
}

#[test]
fn a_write_through_run_gets_load_targets_of_its_own() {
    let wisckey = engine_file(1024, &[ops_line("fillrandom", 300_000, 1.04)]);
    let write_through = engine_file(1024, &[ops_line("fillrandom", 200_000, 1.04)]);
    let leveldb = engine_file(1024, &[ops_line("fillrandom", 20_000, 8.0)]);
    let rocksdb = engine_file(1024, &[ops_line("fillrandom", 80_000, 2.4)]);
    let d = dir(
        "v1024",
        "VALUE_SIZE=1024\n",
        &[
            ("wisckey", &wisckey),
            ("wisckey-writethrough", &write_through),
            ("leveldb", &leveldb),
            ("rocksdb", &rocksdb),
        ],
    );
    let report = build(&[d], None, "m").markdown;
    // The default keeps its rows: 300000 / 80000 = 3.75, 300000 / 20000 = 15.
    assert!(
        report.contains("| random load ≥ 3× best peer (≥ 1 KiB) | fillrandom @ 1024 B | 300000 | rocksdb 80000 | 3.75 | met |"),
        "{report}"
    );
    assert!(
        report.contains("| random load ≥ 15× LevelDB (1 KiB) | fillrandom @ 1024 B | 300000 | leveldb 20000 | 15.00 | met |"),
        "{report}"
    );
    // The write-through variant is judged against the same peers, not itself a peer:
    // 200000 / 80000 = 2.5, 200000 / 20000 = 10.
    assert!(
        report.contains("| random load ≥ 3× best peer (≥ 1 KiB, as durable) | fillrandom @ 1024 B (wisckey-writethrough) | 200000 | rocksdb 80000 | 2.50 | **missed** |"),
        "{report}"
    );
    assert!(
        report.contains("| random load ≥ 15× LevelDB (1 KiB, as durable) | fillrandom @ 1024 B (wisckey-writethrough) | 200000 | leveldb 20000 | 10.00 | **missed** |"),
        "{report}"
    );
}

#[test]
fn loads_are_checked_against_the_overwrite_and_the_append_ceiling() {
    // 100,000 puts/s of 16 KiB values + 16-byte keys = 1,640.0 MB/s.
    let wisckey = engine_file(16384, &[ops_line("fillrandom", 100_000, 1.01)]);
    let d = dir(
        "v16384",
        "VALUE_SIZE=16384\nKEY_SIZE=16\n",
        &[("wisckey", &wisckey)],
    );
    let device = "| measure | value |\n|---|---:|\n\
        | sequential write, 1 MiB blocks, iodepth 8 | 3280.0 MB/s |\n\
        | sequential append to a new file, 1 MiB blocks, iodepth 1 | 1800.0 MB/s |\n\
        | sequential append to a new file, 1 MiB blocks, iodepth 8 | 2050.0 MB/s |\n\
        | 4 KiB random read, iodepth 1 | 19449 IOPS |\n";
    let report = build(std::slice::from_ref(&d), Some(device), "m").markdown;
    // 1640 / 3280 = 0.50: missed against the overwrite ceiling ...
    assert!(
        report.contains("| load ≥ 80% of fio sequential write (≥ 16 KiB) | fillrandom @ 16384 B | 1640.0 MB/s | fio 3280.0 MB/s | 0.50 | **missed** |"),
        "{report}"
    );
    // ... and 1640 / 2050 (the faster append) = 0.80: met against appending.
    assert!(
        report.contains("| load ≥ 80% of fio append to a new file (≥ 16 KiB) | fillrandom @ 16384 B | 1640.0 MB/s | fio 2050.0 MB/s | 0.80 | met |"),
        "{report}"
    );
    // A device.md from before the append jobs existed: the append row is left out, the
    // overwrite row stays.
    let old_device = "| measure | value |\n|---|---:|\n\
        | sequential write, 1 MiB blocks, iodepth 8 | 3280.0 MB/s |\n";
    let report = build(&[d], Some(old_device), "m").markdown;
    assert!(
        report.contains("fio sequential write (≥ 16 KiB)"),
        "{report}"
    );
    assert!(!report.contains("append"), "{report}");
}

#[test]
fn folders_get_their_own_tables_in_db_bench_order() {
    let wisckey = engine_file(
        256,
        &[
            ops_line("readrandom", 1_000, 0.0),
            ops_line("fillrandom", 2_000, 1.0),
            ops_line("fillseq", 3_000, 1.0),
        ],
    );
    let threaded = "threads:    16\nreadrandom : 1.0 micros/op 5000 ops/sec; 1.0 MB/s\n";
    let leveldb = engine_file(256, &[ops_line("fillseq", 1_500, 1.0)]);
    let a = dir(
        "v256",
        "VALUE_SIZE=256\n",
        &[
            ("wisckey", &wisckey),
            ("wisckey", threaded),
            ("leveldb", &leveldb),
        ],
    );
    let b = dir(
        "v1024",
        "VALUE_SIZE=1024\n",
        &[(
            "wisckey",
            &engine_file(1024, &[ops_line("fillseq", 9, 1.0)]),
        )],
    );
    let report = build(&[a, b], None, "m").markdown;
    assert!(
        report.contains("### v256 (values of 256 B)\n\n| engine | fillseq | fillrandom | readrandom | readrandom/16t |"),
        "{report}"
    );
    assert!(
        report.contains("| leveldb | 1500 (2.00) | - | - | - |"),
        "{report}"
    );
    assert!(report.contains("### v1024 (values of 1024 B)"), "{report}");
}

#[test]
fn ycsb_operation_latencies_get_a_table_and_a_chart() {
    let run = |p99: f64| {
        format!(
            "values:     1024 bytes each\nycsb-c-run : 10.0 micros/op 100000 ops/sec\n  read   : count 5  found 5  p50 1.00  p99 {p99:.2}  p99.9 9.00  (us)\n"
        )
    };
    let d = dir(
        "ycsb-1024",
        "RECORD_SIZE=1024\n",
        &[("wisckey", &run(2.0)), ("rocksdb", &run(4.0))],
    );
    let report = build(&[d], None, "m");
    assert!(
        report
            .markdown
            .contains("| C read | 1.0 / 2.0 / 9.0 | 1.0 / 4.0 / 9.0 |"),
        "{}",
        report.markdown
    );
    assert!(report
        .charts
        .iter()
        .any(|(name, _)| name == "ycsb-p99-latency.svg"));
}

#[test]
fn phases_without_a_result_are_listed_with_their_last_line() {
    let mut d = dir(
        "v1024",
        "VALUE_SIZE=1024\n",
        &[("wisckey", &line("seekrandom", 500))],
    );
    d.without_result.push((
        "badger.r1.seekrandom.txt".to_string(),
        "run-suite.sh: killed after 120 s (READ_TIMEOUT): no result".to_string(),
    ));
    let md = build(&[d], None, "m").markdown;
    assert!(md.contains("## Phases without a figure"), "{md}");
    assert!(
        md.contains("`v1024/badger.r1.seekrandom.txt`: run-suite.sh: killed after 120 s"),
        "{md}"
    );
    let quiet = build(&[dir("d", "", &[("wisckey", &line("x", 1))])], None, "m").markdown;
    assert!(!quiet.contains("Phases without a figure"), "{quiet}");
}

#[test]
fn ycsb_is_normalised_to_the_leveldb_variant_that_ran_it_and_skips_engines_without_ycsb() {
    let db_bench = dir(
        "v1024",
        "VALUE_SIZE=1024\n",
        &[
            ("wisckey", &line("fillrandom", 900)),
            ("leveldb", &line("fillrandom", 100)),
        ],
    );
    let ycsb = dir(
        "ycsb-1024",
        "RECORD_SIZE=1024\n",
        &[
            ("wisckey", &line("ycsb-a-run", 300)),
            ("leveldb-pread", &line("ycsb-a-run", 100)),
        ],
    );
    let md = build(&[db_bench, ycsb], None, "m").markdown;
    assert!(
        md.contains("## YCSB (run phase, ops/s; in brackets ÷ leveldb-pread)"),
        "{md}"
    );
    assert!(md.contains("| wisckey | 300 (3.00) |"), "{md}");
    let ycsb_table = &md[md.find("## YCSB (run phase").expect("YCSB section")..];
    let ycsb_table = &ycsb_table[..ycsb_table.find("![").expect("chart link")];
    assert!(!ycsb_table.contains("| leveldb |"), "{ycsb_table}");
}

#[test]
fn bytes_written_during_a_read_phase_are_shown() {
    let compacting = "readrandom : 90.0 micros/op 11074 ops/sec; 7.0 MB/s\n  wa=n/a (device vda wrote 481.0 MiB / user 0.0 MiB) wa_process=n/a (process wrote 479.9 MiB) db_size=2295.7 MiB\n";
    let idle = "readrandom : 70.0 micros/op 13503 ops/sec; 7.0 MB/s\n  wa=n/a (device vda wrote 0.0 MiB / user 0.0 MiB) wa_process=n/a (process wrote 0.0 MiB) db_size=2118.6 MiB\n";
    let d = dir("d", "", &[("wisckey", idle), ("rocksdb", compacting)]);
    let md = build(&[d], None, "m").markdown;
    assert!(
        md.contains("| readrandom | rocksdb | - | - | 479.9 |"),
        "{md}"
    );
    assert!(
        md.contains("| readrandom | wisckey | - | - | 0.0 |"),
        "{md}"
    );
}
