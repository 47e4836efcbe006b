//! A background failure (I/O error while flushing a memtable) is latched: the flush reports
//! it, later writes return it even after the fault is gone, reads keep working, and a reopen
//! recovers every acknowledged write from the value log. A latched error that is not the
//! log's own still lets buffered writes reach the OS (and `Db::sync` the disk); a failure to
//! remove an obsolete file is not latched at all, nor is a moment without file handles
//! (EMFILE), and a flush that fails after writing its table removes it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wisckey::fs::{FaultFs, FaultKind, FaultOps, FileSystem, FsOp, MemFs, PowerLoss};
use wisckey::{Db, Error, Options, WriteOptions};

mod common;

use common::{HookFs, Hooks};

#[test]
fn flush_failure_is_latched_and_returned_by_later_writes() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fault.clone()))).expect("open");
    for i in 0..100u32 {
        db.put_opt(
            format!("k{i:03}"),
            vec![1u8; 100],
            &WriteOptions { sync: i == 99 },
        )
        .expect("put");
    }
    // The next write-class call — the flush creating its table file — fails once with EIO.
    fault.fail_at(1, FaultKind::Io, FaultOps::Writes, false);
    let flush = db.flush();
    assert!(
        matches!(flush, Err(Error::Io { .. })),
        "flush reports the failure: {flush:?}"
    );
    assert!(fault.tripped());
    assert!(db.background_error().is_some(), "the error is latched");
    // The fault is gone, but writes keep failing with the latched error.
    match db.put(b"later", b"x") {
        Err(Error::Io { .. }) => {}
        other => panic!("expected the latched Io error, got {other:?}"),
    }
    // Reads still work.
    assert_eq!(db.get(b"k050").expect("get"), Some(vec![1u8; 100]));
    assert!(db.close().is_err(), "close reports the latched error");

    let db = Db::open("/db", Options::small_for_tests(Arc::new(mem))).expect("reopen");
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("k{i:03}")).expect("get"),
            Some(vec![1u8; 100])
        );
    }
    assert_eq!(
        db.get(b"later").expect("get"),
        None,
        "the refused write is not there"
    );
    db.put(b"later", b"x")
        .expect("writes work again after reopen");
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<wisckey::Snapshot>();
}

/// What a process kill leaves: every byte that reached the OS (live bytes, synced or not),
/// nothing of the process's buffers. No locks are held in the image.
fn kill_image(mem: &MemFs) -> MemFs {
    let image = MemFs::new();
    image.create_dir_all(Path::new("/db")).expect("mkdir");
    for path in mem.file_names() {
        if let Some(bytes) = mem.contents(&path) {
            image.set_contents(&path, &bytes).expect("copy");
        }
    }
    image
}

fn log_holds(mem: &MemFs, needle: &[u8]) -> bool {
    mem.file_names()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .filter_map(|p| mem.contents(p))
        .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}

const BUFFERED_VALUE: &[u8] = b"buffered-value-0123456789-acknowledged-not-synced";

/// Opens a database on `fault`, acknowledges a non-sync put that stays in the log's buffer,
/// then latches an EIO from the flush's table creation (not a log failure).
fn latch_a_table_error(fault: &FaultFs, options: Options) -> Db {
    let db = Db::open("/db", options).expect("open");
    // The sync put writes the buffer out: the next write-out is not due for an interval.
    db.put_opt(b"synced", b"1", &WriteOptions { sync: true })
        .expect("sync put");
    db.put(b"buffered", BUFFERED_VALUE).expect("buffered put");
    fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Create]), false);
    let flush = db.flush();
    assert!(matches!(flush, Err(Error::Io { .. })), "{flush:?}");
    assert!(fault.tripped());
    assert!(db.background_error().is_some(), "the error is latched");
    db
}

/// Defect: after a latched error the log thread stopped writing the buffer out, so an
/// acknowledged non-sync write stayed in the process's memory until `close`: a kill lost
/// it, although `vlog_flush_interval` bounds how long such a write sits in user space.
#[test]
fn buffered_writes_still_reach_the_os_after_a_latched_table_error() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        // Long enough that the buffered put is not written out before the error is latched.
        vlog_flush_interval: Duration::from_secs(1),
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = latch_a_table_error(&fault, options);
    assert!(
        !log_holds(&mem, BUFFERED_VALUE),
        "the put is still in the buffer"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log_holds(&mem, BUFFERED_VALUE) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let image = kill_image(&mem);
    assert!(
        log_holds(&image, BUFFERED_VALUE),
        "the log thread writes the buffer out within the interval despite the latched error"
    );
    // New writes stay refused.
    assert!(matches!(db.put(b"later", b"x"), Err(Error::Io { .. })));
    let after_kill = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    assert_eq!(
        after_kill.get(b"buffered").expect("get"),
        Some(BUFFERED_VALUE.to_vec())
    );
    assert_eq!(after_kill.get(b"later").expect("get"), None);
    drop(db);
}

/// Defect: `Db::sync` returned the latched error without syncing, so acknowledged writes
/// could not be made durable short of `close`. A latched error that is not the log's own
/// leaves the log intact: `sync` makes them durable (new writes stay refused).
#[test]
fn sync_after_a_latched_table_error_makes_acknowledged_writes_durable() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        vlog_flush_interval: Duration::from_secs(60),
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = latch_a_table_error(&fault, options);
    db.sync()
        .expect("sync writes the log out and syncs it despite the latched error");
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    assert!(matches!(db.put(b"later", b"x"), Err(Error::Io { .. })));
    let after_cut = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    assert_eq!(
        after_cut.get(b"buffered").expect("get"),
        Some(BUFFERED_VALUE.to_vec())
    );
    assert_eq!(after_cut.get(b"synced").expect("get"), Some(b"1".to_vec()));
    drop(db);
}

/// Defect: a failure to remove an obsolete file after a successful flush was latched, so
/// the database refused every write until reopened, although a leftover file harms
/// nothing. Now it is logged and the next sweep tries again.
#[test]
fn failing_to_remove_an_obsolete_file_is_not_latched() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options.clone()).expect("open");
    for i in 0..20u32 {
        db.put(format!("k{i:03}"), vec![1u8; 100]).expect("put");
    }
    // A table no version lists: the sweep after the next flush removes it.
    let leftover = Path::new("/db/900000.sst");
    mem.set_contents(leftover, b"leftover").expect("plant");
    fault.record_calls(true);
    fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Remove]), false);
    db.flush().expect("flush");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !fault.tripped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(fault.tripped(), "the sweep tried to remove the leftover");
    let first_remove = fault
        .recorded()
        .into_iter()
        .find(|(op, _)| *op == FsOp::Remove);
    assert_eq!(
        first_remove.map(|(_, path)| path),
        Some(leftover.to_path_buf()),
        "the failed remove was the sweep's"
    );
    fault.record_calls(false);
    // The background thread has finished that flush before it takes up the next one.
    db.put(b"after", b"x").expect("writes go on");
    db.flush().expect("the next flush succeeds");
    assert_eq!(db.background_error().map(|e| e.to_string()), None);
    // That flush's sweep removes the leftover.
    let deadline = Instant::now() + Duration::from_secs(5);
    while mem.contents(leftover).is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(mem.contents(leftover).is_none(), "the next sweep retried");
    db.close().expect("close");
    let db = Db::open("/db", options).expect("reopen");
    assert_eq!(db.get(b"after").expect("get"), Some(b"x".to_vec()));
    assert_eq!(db.get(b"k005").expect("get"), Some(vec![1u8; 100]));
}

/// A value whose record was lost with a failed write-out reads as that failure (an I/O
/// error), not as `Corruption`: no stored byte is damaged, the record never got there.
#[test]
fn a_record_lost_with_a_failed_write_out_reads_as_the_write_error() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        // The record stays in the buffer until the sync below writes it out.
        vlog_flush_interval: Duration::from_secs(3600),
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options).expect("open");
    db.put(b"kept", vec![7u8; 200]).expect("put");
    db.sync().expect("sync");
    db.put(b"lost", vec![8u8; 200]).expect("put");
    fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Append]), true);
    let synced = db.sync();
    assert!(matches!(synced, Err(Error::Io { .. })), "{synced:?}");
    match db.get(b"lost") {
        Err(Error::Io { .. }) => {}
        other => panic!("a record lost with the write-out: expected its Io error, got {other:?}"),
    }
    assert_eq!(db.get(b"kept").expect("get"), Some(vec![7u8; 200]));
    fault.clear();
    assert!(db.close().is_err(), "close reports the latched error");
}

/// Fails every `sync_data` of a value-log segment once armed.
#[derive(Debug, Default)]
struct FailLogSync {
    armed: std::sync::atomic::AtomicBool,
}

impl Hooks for FailLogSync {
    fn before_sync_data(&self, path: &Path) -> wisckey::Result<()> {
        let log = path.extension().is_some_and(|e| e == "vlog");
        if log && self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            let eio = std::io::Error::from_raw_os_error(libc::EIO);
            return Err(Error::io("test: log sync", eio));
        }
        Ok(())
    }
}

/// A flush whose table is written but whose log records cannot be made durable (the replay
/// head may not pass them) fails without leaving the table behind: no manifest names it.
#[test]
fn a_flush_that_fails_after_writing_its_table_removes_it() {
    let fs = HookFs::new(FailLogSync::default());
    let dir = Path::new("/db");
    let db = Db::open(dir, Options::small_for_tests(Arc::new(fs.clone()))).expect("open");
    let tables = || -> Vec<String> {
        (fs.mem.list(dir).expect("list").into_iter())
            .filter(|name| name.ends_with(".sst"))
            .collect()
    };
    db.put(b"first", vec![1u8; 100]).expect("put");
    db.flush().expect("flush");
    let before = tables();
    assert!(!before.is_empty(), "the first flush wrote a table");
    for i in 0..20u32 {
        db.put(format!("k{i:03}"), vec![2u8; 100]).expect("put");
    }
    fs.hooks
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let flush = db.flush();
    assert!(matches!(flush, Err(Error::Io { .. })), "{flush:?}");
    assert_eq!(tables(), before, "the failed flush's table is gone");
}

/// Defect: a flush that could not create its table for want of a file handle latched the
/// error, and every later write failed with it until a reopen, though nothing had been
/// written and the handles came back. It is retried now, as a full disk is.
#[test]
fn a_flush_without_a_file_handle_is_retried_not_latched() {
    use std::sync::atomic::Ordering;
    // Table creations fail while armed: the process out of file handles for a moment (a
    // server with many clients).
    let fs = HookFs::new(common::FailWhileArmed::new(
        common::Call::Create,
        ".sst",
        libc::EMFILE,
    ));
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open");
    db.put("before", "x").expect("put");
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let flush = db.flush();
    assert!(
        flush.as_ref().is_err_and(Error::is_out_of_handles),
        "the flush reports the missing handle: {flush:?}"
    );
    assert!(db.background_error().is_none(), "not latched");
    fs.hooks.armed.store(false, Ordering::SeqCst);
    db.put("after", "y").expect("a write once handles are back");
    db.flush().expect("the flush, retried");
    assert!(
        db.level_file_counts().iter().sum::<usize>() > 0,
        "a table was written"
    );
    db.close().expect("close");
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("reopen");
    assert_eq!(db.get("before").expect("get"), Some(b"x".to_vec()));
    assert_eq!(db.get("after").expect("get"), Some(b"y".to_vec()));
}

/// Defect: `compact_range` (which `Db::gc` runs first by default) latched a compaction
/// output it could not create for want of a file handle, refusing every later write until
/// a reopen. It is returned and not latched now, as a full disk is.
#[test]
fn a_compaction_without_a_file_handle_is_retried_not_latched() {
    use std::sync::atomic::Ordering;
    let fs = HookFs::new(common::FailWhileArmed::new(
        common::Call::Create,
        ".sst",
        libc::EMFILE,
    ));
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open");
    for round in 0..3u32 {
        for i in 0..50u32 {
            db.put(format!("k{i:03}"), format!("v{round}"))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let compacted = db.compact_range(None, None);
    assert!(
        compacted.as_ref().is_err_and(Error::is_out_of_handles),
        "the compaction reports the missing handle: {compacted:?}"
    );
    assert!(db.background_error().is_none(), "not latched");
    fs.hooks.armed.store(false, Ordering::SeqCst);
    db.put("after", "y").expect("a write once handles are back");
    db.compact_range(None, None).expect("the compaction, again");
    assert_eq!(db.get("k007").expect("get"), Some(b"v2".to_vec()));
    db.close().expect("close");
}
