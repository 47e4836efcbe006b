//! The benchmark bodies and the db_bench report line. Each benchmark runs `threads` workers
//! against one shared `Db`; a worker owns its key stream and value pool, so workers share
//! nothing but the database. Timing covers only the operations.

use std::time::Instant;

use wisckey::{Db, ReadOptions, WriteOptions};

use super::workload::{format_key, key_stream, ValuePool};

/// The benchmarks understood so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    FillSync,
    ReadRandom,
    ReadSeq,
}

impl Benchmark {
    pub fn parse(name: &str) -> Option<Benchmark> {
        Some(match name {
            "fillseq" => Benchmark::FillSeq,
            "fillrandom" => Benchmark::FillRandom,
            "overwrite" => Benchmark::Overwrite,
            "fillsync" => Benchmark::FillSync,
            "readrandom" => Benchmark::ReadRandom,
            "readseq" => Benchmark::ReadSeq,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::FillSeq => "fillseq",
            Benchmark::FillRandom => "fillrandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::FillSync => "fillsync",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::ReadSeq => "readseq",
        }
    }

    /// db_bench runs these on a freshly destroyed database.
    pub fn fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::FillSync
        )
    }
}

/// Shape of the workload.
#[derive(Debug, Clone)]
pub struct Config {
    pub num: u64,
    pub reads: u64,
    pub value_size: usize,
    pub key_size: usize,
    pub threads: u64,
    pub seed: u64,
    pub sync: bool,
}

/// What one worker did.
#[derive(Debug, Default, Clone, Copy)]
struct WorkerStats {
    ops: u64,
    bytes: u64,
    found: u64,
    busy_secs: f64,
}

/// What one benchmark did, all workers together.
#[derive(Debug)]
pub struct BenchResult {
    ops: u64,
    bytes: u64,
    found: Option<u64>,
    busy_secs: f64,
    wall_secs: f64,
    pub user_bytes_written: u64,
}

impl BenchResult {
    /// `name : X micros/op Y ops/sec; Z MB/s` as RocksDB's db_bench prints it: micros/op is
    /// per-thread time per op, ops/sec and MB/s are totals over wall time.
    pub fn report_line(&self, name: &str) -> String {
        let ops = self.ops.max(1) as f64;
        let wall = self.wall_secs.max(1e-9);
        let mut line = format!(
            "{name:<12} : {:>11.3} micros/op {:.0} ops/sec; {:>6.1} MB/s",
            self.busy_secs * 1e6 / ops,
            self.ops as f64 / wall,
            self.bytes as f64 / wall / 1_048_576.0
        );
        if let Some(found) = self.found {
            line.push_str(&format!(" ({found} of {} found)", self.ops));
        }
        line
    }
}

pub fn run_benchmark(
    db: &Db,
    bench: Benchmark,
    config: &Config,
) -> Result<BenchResult, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let outcomes: Vec<wisckey::Result<WorkerStats>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|thread| scope.spawn(move || run_worker(db, bench, config, thread)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let wall_secs = started.elapsed().as_secs_f64();
    let mut total = WorkerStats::default();
    for outcome in outcomes {
        let stats = outcome?;
        total.ops += stats.ops;
        total.bytes += stats.bytes;
        total.found += stats.found;
        total.busy_secs += stats.busy_secs;
    }
    let writes = !matches!(bench, Benchmark::ReadRandom | Benchmark::ReadSeq);
    Ok(BenchResult {
        ops: total.ops,
        bytes: total.bytes,
        found: (bench == Benchmark::ReadRandom).then_some(total.found),
        busy_secs: total.busy_secs,
        wall_secs,
        user_bytes_written: if writes { total.bytes } else { 0 },
    })
}

fn run_worker(
    db: &Db,
    bench: Benchmark,
    config: &Config,
    thread: u64,
) -> wisckey::Result<WorkerStats> {
    let started = Instant::now();
    let mut stats = match bench {
        Benchmark::FillSeq => fill(db, config, thread, bench, false)?,
        Benchmark::FillRandom | Benchmark::Overwrite => fill(db, config, thread, bench, true)?,
        Benchmark::FillSync => fill(db, config, thread, bench, true)?,
        Benchmark::ReadRandom => read_random(db, config, thread)?,
        Benchmark::ReadSeq => read_seq(db, config)?,
    };
    stats.busy_secs = started.elapsed().as_secs_f64();
    Ok(stats)
}

fn fill(
    db: &Db,
    config: &Config,
    thread: u64,
    bench: Benchmark,
    random: bool,
) -> wisckey::Result<WorkerStats> {
    // db_bench's fillsync writes num / 1000 entries, each synced.
    let (count, sync) = if bench == Benchmark::FillSync {
        ((config.num / 1000).max(1), true)
    } else {
        (config.num, config.sync)
    };
    let opts = WriteOptions { sync };
    let mut keys = key_stream(config.seed, bench.name(), thread);
    let mut values = ValuePool::new(config.value_size);
    let mut key = Vec::with_capacity(config.key_size);
    let mut stats = WorkerStats::default();
    for i in 0..count {
        let index = if random {
            keys.next_u64() % config.num
        } else {
            i
        };
        format_key(index, config.key_size, &mut key);
        db.put_opt(&key, values.next_value(), &opts)?;
        stats.ops += 1;
        stats.bytes += (config.key_size + config.value_size) as u64;
    }
    Ok(stats)
}

fn read_random(db: &Db, config: &Config, thread: u64) -> wisckey::Result<WorkerStats> {
    let mut keys = key_stream(config.seed, Benchmark::ReadRandom.name(), thread);
    let mut key = Vec::with_capacity(config.key_size);
    let mut stats = WorkerStats::default();
    for _ in 0..config.reads {
        format_key(keys.next_u64() % config.num, config.key_size, &mut key);
        if let Some(value) = db.get(&key)? {
            stats.found += 1;
            stats.bytes += (key.len() + value.len()) as u64;
        }
        stats.ops += 1;
    }
    Ok(stats)
}

fn read_seq(db: &Db, config: &Config) -> wisckey::Result<WorkerStats> {
    let mut it = db.iter(&ReadOptions::default())?;
    it.seek_to_first();
    let mut stats = WorkerStats::default();
    while it.valid() && stats.ops < config.reads {
        let value = it.value()?;
        stats.bytes += (it.key().len() + value.len()) as u64;
        stats.ops += 1;
        it.next();
    }
    it.status()?;
    Ok(stats)
}
