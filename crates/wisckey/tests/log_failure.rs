//! Regression tests for value-log write failures that happen outside the write leader
//! (found in review): the failed write-out must poison the log before anyone else can append,
//! and a memtable flush must not move the replay head past records a failure discarded.
//!
//! A hook file system makes the next `.vlog` append sleep and then fail with EIO, and can
//! slow the next `.sst` append, to open the race windows deterministically enough; it can
//! also make the next `.vlog` fdatasync report EIO after its data became durable.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{HookFs, Hooks};
use wisckey::fs::PowerLoss;
use wisckey::{Db, Error, Options, ReadOptions, Result, WriteOptions};

/// One-shot "sleep then EIO" on the next .vlog append; one-shot sleep on the next .sst
/// append. Each is armed by storing milliseconds (0 = disarmed).
#[derive(Debug, Default)]
struct LogFailure {
    vlog_fail_sleep_ms: AtomicU64,
    sst_sleep_ms: AtomicU64,
    /// One-shot: the next `.vlog` fdatasync makes its data durable, then reports EIO.
    vlog_sync_fails_after: std::sync::atomic::AtomicBool,
    /// The name of the thread that entered the failing `.vlog` append, once one has.
    vlog_failed_on: std::sync::Mutex<Option<String>>,
    /// Set when the slowed `.sst` append has begun its sleep.
    sst_slowed: std::sync::atomic::AtomicBool,
}

impl LogFailure {
    /// Waits (up to 10 s) until `entered` says so; false if it never did.
    fn wait_for(entered: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !entered() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

impl Hooks for LogFailure {
    fn before_append(&self, path: &Path, _data: &[u8]) -> Result<()> {
        let name = path.display().to_string();
        if name.ends_with(".vlog") {
            let ms = self.vlog_fail_sleep_ms.swap(0, Ordering::SeqCst);
            if ms > 0 {
                let me = std::thread::current()
                    .name()
                    .unwrap_or("unnamed")
                    .to_string();
                *self.vlog_failed_on.lock().expect("not poisoned") = Some(me);
                std::thread::sleep(Duration::from_millis(ms));
                let eio = std::io::Error::from_raw_os_error(libc::EIO);
                return Err(Error::io("hook append", eio));
            }
        }
        if name.ends_with(".sst") || name.ends_with(".ldb") {
            let ms = self.sst_sleep_ms.swap(0, Ordering::SeqCst);
            if ms > 0 {
                self.sst_slowed.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        Ok(())
    }

    fn after_sync_data(&self, path: &Path) -> Result<()> {
        let vlog = path.display().to_string().ends_with(".vlog");
        if vlog && self.vlog_sync_fails_after.swap(false, Ordering::SeqCst) {
            let eio = std::io::Error::from_raw_os_error(libc::EIO);
            return Err(Error::io("hook fdatasync", eio));
        }
        Ok(())
    }
}

fn hookfs() -> HookFs<LogFailure> {
    HookFs::new(LogFailure::default())
}

/// The `wisckey-log` thread's write-out fails while a sync writer waits for the log lock:
/// the sync write must fail too, and no later write may survive an earlier lost one.
#[test]
fn failed_background_write_out_is_not_followed_by_a_durable_later_write() {
    let fs = hookfs();
    let mut opts = Options::small_for_tests(Arc::new(fs.clone()));
    opts.vlog_flush_interval = Duration::from_millis(300);
    opts.vlog_buffer_size = 1 << 20;
    opts.value_threshold = 64;
    let db = Db::open("/db", opts).expect("open");
    // Acknowledged non-sync write; sits in the buffer.
    db.put(b"a", vec![b'1'; 100]).expect("put v1"); // pointer (>= threshold)
    db.put(b"small", b"x").expect("put small"); // inline
    let snap = db.snapshot();
    // Next vlog append (the log flusher's, ~300 ms after open) sleeps 600 ms then EIO.
    fs.hooks.vlog_fail_sleep_ms.store(600, Ordering::SeqCst);
    let hooks = Arc::clone(&fs.hooks);
    assert!(
        LogFailure::wait_for(|| hooks.vlog_failed_on.lock().expect("lock").is_some()),
        "no append met the armed failure"
    );
    // The log flusher is now inside the failing append, holding the vlog lock: the
    // background write-out this test is about, not the sync write's own.
    let failed_on = fs.hooks.vlog_failed_on.lock().expect("lock").clone();
    assert_eq!(failed_on.as_deref(), Some("wisckey-log"));
    let r = db.put_opt(b"a", vec![b'2'; 100], &WriteOptions { sync: true });
    eprintln!(
        "sync put after concurrent log failure -> {r:?}; bg_error={:?}",
        db.background_error()
    );
    // The sync write is not acknowledged and the failure is latched.
    assert_eq!(
        fs.hooks.vlog_fail_sleep_ms.load(Ordering::SeqCst),
        0,
        "the injected failure fired"
    );
    assert!(r.is_err(), "a sync write after a lost write-out must fail");
    assert!(db.background_error().is_some(), "the failure is latched");
    let at_snap = db.get_opt(
        b"a",
        &ReadOptions {
            snapshot: Some(snap.clone()),
            ..Default::default()
        },
    );
    eprintln!(
        "get(a) at snapshot taken when a=v1 -> {:?}",
        at_snap.as_ref().map(|o| o.as_ref().map(|v| v[0] as char))
    );
    drop(snap);
    let image = fs.mem.power_loss_image(PowerLoss::DropUnsynced);
    std::mem::forget(db); // crash
    let db2 = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    let a = db2.get(b"a");
    let small = db2.get(b"small");
    eprintln!(
        "after power loss: a={:?} small={:?}",
        a.as_ref().map(|o| o.as_ref().map(|v| v[0] as char)),
        small
    );
    let a_is_v2 = matches!(&a, Ok(Some(v)) if v[0] == b'2');
    assert!(
        !a_is_v2,
        "the sync write that failed is there after the power cut (small: {small:?})"
    );
    // The value before it, or (its record was in the buffer the failure lost) an error;
    // never the failed write's value, never nothing.
    match at_snap {
        Ok(Some(v)) => assert_eq!(v, vec![b'1'; 100], "the snapshot reads another value"),
        Ok(None) => panic!("the snapshot lost the key"),
        Err(_) => {}
    }
}

/// A write-out failure discards buffered records of a memtable being flushed: the flush must
/// not record a replay head past them, and the database must still open.
#[test]
fn flush_never_moves_the_head_past_records_a_failure_discarded() {
    let fs = hookfs();
    let mut opts = Options::small_for_tests(Arc::new(fs.clone()));
    opts.vlog_flush_interval = Duration::from_secs(30);
    opts.vlog_buffer_size = 64 << 10;
    let db = Arc::new(Db::open("/db", opts).expect("open"));
    for i in 0..20u32 {
        db.put(format!("k{i:02}"), vec![7u8; 100]).expect("put");
    }
    fs.hooks.sst_sleep_ms.store(500, Ordering::SeqCst);
    let d = Arc::clone(&db);
    let flusher = std::thread::spawn(move || d.flush());
    // The flush is inside its table's append (slowed 500 ms) when the write-out fails.
    let hooks = Arc::clone(&fs.hooks);
    assert!(
        LogFailure::wait_for(|| hooks.sst_slowed.load(Ordering::SeqCst)),
        "the flush never appended to its table"
    );
    // A writer overflows the buffer; the write-out fails -> buffer (incl. imm records) dropped.
    fs.hooks.vlog_fail_sleep_ms.store(1, Ordering::SeqCst);
    let w = db.put(b"big", vec![9u8; 70 << 10]);
    eprintln!(
        "overflowing write -> {:?}",
        w.as_ref().err().map(|e| e.to_string())
    );
    assert_eq!(
        fs.hooks.vlog_fail_sleep_ms.load(Ordering::SeqCst),
        0,
        "the injected failure fired"
    );
    assert!(
        w.is_err(),
        "the write whose write-out failed is not acknowledged"
    );
    let f = flusher.join().expect("flusher thread");
    eprintln!("flush -> {f:?}; head={:?}", db.vlog_head());
    let db = Arc::try_unwrap(db).expect("sole owner");
    let c = db.close();
    eprintln!("close -> {c:?}");
    let re = Db::open("/db", Options::small_for_tests(Arc::new(fs.mem.clone())));
    match &re {
        Ok(db) => eprintln!(
            "reopen ok; get(k05)={:?}",
            db.get(b"k05").map(|o| o.map(|v| v.len()))
        ),
        Err(e) => eprintln!("REOPEN FAILED: {e}"),
    }
    let db = re.expect("database cannot be reopened after a transient log write failure");
    // A head past the discarded records would leave table entries pointing at nothing:
    // every key reads as absent or as what was written, never as an error.
    for i in 0..20u32 {
        let k = format!("k{i:02}");
        match db.get(&k) {
            Ok(None) => {}
            Ok(Some(v)) => assert_eq!(v, vec![7u8; 100], "{k}"),
            Err(e) => panic!("{k} reads as an error after reopen: {e}"),
        }
    }
    assert_eq!(db.get(b"big").expect("get big"), None, "the failed write");
    let report = db.check().expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// An fdatasync that wrote the group's records but reported EIO: the sync write fails, so
/// it must not be there after a power cut either (DESIGN, contract 5). The writer cuts the
/// failed group off its segment; that cut must be durable, or the restart finds the whole
/// records the failed sync did write and replays them.
#[test]
fn a_sync_write_whose_fdatasync_failed_is_not_there_after_a_power_cut() {
    let fs = hookfs();
    let opts = Options::small_for_tests(Arc::new(fs.clone()));
    let db = Db::open("/db", opts).expect("open");
    let sync = WriteOptions { sync: true };
    db.put_opt(b"before", vec![1u8; 300], &sync)
        .expect("a synced write");
    fs.hooks.vlog_sync_fails_after.store(true, Ordering::SeqCst);
    let failed = db.put_opt(b"failed", vec![2u8; 300], &sync);
    assert!(
        !fs.hooks.vlog_sync_fails_after.load(Ordering::SeqCst),
        "the injected failure fired"
    );
    assert!(failed.is_err(), "the write whose sync failed: {failed:?}");
    // The power goes out now, before anything else is written.
    let image = fs.mem.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    let db = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    assert_eq!(
        db.get(b"before").expect("get").as_deref(),
        Some(&[1u8; 300][..])
    );
    assert_eq!(
        db.get(b"failed").expect("get"),
        None,
        "a write that returned an error came back after the power cut"
    );
}
