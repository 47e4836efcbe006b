//! Regression test (issue 10): the `state` lock was held across the manifest's append and
//! fsync, so every flush or compaction install stalled all reads (which take `state` for
//! their view) for an fsync. Here the manifest's fsync blocks until the test lets it go;
//! a read must complete meanwhile.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::{HookFs, Hooks};
use parking_lot::Mutex;
use wisckey::fs::FileSystem;
use wisckey::{Db, Options, Result};

/// When armed, the next manifest fsync reports that it started and waits to be released.
#[derive(Debug, Default)]
struct BlockManifestSync {
    armed: AtomicBool,
    started: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Hooks for BlockManifestSync {
    fn before_sync_data(&self, path: &Path) -> Result<()> {
        let is_manifest = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"));
        if is_manifest && self.armed.swap(false, Ordering::SeqCst) {
            if let Some(started) = self.started.lock().take() {
                let _ = started.send(());
            }
            if let Some(release) = self.release.lock().take() {
                // Bounded, so a regression fails the test instead of hanging it.
                let _ = release.recv_timeout(Duration::from_secs(10));
            }
        }
        Ok(())
    }
}

/// A database holding `k` = `v` whose flush (running in the returned thread) is blocked in
/// its manifest fsync until something is sent on the returned channel.
fn flush_blocked_in_manifest_sync() -> (
    Arc<Db>,
    std::thread::JoinHandle<Result<()>>,
    mpsc::Sender<()>,
) {
    let fs = HookFs::new(BlockManifestSync::default());
    let db =
        Arc::new(Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open"));
    db.put(b"k", b"v").expect("put");
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    *fs.hooks.started.lock() = Some(started_tx);
    *fs.hooks.release.lock() = Some(release_rx);
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.flush())
    };
    started_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the flush reached the manifest fsync");
    (db, flusher, release_tx)
}

#[test]
fn reads_proceed_while_the_manifest_is_being_synced() {
    let (db, flusher, release_tx) = flush_blocked_in_manifest_sync();
    let (read_tx, read_rx) = mpsc::channel();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ = read_tx.send(db.get(b"k"));
        })
    };
    let read = read_rx.recv_timeout(Duration::from_secs(5));
    let _ = release_tx.send(());
    reader.join().expect("reader");
    flusher.join().expect("flusher").expect("flush");
    let got = read.expect("a read completed while the manifest fsync was blocked");
    assert_eq!(got.expect("get"), Some(b"v".to_vec()));
}

/// Defect: the obsolete-file sweep (after a GC round, flush or compaction) read the
/// manifest's file number under the state lock through the manifest writer's mutex, which
/// an install holds across its append and fsync; every write waited for that fsync. Here a
/// GC round's sweep runs while a flush's manifest fsync is blocked; a write must complete
/// meanwhile.
#[test]
fn writes_proceed_while_a_sweep_runs_during_a_manifest_sync() {
    let (db, flusher, release_tx) = flush_blocked_in_manifest_sync();
    let collector = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            // Nothing to collect: the round samples nothing, then sweeps.
            db.gc(&wisckey::GcOptions {
                space_amp_target: 100.0,
                compact_first: false,
                ..wisckey::GcOptions::default()
            })
        })
    };
    // With the fix the round ends (its sweep waits for nothing); without it the round
    // blocks in its sweep holding the state lock. Either way, wait until it has had time
    // to get there.
    let started = std::time::Instant::now();
    while !collector.is_finished() && started.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let round_ended = collector.is_finished();
    let (write_tx, write_rx) = mpsc::channel();
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ = write_tx.send(db.put(b"k2", b"v2"));
        })
    };
    let written = write_rx.recv_timeout(Duration::from_secs(5));
    let _ = release_tx.send(());
    writer.join().expect("writer");
    flusher.join().expect("flusher").expect("flush");
    collector.join().expect("collector").expect("gc");
    written
        .expect("a write completed while the manifest fsync was blocked")
        .expect("put");
    assert!(
        round_ended,
        "the GC round was still in its sweep while the manifest fsync was blocked"
    );
    assert_eq!(db.get(b"k2").expect("get"), Some(b"v2".to_vec()));
}

/// Defect: a flush whose manifest append failed on a full disk left its table pending
/// (the edit might be on disk) and never released it, though the retry's install rewrote
/// the manifest from memory without it: every failed attempt kept a table file on the
/// full disk until the next open.
#[test]
fn a_table_of_a_failed_install_is_removed_once_a_later_install_succeeds() {
    let fs = HookFs::new(common::ManifestAppendNoSpace::default());
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open");
    for i in 0..100u32 {
        db.put(format!("key{i:03}"), b"value").expect("put");
    }
    fs.hooks.armed.store(true, Ordering::SeqCst);
    // The first install fails; the flush is retried (a full disk is not latched).
    let mut tries = 0;
    while let Err(e) = db.flush() {
        assert!(e.is_no_space(), "{e}");
        tries += 1;
        assert!(tries < 100, "the flush never succeeded");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!fs.hooks.armed.load(Ordering::SeqCst), "the append failed");
    // Another install runs the sweep after the failed attempt is released.
    db.put(b"more", b"value").expect("put");
    db.flush().expect("flush");
    let tables_on_disk = fs
        .mem
        .list(Path::new("/db"))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .count();
    let tables_listed: usize = (0..7)
        .map(|level| {
            db.property(&format!("wisckey.num-files-at-level{level}"))
                .expect("property")
                .expect("known property")
                .parse::<usize>()
                .expect("number")
        })
        .sum();
    assert_eq!(
        tables_on_disk, tables_listed,
        "a table no version lists is left"
    );
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("key{i:03}")).expect("get"),
            Some(b"value".to_vec())
        );
    }
}

/// An open rolls to a new manifest (write it, sync, then CURRENT through a temp file and a
/// rename). When the directory sync after that rename fails and CURRENT cannot be read
/// back either, the switch may have happened: the new manifest must stay. Removing it once
/// left CURRENT naming a missing manifest, and the database did not open again though the
/// old manifest was intact beside it. Every one of these calls fails in turn here; each
/// time the database must open again once the disk works, with its data.
#[test]
fn a_failed_manifest_switch_never_leaves_current_naming_a_missing_manifest() {
    use wisckey::fs::{FaultFs, FaultKind, FaultOps, FsOp, MemFs, PowerLoss};
    // A copy of what `mem` holds (everything is synced after a clean close).
    let copy = |mem: &MemFs| mem.power_loss_image(PowerLoss::DropUnsynced);
    const OPS: FaultOps = FaultOps::Only(&[FsOp::SyncDir, FsOp::Exists]);
    let mem = MemFs::new();
    {
        let db = Db::open("/db", Options::small_for_tests(Arc::new(mem.clone()))).expect("open");
        for i in 0..50u32 {
            db.put(format!("key{i:03}"), b"value").expect("put");
        }
        db.close().expect("close");
    }
    let counting = FaultFs::new(Arc::new(copy(&mem)));
    Db::open("/db", Options::small_for_tests(Arc::new(counting.clone())))
        .expect("open")
        .close()
        .expect("close");
    let calls = counting.calls_of(OPS);
    assert!(calls >= 2, "{calls} directory syncs and existence checks");
    for k in 1..=calls {
        let image = copy(&mem);
        let fault = FaultFs::new(Arc::new(image.clone()));
        fault.fail_at(k, FaultKind::Io, OPS, true);
        if let Ok(db) = Db::open("/db", Options::small_for_tests(Arc::new(fault))) {
            let _ = db.close();
        }
        let db = Db::open("/db", Options::small_for_tests(Arc::new(image)))
            .unwrap_or_else(|e| panic!("call {k} of {calls} failed: the reopen fails: {e}"));
        for i in 0..50u32 {
            assert_eq!(
                db.get(format!("key{i:03}")).expect("get"),
                Some(b"value".to_vec()),
                "call {k}"
            );
        }
    }
}

/// Fails, while armed, the directory sync after the first manifest's CURRENT switch (the
/// one after CURRENT's temp file was created and renamed) with ENOSPC, so the open retries
/// with the space reserve released; then the first append to any later manifest with EIO.
#[derive(Debug, Default)]
struct FailSwitchThenRewrite {
    armed: AtomicBool,
    manifests_created: Mutex<Vec<std::path::PathBuf>>,
    current_temp_created: AtomicBool,
    switch_failed: AtomicBool,
    rewrite_failed: AtomicBool,
}

fn is_manifest(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
}

impl Hooks for FailSwitchThenRewrite {
    fn before_create(&self, path: &Path) -> Result<()> {
        if self.armed.load(Ordering::SeqCst) {
            if is_manifest(path) {
                self.manifests_created.lock().push(path.to_path_buf());
            } else if path.extension().is_some_and(|e| e == "tmp") {
                self.current_temp_created.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    }
    fn before_sync_dir(&self, dir: &Path) -> Result<()> {
        if self.armed.load(Ordering::SeqCst)
            && self.current_temp_created.load(Ordering::SeqCst)
            && !self.switch_failed.swap(true, Ordering::SeqCst)
        {
            return Err(wisckey::Error::io(
                format!("sync {}", dir.display()),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        Ok(())
    }
    fn before_append(&self, path: &Path, _data: &[u8]) -> Result<()> {
        let later_manifest = self.manifests_created.lock().len() >= 2;
        if self.armed.load(Ordering::SeqCst)
            && later_manifest
            && is_manifest(path)
            && !self.rewrite_failed.swap(true, Ordering::SeqCst)
        {
            return Err(wisckey::Error::io(
                format!("append {}", path.display()),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        Ok(())
    }
}

/// An open whose CURRENT switch failed on a full disk retries with the space reserve
/// released. The failed attempt may already have renamed CURRENT to name its new manifest;
/// the retry once wrote its manifest under the same number, truncating the manifest CURRENT
/// named, so a retry that failed in turn (or a crash during it) left CURRENT naming an
/// empty manifest and the database unopenable ("MANIFEST-000006 has no manifest magic").
/// The retry must take a new number.
#[test]
fn an_opens_full_disk_retry_never_rewrites_the_manifest_current_names() {
    full_disk_retry_after_the_current_switch(true);
}

/// The same open whose retry succeeds: it opens with the data, and the failed attempt's
/// manifest (which CURRENT named for a while) is swept once the retry's is current.
#[test]
fn an_opens_successful_full_disk_retry_leaves_one_manifest() {
    full_disk_retry_after_the_current_switch(false);
}

fn full_disk_retry_after_the_current_switch(fail_the_retry: bool) {
    let fs = HookFs::new(FailSwitchThenRewrite::default());
    let expect_data = |db: &Db| {
        for i in 0..50u32 {
            assert_eq!(
                db.get(format!("key{i:03}")).expect("get"),
                Some(b"value".to_vec())
            );
        }
    };
    {
        let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open");
        for i in 0..50u32 {
            db.put(format!("key{i:03}"), b"value").expect("put");
        }
        db.close().expect("close");
    }
    // A retry that is not to fail finds its one failure already spent.
    fs.hooks
        .rewrite_failed
        .store(!fail_the_retry, Ordering::SeqCst);
    fs.hooks.armed.store(true, Ordering::SeqCst);
    let first = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone())));
    fs.hooks.armed.store(false, Ordering::SeqCst);
    assert!(
        fs.hooks.switch_failed.load(Ordering::SeqCst),
        "the CURRENT switch's directory sync failed"
    );
    let created = fs.hooks.manifests_created.lock().clone();
    assert_eq!(created.len(), 2, "an attempt and a retry: {created:?}");
    match first {
        Ok(db) => {
            assert!(
                !fail_the_retry,
                "the retry's manifest write failed, yet it opened"
            );
            expect_data(&db);
            db.close().expect("close");
        }
        Err(e) => assert!(fail_the_retry, "the retry failed: {e}"),
    }
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fs.clone())))
        .unwrap_or_else(|e| panic!("the reopen fails: {e}"));
    expect_data(&db);
    assert_ne!(
        created[0], created[1],
        "the retry reused the manifest number"
    );
    db.close().expect("close");
    let manifests: Vec<String> = fs
        .list(Path::new("/db"))
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    assert_eq!(manifests.len(), 1, "manifests left: {manifests:?}");
}
