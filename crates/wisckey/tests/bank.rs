//! Concurrency invariant (Badger's "bank" test): threads move money between accounts with
//! atomic batches while others sum all balances through snapshots and iterators, with
//! flushes, compactions and value-log GC (a loop, and the background thread) running. Every
//! consistent read must see the same total.
//!
//! Long variant: `WISCKEY_BANK_SECS=120 cargo test --release --test bank -- --nocapture`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::MemFs;
use wisckey::{Db, GcOptions, Options, ReadOptions, WriteBatch};

const ACCOUNTS: u64 = 200;
const START: u64 = 1000;

fn key(i: u64) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

/// Balances are padded so that some are inline and some are value-log pointers.
fn encode(balance: u64, pad: usize) -> Vec<u8> {
    let mut v = balance.to_le_bytes().to_vec();
    v.resize(8 + pad, 0xab);
    v
}

fn decode(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("8-byte balance"))
}

fn total_by_gets(db: &Db) -> u64 {
    let opts = ReadOptions {
        snapshot: Some(db.snapshot()),
        ..ReadOptions::default()
    };
    (0..ACCOUNTS)
        .map(|i| {
            decode(
                &db.get_opt(key(i), &opts)
                    .expect("get")
                    .expect("account exists"),
            )
        })
        .sum()
}

fn total_by_scan(db: &Db, reverse: bool) -> u64 {
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    let mut total = 0;
    let mut n = 0;
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        total += decode(&it.value().expect("value"));
        n += 1;
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().expect("status");
    assert_eq!(n, ACCOUNTS, "every account is seen exactly once");
    total
}

#[test]
fn concurrent_transfers_preserve_the_total() {
    let secs = std::env::var("WISCKEY_BANK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/bank", Options::small_for_tests(Arc::new(fs))).expect("open"));
    let mut init = WriteBatch::new();
    for i in 0..ACCOUNTS {
        init.put(key(i), encode(START, (i % 3) as usize * 60));
    }
    db.write(init).expect("init");
    let expected = ACCOUNTS * START;

    let stop = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(AtomicU64::new(0));
    let checks = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    // Transfers read balances outside any lock, so each writer owns a disjoint set of
    // accounts: its reads are then always current and the batch keeps the total.
    for t in 0..2u64 {
        let (db, stop, transfers) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&transfers));
        handles.push(std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(1000 + t);
            let mine: Vec<u64> = (0..ACCOUNTS).filter(|i| i % 2 == t).collect();
            while !stop.load(Ordering::Relaxed) {
                let a = mine[rng.gen_range(0..mine.len())];
                let b = mine[rng.gen_range(0..mine.len())];
                if a == b {
                    continue;
                }
                let ba = decode(&db.get(key(a)).expect("get").expect("a"));
                let bb = decode(&db.get(key(b)).expect("get").expect("b"));
                let amount = rng.gen_range(0..=ba.min(50));
                let mut batch = WriteBatch::new();
                batch.put(key(a), encode(ba - amount, rng.gen_range(0..200)));
                batch.put(key(b), encode(bb + amount, rng.gen_range(0..200)));
                db.write(batch).expect("transfer");
                transfers.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for r in 0..2u64 {
        let (db, stop, checks) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&checks));
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let total = match checks.load(Ordering::Relaxed) % 3 {
                    0 => total_by_gets(&db),
                    1 => total_by_scan(&db, r == 0),
                    _ => total_by_scan(&db, r == 1),
                };
                assert_eq!(total, expected, "a consistent read saw a different total");
                checks.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Value-log GC in a loop (background GC runs too, by default).
    let collected = Arc::new(AtomicU64::new(0));
    {
        let (db, stop, collected) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&collected));
        handles.push(std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let options = GcOptions {
                    compact_first: round % 3 == 0,
                    ..GcOptions::default()
                };
                let done = db.gc(&options).expect("gc");
                collected.fetch_add(done.segments_collected, Ordering::Relaxed);
                round += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut maintenance = 0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        if maintenance % 2 == 0 {
            db.flush().expect("flush");
        } else {
            db.compact_range(None, None).expect("compact");
        }
        maintenance += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("thread");
    }
    let (t, c) = (
        transfers.load(Ordering::Relaxed),
        checks.load(Ordering::Relaxed),
    );
    let collected = collected.load(Ordering::Relaxed);
    eprintln!(
        "{t} transfers, {c} consistent reads, {maintenance} flushes/compactions, \
         {collected} segments collected by the GC loop"
    );
    assert!(t > 100 && c > 10, "the test did real work");
    assert!(collected > 0, "the GC loop collected segments");
    assert_eq!(total_by_gets(&db), expected);
}
