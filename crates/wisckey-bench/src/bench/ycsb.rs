//! YCSB core workloads A–F (`wisckey-bench bench --ycsb=a`); the peers in bench/peers/ implement
//! the same generators and print the same lines (bench/run-ycsb.sh). Definitions
//! (docs/BENCHMARKS.md, "YCSB"; generators in `ycsb_gen`):
//! - record `k` has key `format_key(fnvhash64(k) % 10^min(key_size, 19), key_size)` (YCSB's
//!   hashed insert order) and one value of `--record_size` bytes from the value pool;
//! - load: records `0..num` inserted in order, split into contiguous ranges per thread;
//! - run: each thread does `reads` operations; the operation is chosen by a uniform double
//!   against the workload's cumulative proportions (read, update, insert, scan, rmw order);
//!   the key by the request distribution over the records inserted so far (zipfian:
//!   scrambled over `num + 2 × expected inserts` items, redrawn while not yet inserted;
//!   latest: `last - zipfian(last + 1)`; uniform); inserts take the next record number from
//!   a shared counter; scans seek to the key and read `uniform(1..=100)` entries.
//!
//! Workers share the database and the insert counter (atomic); each owns its generators,
//! built before the run phase's clock starts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use wisckey::{Db, ReadOptions};

use super::histogram::Latencies;
use super::workload::{format_key, key_stream, SplitMix64, ValuePool};
use super::ycsb_gen::{fnvhash64, next_f64, ScrambledZipfian, Zipfian};

const MAX_SCAN: u64 = 100;
const OP_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "rmw"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Distribution {
    Zipfian,
    Latest,
}

/// A core workload: proportions of read, update, insert, scan, read-modify-write.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub name: char,
    mix: [f64; 5],
    dist: Distribution,
}

impl Workload {
    pub fn parse(name: &str) -> Option<Workload> {
        let (mix, dist) = match name.to_ascii_lowercase().as_str() {
            "a" => ([0.5, 0.5, 0.0, 0.0, 0.0], Distribution::Zipfian),
            "b" => ([0.95, 0.05, 0.0, 0.0, 0.0], Distribution::Zipfian),
            "c" => ([1.0, 0.0, 0.0, 0.0, 0.0], Distribution::Zipfian),
            "d" => ([0.95, 0.0, 0.05, 0.0, 0.0], Distribution::Latest),
            "e" => ([0.0, 0.0, 0.05, 0.95, 0.0], Distribution::Zipfian),
            "f" => ([0.5, 0.0, 0.0, 0.0, 0.5], Distribution::Zipfian),
            _ => return None,
        };
        let name = name.chars().next()?.to_ascii_lowercase();
        Some(Workload { name, mix, dist })
    }

    fn pick_op(&self, u: f64) -> usize {
        let mut acc = 0.0;
        for (i, p) in self.mix.iter().enumerate() {
            acc += p;
            if u < acc {
                return i;
            }
        }
        self.mix.iter().rposition(|&p| p > 0.0).unwrap_or(0)
    }
}

#[derive(Debug, Clone)]
pub struct YcsbConfig {
    pub records: u64,
    pub ops: u64,
    pub record_size: usize,
    pub key_size: usize,
    pub threads: u64,
    pub seed: u64,
    /// Pass each scan's drawn length as `ReadOptions::scan_length_hint`.
    pub scan_length_hint: bool,
}

/// Per-operation-type latencies and counts of one phase.
#[derive(Debug, Default)]
pub struct PhaseResult {
    pub ops: u64,
    pub wall_secs: f64,
    pub latencies: Vec<Latencies>,
    pub user_written: u64,
    pub user_read: u64,
    /// Per operation type: reads (read, rmw) that found their key; for scans, entries
    /// returned. Deterministic for one thread, so engines can be checked against each other.
    pub found: [u64; 5],
}

pub fn record_key(record: u64, key_size: usize, out: &mut Vec<u8>) {
    let digits = key_size.min(19) as u32;
    format_key(fnvhash64(record) % 10u64.pow(digits), key_size, out);
}

pub fn load(db: &Db, config: &YcsbConfig) -> wisckey::Result<PhaseResult> {
    let per_thread = config.records.div_ceil(config.threads);
    let started = Instant::now();
    let outcomes: Vec<wisckey::Result<(u64, Latencies)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut values = ValuePool::new(config.record_size);
                    let mut key = Vec::new();
                    let mut lat = Latencies::new();
                    let range = (t * per_thread)..((t + 1) * per_thread).min(config.records);
                    let n = range.end.saturating_sub(range.start);
                    for record in range {
                        record_key(record, config.key_size, &mut key);
                        let op = Instant::now();
                        db.put(&key, values.next_value())?;
                        lat.record_nanos(elapsed_nanos(op));
                    }
                    Ok((n, lat))
                })
            })
            .collect();
        handles.into_iter().map(join).collect()
    });
    let mut result = PhaseResult {
        latencies: vec![Latencies::new()],
        ..PhaseResult::default()
    };
    result.wall_secs = started.elapsed().as_secs_f64();
    for outcome in outcomes {
        let (n, lat) = outcome?;
        result.ops += n;
        result.latencies[0].merge(&lat);
    }
    result.user_written = result.ops * (config.key_size + config.record_size) as u64;
    Ok(result)
}

pub fn run(db: &Db, workload: Workload, config: &YcsbConfig) -> wisckey::Result<PhaseResult> {
    let inserted = AtomicU64::new(config.records);
    let expected_inserts = (config.ops * config.threads) as f64 * workload.mix[2];
    let zipf_items = config.records + (2.0 * expected_inserts) as u64;
    // Everything the workers need is built before the clock starts: the request generator
    // (latest's zipfian is an O(records) zeta sum, built once and copied to each thread;
    // only D uses it), the op streams and the value pools. Untimed, and the same draws as
    // when each thread built its own.
    let chooser = match workload.dist {
        Distribution::Zipfian => Chooser::Scrambled(ScrambledZipfian::new(zipf_items)),
        Distribution::Latest => Chooser::Latest(Zipfian::new(config.records.max(1))),
    };
    let workers: Vec<RunWorker<'_>> = (0..config.threads)
        .map(|t| RunWorker {
            db,
            config,
            workload,
            rng: key_stream(config.seed, &format!("ycsb-{}", workload.name), t),
            chooser: chooser.clone(),
            inserted: &inserted,
            values: ValuePool::new(config.record_size),
            key: Vec::new(),
            result: PhaseResult {
                latencies: (0..5).map(|_| Latencies::new()).collect(),
                ..PhaseResult::default()
            },
        })
        .collect();
    let started = Instant::now();
    let outcomes: Vec<wisckey::Result<PhaseResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|mut worker| {
                scope.spawn(move || {
                    worker.run()?;
                    Ok(worker.result)
                })
            })
            .collect();
        handles.into_iter().map(join).collect()
    });
    let mut total = PhaseResult {
        latencies: (0..5).map(|_| Latencies::new()).collect(),
        ..PhaseResult::default()
    };
    total.wall_secs = started.elapsed().as_secs_f64();
    for outcome in outcomes {
        let r = outcome?;
        total.ops += r.ops;
        total.user_written += r.user_written;
        total.user_read += r.user_read;
        for (all, one) in total.found.iter_mut().zip(r.found) {
            *all += one;
        }
        for (all, one) in total.latencies.iter_mut().zip(&r.latencies) {
            all.merge(one);
        }
    }
    Ok(total)
}

/// The request distribution's generator, one copy per thread.
#[derive(Debug, Clone)]
enum Chooser {
    /// Scrambled zipfian (A, B, C, E, F).
    Scrambled(ScrambledZipfian),
    /// Latest (D): a zipfian over the records, grown as inserts add records.
    Latest(Zipfian),
}

struct RunWorker<'a> {
    db: &'a Db,
    config: &'a YcsbConfig,
    workload: Workload,
    rng: SplitMix64,
    chooser: Chooser,
    inserted: &'a AtomicU64,
    values: ValuePool,
    key: Vec<u8>,
    result: PhaseResult,
}

impl RunWorker<'_> {
    fn run(&mut self) -> wisckey::Result<()> {
        let record_bytes = (self.config.key_size + self.config.record_size) as u64;
        for _ in 0..self.config.ops {
            let op = self.workload.pick_op(next_f64(&mut self.rng));
            let record = if op == 2 {
                self.inserted.fetch_add(1, Ordering::Relaxed)
            } else {
                self.choose_record()
            };
            record_key(record, self.config.key_size, &mut self.key);
            let started = Instant::now();
            match op {
                0 => {
                    if self.read()? {
                        self.result.found[0] += 1;
                    }
                }
                1 => {
                    self.db.put(&self.key, self.values.next_value())?;
                    self.result.user_written += record_bytes;
                }
                2 => {
                    self.db.put(&self.key, self.values.next_value())?;
                    self.result.user_written += record_bytes;
                }
                3 => self.result.found[3] += self.scan()?,
                _ => {
                    if self.read()? {
                        self.result.found[4] += 1;
                    }
                    self.db.put(&self.key, self.values.next_value())?;
                    self.result.user_written += record_bytes;
                }
            }
            self.result.latencies[op].record_nanos(elapsed_nanos(started));
            self.result.ops += 1;
        }
        Ok(())
    }

    /// A record already inserted, by the workload's request distribution.
    fn choose_record(&mut self) -> u64 {
        let inserted = self.inserted.load(Ordering::Relaxed).max(1);
        match &mut self.chooser {
            Chooser::Latest(latest) => {
                let last = inserted - 1;
                last - latest.next_of(&mut self.rng, last + 1).min(last)
            }
            Chooser::Scrambled(scrambled) => loop {
                let record = scrambled.next(&mut self.rng);
                if record < inserted {
                    return record;
                }
            },
        }
    }

    /// Whether the key was found.
    fn read(&mut self) -> wisckey::Result<bool> {
        let value = self.db.get(&self.key)?;
        if let Some(value) = &value {
            self.result.user_read += (self.key.len() + value.len()) as u64;
        }
        Ok(value.is_some())
    }

    /// The number of entries returned.
    fn scan(&mut self) -> wisckey::Result<u64> {
        let mut entries = 0;
        let len = 1 + self.rng.next_u64() % MAX_SCAN;
        let options = ReadOptions {
            scan_length_hint: self.config.scan_length_hint.then_some(len as usize),
            ..ReadOptions::default()
        };
        let mut it = self.db.iter(&options)?;
        it.seek(&self.key);
        for _ in 0..len {
            if !it.valid() {
                break;
            }
            let value = it.value()?;
            self.result.user_read += (it.key().len() + value.len()) as u64;
            entries += 1;
            it.next();
        }
        it.status()?;
        Ok(entries)
    }
}

/// The per-operation lines: `  read   : count N  found F  p50 X  p99 Y  p99.9 Z  (us)`;
/// `found` only for read and rmw (keys found) and scan (entries returned).
pub fn op_lines(result: &PhaseResult, names: &[&str]) -> String {
    let mut out = String::new();
    for (i, (name, lat)) in names.iter().zip(&result.latencies).enumerate() {
        if lat.count() == 0 {
            continue;
        }
        let found = if matches!(*name, "read" | "scan" | "rmw") {
            format!("  found {}", result.found[i])
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {name:<6} : count {}{found}  p50 {:.2}  p99 {:.2}  p99.9 {:.2}  (us)\n",
            lat.count(),
            lat.percentile_micros(50.0),
            lat.percentile_micros(99.0),
            lat.percentile_micros(99.9)
        ));
    }
    out
}

pub fn run_op_names() -> &'static [&'static str] {
    &OP_NAMES
}

fn elapsed_nanos(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_pick_ops_by_proportion() {
        let a = Workload::parse("A").expect("a");
        assert_eq!(a.pick_op(0.2), 0);
        assert_eq!(a.pick_op(0.7), 1);
        let e = Workload::parse("e").expect("e");
        assert_eq!(e.pick_op(0.01), 2);
        assert_eq!(e.pick_op(0.5), 3);
        assert_eq!(e.pick_op(0.9999999), 3);
        assert!(Workload::parse("g").is_none());
    }

    #[test]
    fn load_then_every_workload_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = Db::open(dir.path().join("db"), wisckey::Options::default()).expect("open");
        let config = YcsbConfig {
            records: 2000,
            ops: 300,
            record_size: 100,
            key_size: 16,
            threads: 2,
            seed: 11,
            scan_length_hint: true,
        };
        let loaded = load(&db, &config).expect("load");
        assert_eq!(loaded.ops, 2000);
        for name in ["a", "b", "c", "d", "e", "f"] {
            let w = Workload::parse(name).expect("workload");
            let r = run(&db, w, &config).expect("run");
            assert_eq!(r.ops, 600, "workload {name}");
            // Reads of loaded records always find them.
            if name == "c" {
                assert_eq!(r.user_read, 600 * 116, "workload c");
                assert_eq!(r.found[0], 600, "workload c");
                assert!(op_lines(&r, run_op_names()).contains("read   : count 600  found 600"));
            }
            assert!(op_lines(&r, run_op_names()).contains("count"));
        }
        db.close().expect("close");
    }
}
