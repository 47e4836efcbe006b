//! `Db::cluster_values`: values written in random order are rewritten at the log's head in
//! key order, after which a scan reads them in runs; what the pass shows and leaves is
//! exactly the model, also with writes, deletes and GC racing it, across a reopen, and for
//! a key range only, and on a full disk. (Power loss during passes: `tests/crash.rs` drives
//! one every 120 writes.)

mod common;
#[path = "common/shuffled.rs"]
mod shuffled;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{HookFs, LogReads};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shuffled::{key, load_shuffled, read_all, scan_reads, value};
use wisckey::fs::{FaultFs, FaultKind, FaultOps, FileSystem, FsOp, MemFs};
use wisckey::{Db, GcOptions, Options, ReadOptions};

fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut options = Options::small_for_tests(fs);
    // Only the explicit `gc` calls below collect, so the read counts are the scans' own.
    options.gc_space_amp_target = f64::INFINITY;
    options
}

#[test]
fn a_random_load_is_rewritten_in_key_order_and_then_scanned_in_runs() {
    let fs = HookFs::new(LogReads::default());
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()))).expect("open");
    let model = load_shuffled(&db, 2000, 7);
    let scattered = scan_reads(&db, &fs, &model);

    // The estimate reads no value and writes nothing, and predicts the pass exactly here
    // (nothing writes in between).
    let log_bytes = |db: &Db| db.stats().expect("stats").value_log.log_bytes;
    let (reads, log) = (fs.hooks.reads.load(Ordering::SeqCst), log_bytes(&db));
    let estimate = db
        .cluster_values_estimate::<&[u8], _>(..)
        .expect("estimate");
    assert_eq!(
        fs.hooks.reads.load(Ordering::SeqCst),
        reads,
        "the estimate read values"
    );
    assert_eq!(log_bytes(&db), log, "the estimate wrote");
    let done = db.cluster_values::<&[u8], _>(..).expect("cluster");
    assert_eq!(
        (
            estimate.values_relocated,
            estimate.values_kept,
            estimate.keys_examined
        ),
        (done.values_relocated, done.values_kept, done.keys_examined)
    );
    assert_eq!(estimate.bytes_relocated, done.bytes_relocated);
    eprintln!("first pass: {done:?}");
    assert_eq!(done.keys_examined, 2000);
    assert_eq!(done.values_in_log, 2000);
    assert_eq!(done.values_changed, 0);
    // A shuffled load leaves a few key-order neighbours back to back by chance: those stay.
    assert!(done.values_relocated >= 1900, "{done:?}");
    assert_eq!(done.values_relocated + done.values_kept, 2000);
    assert!(
        done.bytes_relocated >= done.values_relocated * 250,
        "{done:?}"
    );
    db.flush().expect("flush");

    let clustered = scan_reads(&db, &fs, &model);
    eprintln!("scan of 2000 values: {scattered} value-log reads before, {clustered} after");
    assert!(
        scattered >= 1900,
        "a shuffled load is read value by value: {scattered}"
    );
    assert!(
        clustered * 8 < scattered,
        "{clustered} reads after clustering"
    );

    // Now in key order: a second pass moves (almost) nothing — only a value left alone
    // at a segment's end, cut off from its neighbour by the roll-over, may move again.
    let estimate = db
        .cluster_values_estimate::<&[u8], _>(..)
        .expect("estimate");
    let again = db.cluster_values::<&[u8], _>(..).expect("second pass");
    assert_eq!(estimate.values_relocated, again.values_relocated);
    eprintln!("second pass: {again:?}");
    assert!(again.values_relocated <= 20, "{again:?}");
    assert_eq!(again.values_in_log, 2000);

    // The old records are garbage GC gives back; every value survives that and a reopen.
    let log_before = db.stats().expect("stats").value_log.log_bytes;
    let gc = db.gc(&GcOptions::default()).expect("gc");
    let log_after = db.stats().expect("stats").value_log.log_bytes;
    eprintln!("gc after clustering: {gc:?}; log {log_before} -> {log_after} bytes");
    assert!(gc.segments_collected > 0);
    assert!(
        log_after * 10 < log_before * 7,
        "{log_before} -> {log_after}"
    );
    assert_eq!(read_all(&db), model);
    db.close().expect("close");
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()))).expect("reopen");
    assert_eq!(read_all(&db), model);
    assert!(db.check().expect("check").is_ok());
}

#[test]
fn a_range_pass_moves_only_the_range() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open(Path::new("/db"), options(Arc::clone(&fs))).expect("open");
    let model = load_shuffled(&db, 1000, 11);
    let done = db.cluster_values(key(200)..key(500)).expect("cluster");
    assert_eq!(done.keys_examined, 300);
    assert!(done.values_relocated >= 280, "{done:?}");
    let inclusive = db.cluster_values(key(600)..=key(609)).expect("cluster");
    assert_eq!(inclusive.keys_examined, 10);
    assert_eq!(read_all(&db), model);
    let backwards = db.cluster_values(key(5)..key(1));
    assert!(
        matches!(backwards, Err(wisckey::Error::InvalidArgument(_))),
        "{backwards:?}"
    );
}

/// Writers overwrite and delete while passes and GC run: every pass keeps every newer
/// write (a relocation whose key changed since the pass's snapshot is dropped), so the
/// final state is exactly the writers' model.
#[test]
fn writes_racing_passes_and_gc_keep_their_newer_values() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Arc::new(Db::open(Path::new("/db"), options(Arc::clone(&fs))).expect("open"));
    let mut model = load_shuffled(&db, 1500, 3);
    let stop = Arc::new(AtomicBool::new(false));
    let passes = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut changed = 0;
            let mut passes = 0;
            while !stop.load(Ordering::SeqCst) || passes < 3 {
                let done = db
                    .cluster_values::<&[u8], _>(..)
                    .expect("cluster during writes");
                changed += done.values_changed;
                passes += 1;
                let gc = GcOptions {
                    compact_first: false,
                    ..GcOptions::default()
                };
                db.gc(&gc).expect("gc during writes");
            }
            (passes, changed)
        })
    };
    let seed = 20261127;
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 1..=6000u32 {
        let i = rng.gen_range(0..1500);
        if rng.gen_bool(0.2) {
            db.delete(key(i)).expect("delete");
            model.remove(&key(i));
        } else {
            db.put(key(i), value(i, round)).expect("put");
            model.insert(key(i), value(i, round));
        }
        if round % 1000 == 0 {
            db.flush().expect("flush");
        }
    }
    stop.store(true, Ordering::SeqCst);
    let (passes, changed) = passes.join().expect("pass thread");
    eprintln!("seed {seed}: {passes} passes, {changed} relocations dropped for newer writes");
    assert_eq!(read_all(&db), model, "seed {seed}");
    let db = Arc::into_inner(db).expect("the pass thread has ended");
    db.close().expect("close");
    let db = Db::open(Path::new("/db"), options(fs)).expect("reopen");
    assert_eq!(read_all(&db), model, "seed {seed}, after reopen");
}

/// GC collecting the segments a pass is reading moves their live values first: the pass
/// then finds those keys at other pointers with the same bytes and clusters them from
/// there, instead of counting them changed and leaving them in GC's order.
#[test]
fn values_gc_moves_during_a_pass_are_clustered_from_where_gc_put_them() {
    type Racer = Box<dyn Fn() -> u64 + Send + Sync>;
    #[derive(Default)]
    struct GcDuringThePass {
        armed: AtomicBool,
        racer: std::sync::Mutex<Option<Racer>>,
        relocated_by_gc: std::sync::atomic::AtomicU64,
    }
    impl std::fmt::Debug for GcDuringThePass {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("GcDuringThePass")
        }
    }
    impl common::Hooks for GcDuringThePass {
        fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
            let value_read = path.extension().is_some_and(|e| e == "vlog");
            if value_read && self.armed.swap(false, Ordering::AcqRel) {
                if let Some(racer) = self.racer.lock().expect("lock").take() {
                    self.relocated_by_gc.store(racer(), Ordering::SeqCst);
                }
            }
            Ok(())
        }
    }
    let fs = HookFs::new(GcDuringThePass::default());
    let db = Arc::new(Db::open(Path::new("/db"), options(Arc::new(fs.clone()))).expect("open"));
    let mut model = load_shuffled(&db, 2000, 11);
    // Half the keys written again: the load's segments are half dead, so GC takes them.
    for i in (0..2000).step_by(2) {
        db.put(key(i), value(i, 1)).expect("overwrite");
        model.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    let racing_db = Arc::clone(&db);
    *fs.hooks.racer.lock().expect("lock") = Some(Box::new(move || {
        let gc = GcOptions {
            compact_first: false,
            space_amp_target: 1.0,
            min_dead_fraction: 0.0,
            ..GcOptions::default()
        };
        racing_db
            .gc(&gc)
            .expect("gc during the pass")
            .records_relocated
    }));
    fs.hooks.armed.store(true, Ordering::Release);
    let done = db.cluster_values::<&[u8], _>(..).expect("cluster");
    let relocated_by_gc = fs.hooks.relocated_by_gc.load(Ordering::SeqCst);
    eprintln!("pass {done:?}; GC relocated {relocated_by_gc} meanwhile");
    assert!(
        !fs.hooks.armed.load(Ordering::Acquire),
        "GC ran inside the pass"
    );
    assert!(
        relocated_by_gc >= 500,
        "GC moved values the pass had yet to reach: {relocated_by_gc}"
    );
    assert_eq!(
        done.values_changed, 0,
        "nothing was written during the pass: {done:?}"
    );
    assert_eq!(
        done.values_relocated + done.values_kept,
        done.values_in_log,
        "{done:?}"
    );
    assert_eq!(read_all(&db), model);
    db.flush().expect("flush");
    let again = db
        .cluster_values_estimate::<&[u8], _>(..)
        .expect("estimate");
    assert_eq!(
        again.values_relocated, 0,
        "one pass left the range in key order: {again:?}"
    );
    assert_eq!(read_all(&db), model);
}

#[test]
fn inline_values_and_a_read_only_database_are_left_alone_but_estimated() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    {
        let db = Db::open(&dir, Options::default()).expect("open");
        db.put("small", "inline").expect("put");
        db.put("large", vec![9u8; 5000]).expect("put");
        let done = db.cluster_values::<&str, _>(..).expect("cluster");
        assert_eq!((done.keys_examined, done.values_in_log), (2, 1));
        db.close().expect("close");
    }
    let db = Db::open_read_only(&dir, Options::default()).expect("open read-only");
    assert!(db.cluster_values::<&str, _>(..).is_err());
    // The estimate writes nothing, so a read-only database answers it.
    let estimate = db.cluster_values_estimate::<&str, _>(..).expect("estimate");
    assert_eq!((estimate.values_in_log, estimate.values_relocated), (1, 1));
    let opts = ReadOptions::default();
    assert_eq!(
        db.get_opt("large", &opts).expect("get"),
        Some(vec![9u8; 5000])
    );
}

/// A pass on a full disk fails with `NoSpace` and changes nothing else: it does not spend
/// the disk reserve (kept for deletes and GC, which give space back; a pass only takes
/// space), nothing is latched, every value reads, and the pass succeeds once space is back.
#[test]
fn a_full_disk_fails_the_pass_cleanly_and_leaves_the_reserve() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        vlog_preallocate_size: 16 << 10,
        ..options(Arc::new(fault.clone()))
    };
    let db = Db::open(Path::new("/db"), options).expect("open");
    let model = load_shuffled(&db, 1000, 5);
    let reserve = Path::new("/db/RESERVE");
    assert!(
        mem.exists(reserve).expect("exists"),
        "the test needs a reserve"
    );
    fault.fail_at(
        1,
        FaultKind::NoSpace,
        FaultOps::Only(&[FsOp::Preallocate]),
        true,
    );
    let err = db
        .cluster_values::<&[u8], _>(..)
        .expect_err("the disk is full");
    assert!(err.is_no_space(), "{err:?}");
    assert!(
        db.background_error().is_none(),
        "a full disk is not latched"
    );
    assert!(
        mem.exists(reserve).expect("exists"),
        "the pass spent the reserve"
    );
    assert_eq!(read_all(&db), model);
    fault.clear();
    let done = db.cluster_values::<&[u8], _>(..).expect("space is back");
    assert!(done.values_relocated > 900, "{done:?}");
    assert_eq!(read_all(&db), model);
}
