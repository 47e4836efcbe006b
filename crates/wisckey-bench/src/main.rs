//! `wisckey-bench`: the development tool that measures wisckey. `bench` runs db_bench- and
//! YCSB-compatible benchmarks against wisckey (the peers' programs are in `bench/peers`);
//! `report` turns folders of results into REPORT.md and SVG charts. Not the product binary:
//! the operator's commands are in `wisckey` (crates/wisckey-cli).

mod bench;
mod report;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "wisckey-bench",
    version,
    about = "wisckey's benchmark driver (db_bench and YCSB workloads) and report generator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// db_bench-style benchmarks (fill*, reads, scans, seeks, deletes, readwhilewriting) and YCSB A-F.
    ///
    /// A flag given twice takes its last value, as db_bench's flags do: the scripts add a
    /// phase's flags after an engine's (e.g. GC off for an unmeasured preload).
    #[command(args_override_self = true)]
    Bench(Box<bench::BenchArgs>),
    /// REPORT.md and SVG charts from benchmark results folders (bench/run-side-by-side.sh).
    Report(report::ReportArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Report(args) => report::run(&args).map_err(Into::into),
    };
    if let Err(e) = result {
        eprintln!("wisckey-bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_flag_given_twice_takes_its_last_value() {
        let cli = Cli::try_parse_from([
            "wisckey-bench",
            "bench",
            "--gc_space_amp_target=1.2",
            "--num=10",
            "--gc_space_amp_target=inf",
            "--benchmarks=fillrandom",
            "--benchmarks=overwrite,readrandom",
        ])
        .expect("a repeated flag is accepted");
        let Command::Bench(args) = cli.command else {
            panic!("parsed as another subcommand: {cli:?}");
        };
        let shown = format!("{args:?}");
        assert!(shown.contains("gc_space_amp_target: Some(inf)"), "{shown}");
        assert!(
            shown.contains(r#"benchmarks: ["overwrite", "readrandom"]"#),
            "{shown}"
        );
    }
}
