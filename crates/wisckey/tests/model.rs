//! Randomized model test: the whole `Db` against a `BTreeMap`.
//!
//! Puts (values from 0 bytes to several MiB, so overwrites switch between inline and
//! pointer values), deletes, atomic batches, point reads, snapshots, forward and backward
//! iteration with seeks and bounds, forced flushes and compactions, value-log GC and
//! clustering passes, clean reopens and reopens after a power cut that follows a sync write
//! (value-log replay) — all interleaved, with every read checked against the model.
//!
//! CI runs a fixed seed. Long variant (documented in README):
//! `WISCKEY_MODEL_SEED=<n> WISCKEY_MODEL_OPS=200000 cargo test --release --test model -- --nocapture`

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::{MemFs, PowerLoss};
use wisckey::{
    Db, GcOptions, Options, ReadOptions, Snapshot, VictimOrder, WriteBatch, WriteOptions,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    // A small key space so that overwrites, deletes and shadowed versions are common; the
    // empty key is part of it.
    let n = rng.gen_range(0..400u32);
    if n == 0 {
        Vec::new()
    } else {
        format!("k{:04}", n * 7 % 400).into_bytes()
    }
}

fn random_value(rng: &mut SmallRng) -> Vec<u8> {
    let len = match rng.gen_range(0..100) {
        0..=9 => 0,
        10..=59 => rng.gen_range(1..64),
        60..=97 => rng.gen_range(64..4096),
        _ => rng.gen_range(64 << 10..3 << 20),
    };
    let fill: u8 = rng.gen();
    let mut v = vec![fill; len];
    if let Some(first) = v.first_mut() {
        *first = rng.gen();
    }
    v
}

fn options(fs: &MemFs) -> Options {
    // Tiny levels and tables, so that the small key space still spreads over several
    // levels and leveled (not only L0 -> L1) compactions and trivial moves happen.
    Options {
        level1_max_bytes: 8 << 10,
        target_file_size: 4 << 10,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

fn check_get(db: &Db, model: &Model, key: &[u8], opts: &ReadOptions, what: &str) {
    let got = db.get_opt(key, opts).expect("get");
    assert_eq!(
        got.as_deref(),
        model.get(key).map(Vec::as_slice),
        "{what}: get({:?})",
        String::from_utf8_lossy(key)
    );
}

/// Scans with random seeks, both directions and random bounds; compares with the model.
fn check_iterator(db: &Db, model: &Model, snapshot: Option<&Snapshot>, rng: &mut SmallRng) {
    let lower = rng.gen_bool(0.3).then(|| random_key(rng));
    let upper = rng.gen_bool(0.3).then(|| random_key(rng));
    let opts = ReadOptions {
        snapshot: snapshot.cloned(),
        lower_bound: lower.clone(),
        upper_bound: upper.clone(),
        // Sometimes scan keys-only: values are then read one by one, never ahead.
        keys_only: rng.gen_bool(0.2),
        // Sometimes a scan-length hint: read-ahead from the seek, stopping at the hint.
        scan_length_hint: rng.gen_bool(0.3).then(|| rng.gen_range(1..80)),
    };
    let in_bounds: Vec<(&Vec<u8>, &Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| lower.as_ref().is_none_or(|l| *k >= l))
        .filter(|(k, _)| upper.as_ref().is_none_or(|u| *k < u))
        .collect();
    let mut it = db.iter(&opts).expect("iter");
    let start_key = random_key(rng);
    let (mut pos, forward_first) = match rng.gen_range(0..3) {
        0 => {
            it.seek_to_first();
            (0isize, true)
        }
        1 => {
            it.seek_to_last();
            (in_bounds.len() as isize - 1, false)
        }
        _ => {
            it.seek(&start_key);
            let p = in_bounds.partition_point(|(k, _)| k.as_slice() < start_key.as_slice());
            (p as isize, true)
        }
    };
    let _ = forward_first;
    for _ in 0..rng.gen_range(1..40) {
        let expected = usize::try_from(pos).ok().and_then(|p| in_bounds.get(p));
        match expected {
            Some((k, v)) => {
                assert!(
                    it.valid(),
                    "iterator ended early; expected {k:?}; {:?}",
                    it.status()
                );
                assert_eq!(it.key(), k.as_slice(), "iterator key");
                assert_eq!(&it.value().expect("value"), *v, "iterator value of {k:?}");
            }
            None => {
                assert!(!it.valid(), "iterator should be exhausted at {pos}");
                it.status().expect("iterator status");
                break;
            }
        }
        if rng.gen_bool(0.7) {
            it.next();
            pos += 1;
        } else {
            it.prev();
            pos -= 1;
        }
    }
    it.status().expect("iterator status");
}

fn run_model(seed: u64, ops: u64, dir: &Path) {
    eprintln!("model test seed = {seed} (set WISCKEY_MODEL_SEED to reproduce), ops = {ops}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut fs = MemFs::new();
    let mut db = Db::open(dir, options(&fs)).expect("open");
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut counts = BTreeMap::<&str, u64>::new();
    let mut segments_collected = 0u64;
    for step in 0..ops {
        let roll = rng.gen_range(0..1000);
        let op = match roll {
            0..=399 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).expect("put");
                model.insert(k, v);
                "put"
            }
            400..=499 => {
                let k = random_key(&mut rng);
                db.delete(&k).expect("delete");
                model.remove(&k);
                "delete"
            }
            500..=559 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = random_key(&mut rng);
                    if rng.gen_bool(0.7) {
                        let v = random_value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        batch.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(batch).expect("write batch");
                "batch"
            }
            560..=799 => {
                let k = random_key(&mut rng);
                check_get(&db, &model, &k, &ReadOptions::default(), "latest");
                "get"
            }
            800..=829 => {
                if snapshots.len() >= 3 {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
                snapshots.push((db.snapshot(), model.clone()));
                "snapshot"
            }
            830..=889 => {
                if let Some((snap, snap_model)) =
                    snapshots.get(rng.gen_range(0..snapshots.len().max(1)))
                {
                    let k = random_key(&mut rng);
                    let opts = ReadOptions {
                        snapshot: Some(snap.clone()),
                        ..ReadOptions::default()
                    };
                    check_get(&db, snap_model, &k, &opts, "snapshot");
                }
                "snapshot-get"
            }
            890..=959 => {
                if !snapshots.is_empty() && rng.gen_bool(0.3) {
                    let (snap, snap_model) = &snapshots[rng.gen_range(0..snapshots.len())];
                    check_iterator(&db, snap_model, Some(snap), &mut rng);
                } else {
                    check_iterator(&db, &model, None, &mut rng);
                }
                "iterate"
            }
            960..=979 => {
                db.flush().expect("flush");
                "flush"
            }
            990..=991 => {
                // A clustering pass (GC's relocation driven by a key-order scan), over all
                // keys or a random range, beside snapshots: what they read must not change.
                let done = if rng.gen_bool(0.5) {
                    db.cluster_values::<&[u8], _>(..)
                } else {
                    let a = random_key(&mut rng);
                    let b = random_key(&mut rng);
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.cluster_values(lo..hi)
                };
                let done = done.expect("cluster_values");
                // Every value in the log was kept, moved, or found changed (background GC
                // may move one first); the reads after this check what they hold.
                assert_eq!(
                    done.values_kept + done.values_relocated + done.values_changed,
                    done.values_in_log,
                    "{done:?}"
                );
                assert!(done.values_in_log <= done.keys_examined, "{done:?}");
                "cluster"
            }
            986..=989 => {
                // Value-log GC interleaved with everything else, snapshots and iterators
                // included (it must keep what they can read).
                let gc_options = GcOptions {
                    compact_first: rng.gen_bool(0.5),
                    space_amp_target: if rng.gen_bool(0.5) { 1.0 } else { 1.3 },
                    min_dead_fraction: 0.01,
                    order: Some(if rng.gen_bool(0.5) {
                        VictimOrder::CostBenefit
                    } else {
                        VictimOrder::OldestFirst
                    }),
                };
                let done = db.gc(&gc_options).expect("gc");
                segments_collected += done.segments_collected;
                "gc"
            }
            980..=985 => {
                let a = random_key(&mut rng);
                let b = random_key(&mut rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                if rng.gen_bool(0.5) {
                    db.compact_range(Some(&lo), Some(&hi))
                        .expect("compact_range");
                } else {
                    db.compact_range(None, None).expect("compact all");
                }
                "compact"
            }
            _ => {
                // Reopen: snapshots do not survive it. Either a clean close (which flushes
                // the memtable), or a power cut right after a sync write: then the value log
                // from the persisted head is replayed, and every write must still be there.
                snapshots.clear();
                if rng.gen_bool(0.5) {
                    db.close().expect("close");
                    db = Db::open(dir, options(&fs)).expect("reopen");
                    "reopen"
                } else {
                    db.put_opt(b"sync-marker", b"", &WriteOptions { sync: true })
                        .expect("sync write");
                    model.insert(b"sync-marker".to_vec(), Vec::new());
                    fs = fs.power_loss_image(PowerLoss::DropUnsynced);
                    drop(db);
                    db = Db::open(dir, options(&fs)).expect("reopen after power loss");
                    "power-loss-reopen"
                }
            }
        };
        *counts.entry(op).or_default() += 1;
        if step % 997 == 0 {
            for k in model.keys().take(50) {
                check_get(&db, &model, k, &ReadOptions::default(), "sweep");
            }
        }
    }
    // Final full comparison, after a reopen.
    snapshots.clear();
    db.close().expect("close");
    let db = Db::open(dir, options(&fs)).expect("final reopen");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut seen = Model::new();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().expect("value"));
        it.next();
    }
    it.status().expect("status");
    drop(it);
    assert_eq!(seen.len(), model.len(), "final key count");
    assert!(seen == model, "final contents differ from the model");
    let levels = db.level_file_counts();
    eprintln!("operation counts: {counts:?}; tables per level at end: {levels:?}");
    assert!(
        levels[2..].iter().any(|&n| n > 0),
        "the run must push data below L1: {levels:?}"
    );
    assert!(
        segments_collected > 0,
        "the run must collect value-log segments ({counts:?})"
    );
    assert!(
        [
            "compact",
            "reopen",
            "power-loss-reopen",
            "gc",
            "cluster",
            "snapshot-get"
        ]
        .iter()
        .all(|op| counts.get(op).copied().unwrap_or(0) > 0),
        "the run must exercise compaction, reopen, replay after a power cut, GC, clustering \
         and reads at a snapshot ({counts:?})"
    );
    db.close().expect("close");
}

#[test]
fn db_matches_btreemap_model() {
    let seed = env_u64("WISCKEY_MODEL_SEED", 0x5eed_2026);
    let ops = env_u64("WISCKEY_MODEL_OPS", 20_000);
    run_model(seed, ops, Path::new("/model-db"));
}
