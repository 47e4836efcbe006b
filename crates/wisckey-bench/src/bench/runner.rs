//! Runs one benchmark: `threads` workers (see `ops`) against one shared `Db`, plus one
//! writer for readwhilewriting, and folds their counters into the db_bench report line.
//! Timing covers only the operations; CPU time is sampled at the same two instants.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::ProgressBar;
use wisckey::Db;

use super::histogram::Latencies;
use super::iostat;
use super::live::LiveKeys;
use super::ops::{Worker, WorkerStats};

/// The benchmarks understood (db_bench names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    FillSync,
    DeleteRandom,
    ReadRandom,
    ReadMissing,
    MultiReadRandom,
    ReadSeq,
    ReadReverse,
    SeekRandom,
    ReadWhileWriting,
    Stats,
    /// wisckey only: `Db::cluster_values` over the whole key space (values rewritten in
    /// key order; reported by its own line, not a db_bench one).
    ClusterValues,
    /// wisckey only: `Db::gc` now (without compacting the key index first; its own line).
    Gc,
}

const ALL: [Benchmark; 15] = [
    Benchmark::FillSeq,
    Benchmark::FillRandom,
    Benchmark::Overwrite,
    Benchmark::FillSync,
    Benchmark::DeleteRandom,
    Benchmark::ReadRandom,
    Benchmark::ReadMissing,
    Benchmark::MultiReadRandom,
    Benchmark::ReadSeq,
    Benchmark::ReadReverse,
    Benchmark::SeekRandom,
    Benchmark::ReadWhileWriting,
    Benchmark::Stats,
    Benchmark::ClusterValues,
    Benchmark::Gc,
];

impl Benchmark {
    pub fn parse(name: &str) -> Option<Benchmark> {
        ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::FillSeq => "fillseq",
            Benchmark::FillRandom => "fillrandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::FillSync => "fillsync",
            Benchmark::DeleteRandom => "deleterandom",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::ReadMissing => "readmissing",
            Benchmark::MultiReadRandom => "multireadrandom",
            Benchmark::ReadSeq => "readseq",
            Benchmark::ReadReverse => "readreverse",
            Benchmark::SeekRandom => "seekrandom",
            Benchmark::ReadWhileWriting => "readwhilewriting",
            Benchmark::Stats => "stats",
            Benchmark::ClusterValues => "clustervalues",
            Benchmark::Gc => "gc",
        }
    }

    /// db_bench runs these on a freshly destroyed database.
    pub fn fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::FillSync
        )
    }

    /// Whether the report line carries a "(F of N found)" count.
    fn reports_found(self) -> bool {
        matches!(
            self,
            Benchmark::ReadRandom
                | Benchmark::ReadMissing
                | Benchmark::MultiReadRandom
                | Benchmark::SeekRandom
                | Benchmark::ReadWhileWriting
        )
    }

    /// Operations one worker performs (for the progress bar; scans may stop earlier).
    pub fn ops_per_thread(self, config: &Config) -> u64 {
        match self {
            Benchmark::FillSync => (config.num / 1000).max(1),
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::DeleteRandom => config.num,
            Benchmark::Overwrite => config.writes,
            Benchmark::Stats | Benchmark::ClusterValues | Benchmark::Gc => 0,
            _ => config.reads,
        }
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
    pub seek_nexts: u64,
    /// Pass `seek_nexts` as `ReadOptions::scan_length_hint` to seekrandom's iterators.
    pub scan_length_hint: bool,
    pub batch_size: u64,
    pub histogram: bool,
    /// overwrite: puts per thread (db_bench's --writes; default num).
    pub writes: u64,
    /// overwrite: key indexes from YCSB's scrambled zipfian (theta 0.99) over 0..num
    /// instead of uniform `next() % num`.
    pub zipfian: bool,
}

/// What one benchmark did, all workers together.
#[derive(Debug)]
pub struct BenchResult {
    bench: Benchmark,
    ops: u64,
    found: u64,
    busy_secs: f64,
    pub wall_secs: f64,
    pub cpu_secs: Option<f64>,
    pub user_bytes_written: u64,
    pub user_bytes_read: u64,
    pub latencies: Option<Latencies>,
}

impl BenchResult {
    /// `name : X micros/op Y ops/sec; Z MB/s` as RocksDB's db_bench prints it: micros/op is
    /// per-thread time per op, ops/sec and MB/s are totals over wall time. MB/s counts the
    /// bytes read for read benchmarks (readwhilewriting: the readers'), written otherwise.
    pub fn report_line(&self) -> String {
        let ops = self.ops.max(1) as f64;
        let wall = self.wall_secs.max(1e-9);
        let bytes = if self.user_bytes_read > 0 || self.bench.reports_found() {
            self.user_bytes_read
        } else {
            self.user_bytes_written
        };
        let mut line = format!(
            "{:<12} : {:>11.3} micros/op {:.0} ops/sec; {:>6.1} MB/s",
            self.bench.name(),
            self.busy_secs * 1e6 / ops,
            self.ops as f64 / wall,
            bytes as f64 / wall / 1_048_576.0
        );
        if self.bench.reports_found() {
            line.push_str(&format!(" ({} of {} found)", self.found, self.ops));
        }
        line
    }
}

pub fn run_benchmark(
    db: &Db,
    bench: Benchmark,
    config: &Config,
    live: &LiveKeys,
    progress: &ProgressBar,
) -> Result<BenchResult, Box<dyn std::error::Error>> {
    let stop_writer = AtomicBool::new(false);
    let stop_writer = &stop_writer;
    let cpu_before = iostat::cpu_seconds();
    let started = Instant::now();
    let (readers, writer, wall_secs) = std::thread::scope(|scope| {
        let writer = (bench == Benchmark::ReadWhileWriting).then(|| {
            // The writer's stream is thread index `threads`, after the readers'.
            let worker = Worker::new(db, config, live, progress, bench.name(), config.threads);
            scope.spawn(move || worker.write_until(stop_writer))
        });
        let workers: Vec<_> = (0..config.threads)
            .map(|thread| {
                let worker = Worker::new(db, config, live, progress, bench.name(), thread);
                scope.spawn(move || worker.run(bench))
            })
            .collect();
        let readers: Vec<wisckey::Result<WorkerStats>> =
            workers.into_iter().map(join_or_resume_panic).collect();
        let wall_secs = started.elapsed().as_secs_f64();
        stop_writer.store(true, Ordering::Relaxed);
        let writer = writer.map(join_or_resume_panic);
        (readers, writer, wall_secs)
    });
    let cpu_secs = cpu_before.zip(iostat::cpu_seconds()).map(|(b, a)| a - b);
    let mut result = BenchResult {
        bench,
        ops: 0,
        found: 0,
        busy_secs: 0.0,
        wall_secs,
        cpu_secs,
        user_bytes_written: 0,
        user_bytes_read: 0,
        latencies: config.histogram.then(Latencies::new),
    };
    for outcome in readers {
        let stats = outcome?;
        result.ops += stats.ops;
        result.found += stats.found;
        result.busy_secs += stats.busy_secs;
        result.user_bytes_written += stats.written;
        result.user_bytes_read += stats.read;
        if let (Some(all), Some(one)) = (result.latencies.as_mut(), stats.latencies.as_ref()) {
            all.merge(one);
        }
    }
    if let Some(writer) = writer {
        result.user_bytes_written += writer?.written;
    }
    Ok(result)
}

fn join_or_resume_panic<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            num: 2000,
            reads: 500,
            value_size: 100,
            key_size: 16,
            threads: 2,
            seed: 7,
            sync: false,
            seek_nexts: 5,
            scan_length_hint: true,
            batch_size: 8,
            histogram: true,
            writes: 2000,
            zipfian: false,
        }
    }

    #[test]
    fn names_round_trip() {
        for b in ALL {
            assert_eq!(Benchmark::parse(b.name()), Some(b));
        }
        assert_eq!(Benchmark::parse("nope"), None);
    }

    #[test]
    fn every_benchmark_runs_and_counts_what_it_did() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Db::open(dir.path().join("db"), wisckey::Options::default()).expect("open");
        let config = config();
        let live = LiveKeys::new(config.num, true);
        let bar = ProgressBar::hidden();
        let run = |bench| run_benchmark(&db, bench, &config, &live, &bar).expect("benchmark");

        let fill = run(Benchmark::FillSeq);
        assert_eq!(fill.ops, 2 * config.num);
        assert_eq!(live.count(), Some(config.num));
        assert_eq!(fill.user_bytes_written, 2 * config.num * 116);
        assert_eq!(fill.latencies.as_ref().map(Latencies::count), Some(4000));

        let read = run(Benchmark::ReadRandom);
        assert_eq!((read.ops, read.found), (1000, 1000));
        assert!(read.report_line().contains("(1000 of 1000 found)"));
        let missing = run(Benchmark::ReadMissing);
        assert_eq!((missing.ops, missing.found), (1000, 0));
        let multi = run(Benchmark::MultiReadRandom);
        assert_eq!((multi.ops, multi.found), (1000, 1000));
        // 500 keys per thread in batches of 8: 63 samples per thread.
        assert_eq!(multi.latencies.as_ref().map(Latencies::count), Some(126));

        let forward = run(Benchmark::ReadSeq);
        let backward = run(Benchmark::ReadReverse);
        assert_eq!(forward.ops, 1000);
        assert_eq!(forward.user_bytes_read, backward.user_bytes_read);

        let seek = run(Benchmark::SeekRandom);
        assert_eq!(seek.found, 1000);
        assert!(seek.user_bytes_read > 0 && seek.user_bytes_read <= 1000 * 5 * 116);

        let rww = run(Benchmark::ReadWhileWriting);
        assert_eq!((rww.ops, rww.found), (1000, 1000));

        let deleted = run(Benchmark::DeleteRandom);
        assert_eq!(deleted.user_bytes_written, 2 * config.num * 16);
        let live_after = live.count().expect("known");
        assert!(live_after < config.num, "{live_after}");
        let after = run(Benchmark::ReadRandom);
        assert!(after.found < after.ops);
        db.close().expect("close");
    }
}
