//! Reads take no lock: they load the published memtables and version and check that the
//! set was still current when they read the sequence number. These tests race readers
//! against a writer whose tiny memtable is switched and flushed every few puts (and against
//! the compactions that follow), and check that no read (`get`, `multi_get` after
//! `prefetch_keys`, an iterator) ever misses an acknowledged write or goes back in time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::MemFs;
use wisckey::{Db, Options, ReadOptions};

const SEED: u64 = 20261126;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Values of 100 bytes go to the value log; those of 20 stay inline: both kinds are read.
fn value(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(if i % 2 == 0 { 100 } else { 20 }, (i % 251) as u8);
    v
}

fn small_memtable_db() -> Arc<Db> {
    let options = Options {
        memtable_size: 4 << 10,
        ..Options::small_for_tests(Arc::new(MemFs::new()))
    };
    Arc::new(Db::open("/db", options).expect("open"))
}

/// A writer puts keys 0, 1, 2, ... and publishes how far it got after each put returns;
/// readers read the newest acknowledged key, a random older one, and (by an iterator) the
/// newest again. Every one must be there with its value.
#[test]
fn reads_racing_memtable_switches_and_flushes_never_miss_an_acknowledged_put() {
    const PUTS: u64 = 6000;
    const READERS: u64 = 3;
    let db = small_memtable_db();
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    db.put(key(0), value(0)).expect("first put");
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (db, acked, done) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&done));
            std::thread::spawn(move || {
                let seed = SEED + r;
                let mut rng = SmallRng::seed_from_u64(seed);
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let newest = acked.load(Ordering::Acquire);
                    let older = rng.gen_range(0..=newest);
                    for i in [newest, older] {
                        assert_eq!(
                            db.get(key(i)).expect("get").as_deref(),
                            Some(&value(i)[..]),
                            "seed {seed}: key {i} acknowledged (newest {newest}) but not read back"
                        );
                    }
                    // The batched path too: touched first (`prefetch_keys`), then
                    // `multi_get`, over memtables that are switched under it.
                    let batch = [key(newest), key(older), key(newest + 1_000_000)];
                    db.prefetch_keys(&batch);
                    let got = db.multi_get(&batch).expect("multi_get");
                    assert_eq!(
                        got,
                        [Some(value(newest)), Some(value(older)), None],
                        "seed {seed}: multi_get of keys {newest} and {older}"
                    );
                    let mut it = db.iter(&ReadOptions::default()).expect("iter");
                    it.seek(&key(newest));
                    assert!(it.valid(), "seed {seed}: iterator lost key {newest}");
                    assert_eq!(it.key(), &key(newest)[..], "seed {seed}");
                    assert_eq!(it.value().expect("value"), value(newest), "seed {seed}");
                    reads += 6;
                }
                reads
            })
        })
        .collect();
    for i in 1..PUTS {
        db.put(key(i), value(i)).expect("put");
        acked.store(i, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    let reads: u64 = readers
        .into_iter()
        .map(|h| h.join().expect("reader thread"))
        .sum();
    assert!(reads > 0, "the readers ran");
    let stats = db.stats().expect("stats");
    let tables: usize = stats.level_files.iter().sum();
    assert!(tables > 0, "the memtable was flushed while reads ran");
}

/// One key overwritten with an increasing counter: a read that starts after put `n` was
/// acknowledged returns `n` or later, never an earlier value from a memtable or table the
/// read should already have looked past.
#[test]
fn reads_of_an_overwritten_key_never_go_back_in_time() {
    const PUTS: u64 = 6000;
    let db = small_memtable_db();
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    db.put("counter", value(0)).expect("first put");
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, acked, done) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut last_seen = 0;
                while !done.load(Ordering::Acquire) {
                    let floor = acked.load(Ordering::Acquire);
                    let read = db.get("counter").expect("get").expect("counter exists");
                    let seen = u64::from_le_bytes(read[..8].try_into().expect("8 bytes"));
                    assert!(seen >= floor, "read {seen} after {floor} was acknowledged");
                    assert!(seen >= last_seen, "read {seen} after reading {last_seen}");
                    assert_eq!(read, value(seen));
                    last_seen = seen;
                }
            })
        })
        .collect();
    for i in 1..PUTS {
        db.put("counter", value(i)).expect("put");
        acked.store(i, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    for h in readers {
        h.join().expect("reader thread");
    }
}
