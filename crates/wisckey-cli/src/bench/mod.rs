//! `wisckey bench`: a subset of LevelDB db_bench's language (flags, benchmark names, report
//! lines) so that wisckey's figures line up with the peer programs in `bench/peers/`, which
//! implement the same workloads (see `workload`) and print the same lines. A run opens the
//! database once, runs the listed benchmarks in order (the `fill*` ones on a fresh
//! database, as db_bench does), and closes it; each benchmark prints its db_bench line and
//! an I/O line (`iostat`). Single process; worker threads share one `Db`.

mod iostat;
mod runner;
mod workload;

use std::path::{Path, PathBuf};

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args};
use wisckey::{Db, Options};

use runner::{Benchmark, Config};

/// Flags, spelled as db_bench spells them.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks: fillseq, fillrandom, overwrite, fillsync, readrandom, readseq.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq"
    )]
    benchmarks: Vec<String>,
    /// Number of keys (key indexes are drawn from 0..num; fills write num entries per thread).
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Reads per thread for readrandom / entries for readseq (default: num).
    #[arg(long)]
    reads: Option<u64>,
    /// Value size in bytes.
    #[arg(long = "value_size", default_value_t = 1024)]
    value_size: usize,
    /// Key size in bytes (zero-padded decimal).
    #[arg(long = "key_size", default_value_t = 16)]
    key_size: usize,
    /// Concurrent worker threads; each performs the full op count.
    #[arg(long, default_value_t = 1)]
    threads: u64,
    /// Database directory (default: a temporary directory, removed afterwards).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Reuse the database in --db instead of starting fresh; fill benchmarks are skipped.
    #[arg(long = "use_existing_db", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    use_existing_db: bool,
    /// Seed of the key streams.
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Engine option `value_threshold` (default: the engine's default).
    #[arg(long = "value_threshold")]
    value_threshold: Option<usize>,
    /// Block cache bytes (same value is given to every peer engine).
    #[arg(long = "cache_size", default_value_t = 64 << 20)]
    cache_size: usize,
    /// Bloom filter bits per key.
    #[arg(long = "bloom_bits", default_value_t = 10)]
    bloom_bits: usize,
    /// Make every fill write a sync write.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false",
          default_missing_value = "true", value_parser = BoolishValueParser::new())]
    sync: bool,
}

pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !workload::key_size_fits(args.num, args.key_size) {
        return Err(format!(
            "--key_size={} cannot hold keys below {}",
            args.key_size, args.num
        )
        .into());
    }
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let benchmarks = args
        .benchmarks
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| Benchmark::parse(b).ok_or_else(|| format!("unknown benchmark '{b}'")))
        .collect::<Result<Vec<_>, _>>()?;
    let temp;
    let path = match &args.db {
        Some(p) => p.clone(),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("db")
        }
    };
    let options = engine_options(args);
    let config = Config {
        num: args.num,
        reads: args.reads.unwrap_or(args.num),
        value_size: args.value_size,
        key_size: args.key_size,
        threads: args.threads,
        seed: args.seed,
        sync: args.sync,
    };
    print_header(args, &path, &options);
    if !args.use_existing_db {
        destroy_db(&path)?;
    }
    let device = iostat::device_of(&path);
    iostat::sync_all();
    let at_open = iostat::sample(device.as_ref());
    let mut db = Some(Db::open(&path, options.clone())?);
    let mut user_bytes_total = 0;
    for bench in benchmarks {
        if bench.fresh_db() {
            if args.use_existing_db {
                println!("{:<12} : skipped (--use_existing_db is true)", bench.name());
                continue;
            }
            if let Some(open) = db.take() {
                open.close()?;
            }
            destroy_db(&path)?;
            db = Some(Db::open(&path, options.clone())?);
        }
        let open = db
            .as_ref()
            .expect("the database is reopened after every fresh fill");
        iostat::sync_all();
        let before = iostat::sample(device.as_ref());
        let result = runner::run_benchmark(open, bench, &config)?;
        println!("{}", result.report_line(bench.name()));
        iostat::sync_all();
        let after = iostat::sample(device.as_ref());
        println!(
            "{}",
            iostat::io_line(
                device.as_ref(),
                before,
                after,
                result.user_bytes_written,
                &path
            )
        );
        user_bytes_total += result.user_bytes_written;
    }
    if let Some(open) = db.take() {
        open.close()?;
    }
    iostat::sync_all();
    let at_close = iostat::sample(device.as_ref());
    println!(
        "{:<12} : whole run from open to close (includes background work finished by close)",
        "total"
    );
    println!(
        "{}",
        iostat::io_line(device.as_ref(), at_open, at_close, user_bytes_total, &path)
    );
    Ok(())
}

fn engine_options(args: &BenchArgs) -> Options {
    let mut options = Options::default();
    if let Some(threshold) = args.value_threshold {
        options.value_threshold = threshold;
    }
    options.block_cache_size = args.cache_size;
    options.bloom_bits_per_key = args.bloom_bits;
    options
}

fn print_header(args: &BenchArgs, path: &Path, options: &Options) {
    println!("engine:     wisckey {}", env!("CARGO_PKG_VERSION"));
    println!("keys:       {} bytes each", args.key_size);
    println!(
        "values:     {} bytes each (incompressible)",
        args.value_size
    );
    println!("entries:    {}", args.num);
    println!("threads:    {}", args.threads);
    println!(
        "options:    value_threshold={} cache_size={} bloom_bits={} memtable_size={}",
        options.value_threshold,
        options.block_cache_size,
        options.bloom_bits_per_key,
        options.memtable_size
    );
    println!("db:         {}", path.display());
    println!("------------------------------------------------");
}

/// Removes a wisckey database in `path`: only files a database holds, then the directory if
/// that left it empty, so a mistyped `--db` cannot wipe unrelated data.
fn destroy_db(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name == "CURRENT"
            || name == "LOCK"
            || name.starts_with("MANIFEST-")
            || name.ends_with(".sst")
            || name.ends_with(".vlog")
            || name.ends_with(".tmp");
        if ours && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    let _ = std::fs::remove_dir(path);
    Ok(())
}
