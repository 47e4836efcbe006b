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
