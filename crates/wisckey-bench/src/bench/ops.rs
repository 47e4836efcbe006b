//! The per-thread benchmark bodies. A `Worker` owns its key stream, value pool, latency
//! histogram and counters; it shares only the database, the live-key set (atomic) and the
//! progress bar (internally synchronized) with other workers. Definitions (shared with the
//! peers, see `docs/BENCHMARKS.md`):
//! - fills: `num` puts (fillsync: `num / 1000`, synced; overwrite: `writes`); random ones
//!   index `next() % num`, or with `--distribution=zipfian` (overwrite only) YCSB's scrambled
//!   zipfian over `0..num` drawn from the same stream (`ycsb_gen::ScrambledZipfian`).
//! - deleterandom: `num` deletes of random indexes.
//! - readrandom / readmissing: `reads` gets of random indexes (readmissing: the index's key
//!   plus a `.` suffix, never written).
//! - multireadrandom: `reads` keys in batches of `batch_size`, each batch one `Db::multi_get`
//!   (values read in parallel). One histogram sample per batch.
//! - readseq / readreverse: one iterator from the first (last) key, up to `reads` entries,
//!   each value copied out.
//! - seekrandom: `reads` times: a new iterator, seek to a random index's key (found if the
//!   iterator lands on that exact key), then `seek_nexts` times: copy the value, next.
//! - readwhilewriting writer: random puts until told to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use indicatif::ProgressBar;
use wisckey::{Db, ReadOptions, WriteOptions};

use super::histogram::Latencies;
use super::live::LiveKeys;
use super::runner::{Benchmark, Config};
use super::workload::{format_key, format_missing_key, key_stream, SplitMix64, ValuePool};
use super::ycsb_gen::ScrambledZipfian;

/// Progress is published every this many ops, so the bar's atomics stay off the hot path
/// (small enough for `--report_interval_secs` lines to count ops to within 64 per thread).
const PROGRESS_STEP: u64 = 64;

/// What one worker did.
#[derive(Debug, Default, Clone)]
pub struct WorkerStats {
    pub ops: u64,
    pub written: u64,
    pub read: u64,
    pub found: u64,
    pub busy_secs: f64,
    pub latencies: Option<Latencies>,
}

pub struct Worker<'a> {
    db: &'a Db,
    config: &'a Config,
    live: &'a LiveKeys,
    progress: &'a ProgressBar,
    keys: SplitMix64,
    zipf: Option<ScrambledZipfian>,
    key: Vec<u8>,
    unreported: u64,
    stats: WorkerStats,
}

impl<'a> Worker<'a> {
    /// A worker whose key stream is that of benchmark `stream`, thread `thread`.
    pub fn new(
        db: &'a Db,
        config: &'a Config,
        live: &'a LiveKeys,
        progress: &'a ProgressBar,
        stream: &str,
        thread: u64,
    ) -> Worker<'a> {
        Worker {
            db,
            config,
            live,
            progress,
            keys: key_stream(config.seed, stream, thread),
            zipf: None,
            key: Vec::with_capacity(config.key_size + 1),
            unreported: 0,
            stats: WorkerStats {
                latencies: config.histogram.then(Latencies::new),
                ..WorkerStats::default()
            },
        }
    }

    pub fn run(mut self, bench: Benchmark) -> wisckey::Result<WorkerStats> {
        let started = Instant::now();
        match bench {
            Benchmark::FillSeq => self.fill(false, false, self.config.num)?,
            Benchmark::FillRandom => self.fill(true, false, self.config.num)?,
            Benchmark::Overwrite => {
                if self.config.zipfian {
                    self.zipf = Some(ScrambledZipfian::new(self.config.num));
                }
                self.fill(true, false, self.config.writes)?
            }
            // db_bench's fillsync writes num / 1000 entries, each synced.
            Benchmark::FillSync => self.fill(true, true, (self.config.num / 1000).max(1))?,
            Benchmark::DeleteRandom => self.delete_random()?,
            Benchmark::ReadRandom | Benchmark::ReadWhileWriting => self.read_random(false)?,
            Benchmark::ReadMissing => self.read_random(true)?,
            Benchmark::MultiReadRandom => self.multi_read_random()?,
            Benchmark::ReadSeq => self.scan(false)?,
            Benchmark::ReadReverse => self.scan(true)?,
            Benchmark::SeekRandom => self.seek_random()?,
            Benchmark::Stats | Benchmark::ClusterValues | Benchmark::Gc => {}
        }
        self.progress.inc(self.unreported);
        self.stats.busy_secs = started.elapsed().as_secs_f64();
        Ok(self.stats)
    }

    /// The readwhilewriting writer: random puts at full speed until `stop` is set.
    pub fn write_until(mut self, stop: &AtomicBool) -> wisckey::Result<WorkerStats> {
        let started = Instant::now();
        let mut values = ValuePool::new(self.config.value_size);
        let opts = WriteOptions {
            sync: self.config.sync,
        };
        while !stop.load(Ordering::Relaxed) {
            let index = self.keys.next_u64() % self.config.num;
            format_key(index, self.config.key_size, &mut self.key);
            self.db.put_opt(&self.key, values.next_value(), &opts)?;
            self.live.insert(index);
            self.stats.ops += 1;
            self.stats.written += (self.config.key_size + self.config.value_size) as u64;
        }
        self.stats.busy_secs = started.elapsed().as_secs_f64();
        self.stats.latencies = None;
        Ok(self.stats)
    }

    fn op_started(&self) -> Option<Instant> {
        self.stats.latencies.is_some().then(Instant::now)
    }

    fn op_done(&mut self, started: Option<Instant>) {
        self.ops_done(started, 1);
    }

    /// Records `ops` operations that together took one latency sample.
    fn ops_done(&mut self, started: Option<Instant>, ops: u64) {
        if let (Some(lat), Some(t)) = (self.stats.latencies.as_mut(), started) {
            lat.record_nanos(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        self.stats.ops += ops;
        self.unreported += ops;
        if self.unreported >= PROGRESS_STEP {
            self.progress.inc(self.unreported);
            self.unreported = 0;
        }
    }

    fn random_index(&mut self) -> u64 {
        self.keys.next_u64() % self.config.num
    }

    /// `count` puts: of indexes 0.. in order, or random ones (zipfian when `zipf` is set).
    fn fill(&mut self, random: bool, fill_sync: bool, count: u64) -> wisckey::Result<()> {
        let opts = WriteOptions {
            sync: fill_sync || self.config.sync,
        };
        let mut values = ValuePool::new(self.config.value_size);
        for i in 0..count {
            let index = match (&mut self.zipf, random) {
                (Some(zipf), _) => zipf.next(&mut self.keys),
                (None, true) => self.random_index(),
                (None, false) => i,
            };
            format_key(index, self.config.key_size, &mut self.key);
            let t = self.op_started();
            self.db.put_opt(&self.key, values.next_value(), &opts)?;
            self.op_done(t);
            self.live.insert(index);
            self.stats.written += (self.config.key_size + self.config.value_size) as u64;
        }
        Ok(())
    }

    fn delete_random(&mut self) -> wisckey::Result<()> {
        let opts = WriteOptions {
            sync: self.config.sync,
        };
        for _ in 0..self.config.num {
            let index = self.random_index();
            format_key(index, self.config.key_size, &mut self.key);
            let t = self.op_started();
            self.db.delete_opt(&self.key, &opts)?;
            self.op_done(t);
            self.live.remove(index);
            self.stats.written += self.config.key_size as u64;
        }
        Ok(())
    }

    fn read_random(&mut self, missing: bool) -> wisckey::Result<()> {
        for _ in 0..self.config.reads {
            let index = self.random_index();
            if missing {
                format_missing_key(index, self.config.key_size, &mut self.key);
            } else {
                format_key(index, self.config.key_size, &mut self.key);
            }
            let t = self.op_started();
            let value = self.db.get(&self.key)?;
            self.op_done(t);
            if let Some(value) = value {
                self.stats.found += 1;
                self.stats.read += (self.key.len() + value.len()) as u64;
            }
        }
        Ok(())
    }

    fn multi_read_random(&mut self) -> wisckey::Result<()> {
        let batch = self.config.batch_size.max(1);
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(batch as usize);
        let mut remaining = self.config.reads;
        while remaining > 0 {
            let n = remaining.min(batch);
            remaining -= n;
            keys.clear();
            for _ in 0..n {
                let mut key = Vec::with_capacity(self.config.key_size);
                format_key(self.random_index(), self.config.key_size, &mut key);
                keys.push(key);
            }
            let t = self.op_started();
            let mut found = 0;
            let mut read = 0;
            // One batched call, as RocksDB's `MultiGet`: values in the log are read in
            // parallel on the reader pool.
            for (key, value) in keys.iter().zip(self.db.multi_get(&keys)?) {
                if let Some(value) = value {
                    found += 1;
                    read += (key.len() + value.len()) as u64;
                }
            }
            // One histogram sample per batch, but every key counts as an op.
            self.ops_done(t, n);
            self.stats.found += found;
            self.stats.read += read;
        }
        Ok(())
    }

    fn scan(&mut self, reverse: bool) -> wisckey::Result<()> {
        let mut it = self.db.iter(&ReadOptions::default())?;
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut entries = 0;
        while it.valid() && entries < self.config.reads {
            let t = self.op_started();
            let value = it.value()?;
            self.stats.read += (it.key().len() + value.len()) as u64;
            if reverse {
                it.prev();
            } else {
                it.next();
            }
            self.op_done(t);
            entries += 1;
        }
        it.status()
    }

    fn seek_random(&mut self) -> wisckey::Result<()> {
        for _ in 0..self.config.reads {
            format_key(self.random_index(), self.config.key_size, &mut self.key);
            let t = self.op_started();
            let options = ReadOptions {
                scan_length_hint: (self.config.scan_length_hint && self.config.seek_nexts > 0)
                    .then_some(self.config.seek_nexts as usize),
                ..ReadOptions::default()
            };
            let mut it = self.db.iter(&options)?;
            it.seek(&self.key);
            if it.valid() && it.key() == self.key.as_slice() {
                self.stats.found += 1;
            }
            for _ in 0..self.config.seek_nexts {
                if !it.valid() {
                    break;
                }
                let value = it.value()?;
                self.stats.read += (it.key().len() + value.len()) as u64;
                it.next();
            }
            it.status()?;
            self.op_done(t);
        }
        Ok(())
    }
}
