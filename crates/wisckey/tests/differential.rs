//! Differential test (issue 12, item 6): one seeded operation log, run under very different
//! options — every value in the log or every value inline, tiny or large segments, GC on
//! or off, scan read-ahead on or off — must give identical answers to every read, and the
//! answers of a `BTreeMap` model. Reads go to the current state and through a snapshot held
//! across later writes, flushes, compactions and GC (dropped at a reopen).
//!
//! Long variant: `WISCKEY_DIFF_SEED=<n> WISCKEY_DIFF_OPS=50000 cargo test --release -p wisckey
//! --test differential -- --nocapture`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::MemFs;
use wisckey::{Db, GcOptions, Options, ReadOptions, Snapshot, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// Maintenance that must not change any answer.
    Flush,
    Compact,
    Gc,
    Reopen,
    /// Read: every key of a range, and a scan from a key with a limit.
    Check(u32),
    /// Take a snapshot (replacing the one held), and read through the one held.
    TakeSnapshot,
    CheckSnapshot(u32),
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Values of every size class: empty, inline, pointers, several blocks.
fn value(rng: &mut SmallRng) -> Vec<u8> {
    let len = match rng.gen_range(0..20) {
        0 => 0,
        1..=6 => rng.gen_range(1..64),
        7..=16 => rng.gen_range(64..2000),
        _ => rng.gen_range(4000..20000),
    };
    let fill = rng.gen::<u8>();
    let mut v = vec![fill; len];
    if len >= 8 {
        v[..8].copy_from_slice(&rng.gen::<u64>().to_le_bytes());
    }
    v
}

/// Keys: a few hot ones overwritten often, and a wider range.
fn pick_key(rng: &mut SmallRng) -> Vec<u8> {
    if rng.gen_bool(0.3) {
        key(rng.gen_range(0..20))
    } else {
        key(rng.gen_range(0..600))
    }
}

fn op_log(seed: u64, n: u64) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| match rng.gen_range(0..1000) {
            0..=549 => Op::Put(pick_key(&mut rng), value(&mut rng)),
            550..=699 => Op::Delete(pick_key(&mut rng)),
            700..=849 => Op::Batch(
                (0..rng.gen_range(1..8))
                    .map(|_| {
                        let k = pick_key(&mut rng);
                        let v = rng.gen_bool(0.8).then(|| value(&mut rng));
                        (k, v)
                    })
                    .collect(),
            ),
            850..=859 => Op::Flush,
            860..=864 => Op::Compact,
            865..=869 => Op::Gc,
            870..=872 => Op::Reopen,
            873..=880 => Op::TakeSnapshot,
            881..=900 => Op::CheckSnapshot(rng.gen_range(0..600)),
            _ => Op::Check(rng.gen_range(0..600)),
        })
        .collect()
}

/// Everything the reads of one run answered, in order.
/// The answers of one run, and the segments its explicit GC steps collected.
fn run(ops: &[Op], options: &dyn Fn(&MemFs) -> Options) -> (Vec<String>, u64) {
    let fs = MemFs::new();
    let dir = Path::new("/diff-db");
    let mut db = Db::open(dir, options(&fs)).expect("open");
    let mut answers = Vec::new();
    let mut collected = 0;
    let mut snapshot: Option<Snapshot> = None;
    for op in ops {
        match op {
            Op::Put(k, v) => db.put(k, v).expect("put"),
            Op::Delete(k) => db.delete(k).expect("delete"),
            Op::Batch(entries) => {
                let mut batch = WriteBatch::new();
                for (k, v) in entries {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                db.write(batch).expect("batch");
            }
            Op::Flush => db.flush().expect("flush"),
            Op::Compact => db.compact_range(None, None).expect("compact"),
            Op::Gc => {
                collected += db.gc(&GcOptions::default()).expect("gc").segments_collected;
            }
            Op::Reopen => {
                snapshot = None;
                db.close().expect("close");
                db = Db::open(dir, options(&fs)).expect("reopen");
            }
            Op::Check(from) => read_answers(&db, &ReadOptions::default(), *from, &mut answers),
            Op::TakeSnapshot => snapshot = Some(db.snapshot()),
            Op::CheckSnapshot(from) => match &snapshot {
                Some(held) => {
                    let opts = ReadOptions {
                        snapshot: Some(held.clone()),
                        ..ReadOptions::default()
                    };
                    answers.push("at the snapshot".to_string());
                    read_answers(&db, &opts, *from, &mut answers);
                }
                None => answers.push("no snapshot".to_string()),
            },
        }
    }
    // The final state, whole.
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    while it.valid() {
        let v = it.value().expect("value");
        answers.push(format!(
            "final {}: {}",
            String::from_utf8_lossy(it.key()),
            digest(&v)
        ));
        it.next();
    }
    it.status().expect("status");
    drop(it);
    db.close().expect("close");
    (answers, collected)
}

/// Gets of 15 keys from `from` and a scan of up to 40 entries from it, at `opts`.
fn read_answers(db: &Db, opts: &ReadOptions, from: u32, answers: &mut Vec<String>) {
    for i in from..(from + 15).min(600) {
        let got = db.get_opt(key(i), opts).expect("get");
        answers.push(format!("get {i}: {:?}", got.map(|v| digest(&v))));
    }
    let mut it = db.iter(opts).expect("iter");
    it.seek(&key(from));
    let mut n = 0;
    while it.valid() && n < 40 {
        let v = it.value().expect("value");
        answers.push(format!(
            "scan {}: {}",
            String::from_utf8_lossy(it.key()),
            digest(&v)
        ));
        it.next();
        n += 1;
    }
    it.status().expect("status");
}

/// The model's answers to [`read_answers`].
fn model_read_answers(model: &Model, from: u32, answers: &mut Vec<String>) {
    for i in from..(from + 15).min(600) {
        let got = model.get(&key(i));
        answers.push(format!("get {i}: {:?}", got.map(|v| digest(v))));
    }
    for (k, v) in model.range(key(from)..).take(40) {
        answers.push(format!(
            "scan {}: {}",
            String::from_utf8_lossy(k),
            digest(v)
        ));
    }
}

/// What a `BTreeMap` answers to the same log.
fn model_answers(ops: &[Op]) -> Vec<String> {
    let mut model = Model::new();
    let mut answers = Vec::new();
    let mut snapshot: Option<Model> = None;
    for op in ops {
        match op {
            Op::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                model.remove(k);
            }
            Op::Batch(entries) => {
                for (k, v) in entries {
                    match v {
                        Some(v) => model.insert(k.clone(), v.clone()),
                        None => model.remove(k),
                    };
                }
            }
            Op::Flush | Op::Compact | Op::Gc => {}
            Op::Reopen => snapshot = None,
            Op::Check(from) => model_read_answers(&model, *from, &mut answers),
            Op::TakeSnapshot => snapshot = Some(model.clone()),
            Op::CheckSnapshot(from) => match &snapshot {
                Some(held) => {
                    answers.push("at the snapshot".to_string());
                    model_read_answers(held, *from, &mut answers);
                }
                None => answers.push("no snapshot".to_string()),
            },
        }
    }
    for (k, v) in &model {
        answers.push(format!(
            "final {}: {}",
            String::from_utf8_lossy(k),
            digest(v)
        ));
    }
    answers
}

/// A value's length and checksum: enough to tell any two values apart in a report.
fn digest(v: &[u8]) -> String {
    format!("{}#{:08x}", v.len(), crc32c::crc32c(v))
}

#[test]
fn one_operation_log_gives_the_same_answers_under_very_different_options() {
    let seed = env_u64("WISCKEY_DIFF_SEED", 2026);
    let n = env_u64("WISCKEY_DIFF_OPS", 3000);
    eprintln!("differential test seed = {seed}, ops = {n}");
    let ops = op_log(seed, n);
    let expected = model_answers(&ops);
    type Configure = Box<dyn Fn(&MemFs) -> Options>;
    let configs: Vec<(&str, Configure)> = vec![
        (
            "every value in the log, tiny segments, eager GC, read-ahead on",
            Box::new(|fs: &MemFs| Options {
                value_threshold: 0,
                vlog_segment_size: 16 << 10,
                gc_space_amp_target: 1.1,
                scan_readahead_entries: 64,
                ..Options::small_for_tests(Arc::new(fs.clone()))
            }),
        ),
        (
            "64-byte threshold, large segments, GC off, read-ahead off",
            Box::new(|fs: &MemFs| Options {
                value_threshold: 64,
                vlog_segment_size: 64 << 20,
                gc_space_amp_target: f64::INFINITY,
                scan_readahead_entries: 0,
                ..Options::small_for_tests(Arc::new(fs.clone()))
            }),
        ),
        (
            "every value inline, default segments and GC",
            Box::new(|fs: &MemFs| Options {
                value_threshold: usize::MAX,
                ..Options::small_for_tests(Arc::new(fs.clone()))
            }),
        ),
        (
            "default options (64 MiB memtable: no flush unless asked)",
            Box::new(|fs: &MemFs| Options::default().with_fs(Arc::new(fs.clone()))),
        ),
    ];
    for (i, (name, configure)) in configs.iter().enumerate() {
        let (answers, collected) = run(&ops, configure.as_ref());
        // The tiny segments' run must collect, or its GC paths went untested.
        assert!(
            i != 0 || collected > 0,
            "seed {seed}, options \"{name}\": the GC steps collected nothing"
        );
        if let Some(i) =
            (0..answers.len().max(expected.len())).find(|&i| answers.get(i) != expected.get(i))
        {
            panic!(
                "seed {seed}, options \"{name}\": answer {i} differs: got {:?}, the model says {:?}",
                answers.get(i),
                expected.get(i)
            );
        }
        let at_snapshot = answers.iter().filter(|a| *a == "at the snapshot").count();
        assert!(at_snapshot > 0, "the log reads through snapshots");
        eprintln!(
            "{name}: {} answers ({at_snapshot} reads through a held snapshot), all as the model",
            answers.len()
        );
    }
}
