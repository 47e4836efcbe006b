//! `wisckey-bench bench`: a subset of LevelDB db_bench's language (flags, benchmark names, report
//! lines) so that wisckey's figures line up with the peer programs in `bench/peers/`, which
//! implement the same workloads (see `workload`) and print the same lines. A run opens the
//! database once, runs the listed benchmarks in order (the `fill*` ones on a fresh
//! database, as db_bench does), and closes it; each benchmark prints its db_bench line,
//! two amplification/CPU lines (`iostat`) and, with `--histogram`, a latency block.
//! Single process; worker threads share one `Db`.

mod histogram;
mod iostat;
mod live;
mod memlimit;
mod ops;
mod progress;
mod runner;
mod workload;
mod ycsb;
mod ycsb_gen;

use std::path::{Path, PathBuf};

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args};
use wisckey::{AutoClusterTotals, Db, GcTotals, Options};

use iostat::SpanFacts;
use live::LiveKeys;
use runner::{Benchmark, Config};

/// Flags, spelled as db_bench spells them.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks: fillseq, fillrandom, overwrite, fillsync, deleterandom,
    /// readrandom, readmissing, multireadrandom, readseq, readreverse, seekrandom,
    /// readwhilewriting, stats, clustervalues (`Db::cluster_values` of every key), gc
    /// (`Db::gc` without compacting first).
    #[arg(
        long,
        action = ArgAction::Set,
        value_delimiter = ',',
        default_value = "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq"
    )]
    benchmarks: Vec<String>,
    /// Number of keys (key indexes are drawn from 0..num; fills write num entries per thread).
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Reads per thread for the random reads, seeks and multireads / entries for the scans
    /// (default: num).
    #[arg(long)]
    reads: Option<u64>,
    /// overwrite: puts per thread (db_bench's --writes; default: num).
    #[arg(long)]
    writes: Option<u64>,
    /// overwrite's key choice: "uniform" (`next() % num`, db_bench's) or "zipfian" (YCSB's
    /// scrambled zipfian, theta 0.99, over 0..num: a few hot keys spread over the key space).
    #[arg(long, default_value = "uniform", value_parser = ["uniform", "zipfian"])]
    distribution: String,
    /// While a benchmark runs, print every this many seconds a line
    /// `progress: t=<s since start> bench=<name> ops=<done so far> db_bytes=<allocated bytes
    /// of --db>` (0 = off).
    #[arg(long = "report_interval_secs", default_value_t = 0.0)]
    report_interval_secs: f64,
    /// After the last benchmark, keep the database open and idle this many seconds before
    /// closing it (background work goes on), printing `progress:` lines with bench=settle.
    #[arg(long = "settle_secs", default_value_t = 0.0)]
    settle_secs: f64,
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
    /// Delete the wisckey database already in --db before the first fill. Without this (or
    /// --use_existing_db) bench refuses a --db that holds a database: it never deletes data
    /// it did not create unless told to.
    #[arg(long = "destroy_existing_db", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    destroy_existing_db: bool,
    /// Seed of the key streams.
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Engine option `value_threshold` (default: the engine's default).
    #[arg(long = "value_threshold")]
    value_threshold: Option<usize>,
    /// Engine option `gc_space_amp_target`: background value-log GC keeps the log's bytes on
    /// disk at most this many times its live bytes ("inf" turns it off; default: the
    /// engine's default, 1.5).
    #[arg(long = "gc_space_amp_target")]
    gc_space_amp_target: Option<f64>,
    /// Engine option `auto_cluster_ratio`: the GC thread clusters a key range once scans
    /// have read this many times as many of its values out of log order as a pass would
    /// move (0 turns it off; default: the engine's default, 1.0).
    #[arg(long = "auto_cluster_ratio")]
    auto_cluster_ratio: Option<f64>,
    /// Engine option `scan_readahead_entries`: entries a forward scan reads ahead, their values
    /// fetched in parallel (0 = off; default: the engine's default, 256).
    #[arg(long = "readahead_entries")]
    readahead_entries: Option<usize>,
    /// Engine option `scan_readahead_threads` (default: the engine's default, 32).
    #[arg(long = "readahead_threads")]
    readahead_threads: Option<usize>,
    /// Block cache bytes (same value is given to every peer engine).
    #[arg(long = "cache_size", default_value_t = 64 << 20)]
    cache_size: usize,
    /// wisckey's value cache bytes (`Options::value_cache_size`; default: the engine's
    /// default, 32 MiB). The peers have no counterpart: their block cache holds values.
    #[arg(long = "value_cache_size")]
    value_cache_size: Option<usize>,
    /// wisckey's `Options::table_preload_size` in bytes (table files read ahead at open;
    /// default: the engine's default, 64 MiB; 0 turns it off).
    #[arg(long = "table_preload_size")]
    table_preload_size: Option<u64>,
    /// wisckey's memtable bytes (`Options::memtable_size`; db_bench's name; default: the
    /// engine's default, 64 MiB).
    #[arg(long = "write_buffer_size")]
    write_buffer_size: Option<usize>,
    /// wisckey's `Options::vlog_write_back_interval` in bytes (0: the OS writes the log back
    /// on its own schedule; default: the engine's default, 1 MiB).
    #[arg(long = "vlog_write_back_interval")]
    vlog_write_back_interval: Option<u64>,
    /// wisckey's `Options::vlog_zero_fill_size` in bytes: small sync writes keep this much
    /// of the log written with zeros ahead of them (0 turns it off; default: the engine's
    /// default, 1 MiB).
    #[arg(long = "vlog_zero_fill_size")]
    vlog_zero_fill_size: Option<u64>,
    /// wisckey's `Options::vlog_direct_writes`: write the value log with O_DIRECT.
    #[arg(long = "vlog_direct_writes", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    vlog_direct_writes: bool,
    /// wisckey's `Options::write_through_to_os`: hand every write to the OS before it is
    /// acknowledged, as the peers' write-ahead logs do (default off: non-sync writes wait
    /// up to `vlog_flush_interval` in the log's buffer, so a process crash may lose them).
    #[arg(long = "write_through_to_os", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    write_through_to_os: bool,
    /// wisckey's `Options::vlog_mapped_writes`: with `--write_through_to_os`, write-outs are
    /// copies into a shared mapping of the log (default on, as the engine's); false makes
    /// each a `pwrite`.
    #[arg(long = "vlog_mapped_writes", action = ArgAction::Set, num_args = 0..=1,
          default_value = "true", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    vlog_mapped_writes: bool,
    /// wisckey's `Options::vlog_segment_size` in bytes (default: the engine's default,
    /// 64 MiB).
    #[arg(long = "vlog_segment_size")]
    vlog_segment_size: Option<u64>,
    /// Bloom filter bits per key.
    #[arg(long = "bloom_bits", default_value_t = 10)]
    bloom_bits: usize,
    /// Make every fill write a sync write.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false",
          default_missing_value = "true", value_parser = BoolishValueParser::new())]
    sync: bool,
    /// seekrandom: entries read (value copied) after each seek.
    #[arg(long = "seek_nexts", default_value_t = 0)]
    seek_nexts: u64,
    /// wisckey: tell each short scan's iterator how many entries it will read
    /// (`ReadOptions::scan_length_hint`: `--seek_nexts` for seekrandom, the drawn scan length
    /// for YCSB E), so read-ahead starts at the seek. The peers have no counterpart in the
    /// same form (Badger prefetches 100 values per iterator by default). false: no hint.
    #[arg(long = "scan_length_hint", action = ArgAction::Set, num_args = 0..=1,
          default_value = "true", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    scan_length_hint: bool,
    /// multireadrandom: keys per batch.
    #[arg(long = "batch_size", default_value_t = 1)]
    batch_size: u64,
    /// Print a per-operation latency histogram after each benchmark.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value = "false",
          default_missing_value = "true", value_parser = BoolishValueParser::new())]
    histogram: bool,
    /// No progress bars (they are also off when stderr is not a terminal).
    #[arg(long)]
    quiet: bool,
    /// Run YCSB core workload a..f instead of --benchmarks: load --num records, then
    /// --reads operations per thread.
    #[arg(long)]
    ycsb: Option<String>,
    /// YCSB record (value) size in bytes.
    #[arg(long = "record_size", default_value_t = 1024)]
    record_size: usize,
    /// YCSB: the load phase only, no run phase (its line says `skipped`), so that a later
    /// process can run the workload on the loaded DB with --use_existing_db
    /// (bench/run-ycsb.sh). The peers take the same flag.
    #[arg(long = "ycsb_load_only", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    ycsb_load_only: bool,
    /// Run inside a memory cgroup limited to this size (e.g. 1G, 512M; page cache included),
    /// so a database larger than it is served by the device, not the page cache. cgroup v2 or
    /// v1, whichever the machine has; needs root. bench/cgexec.sh limits the peers alike.
    #[arg(long = "mem_limit", visible_alias = "mem-limit", value_parser = memlimit::parse_size)]
    mem_limit: Option<u64>,
}

pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let limit = match args.mem_limit {
        Some(bytes) => Some(memlimit::MemoryLimit::enter(
            Path::new(memlimit::CGROUP_ROOT),
            "wisckey",
            bytes,
        )?),
        None => None,
    };
    if let Some(limit) = &limit {
        println!("memory:     limit {}", limit.describe());
    }
    run_in_process(args)?;
    if let Some(peak) = limit.as_ref().and_then(memlimit::MemoryLimit::peak_bytes) {
        println!(
            "memory:     peak {} MiB (cgroup, page cache included)",
            peak >> 20
        );
    }
    Ok(())
}

fn run_in_process(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
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
    if let Some(name) = &args.ycsb {
        let workload = ycsb::Workload::parse(name)
            .ok_or_else(|| format!("unknown YCSB workload '{name}' (a..f)"))?;
        return run_ycsb(args, workload);
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
        seek_nexts: args.seek_nexts,
        scan_length_hint: args.scan_length_hint,
        batch_size: args.batch_size,
        histogram: args.histogram,
        writes: args.writes.unwrap_or(args.num),
        zipfian: args.distribution == "zipfian",
    };
    refuse_existing_db(args, &path)?;
    print_header(args, &path, &options);
    if !args.use_existing_db {
        destroy_db(&path)?;
    }
    let device = iostat::device_of(&path);
    iostat::sync_all();
    let at_open = iostat::sample(device.as_ref());
    let started = std::time::Instant::now();
    let mut db = Some(Db::open(&path, options.clone())?);
    let live = LiveKeys::new(config.num, !args.use_existing_db);
    let mut total = SpanFacts::default();
    for bench in benchmarks {
        if bench == Benchmark::Stats {
            let open = db
                .as_ref()
                .expect("the database stays open between benchmarks");
            print!("{}", stats_block(open, &path));
            continue;
        }
        if matches!(bench, Benchmark::ClusterValues | Benchmark::Gc) {
            let open = db
                .as_ref()
                .expect("the database stays open between benchmarks");
            iostat::sync_all();
            let before = iostat::sample(device.as_ref());
            let clock = std::time::Instant::now();
            let gc_options = wisckey::GcOptions {
                compact_first: false,
                ..wisckey::GcOptions::default()
            };
            enum Done {
                Gc(wisckey::GcOutcome),
                Pass(wisckey::ClusterOutcome),
            }
            let done = if bench == Benchmark::Gc {
                Done::Gc(open.gc(&gc_options)?)
            } else {
                Done::Pass(open.cluster_values::<&[u8], _>(..)?)
            };
            let secs = clock.elapsed().as_secs_f64();
            let said = match done {
                Done::Gc(gc) => format!(
                    "collected {} segments (read {:.1} MiB, relocated {} records, dropped {})",
                    gc.segments_collected,
                    gc.bytes_read as f64 / 1048576.0,
                    gc.records_relocated,
                    gc.records_dropped
                ),
                Done::Pass(pass) => format!(
                    "{} keys, {} values in the log: relocated {} ({:.1} MiB, {:.1} MB/s), kept {}, changed {}",
                    pass.keys_examined,
                    pass.values_in_log,
                    pass.values_relocated,
                    pass.bytes_relocated as f64 / 1048576.0,
                    pass.bytes_relocated as f64 / 1e6 / secs.max(1e-9),
                    pass.values_kept,
                    pass.values_changed
                ),
            };
            println!("{:<12} : {secs:.3} s; {said}", bench.name());
            iostat::sync_all();
            let after = iostat::sample(device.as_ref());
            let facts = SpanFacts {
                live_bytes: live_bytes(&live, &config),
                ..SpanFacts::default()
            };
            println!(
                "{}",
                iostat::amp_lines(device.as_ref(), before, after, facts, &path)
            );
            continue;
        }
        if bench.fresh_db() {
            if args.use_existing_db {
                println!("{:<12} : skipped (--use_existing_db is true)", bench.name());
                continue;
            }
            if let Some(open) = db.take() {
                open.close()?;
            }
            destroy_db(&path)?;
            live.reset();
            db = Some(Db::open(&path, options.clone())?);
        }
        let open = db
            .as_ref()
            .expect("the database is reopened after every fresh fill");
        iostat::sync_all();
        let before = iostat::sample(device.as_ref());
        let gc_before = gc_totals(open);
        let bar = progress::bar(
            bench.name(),
            bench.ops_per_thread(&config) * config.threads,
            args.quiet,
        );
        let result = with_progress_lines(
            args.report_interval_secs,
            started,
            bench.name(),
            &bar,
            &path,
            || runner::run_benchmark(open, bench, &config, &live, &bar),
        )?;
        bar.finish_and_clear();
        println!("{}", result.report_line());
        iostat::sync_all();
        let after = iostat::sample(device.as_ref());
        let facts = SpanFacts {
            user_written: result.user_bytes_written,
            user_read: result.user_bytes_read,
            live_bytes: live_bytes(&live, &config),
            cpu: result.cpu_secs.map(|cpu| (cpu, result.wall_secs)),
        };
        println!(
            "{}",
            iostat::amp_lines(device.as_ref(), before, after, facts, &path)
        );
        println!("{}", gc_line(gc_before, gc_totals(open)));
        if let Some(latencies) = &result.latencies {
            print!("{}", latencies.report());
        }
        total.user_written += result.user_bytes_written;
        total.user_read += result.user_bytes_read;
    }
    if args.settle_secs > 0.0 {
        let idle = indicatif::ProgressBar::hidden();
        with_progress_lines(
            args.report_interval_secs,
            started,
            "settle",
            &idle,
            &path,
            || std::thread::sleep(std::time::Duration::from_secs_f64(args.settle_secs)),
        );
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
    total.live_bytes = live_bytes(&live, &config);
    println!(
        "{}",
        iostat::amp_lines(device.as_ref(), at_open, at_close, total, &path)
    );
    Ok(())
}

/// Runs `body`; with `interval_secs > 0`, a thread prints a `progress:` line every
/// `interval_secs` while it runs, and one more when it is done (ops from the bar, which the
/// workers advance every 64 ops; bytes allocated by the files under `path`).
fn with_progress_lines<T>(
    interval_secs: f64,
    started: std::time::Instant,
    name: &str,
    bar: &indicatif::ProgressBar,
    path: &Path,
    body: impl FnOnce() -> T,
) -> T {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    if interval_secs <= 0.0 {
        return body();
    }
    let line = || {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "progress: t={:.3} bench={} ops={} db_bytes={}",
            started.elapsed().as_secs_f64(),
            name,
            bar.position(),
            iostat::dir_size_on_disk(path)
        );
        let _ = out.flush();
    };
    let done = AtomicBool::new(false);
    let interval = Duration::from_secs_f64(interval_secs);
    std::thread::scope(|scope| {
        let reporter = scope.spawn(|| {
            let mut next = std::time::Instant::now() + interval;
            while !done.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                if now >= next {
                    line();
                    next += interval;
                } else {
                    std::thread::sleep((next - now).min(Duration::from_millis(20)));
                }
            }
        });
        let result = body();
        done.store(true, Ordering::Relaxed);
        let _ = reporter.join();
        line();
        result
    })
}

/// YCSB: load (unless --use_existing_db), then the workload's run phase (unless
/// --ycsb_load_only), each with its amplification/CPU lines and per-operation latencies.
fn run_ycsb(args: &BenchArgs, workload: ycsb::Workload) -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let path = match &args.db {
        Some(p) => p.clone(),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("db")
        }
    };
    let config = ycsb::YcsbConfig {
        records: args.num,
        ops: args.reads.unwrap_or(args.num),
        record_size: args.record_size,
        key_size: args.key_size,
        threads: args.threads,
        seed: args.seed,
        scan_length_hint: args.scan_length_hint,
    };
    let options = engine_options(args);
    print_header(args, &path, &options);
    println!(
        "ycsb:       workload {} record_size={}",
        workload.name, args.record_size
    );
    refuse_existing_db(args, &path)?;
    if !args.use_existing_db {
        destroy_db(&path)?;
    }
    let device = iostat::device_of(&path);
    let db = Db::open(&path, options)?;
    let record_bytes = (args.key_size + args.record_size) as u64;
    let phases: [(&str, bool); 2] = [("load", true), ("run", false)];
    for (phase, is_load) in phases {
        if is_load && args.use_existing_db {
            println!(
                "ycsb-{}-load : skipped (--use_existing_db is true)",
                workload.name
            );
            continue;
        }
        if !is_load && args.ycsb_load_only {
            println!(
                "ycsb-{}-run : skipped (--ycsb_load_only is true)",
                workload.name
            );
            continue;
        }
        iostat::sync_all();
        let before = iostat::sample(device.as_ref());
        // Sampled before the CPU counter: reading the stats is not the phase's work.
        let gc_before = gc_totals(&db);
        let cpu_before = iostat::cpu_seconds();
        let result = if is_load {
            ycsb::load(&db, &config)?
        } else {
            ycsb::run(&db, workload, &config)?
        };
        let cpu = cpu_before.zip(iostat::cpu_seconds()).map(|(b, a)| a - b);
        let wall = result.wall_secs.max(1e-9);
        println!(
            "{:<12} : {:>11.3} micros/op {:.0} ops/sec",
            format!("ycsb-{}-{phase}", workload.name),
            wall * 1e6 * config.threads as f64 / result.ops.max(1) as f64,
            result.ops as f64 / wall
        );
        iostat::sync_all();
        let after = iostat::sample(device.as_ref());
        let facts = SpanFacts {
            user_written: result.user_written,
            user_read: result.user_read,
            live_bytes: (!args.use_existing_db).then_some(args.num * record_bytes),
            cpu: cpu.map(|c| (c, result.wall_secs)),
        };
        println!(
            "{}",
            iostat::amp_lines(device.as_ref(), before, after, facts, &path)
        );
        println!("{}", gc_line(gc_before, gc_totals(&db)));
        let names: &[&str] = if is_load {
            &["insert"]
        } else {
            ycsb::run_op_names()
        };
        print!("{}", ycsb::op_lines(&result, names));
    }
    db.close()?;
    Ok(())
}

/// What value-log GC and scan-triggered clustering have done since open (None if the
/// stats cannot be read).
fn gc_totals(db: &Db) -> Option<(GcTotals, AutoClusterTotals)> {
    db.stats().ok().map(|stats| (stats.gc, stats.auto_cluster))
}

/// The `gc:` line after a phase: what background value-log GC did during it (it runs
/// beside the foreground work when `gc_space_amp_target` is finite), and what clustering
/// passes scans triggered, so a figure taken with them running says how much work it
/// absorbed.
fn gc_line(
    before: Option<(GcTotals, AutoClusterTotals)>,
    after: Option<(GcTotals, AutoClusterTotals)>,
) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let (Some((before, cluster_before)), Some((after, cluster_after))) = (before, after) else {
        return format!("{:>15}gc=n/a (stats unavailable)", "");
    };
    format!(
        "{:>15}gc_runs={} (segments collected {}, read {:.1} MiB, relocated {:.1} MiB, freed {:.1} MiB, punched {:.1} MiB) \
         auto_cluster_passes={} (ranges estimated {}, values relocated {}, {:.1} MiB)",
        "",
        after.runs - before.runs,
        after.work.segments_collected - before.work.segments_collected,
        (after.work.bytes_read - before.work.bytes_read) as f64 / MIB,
        (after.work.bytes_relocated - before.work.bytes_relocated) as f64 / MIB,
        (after.bytes_freed - before.bytes_freed) as f64 / MIB,
        (after.bytes_punched - before.bytes_punched) as f64 / MIB,
        cluster_after.passes - cluster_before.passes,
        cluster_after.ranges_estimated - cluster_before.ranges_estimated,
        cluster_after.work.values_relocated - cluster_before.work.values_relocated,
        (cluster_after.work.bytes_relocated - cluster_before.work.bytes_relocated) as f64 / MIB,
    )
}

fn live_bytes(live: &LiveKeys, config: &Config) -> Option<u64> {
    live.count()
        .map(|keys| keys * (config.key_size + config.value_size) as u64)
}

/// The `stats` benchmark: what the engine exposes about its shape (not timed).
fn stats_block(db: &Db, path: &Path) -> String {
    let levels = db.level_file_counts();
    let files: Vec<String> = levels
        .iter()
        .enumerate()
        .map(|(level, n)| format!("L{level}={n}"))
        .collect();
    let head = db.vlog_head().map_or_else(
        || "none".to_string(),
        |h| format!("{}:{}", h.segment, h.offset),
    );
    let (sst, vlog) = file_bytes_by_kind(path);
    format!(
        "{:<12} : tables per level: {}\n{:<12}   sst={:.1} MiB vlog={:.1} MiB vlog_head={head}\n",
        "stats",
        files.join(" "),
        "",
        sst as f64 / 1_048_576.0,
        vlog as f64 / 1_048_576.0,
    )
}

/// Logical bytes of the database's table files and value-log segments.
fn file_bytes_by_kind(path: &Path) -> (u64, u64) {
    let (mut sst, mut vlog) = (0, 0);
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let len = entry.metadata().map_or(0, |m| m.len());
        if name.ends_with(".sst") {
            sst += len;
        } else if name.ends_with(".vlog") {
            vlog += len;
        }
    }
    (sst, vlog)
}

fn engine_options(args: &BenchArgs) -> Options {
    let mut options = Options::default();
    if let Some(threshold) = args.value_threshold {
        options.value_threshold = threshold;
    }
    if let Some(target) = args.gc_space_amp_target {
        options.gc_space_amp_target = target;
    }
    if let Some(ratio) = args.auto_cluster_ratio {
        options.auto_cluster_ratio = ratio;
    }
    if let Some(entries) = args.readahead_entries {
        options.scan_readahead_entries = entries;
    }
    if let Some(threads) = args.readahead_threads {
        options.scan_readahead_threads = threads;
    }
    options.block_cache_size = args.cache_size;
    if let Some(bytes) = args.value_cache_size {
        options.value_cache_size = bytes;
    }
    if let Some(bytes) = args.table_preload_size {
        options.table_preload_size = bytes;
    }
    if let Some(bytes) = args.write_buffer_size {
        options.memtable_size = bytes;
    }
    options.bloom_bits_per_key = args.bloom_bits;
    if let Some(bytes) = args.vlog_write_back_interval {
        options.vlog_write_back_interval = bytes;
    }
    if let Some(bytes) = args.vlog_segment_size {
        options.vlog_segment_size = bytes;
    }
    if let Some(bytes) = args.vlog_zero_fill_size {
        options.vlog_zero_fill_size = bytes;
    }
    options.vlog_direct_writes = args.vlog_direct_writes;
    options.write_through_to_os = args.write_through_to_os;
    options.vlog_mapped_writes = args.vlog_mapped_writes;
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
        "options:    value_threshold={} cache_size={} bloom_bits={} memtable_size={} \
         scan_readahead_entries={} scan_readahead_threads={} gc_space_amp_target={} \
         value_cache_size={} scan_length_hint={} vlog_write_back_interval={} \
         vlog_segment_size={} vlog_direct_writes={} auto_cluster_ratio={} \
         vlog_zero_fill_size={} table_preload_size={} write_through_to_os={} \
         vlog_mapped_writes={}",
        options.value_threshold,
        options.block_cache_size,
        options.bloom_bits_per_key,
        options.memtable_size,
        options.scan_readahead_entries,
        options.scan_readahead_threads,
        options.gc_space_amp_target,
        options.value_cache_size,
        args.scan_length_hint,
        options.vlog_write_back_interval,
        options.vlog_segment_size,
        options.vlog_direct_writes,
        options.auto_cluster_ratio,
        options.vlog_zero_fill_size,
        options.table_preload_size,
        options.write_through_to_os,
        options.vlog_mapped_writes
    );
    println!("db:         {}", path.display());
    println!("------------------------------------------------");
}

/// Refuses a `--db` that already holds database files unless the user said what to do with
/// them (`--use_existing_db` or `--destroy_existing_db`).
fn refuse_existing_db(args: &BenchArgs, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    if args.use_existing_db || args.destroy_existing_db {
        return Ok(());
    }
    let holds_ours = std::fs::read_dir(path).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            is_database_file(&name)
        })
    });
    if holds_ours {
        return Err(format!(
            "{} holds a database; bench would delete it. Nothing was changed. Pass \
             --use_existing_db to benchmark it as it is, or --destroy_existing_db to delete it \
             first",
            path.display()
        )
        .into());
    }
    Ok(())
}

/// Whether `name` is a file a wisckey database holds.
fn is_database_file(name: &str) -> bool {
    name == "CURRENT"
        || name == "LOCK"
        || name.starts_with("MANIFEST-")
        || name.ends_with(".sst")
        || name.ends_with(".vlog")
        || name.ends_with(".tmp")
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
        if is_database_file(&name) && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    let _ = std::fs::remove_dir(path);
    Ok(())
}
