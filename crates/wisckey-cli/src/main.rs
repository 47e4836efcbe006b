//! The `wisckey` command-line tool. `wisckey demo` loads and reads a temporary database and
//! prints db_bench-style report lines; more subcommands (the full benchmark suite,
//! maintenance) come with later work.

mod demo;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "wisckey",
    version,
    about = "wisckey: a key-value store that keeps keys in an LSM-tree and values in a value log"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load, read, scan and reopen a temporary database; print throughput per phase.
    Demo(demo::DemoArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
    };
    if let Err(e) = result {
        eprintln!("wisckey: {e}");
        std::process::exit(1);
    }
}
