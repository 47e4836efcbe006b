//! The disk-space reserve and the files background work leaves behind on a full disk.
//!
//! - A `RESERVE` file that a delete-only write spent stays spent while the database runs
//!   and comes back at the next open; one there is no room for leaves the open working,
//!   and `DbStats::disk_reserve_bytes` says whether one is held.
//! - A flush or compaction whose table write fails removes its partial table, so retries
//!   on a full disk without a reserve do not pile up files that hold space; the retries are
//!   paced even while a caller waits in `Db::flush`.
//! - `Db::sync` needs no memtable room: it makes acknowledged writes durable while flushes
//!   meet the full disk, and `Db::flush` waits for space to come back when the memtables
//!   are full.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use wisckey::fs::{FaultFs, FaultKind, FaultOps, FileSystem, FsOp, MemFs, PowerLoss};
use wisckey::{Db, Options, WriteOptions};

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:05}-")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(100)
        .collect()
}

fn sst_files(mem: &MemFs) -> BTreeSet<PathBuf> {
    mem.file_names()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect()
}

fn has_reserve(mem: &MemFs) -> bool {
    mem.file_names()
        .iter()
        .any(|p| p == Path::new("/db/RESERVE"))
}

/// A reserve a delete-only write spent on a full disk stays spent while the database runs
/// (taking the space back after the next flush, the disk still full, left later deletes
/// without it: `hardening::gc_gives_space_back_on_a_full_disk` failed about one run in
/// five when that was tried) and comes back at the next open.
#[test]
fn reserve_spent_by_a_delete_only_write_comes_back_at_the_next_open() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        // Small chunks: the deletes below soon need a preallocation.
        vlog_preallocate_size: 4 << 10,
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options.clone()).expect("open");
    assert!(has_reserve(&mem), "open creates the reserve");
    let reserve_bytes = |db: &Db| db.stats().expect("stats").disk_reserve_bytes;
    assert_eq!(reserve_bytes(&db), options.disk_reserve_size);
    for i in 0..50u32 {
        db.put(format!("key{i:05}"), value(i)).expect("put");
    }
    // The disk is full: no preallocation succeeds, the reserve cannot come back either.
    fault.fail_at(
        1,
        FaultKind::NoSpace,
        FaultOps::Only(&[FsOp::Preallocate]),
        true,
    );
    let mut refused = None;
    for i in 0..5000u32 {
        if let Err(e) = db.delete(format!("key{:05}", i % 50)) {
            refused = Some(e);
            break;
        }
    }
    let refused = refused.expect("a delete met the full disk");
    assert!(refused.is_no_space(), "{refused:?}");
    assert!(
        !has_reserve(&mem),
        "the delete-only write spent the reserve"
    );
    assert_eq!(reserve_bytes(&db), 0, "the stats say it is spent");
    assert!(db.background_error().is_none());
    // A flush meets the full disk too (no table file can be created), then finds space:
    // the reserve it did not release is not its to take back.
    fault.fail_at(
        1,
        FaultKind::NoSpace,
        FaultOps::Only(&[FsOp::Preallocate, FsOp::Create]),
        true,
    );
    let flush = db.flush().expect_err("the flush meets the full disk");
    assert!(flush.is_no_space(), "{flush:?}");
    fault.clear();
    db.flush().expect("the flush finds space");
    // The background thread would take it back just after the flush is installed.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !has_reserve(&mem),
        "the reserve deletes spent stays spent while the database runs"
    );

    db.delete(b"key00000").expect("deletes resume");
    db.put(b"after", b"x").expect("put");
    db.flush().expect("flush");
    db.close().expect("close");
    let db = Db::open("/db", options.clone()).expect("reopen");
    assert!(has_reserve(&mem), "the reopen re-creates the reserve");
    assert_eq!(reserve_bytes(&db), options.disk_reserve_size);
    assert_eq!(db.get(b"key00000").expect("get"), None);
    assert_eq!(db.get(b"after").expect("get"), Some(b"x".to_vec()));
}

/// A crash between the reserve file's creation and its allocation leaves a file that holds
/// no space; the next open allocated nothing, taking the file for a reserve. Every open
/// now makes sure of its space (an allocation over blocks already held costs none).
#[test]
fn an_open_allocates_the_reserve_even_where_its_file_exists() {
    let mem = MemFs::new();
    let options = |fs: Arc<dyn FileSystem>| Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(fs)
    };
    Db::open("/db", options(Arc::new(mem.clone())))
        .expect("open")
        .close()
        .expect("close");
    // What the crash left: the file, no space behind it.
    mem.remove(Path::new("/db/RESERVE")).expect("remove");
    drop(mem.create(Path::new("/db/RESERVE")).expect("create"));
    let recording = FaultFs::new(Arc::new(mem.clone()));
    recording.record_calls(true);
    let db = Db::open("/db", options(Arc::new(recording.clone()))).expect("reopen");
    let allocated = (recording.recorded().into_iter())
        .any(|(op, path)| op == FsOp::Preallocate && path == Path::new("/db/RESERVE"));
    assert!(allocated, "the reopen allocates the reserve's space");
    db.close().expect("close");
}

/// A reserve there is no room for (a full disk, or a `disk_reserve_size` larger than the
/// free space) does not stop the open; defect: nothing but a debug log line said it was
/// missing. `DbStats::disk_reserve_bytes` says 0 (and a warning is logged), and the next
/// open with room makes it.
#[test]
fn a_reserve_without_room_leaves_the_open_working_and_the_stats_say_so() {
    let options = |fs: Arc<dyn FileSystem>| Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(fs)
    };
    // Which of an open's allocations is the reserve's.
    let recording = FaultFs::new(Arc::new(MemFs::new()));
    recording.record_calls(true);
    Db::open("/db", options(Arc::new(recording.clone())))
        .expect("open")
        .close()
        .expect("close");
    let allocations: Vec<PathBuf> = (recording.recorded().into_iter())
        .filter(|(op, _)| *op == FsOp::Preallocate)
        .map(|(_, path)| path)
        .collect();
    let nth = (allocations.iter())
        .position(|p| p == Path::new("/db/RESERVE"))
        .expect("the open allocates the reserve") as u64
        + 1;

    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    fault.fail_at(
        nth,
        FaultKind::NoSpace,
        FaultOps::Only(&[FsOp::Preallocate]),
        false,
    );
    let db = Db::open("/db", options(Arc::new(fault.clone()))).expect("open without a reserve");
    assert!(
        fault.tripped(),
        "the reserve's allocation met the full disk"
    );
    assert!(!has_reserve(&mem), "no empty RESERVE file is left");
    assert_eq!(db.stats().expect("stats").disk_reserve_bytes, 0);
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    let db = Db::open("/db", options(Arc::new(mem.clone()))).expect("reopen");
    assert!(has_reserve(&mem));
    let size = options(Arc::new(mem.clone())).disk_reserve_size;
    assert!(size > 0);
    assert_eq!(db.stats().expect("stats").disk_reserve_bytes, size);
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// The counterpart: a reserve a flush released on a full disk is taken back once a flush
/// finds space again.
#[test]
fn reserve_a_flush_released_comes_back_after_the_next_successful_flush() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options).expect("open");
    assert!(has_reserve(&mem), "open creates the reserve");
    for i in 0..50u32 {
        db.put(format!("key{i:05}"), value(i)).expect("put");
    }
    fault.fail_at(1, FaultKind::NoSpace, FaultOps::Only(&[FsOp::Create]), true);
    let flush = db.flush().expect_err("the flush meets the full disk");
    assert!(flush.is_no_space(), "{flush:?}");
    assert!(!has_reserve(&mem), "the flush released the reserve");
    fault.clear();
    db.flush().expect("the flush finds space");
    // The background thread takes it back after the flush is installed (which `flush`
    // waits for): give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !has_reserve(&mem) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(has_reserve(&mem), "the flush took the reserve back");
    db.close().expect("close");
}

/// Defect: a flush whose table write failed released the table's number but left the
/// partial file, and the sweep runs only after a success: with no reserve on a full disk,
/// every 100 ms retry left another partial table holding space.
#[test]
fn failed_flush_table_writes_leave_no_partial_tables() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        disk_reserve_size: 0,
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options.clone()).expect("open");
    // The last put syncs: nothing is left in the log's buffer, so only table writes append.
    for i in 0..100u32 {
        db.put_opt(
            format!("key{i:05}"),
            value(i),
            &WriteOptions { sync: i == 99 },
        )
        .expect("put");
    }
    let before = sst_files(&mem);
    fault.record_calls(true);
    fault.fail_at(1, FaultKind::NoSpace, FaultOps::Only(&[FsOp::Append]), true);
    // Retried every 100 ms; `flush` gives up after about 500 ms of it.
    let flushed = db.flush();
    assert!(matches!(&flushed, Err(e) if e.is_no_space()), "{flushed:?}");
    assert!(
        db.background_error().is_none(),
        "a full disk is not latched"
    );
    assert!(fault.tripped());
    // Retried every 100 ms, not at each wake-up of the waiting `flush` (that made
    // thousands of attempts in its half second).
    let attempts = fault
        .recorded()
        .iter()
        .filter(|(op, path)| *op == FsOp::Create && path.extension().is_some_and(|e| e == "sst"))
        .count();
    assert!(
        (1..=20).contains(&attempts),
        "{attempts} table writes in about 500 ms"
    );
    fault.record_calls(false);
    let leftovers: Vec<PathBuf> = sst_files(&mem).difference(&before).cloned().collect();
    // One retry may be between creating its table and failing.
    assert!(
        leftovers.len() <= 1,
        "failed flushes left partial tables: {leftovers:?}"
    );
    fault.clear();
    db.flush()
        .expect("the retried flush succeeds once space is back");
    for i in 0..100u32 {
        assert_eq!(db.get(format!("key{i:05}")).expect("get"), Some(value(i)));
    }
    db.close().expect("close");
    let db = Db::open("/db", options).expect("reopen");
    for i in 0..100u32 {
        assert_eq!(db.get(format!("key{i:05}")).expect("get"), Some(value(i)));
    }
}

/// The same for a compaction: its failed output is removed, not left for a sweep that
/// only runs after a success.
#[test]
fn failed_compaction_writes_leave_no_partial_tables() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        disk_reserve_size: 0,
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options.clone()).expect("open");
    // Three L0 tables (under the compaction trigger: no background compaction).
    for round in 0..3u32 {
        for i in 0..100u32 {
            db.put(format!("key{i:05}"), value(round * 1000 + i))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    db.sync().expect("sync");
    let before = sst_files(&mem);
    assert_eq!(before.len(), 3, "{before:?}");
    fault.fail_at(1, FaultKind::NoSpace, FaultOps::Only(&[FsOp::Append]), true);
    let compacted = db.compact_range(None, None);
    assert!(
        matches!(&compacted, Err(e) if e.is_no_space()),
        "{compacted:?}"
    );
    assert!(
        db.background_error().is_none(),
        "a full disk is not latched"
    );
    let leftovers: Vec<PathBuf> = sst_files(&mem).difference(&before).cloned().collect();
    assert!(
        leftovers.is_empty(),
        "the failed compaction left partial tables: {leftovers:?}"
    );
    fault.clear();
    db.compact_range(None, None)
        .expect("compaction succeeds once space is back");
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(value(2000 + i))
        );
    }
    db.close().expect("close");
    let db = Db::open("/db", options).expect("reopen");
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("key{i:05}")).expect("get"),
            Some(value(2000 + i))
        );
    }
}

/// `Db::sync` while flushes meet a full disk and every memtable is full: it inserts nothing,
/// so it needs no memtable room and makes the acknowledged writes durable. (It made room as
/// a write does, and refused with `NoSpace` there: acknowledged writes could not be synced
/// when it mattered most.)
#[test]
fn sync_makes_acknowledged_writes_durable_while_flushes_meet_a_full_disk() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let options = Options {
        // One segment holds the whole test: no segment is created once the disk is full.
        vlog_segment_size: 16 << 20,
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fault.clone()))
    };
    let db = Db::open("/db", options.clone()).expect("open");
    // Files cannot be created (tables, say); appends to the log's preallocated space work.
    fault.fail_at(1, FaultKind::NoSpace, FaultOps::Only(&[FsOp::Create]), true);
    let mut acknowledged = 0u32;
    for i in 0..100_000u32 {
        match db.put(format!("key{i:06}"), value(i)) {
            Ok(()) => acknowledged = i + 1,
            Err(e) if e.is_no_space() => break,
            Err(e) => panic!("put {i}: {e}"),
        }
    }
    assert!(
        (1..100_000).contains(&acknowledged),
        "writes stop with NoSpace once the memtables are full: {acknowledged} went in"
    );
    assert!(fault.tripped(), "no flush met the full disk");
    db.sync()
        .expect("a sync needs no memtable room, only the log's own space");
    // A power cut keeps what was synced, nothing else.
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    let reopened = Db::open("/db", options.with_fs(Arc::new(image))).expect("reopen");
    for i in 0..acknowledged {
        assert_eq!(
            reopened.get(format!("key{i:06}")).expect("get"),
            Some(value(i)),
            "key {i} was acknowledged and synced"
        );
    }
    reopened.close().expect("close");
    fault.clear();
    db.flush().expect("flushes succeed once space is back");
    db.close().expect("close");
}

/// Defect: a close whose memtable flush found no room for its table failed with
/// `NoSpace`, though it had synced the log and lost nothing (the next open replays the
/// memtable): a user could only read it as a failed close. It now succeeds.
#[test]
fn a_close_whose_flush_finds_no_room_succeeds_once_the_log_is_synced() {
    // Appends to tables fail while armed: a disk with room left for the value log's
    // preallocated space but none for a flush's table.
    let fs = common::HookFs::new(common::FailWhileArmed::new(
        common::Call::Append,
        ".sst",
        libc::ENOSPC,
    ));
    let options = || Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Db::open("/db", options()).expect("open");
    for i in 0..200 {
        db.put(format!("key{i:05}"), value(i)).expect("put");
    }
    fs.hooks.armed.store(true, Ordering::SeqCst);
    db.close()
        .expect("close on a disk with no room for the flush");
    fs.hooks.armed.store(false, Ordering::SeqCst);
    let db = Db::open("/db", options()).expect("reopen");
    assert!(
        db.recovery_report().replayed_records > 0,
        "the memtable was not flushed, so the open replays it: {:?}",
        db.recovery_report()
    );
    for i in 0..200 {
        let key = format!("key{i:05}");
        assert_eq!(db.get(&key).expect("get"), Some(value(i)), "{key}");
    }
    db.close().expect("close");
}

fn quiet_options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(fs)
    }
}

/// Fails the first table creation with ENOSPC, then holds the next one (the retry right
/// after the reserve's release) until `go`.
#[derive(Debug, Default)]
struct FullThenHeldRetry {
    armed: std::sync::atomic::AtomicBool,
    creates: std::sync::atomic::AtomicUsize,
    held: std::sync::atomic::AtomicBool,
    go: std::sync::atomic::AtomicBool,
}

impl common::Hooks for FullThenHeldRetry {
    fn before_create(&self, path: &Path) -> wisckey::Result<()> {
        if !path.to_string_lossy().ends_with(".sst") || !self.armed.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.creates.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(wisckey::Error::io(
                format!("create {} (injected)", path.display()),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        self.armed.store(false, Ordering::SeqCst);
        self.held.store(true, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.go.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Ok(())
    }
}

/// Defect: a put group made the reserve again out of the space the flush thread had just
/// released it for, so the flush's retry met the full disk again (on a real full tmpfs:
/// three table creations instead of two). While the work it was released for has not
/// succeeded, puts are refused; once it has, the reserve is back and puts go on.
#[test]
fn a_put_does_not_take_back_the_reserve_released_for_a_flush() {
    let fs = common::HookFs::new(FullThenHeldRetry::default());
    let db = Arc::new(Db::open("/db", quiet_options(Arc::new(fs.clone()))).expect("open"));
    for i in 0..50u32 {
        db.put(format!("k{i}"), value(i)).expect("put");
    }
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.flush())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !fs.hooks.held.load(Ordering::SeqCst) {
        assert!(
            std::time::Instant::now() < deadline,
            "the flush was not retried within 60 s of meeting the full disk"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let reserve = Path::new("/db/RESERVE");
    let released = !fs.mem.exists(reserve).expect("exists");
    let put = db.put("p", "v");
    let made_again = fs.mem.exists(reserve).expect("exists");
    fs.hooks.go.store(true, Ordering::SeqCst);
    flusher
        .join()
        .expect("flusher")
        .expect("the flush goes through");
    assert!(released, "the reserve was released for the flush");
    assert!(
        put.as_ref().is_err_and(|e| e.is_no_space()) && !made_again,
        "a put took the space released for the flush: {put:?}, reserve made again: {made_again}"
    );
    // The flush thread makes it again just after the install that woke `flush`; a put
    // group that comes first makes it itself.
    db.put("p", "v").expect("puts go on");
    assert_eq!(
        db.stats().expect("stats").disk_reserve_bytes,
        256 << 10,
        "made again once the flush went through"
    );
}

/// Defect: a reserve that could not be made at open was never tried again while the
/// database ran (each try followed only a release), although `disk_reserve_size` says it
/// is made once space is back. It comes back after the next successful flush.
#[test]
fn a_reserve_that_could_not_be_made_at_open_comes_back_after_a_flush() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    fault.fail_at(
        1,
        FaultKind::NoSpace,
        FaultOps::Only(&[FsOp::Preallocate]),
        true,
    );
    let db = Db::open("/db", quiet_options(Arc::new(fault.clone()))).expect("open");
    assert_eq!(db.stats().expect("stats").disk_reserve_bytes, 0);
    fault.clear();
    for i in 0..50u32 {
        db.put(format!("k{i}"), value(i)).expect("put");
    }
    db.flush().expect("flush");
    // Made by the flush thread just after the install that woke `flush`.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut reserve = db.stats().expect("stats").disk_reserve_bytes;
    while reserve == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
        reserve = db.stats().expect("stats").disk_reserve_bytes;
    }
    assert_eq!(
        reserve,
        256 << 10,
        "not made again within 10 s of the flush"
    );
}

/// Fails table creations with ENOSPC and the reserve's creation with EMFILE, while armed.
#[derive(Debug, Default)]
struct FullDiskThenNoHandle {
    tables_full: std::sync::atomic::AtomicBool,
    reserve_emfile: std::sync::atomic::AtomicBool,
}

impl common::Hooks for FullDiskThenNoHandle {
    fn before_create(&self, path: &Path) -> wisckey::Result<()> {
        let name = path.to_string_lossy();
        if name.ends_with(".sst") && self.tables_full.load(Ordering::SeqCst) {
            return Err(wisckey::Error::io(
                format!("create {} (injected)", path.display()),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        if name.ends_with("RESERVE") && self.reserve_emfile.load(Ordering::SeqCst) {
            return Err(wisckey::Error::io(
                format!("create {} (injected)", path.display()),
                std::io::Error::from_raw_os_error(libc::EMFILE),
            ));
        }
        Ok(())
    }
}

/// Defect: a put group that could not make the spent reserve again for want of a file
/// handle (or for EIO) was told the disk was full.
#[test]
fn a_reserve_not_made_for_want_of_a_file_handle_is_not_called_a_full_disk() {
    let fs = common::HookFs::new(FullDiskThenNoHandle::default());
    let db = Db::open("/db", quiet_options(Arc::new(fs.clone()))).expect("open");
    for i in 0..50u32 {
        db.put(format!("k{i}"), value(i)).expect("put");
    }
    fs.hooks.tables_full.store(true, Ordering::SeqCst);
    assert!(db.flush().is_err_and(|e| e.is_no_space()));
    fs.hooks.reserve_emfile.store(true, Ordering::SeqCst);
    fs.hooks.tables_full.store(false, Ordering::SeqCst);
    db.flush().expect("space is back");
    let refused = db.put("x", "y").expect_err("the reserve cannot be made");
    assert!(
        refused.is_out_of_handles() && !refused.is_no_space(),
        "{refused}"
    );
    fs.hooks.reserve_emfile.store(false, Ordering::SeqCst);
    db.put("x", "y").expect("handles are back");
}
