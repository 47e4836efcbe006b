//! kill -9 with an expected-state oracle (issue 12, item 2), after RocksDB's crash test: a
//! child process runs four writer threads (puts of every size class, deletes, batches,
//! overwrites of hot keys, some sync) plus a thread running GC and compactions, under
//! options drawn anew each cycle; the parent kills it with SIGKILL at a random moment.
//!
//! The oracle lives in the parent: every operation is a pure function of (seed, thread,
//! operation number), and the child prints `B t n` before and `A t n` after each one (one
//! lock orders the lines, so their order is a happens-before order). After each kill the
//! parent reopens the database (timing recovery) and requires every thread's keys to hold
//! exactly the state after a prefix of its operations, each applied whole or not at all:
//! - half the cycles write through to the OS before acknowledging (`write_through_to_os`):
//!   a process kill keeps every acknowledged write, so the prefix is every acknowledged
//!   operation, plus or minus the one in flight;
//! - the other half buffer non-sync writes in user space: the prefix may stop short of the
//!   acknowledged operations (a kill loses the buffer), but never before an operation that
//!   was acknowledged before some acknowledged sync write began (that sync made the log up
//!   to it durable), nor before the thread's own acknowledged sync writes.
//!
//! Long variant: `WISCKEY_ORACLE_CYCLES=5000 cargo test --release -p wisckey --test
//! kill_oracle -- --nocapture` (CI: 10 cycles).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const THREADS: u64 = 4;
const KEYS_PER_THREAD: u64 = 60;
const DIR_ENV: &str = "WISCKEY_ORACLE_DIR";
const START_ENV: &str = "WISCKEY_ORACLE_START";
const CYCLE_ENV: &str = "WISCKEY_ORACLE_CYCLE";
const SEED: u64 = 0x0a_c1e5;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One operation of a thread: a batch of puts (`Some`) and deletes (`None`) on its own keys.
struct ThreadOp {
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    sync: bool,
}

fn thread_op(thread: u64, n: u64) -> ThreadOp {
    let mut rng = SmallRng::seed_from_u64(SEED ^ (thread << 48) ^ n);
    let count = if rng.gen_bool(0.2) {
        rng.gen_range(2..5)
    } else {
        1
    };
    let entries = (0..count)
        .map(|_| {
            // A few hot keys per thread take most of the overwrites.
            let k = if rng.gen_bool(0.4) {
                rng.gen_range(0..4)
            } else {
                rng.gen_range(0..KEYS_PER_THREAD)
            };
            let key = format!("t{thread}-k{k:03}").into_bytes();
            if rng.gen_bool(0.15) {
                return (key, None);
            }
            let len = match rng.gen_range(0..10) {
                0..=2 => rng.gen_range(0..64),
                3..=7 => rng.gen_range(64..4000),
                _ => rng.gen_range(4000..40_000),
            };
            let mut value = format!("{thread}:{n}:").into_bytes();
            value.resize(len.max(value.len()), (n % 251) as u8);
            (key, Some(value))
        })
        .collect();
    ThreadOp {
        entries,
        sync: rng.gen_bool(0.1),
    }
}

fn apply(model: &mut Model, op: &ThreadOp) {
    for (k, v) in &op.entries {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Options drawn for a cycle: value threshold, segment and memtable sizes, GC target.
fn cycle_options(cycle: u64) -> Options {
    let mut rng = SmallRng::seed_from_u64(SEED ^ cycle.wrapping_mul(0x9e37_79b9));
    Options {
        write_through_to_os: rng.gen_bool(0.5),
        value_threshold: [0, 64, 512, usize::MAX][rng.gen_range(0..4)],
        vlog_segment_size: [64 << 10, 1 << 20, 8 << 20][rng.gen_range(0..3)],
        memtable_size: [64 << 10, 1 << 20][rng.gen_range(0..2)],
        gc_space_amp_target: [1.2, 1.5, f64::INFINITY][rng.gen_range(0..3)],
        ..Options::default()
    }
}

/// The child's body: runs only when the parent re-executes this test binary.
#[test]
#[ignore = "the child's body: its parent test runs it (--ignored)"]
fn oracle_child() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return; // Not a child.
    };
    let cycle: u64 = std::env::var(CYCLE_ENV)
        .expect("cycle")
        .parse()
        .expect("cycle");
    let starts: Vec<u64> = (std::env::var(START_ENV).expect("starts").split(','))
        .map(|s| s.parse().expect("start"))
        .collect();
    let db = Arc::new(Db::open(Path::new(&dir), cycle_options(cycle)).expect("child open"));
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = |out: &Mutex<std::io::Stdout>, line: String| {
        let mut out = out.lock().expect("stdout");
        writeln!(out, "{line}").expect("child stdout");
        out.flush().expect("child flush");
    };
    {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for round in 0u64.. {
                if round % 5 == 0 {
                    let _ = db.compact_range(None, None);
                }
                let _ = db.gc(&wisckey::GcOptions {
                    compact_first: false,
                    ..wisckey::GcOptions::default()
                });
                std::thread::sleep(Duration::from_millis(3));
            }
        });
    }
    say(&out, "READY".to_string());
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, out) = (Arc::clone(&db), Arc::clone(&out));
            let start = starts[t as usize];
            std::thread::spawn(move || {
                for n in start.. {
                    let op = thread_op(t, n);
                    let mut batch = WriteBatch::new();
                    for (k, v) in &op.entries {
                        match v {
                            Some(v) => batch.put(k, v),
                            None => batch.delete(k),
                        };
                    }
                    say(&out, format!("B {t} {n}"));
                    db.write_opt(batch, &WriteOptions { sync: op.sync })
                        .expect("child write");
                    say(&out, format!("A {t} {n}"));
                }
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn sigkill_of_a_multithreaded_writer_matches_the_oracle() {
    if std::env::var(DIR_ENV).is_ok() {
        return; // The child runs only `oracle_child`.
    }
    let cycles: u64 = std::env::var("WISCKEY_ORACLE_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let mut rng = SmallRng::seed_from_u64(SEED);
    // Per thread: the next operation number and the oracle of its keys.
    let mut next = vec![0u64; THREADS as usize];
    let mut models: Vec<Model> = vec![Model::new(); THREADS as usize];
    let (mut acked_total, mut synced_total) = (0u64, 0u64);
    // Acknowledged non-sync operations a kill took with the write buffer (buffered cycles).
    let (mut buffered_lost, mut write_through_cycles) = (0u64, 0u64);
    let mut recoveries = Vec::new();
    for cycle in 0..cycles {
        let starts = next
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut child = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--ignored",
                "--exact",
                "oracle_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_ENV, &dir)
            .env(START_ENV, &starts)
            .env(CYCLE_ENV, cycle.to_string())
            .stdout(Stdio::piped())
            // A child that panics says why (it is otherwise quiet on stderr).
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("child READY");
            // libtest prints `test oracle_child ... ` on the same line.
            if line.ends_with("READY") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(10..250)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let _ = reader.join();
        lines.extend(rx.try_iter());

        // What each thread began and had acknowledged, and the operations every thread had
        // acknowledged before an acknowledged sync write began (they are durable).
        let mut acked: Vec<Option<u64>> = vec![None; THREADS as usize];
        let mut began: Vec<Option<u64>> = vec![None; THREADS as usize];
        let mut durable: Vec<u64> = next.clone();
        let mut before_sync: BTreeMap<(usize, u64), Vec<u64>> = BTreeMap::new();
        for line in &lines {
            let mut parts = line.split(' ');
            let (Some(kind), Some(t), Some(n)) = (parts.next(), parts.next(), parts.next()) else {
                continue; // The last line may be cut by the kill.
            };
            let (Ok(t), Ok(n)) = (t.parse::<usize>(), n.parse::<u64>()) else {
                continue;
            };
            let done: Vec<u64> = (0..THREADS as usize)
                .map(|u| acked[u].map_or(next[u], |a| a + 1))
                .collect();
            match kind {
                "A" => {
                    acked[t] = Some(n);
                    if let Some(floor) = before_sync.remove(&(t, n)) {
                        for (d, f) in durable.iter_mut().zip(floor) {
                            *d = (*d).max(f);
                        }
                        durable[t] = durable[t].max(n + 1);
                    }
                }
                "B" => {
                    began[t] = Some(n);
                    if thread_op(t as u64, n).sync {
                        before_sync.insert((t, n), done);
                    }
                }
                _ => {}
            }
        }
        let write_through = cycle_options(cycle).write_through_to_os;
        write_through_cycles += u64::from(write_through);
        let mut acked_upto = vec![0u64; THREADS as usize];
        for t in 0..THREADS as usize {
            acked_upto[t] = acked[t].map_or(next[t], |n| n + 1);
            for n in next[t]..acked_upto[t] {
                synced_total += u64::from(thread_op(t as u64, n).sync);
                acked_total += 1;
            }
        }

        let started = Instant::now();
        let db = Db::open(&dir, cycle_options(cycle + 1)).unwrap_or_else(|e| {
            panic!("seed {SEED:#x} cycle {cycle}: reopen after SIGKILL failed: {e}")
        });
        recoveries.push(started.elapsed());
        let mut found: Vec<Model> = vec![Model::new(); THREADS as usize];
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        while it.valid() {
            let key = it.key().to_vec();
            let thread: usize = (key.get(1..2))
                .and_then(|d| std::str::from_utf8(d).ok()?.parse().ok())
                .unwrap_or_else(|| panic!("seed {SEED:#x} cycle {cycle}: unexpected key {key:?}"));
            let value = it
                .value()
                .unwrap_or_else(|e| panic!("seed {SEED:#x} cycle {cycle}: value of {key:?}: {e}"));
            found[thread].insert(key, value);
            it.next();
        }
        it.status().expect("iterator status");
        drop(it);
        for t in 0..THREADS as usize {
            // The prefixes the contract allows: from what must have survived up to every
            // operation begun.
            let start = next[t];
            let floor = if write_through {
                acked_upto[t]
            } else {
                durable[t]
            };
            let upper = began[t].map_or(start, |n| n + 1).max(acked_upto[t]);
            let mut state = models[t].clone();
            let mut matched = None;
            for p in start..=upper {
                if p > start {
                    apply(&mut state, &thread_op(t as u64, p - 1));
                }
                if p >= floor && state == found[t] {
                    matched = Some((p, state.clone()));
                }
            }
            let Some((p, state)) = matched else {
                let lost = (models[t].iter())
                    .filter(|(k, v)| found[t].get(*k) != Some(*v))
                    .count();
                panic!(
                    "seed {SEED:#x} cycle {cycle}, thread {t} (write-through: {write_through}): \
                     no prefix of operations {start}..={upper} that keeps {floor}.. matches the \
                     database \
                     ({lost} keys differ from the state at {start}; deleted ones back or a \
                     hole)"
                );
            };
            buffered_lost += acked_upto[t].saturating_sub(p);
            models[t] = state;
            next[t] = p;
        }
        db.close().expect("close");
    }
    recoveries.sort();
    // A child that failed at its first write would match the empty prefix every cycle.
    assert!(
        acked_total >= cycles,
        "only {acked_total} operations acknowledged in {cycles} cycles: the children did \
         not write"
    );
    eprintln!(
        "kill -9 oracle: {cycles} cycles ({write_through_cycles} write-through, {} buffered), \
         {acked_total} acknowledged operations checked ({synced_total} sync), 0 lost that \
         the contract keeps, {buffered_lost} acknowledged buffered operations lost with the \
         buffer, 0 resurrected, 0 holes, 0 failed opens; recovery p50 {:?}, p99 {:?}",
        cycles - write_through_cycles,
        percentile(&recoveries, 0.5),
        percentile(&recoveries, 0.99)
    );
}
