//! Concurrency invariant (Badger's "bank" test): threads move money between accounts with
//! atomic batches while others sum all balances through snapshots and iterators, with
//! flushes, compactions and value-log GC (a loop, and the background thread) running. Every
//! consistent read must see the same total; a snapshot held across GC and compactions must
//! keep reading exactly the balances it first read; and a process killed with SIGKILL in
//! the middle of all that must reopen with the total intact.
//!
//! Long variants: `WISCKEY_BANK_SECS=120 cargo test --release -p wisckey --test bank --
//! --nocapture`; `WISCKEY_BANK_KILL_CYCLES=500 cargo test --release -p wisckey --test bank
//! killed -- --nocapture`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::MemFs;
use wisckey::{Db, GcOptions, Options, ReadOptions, Snapshot, WriteBatch};

mod util;

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

/// Every balance as `snapshot` sees it, by gets and by a scan (which must agree).
fn balances_at(db: &Db, snapshot: &Snapshot) -> Vec<u64> {
    let opts = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..ReadOptions::default()
    };
    let by_gets: Vec<u64> = (0..ACCOUNTS)
        .map(|i| decode(&db.get_opt(key(i), &opts).expect("get").expect("account")))
        .collect();
    let mut it = db.iter(&opts).expect("iter");
    it.seek_to_first();
    let mut by_scan = Vec::new();
    while it.valid() {
        by_scan.push(decode(&it.value().expect("value")));
        it.next();
    }
    it.status().expect("status");
    assert_eq!(by_gets, by_scan, "gets and a scan at one snapshot disagree");
    by_gets
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
    // A snapshot held across transfers, GC and compactions reads what it read first.
    let held = Arc::new(AtomicU64::new(0));
    {
        let (db, stop, held) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&held));
        handles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let snapshot = db.snapshot();
                let first = balances_at(&db, &snapshot);
                assert_eq!(first.iter().sum::<u64>(), expected);
                std::thread::sleep(Duration::from_millis(150));
                assert_eq!(
                    balances_at(&db, &snapshot),
                    first,
                    "a held snapshot read different balances later"
                );
                held.fetch_add(1, Ordering::Relaxed);
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
    let held = held.load(Ordering::Relaxed);
    eprintln!(
        "{t} transfers, {c} consistent reads, {held} snapshots held 150 ms and re-read, \
         {maintenance} flushes/compactions, {collected} segments collected by the GC loop"
    );
    assert!(t > 100 && c > 10 && held > 0, "the test did real work");
    assert!(collected > 0, "the GC loop collected segments");
    assert_eq!(total_by_gets(&db), expected);
}

const KILL_DIR_ENV: &str = "WISCKEY_BANK_KILL_DIR";
/// The child's transfer seed, which the parent derives from its own seed and the cycle.
const CHILD_SEED_ENV: &str = "WISCKEY_BANK_CHILD_SEED";

fn kill_options() -> Options {
    Options {
        vlog_segment_size: 256 << 10,
        memtable_size: 256 << 10,
        gc_space_amp_target: 1.2,
        ..Options::default()
    }
}

/// The child of `transfers_killed_at_random_keep_the_total`: transfers and GC until killed.
#[test]
#[ignore = "the child's body: its parent test runs it (--ignored)"]
fn bank_kill_child() {
    let Ok(dir) = std::env::var(KILL_DIR_ENV) else {
        return; // Not a child.
    };
    let db = Arc::new(Db::open(std::path::Path::new(&dir), kill_options()).expect("child open"));
    {
        let db = Arc::clone(&db);
        std::thread::spawn(move || loop {
            let _ = db.gc(&GcOptions::default());
            std::thread::sleep(Duration::from_millis(5));
        });
    }
    println!("READY");
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let seed: u64 = (std::env::var(CHILD_SEED_ENV).ok())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut rng = SmallRng::seed_from_u64(seed ^ t);
                let mine: Vec<u64> = (0..ACCOUNTS).filter(|i| i % 2 == t).collect();
                loop {
                    let a = mine[rng.gen_range(0..mine.len())];
                    let b = mine[rng.gen_range(0..mine.len())];
                    if a == b {
                        continue;
                    }
                    let ba = decode(&db.get(key(a)).expect("get").expect("a"));
                    let bb = decode(&db.get(key(b)).expect("get").expect("b"));
                    let amount = rng.gen_range(0..=ba.min(50));
                    let mut batch = WriteBatch::new();
                    batch.put(key(a), encode(ba - amount, rng.gen_range(0..3000)));
                    batch.put(key(b), encode(bb + amount, rng.gen_range(0..3000)));
                    db.write(batch).expect("transfer");
                }
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
}

#[test]
fn transfers_killed_at_random_keep_the_total() {
    use std::io::BufRead as _;
    if std::env::var(KILL_DIR_ENV).is_ok() {
        return; // The child runs only `bank_kill_child`.
    }
    let cycles: u64 = std::env::var("WISCKEY_BANK_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("bank");
    {
        let db = Db::open(&dir, kill_options()).expect("open");
        let mut init = WriteBatch::new();
        for i in 0..ACCOUNTS {
            init.put(key(i), encode(START, (i % 3) as usize * 60));
        }
        db.write_opt(init, &wisckey::WriteOptions { sync: true })
            .expect("init");
        db.close().expect("close");
    }
    let expected = ACCOUNTS * START;
    // Fixed in CI; another with WISCKEY_BANK_SEED. Kill timing and the children's thread
    // interleaving still vary between runs.
    let seed: u64 = (std::env::var("WISCKEY_BANK_SEED").ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(99);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut changed = 0;
    let mut previous = vec![START; ACCOUNTS as usize];
    for cycle in 0..cycles {
        let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--ignored",
                "--exact",
                "bank_kill_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(KILL_DIR_ENV, &dir)
            .env(
                CHILD_SEED_ENV,
                (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ cycle).to_string(),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(stdout).lines();
        // libtest prints `test bank_kill_child ... ` on the same line.
        let mut ready = false;
        while let Some(Ok(line)) = lines.next() {
            if line.ends_with("READY") {
                ready = true;
                break;
            }
        }
        // Else the child ended before it opened the database (a panic, say): killing it
        // and checking an untouched database would pass without testing anything.
        assert!(
            ready,
            "seed {seed} cycle {cycle}: the child never opened the database"
        );
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..300)));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let db = Db::open(&dir, kill_options())
            .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: reopen after SIGKILL: {e}"));
        let snapshot = db.snapshot();
        let balances = balances_at(&db, &snapshot);
        assert_eq!(
            balances.iter().sum::<u64>(),
            expected,
            "seed {seed} cycle {cycle}: the total changed across a SIGKILL"
        );
        changed += u64::from(balances != previous);
        previous = balances;
        drop(snapshot);
        db.close().expect("close");
    }
    eprintln!("bank under kill -9: {cycles} cycles, balances moved in {changed}, total intact");
    assert!(
        changed > cycles / 2,
        "seed {seed}: the children made transfers in only {changed} of {cycles} cycles"
    );
}
