//! `Options::auto_cluster_ratio`: key ranges that forward scans read out of log order again
//! and again are clustered by the GC thread, after which the same scans read runs; ranges
//! scanned once, point reads and keys-only scans rewrite nothing; the option and background
//! GC being off turn it off; writers racing the background passes, and a close in the
//! middle of them, lose nothing.

mod common;
#[path = "common/shuffled.rs"]
mod shuffled;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{HookFs, LogReads};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shuffled::{key, load_shuffled, read_all, scan_reads, value, Model};
use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Options, ReadOptions};

/// Keys of a test: enough that scans of them pass the heat's first threshold (4,096
/// scattered reads in one range) within a few dozen scans.
const KEYS: u32 = 3000;

fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut options = Options::small_for_tests(fs);
    // Background GC runs (auto clustering needs it) but never finds the log over target,
    // so the value-log reads counted below are the scans' and the passes' own.
    options.gc_space_amp_target = 100.0;
    options.auto_cluster_ratio = 1.0;
    options
}

fn passes(db: &Db) -> u64 {
    db.stats().expect("stats").auto_cluster.passes
}

/// After a while for the GC thread to act, no range was estimated or clustered.
fn assert_nothing_looked_at(db: &Db, after: &str) {
    std::thread::sleep(Duration::from_millis(1500));
    let totals = db.stats().expect("stats").auto_cluster;
    assert_eq!(
        (totals.ranges_estimated, totals.passes),
        (0, 0),
        "after {after}: {totals:?}"
    );
}

/// Waits until nothing happens in the background for a while: no estimate or pass
/// started or finished, and no value-log read (a pass reads all along).
fn wait_for_quiet(db: &Db, fs: &HookFs<LogReads>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let state = || {
        let totals = db.stats().expect("stats").auto_cluster;
        let reads = fs.hooks.reads.load(Ordering::SeqCst);
        (totals.ranges_estimated, totals.passes, reads)
    };
    let mut seen = state();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = state();
        if now == seen {
            return;
        }
        assert!(Instant::now() < deadline, "background work never stopped");
        seen = now;
    }
}

#[test]
fn ranges_scanned_again_and_again_are_clustered_in_the_background() {
    let fs = HookFs::new(LogReads::default());
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()))).expect("open");
    let model = load_shuffled(&db, KEYS, 7);
    let first = scan_reads(&db, &fs, &model);
    assert!(
        first >= 2900,
        "a shuffled load is read value by value: {first}"
    );
    assert_eq!(passes(&db), 0, "one scan is not worth a pass");

    // Scan until the scans read runs (every range passed), or give up.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut scans = 1;
    let mut last = first;
    while last * 8 >= first {
        assert!(
            Instant::now() < deadline,
            "after {scans} scans a scan still took {last} value-log reads (stats: {:?})",
            db.stats().expect("stats").auto_cluster
        );
        std::thread::sleep(Duration::from_millis(5));
        last = scan_reads(&db, &fs, &model);
        scans += 1;
    }
    wait_for_quiet(&db, &fs);
    let totals = db.stats().expect("stats").auto_cluster;
    eprintln!("{scans} scans; first {first} value-log reads, then {last}; {totals:?}");
    assert!(totals.passes >= 1 && totals.ranges_estimated >= totals.passes);
    assert!(
        totals.work.values_relocated >= 2500,
        "the passes moved most values: {totals:?}"
    );
    let settled = scan_reads(&db, &fs, &model);
    assert!(settled * 8 < first, "{settled} reads once quiet");

    // Clustered ranges are read in runs now and earn no further pass: after at most a few
    // rounds of scans (a range that had few scattered reads may still earn its pass), the
    // pass count stops.
    let mut rounds = 0;
    loop {
        let before = passes(&db);
        for _ in 0..20 {
            assert_eq!(read_all(&db), model);
        }
        wait_for_quiet(&db, &fs);
        if passes(&db) == before {
            break;
        }
        rounds += 1;
        assert!(
            rounds < 5,
            "passes keep coming: {:?}",
            db.stats().expect("stats").auto_cluster
        );
    }
    let clustered = scan_reads(&db, &fs, &model);
    assert!(clustered * 8 < first, "{clustered} reads once clustered");

    db.close().expect("close");
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()))).expect("reopen");
    assert_eq!(read_all(&db), model);
    assert!(db.check().expect("check").is_ok());
}

#[test]
fn point_reads_keys_only_scans_checks_and_single_scans_rewrite_nothing() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open(Path::new("/db"), options(Arc::clone(&fs))).expect("open");
    let model = load_shuffled(&db, KEYS, 11);
    let log = |db: &Db| db.stats().expect("stats").value_log.log_bytes;
    let before = log(&db);
    let mut rng = SmallRng::seed_from_u64(5);
    for _ in 0..20_000 {
        let i = rng.gen_range(0..KEYS);
        assert_eq!(db.get(key(i)).expect("get"), model.get(&key(i)).cloned());
    }
    let keys_only = ReadOptions {
        keys_only: true,
        ..ReadOptions::default()
    };
    for _ in 0..20 {
        let keys: Vec<Vec<u8>> = db
            .range_opt::<&[u8], _>(.., &keys_only)
            .expect("range")
            .keys()
            .collect::<wisckey::Result<_>>()
            .expect("keys");
        assert_eq!(keys.len(), model.len());
    }
    // Checks read every value, several times what a range needs before a look, but are
    // no user's scan.
    for _ in 0..5 {
        assert!(db.check().expect("check").is_ok());
    }
    // One full scan: fewer scattered reads than any range needs before a look.
    assert_eq!(read_all(&db), model);
    assert_nothing_looked_at(&db, "point reads, keys-only scans, checks, one scan");
    assert_eq!(log(&db), before, "something was rewritten");
}

#[test]
fn nothing_is_clustered_with_the_ratio_zero_or_background_gc_off() {
    for (ratio, gc_target) in [(0.0, 100.0), (1.0, f64::INFINITY)] {
        let fs = HookFs::new(LogReads::default());
        let mut options = options(Arc::new(fs.clone()));
        options.auto_cluster_ratio = ratio;
        options.gc_space_amp_target = gc_target;
        let db = Db::open(Path::new("/db"), options).expect("open");
        let model = load_shuffled(&db, KEYS, 3);
        for scan in 0..30 {
            let reads = scan_reads(&db, &fs, &model);
            assert!(
                reads >= 2900,
                "scan {scan} read runs: {reads} value-log reads"
            );
        }
        assert_nothing_looked_at(&db, &format!("ratio {ratio}, GC target {gc_target}"));
        db.close().expect("close");
    }
    let mut bad = Options::small_for_tests(Arc::new(MemFs::new()));
    for ratio in [-1.0, f64::NAN, f64::INFINITY] {
        bad.auto_cluster_ratio = ratio;
        assert!(
            matches!(bad.validate(), Err(wisckey::Error::InvalidArgument(_))),
            "{ratio}"
        );
    }
}

/// Writers overwrite and delete while scans keep triggering background passes; the
/// database is closed while passes may still run. Every newer write survives (a relocation
/// whose key changed since the pass's snapshot is dropped), before and after the reopen.
#[test]
fn writes_racing_background_passes_and_a_close_lose_nothing() {
    let seed = 20261128;
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let mut options = options(Arc::clone(&fs));
    // Clusters at the first look: more passes race the writers.
    options.auto_cluster_ratio = 0.1;
    let db = Arc::new(Db::open(Path::new("/db"), options.clone()).expect("open"));
    let mut model = load_shuffled(&db, KEYS, 13);
    let scanner = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut scans = 0u32;
            let started = Instant::now();
            // Until four passes raced the writers; on a loaded machine, one pass and ten
            // seconds; a minute without one fails below. (Bounded by scans instead, a
            // loaded CI machine spent minutes here.)
            loop {
                let (done, elapsed) = (passes(&db), started.elapsed());
                if done >= 4
                    || (done >= 1 && elapsed > Duration::from_secs(10))
                    || elapsed > Duration::from_secs(60)
                {
                    break;
                }
                let mut last: Option<Vec<u8>> = None;
                for entry in db.range::<&[u8], _>(..).expect("range") {
                    let (k, _) = entry.expect("scan entry");
                    assert!(last.as_ref().is_none_or(|l| *l < k), "keys out of order");
                    last = Some(k);
                }
                scans += 1;
            }
            scans
        })
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut round = 1;
    while !scanner.is_finished() {
        let i = rng.gen_range(0..KEYS);
        if rng.gen_bool(0.2) {
            db.delete(key(i)).expect("delete");
            model.remove(&key(i));
        } else {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        round += 1;
        if round % 256 == 0 {
            // Leave the GC thread room on a small machine: the point is racing, not starving.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let scans = scanner.join().expect("scanner");
    let totals = db.stats().expect("stats").auto_cluster;
    eprintln!("seed {seed}: {round} writes, {scans} scans, {totals:?}");
    // How many passes run depends on the machine's pace (compactions the writers cause
    // rename ranges and restart their counts); at least one raced the writers.
    assert!(totals.passes >= 1, "seed {seed}: no pass ran: {totals:?}");
    assert!(read_all(&db) == model, "seed {seed}: the model differs");
    // More scans so that a pass is likely running when the database closes.
    for _ in 0..5 {
        assert!(read_all(&db) == model, "seed {seed}");
    }
    Arc::into_inner(db)
        .expect("the only handle")
        .close()
        .expect("close");
    let db = Db::open(Path::new("/db"), options).expect("reopen");
    assert!(read_all(&db) == model, "seed {seed}: differs after reopen");
    assert!(db.check().expect("check").is_ok(), "seed {seed}");
}

/// Slows the GC thread's value-log reads, so that background GC collects more slowly than
/// a writer makes segments dead (as on a loaded machine).
#[derive(Debug, Default)]
struct SlowGcLogReads;

impl common::Hooks for SlowGcLogReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        let gc_thread = std::thread::current().name() == Some("wisckey-gc");
        if gc_thread && path.extension().is_some_and(|e| e == "vlog") {
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }
}

/// Defect: under sustained overwrites a background GC round found a segment newly dead at
/// every step and never ended, and the GC thread clusters only between rounds: no pass
/// ran while the writes lasted (on a loaded machine the racing test above scanned for
/// minutes). A round now steps aside, once it has collected, for a range that is due.
/// Here a writer overwrites another key range over and over in key order (each run of it
/// leaves the previous run's segments wholly dead: victims at any target) while scans
/// read the shuffled range.
#[test]
fn scans_earn_their_pass_while_overwrites_go_on() {
    let fs = HookFs::new(SlowGcLogReads);
    let mut options = options(Arc::new(fs.clone()));
    options.auto_cluster_ratio = 0.1;
    let db = Db::open(Path::new("/db"), options).expect("open");
    let model = load_shuffled(&db, KEYS, 17);
    let hot_key = |i: u32| format!("zz{i:06}").into_bytes();
    let scanned = || -> Model {
        (db.range(key(0)..key(KEYS)).expect("range"))
            .collect::<wisckey::Result<Model>>()
            .expect("scan")
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (passed_while_writing, waited, hot) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut hot = Model::new();
            let mut round = 1;
            while !stop.load(Ordering::SeqCst) {
                for i in 0..500 {
                    db.put(hot_key(i), value(i, round)).expect("put");
                    hot.insert(hot_key(i), value(i, round));
                }
                std::thread::sleep(Duration::from_millis(1));
                round += 1;
            }
            hot
        });
        let started = Instant::now();
        while passes(&db) == 0 && started.elapsed() < Duration::from_secs(20) {
            assert!(scanned() == model, "the scanned range differs");
        }
        let passed = passes(&db) > 0 && !writer.is_finished();
        let waited = started.elapsed();
        stop.store(true, Ordering::SeqCst);
        (passed, waited, writer.join().expect("writer"))
    });
    assert!(
        passed_while_writing,
        "no clustering pass in {waited:?} of scans while overwrites went on: {:?} {:?}",
        db.stats().expect("stats").auto_cluster,
        db.stats().expect("stats").gc
    );
    let mut model = model;
    model.extend(hot);
    assert!(read_all(&db) == model, "the model differs");
}

/// Counts the table reads the GC thread makes and, while armed, fails them with EIO (a
/// clustering pass's own iterator reads the key index there; with no block cache every
/// read reaches a file).
#[derive(Debug, Default)]
struct FailGcTableReads {
    armed: std::sync::atomic::AtomicBool,
    seen: std::sync::atomic::AtomicUsize,
    failed: std::sync::atomic::AtomicUsize,
}

impl common::Hooks for FailGcTableReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        let gc_thread = std::thread::current().name() == Some("wisckey-gc");
        if !gc_thread || path.extension().is_none_or(|e| e != "sst") {
            return Ok(());
        }
        self.seen.fetch_add(1, Ordering::SeqCst);
        if self.armed.load(Ordering::SeqCst) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(common::injected("read_at", path, "EIO"));
        }
        Ok(())
    }
}

/// Defect: a read that failed with an I/O error in a clustering pass the scans triggered
/// (nothing written yet: the pass was reading the key index) was latched as the database's
/// background error, so every later write failed until a reopen. Now the pass ends with a
/// warning, writes go on, and the range can earn a pass again.
#[test]
fn a_failed_read_in_a_background_clustering_pass_does_not_stop_writes() {
    let fs = HookFs::new(FailGcTableReads::default());
    let mut options = options(Arc::new(fs.clone()));
    options.block_cache_size = 0;
    let db = Db::open(Path::new("/db"), options).expect("open");
    let model = load_shuffled(&db, KEYS, 11);
    // GC samples the new segments once (key-index reads on its thread too, whose failures
    // end a round harmlessly): armed only once those are over, so what fails is a pass.
    // Over means no such read for longer than GC's period between rounds (1 s): a shorter
    // quiet could fall before a round that still samples.
    let mut seen = fs.hooks.seen.load(Ordering::SeqCst);
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let now = fs.hooks.seen.load(Ordering::SeqCst);
        if now == seen {
            break;
        }
        seen = now;
    }
    assert_eq!(passes(&db), 0);
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(120);
    while fs.hooks.failed.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "no clustering pass read the key index: {:?}",
            db.stats().expect("stats").auto_cluster
        );
        assert_eq!(read_all(&db), model);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        db.background_error().is_none(),
        "a failed read stopped the database: {:?}",
        db.background_error()
    );
    db.put(b"later", b"x").expect("writes go on");
    // The disk reads again: scans earn the range its pass.
    fs.hooks.armed.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut model = model;
    model.insert(b"later".to_vec(), b"x".to_vec());
    while passes(&db) == 0 {
        assert!(
            Instant::now() < deadline,
            "no pass after the disk healed: {:?}",
            db.stats().expect("stats").auto_cluster
        );
        assert_eq!(read_all(&db), model);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.background_error().is_none());
    assert_eq!(read_all(&db), model);
}
