//! `Db::checkpoint`: a copy made while a writer runs holds exactly a prefix of its writes
//! (and every write acknowledged before the call), opens on its own, and takes further
//! writes, GC and reopens without touching the original; an existing target is refused.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Error, GcOptions, Options, ReadOptions};

fn options(fs: &MemFs) -> Options {
    Options {
        gc_space_amp_target: 1.2,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Key `i` of the sequential writer holds this (sizes cycle through inline and log values).
fn value(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize([8, 100, 2000][i as usize % 3], b'v');
    v
}

/// Every key and value, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn contents(db: &Db) -> Entries {
    db.range::<&[u8], _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan")
}

#[test]
fn a_checkpoint_taken_during_writes_holds_a_prefix_and_lives_on_its_own() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open(Path::new("/db"), options(&fs)).expect("open"));
    // Churn first, so GC has segments to collect and punch while the writer runs.
    for round in 0..3u64 {
        for i in 0..200 {
            db.put(format!("churn{i:03}"), vec![round as u8; 1500])
                .expect("put");
        }
    }
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, written) = (Arc::clone(&db), Arc::clone(&written));
        std::thread::spawn(move || {
            for i in 0..3000u64 {
                db.put(key(i), value(i)).expect("put");
                written.store(i + 1, Ordering::SeqCst);
                if i % 500 == 0 {
                    db.delete(format!("churn{:03}", i % 200)).expect("delete");
                }
            }
        })
    };
    while written.load(Ordering::SeqCst) < 1000 {
        std::thread::yield_now();
    }
    let acknowledged = written.load(Ordering::SeqCst);
    let report = db.checkpoint(Path::new("/backup")).expect("checkpoint");
    writer.join().expect("writer");
    assert!(report.tables > 0 && report.segments > 0, "{report:?}");

    let backup = Db::open(Path::new("/backup"), options(&fs)).expect("open the checkpoint");
    // Exactly keys 0..n of the sequential writer, n at least what was acknowledged before.
    let mut n = 0;
    while backup.get(key(n)).expect("get").is_some() {
        assert_eq!(backup.get(key(n)).expect("get"), Some(value(n)));
        n += 1;
    }
    assert!(
        n >= acknowledged,
        "{n} keys, {acknowledged} acknowledged before the checkpoint"
    );
    assert!(n <= 3000);
    let keys = backup.keys("key".."kez").expect("keys").count() as u64;
    assert_eq!(keys, n, "no key after the prefix");

    // The copy lives on its own: writes, GC, a reopen; the original is untouched.
    let original = contents(&db);
    backup.put("only-in-backup", "x").expect("put");
    for i in 0..200u64 {
        backup.delete(format!("churn{i:03}")).expect("delete");
    }
    backup
        .gc(&GcOptions::default())
        .expect("gc in the checkpoint");
    backup.close().expect("close");
    let backup = Db::open(Path::new("/backup"), options(&fs)).expect("reopen the checkpoint");
    assert_eq!(
        backup.get("only-in-backup").expect("get"),
        Some(b"x".to_vec())
    );
    let check = backup.check().expect("check");
    assert!(check.is_ok(), "{:?}", check.problems);
    assert_eq!(contents(&db), original);
    assert_eq!(db.get("only-in-backup").expect("get"), None);
}

#[test]
fn a_checkpoint_refuses_an_existing_target_and_matches_a_quiet_database_exactly() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), options(&fs)).expect("open");
    for i in 0..500u64 {
        db.put(key(i), value(i)).expect("put");
        if i % 7 == 0 {
            db.delete(key(i / 2)).expect("delete");
        }
    }
    db.flush().expect("flush");
    for i in 500..600u64 {
        db.put(key(i), value(i)).expect("put"); // In the memtable: replayed by the copy.
    }
    let snapshot = db.snapshot();
    let expected = contents(&db);
    db.checkpoint(Path::new("/copy")).expect("checkpoint");
    let again = db.checkpoint(Path::new("/copy"));
    assert!(
        matches!(&again, Err(Error::InvalidArgument(m)) if m.contains("/copy already exists")),
        "{again:?}"
    );
    // An empty path is named as such (it once shared "already exists (or is empty)").
    let empty = db.checkpoint(Path::new(""));
    assert!(
        matches!(&empty, Err(Error::InvalidArgument(m)) if m.contains("an empty path")),
        "{empty:?}"
    );
    let refused = db.checkpoint(Path::new("/db"));
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    // A new directory inside the database would become part of it: refused, nothing made.
    for inside in ["/db/backup", "/db/./new/copy", "/elsewhere/../db/backup"] {
        let refused = db.checkpoint(Path::new(inside));
        assert!(
            matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("inside")),
            "{inside}: {refused:?}"
        );
    }
    assert!(!fs.exists(Path::new("/db/backup")).expect("exists"));
    assert!(!fs.exists(Path::new("/db/new")).expect("exists"));
    db.checkpoint(Path::new("/db2"))
        .expect("a sibling whose name starts alike");
    let copy = Db::open(Path::new("/copy"), options(&fs)).expect("open the copy");
    assert_eq!(contents(&copy), expected);
    let at_snapshot: Vec<_> = db
        .range_opt::<&[u8], _>(
            ..,
            &ReadOptions {
                snapshot: Some(snapshot),
                ..ReadOptions::default()
            },
        )
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(at_snapshot, expected);
}

/// Defect: only the paths' text was compared, so a target named through a symbolic link
/// into the database's directory (or the database opened through a link) made the copy a
/// directory of the database, which `repair` then refused to rebuild around.
#[cfg(unix)]
#[test]
fn a_checkpoint_named_through_a_link_into_the_database_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let real = root.path().join("real");
    let link = root.path().join("link");
    std::fs::create_dir(&real).expect("mkdir");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let entries = || {
        let mut names: Vec<String> = std::fs::read_dir(&real)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let cases = [(&link, real.join("backup")), (&real, link.join("x/y"))];
    for (case, (opened_as, target)) in cases.into_iter().enumerate() {
        let db = Db::open(opened_as, Options::default()).expect("open");
        db.put("k", format!("v{case}")).expect("put");
        let before = entries();
        let refused = db.checkpoint(&target);
        assert!(
            matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("inside")),
            "opened as {}, checkpoint to {}: {refused:?}",
            opened_as.display(),
            target.display()
        );
        assert_eq!(entries(), before, "nothing was made inside the database");
        // Through the link, but outside the database: allowed.
        db.checkpoint(link.join("..").join(format!("copy-{case}")))
            .expect("a checkpoint beside the database");
        db.close().expect("close");
    }
    let report = Db::repair(&real, Options::default()).expect("repair still works");
    assert!(report.problems.is_empty(), "{report:?}");
    for case in 0..2 {
        let copy = Db::open(root.path().join(format!("copy-{case}")), Options::default())
            .expect("open the copy");
        let expected = format!("v{case}").into_bytes();
        assert_eq!(copy.get("k").expect("get"), Some(expected));
    }
}

/// Defect: the checkpoint synced its files and its own directory but never the directories
/// holding the new directory's entry, so after `checkpoint` returned a power cut could lose
/// the whole copy (on XFS or btrfs). The same held for a new database's directory.
#[test]
fn new_directories_are_made_durable_in_their_parents() {
    use wisckey::fs::{FaultFs, FsOp};
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let fs: Arc<dyn wisckey::fs::FileSystem> = Arc::new(fault.clone());
    let synced_dirs = |fault: &FaultFs| -> Vec<std::path::PathBuf> {
        (fault.recorded().into_iter())
            .filter(|(op, _)| *op == FsOp::SyncDir)
            .map(|(_, path)| path)
            .collect()
    };
    fault.record_calls(true);
    let db = Db::open(
        Path::new("/data/dbs/db"),
        Options::small_for_tests(Arc::clone(&fs)),
    )
    .expect("open");
    let synced = synced_dirs(&fault);
    for parent in ["/data/dbs", "/data", "/"] {
        assert!(
            synced.iter().any(|p| p == Path::new(parent)),
            "{parent} synced after the database's directory was created: {synced:?}"
        );
    }
    db.put(b"k", b"v").expect("put");
    fault.record_calls(true);
    db.checkpoint("/backups/today/copy").expect("checkpoint");
    let synced = synced_dirs(&fault);
    for parent in ["/backups/today", "/backups", "/"] {
        assert!(
            synced.iter().any(|p| p == Path::new(parent)),
            "{parent} synced after the checkpoint's directory was created: {synced:?}"
        );
    }
    // An existing directory's parent is left alone.
    fault.record_calls(true);
    drop(db);
    let reopened = Db::open(
        Path::new("/data/dbs/db"),
        Options::small_for_tests(Arc::clone(&fs)),
    )
    .expect("reopen");
    assert!(
        !synced_dirs(&fault)
            .iter()
            .any(|p| p == Path::new("/data/dbs")),
        "reopening syncs no parent"
    );
    drop(reopened);
}

/// Two checkpoints racing to one target: one makes the copy, the other refuses. (Both
/// passed the existence check, and the second rewrote the first's finished copy in place.)
#[test]
fn two_checkpoints_racing_to_one_target_make_one_copy() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open(Path::new("/db"), options(&fs)).expect("open"));
    for i in 0..300u64 {
        db.put(key(i), value(i)).expect("put");
    }
    let expected = contents(&db);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let (db, barrier) = (Arc::clone(&db), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                db.checkpoint(Path::new("/race"))
            })
        })
        .collect();
    let results: Vec<_> = racers
        .into_iter()
        .map(|r| r.join().expect("checkpoint thread"))
        .collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(Error::InvalidArgument(_)))),
        "{results:?}"
    );
    let copy = Db::open(Path::new("/race"), options(&fs)).expect("open the copy");
    assert_eq!(contents(&copy), expected);
}

/// A checkpoint cut short at any of its writes (an error, then a power cut) never leaves a
/// directory that opens as a database it is not: it opens with exactly the source's
/// contents (the copy was complete) or is refused. Without the `CHECKPOINT-INCOMPLETE`
/// marker, a copy cut before any data file (or of a database with no tables, cut while
/// its first segment held at most a header) looked like an interrupted creation, and open
/// completed it into a new, empty database.
#[test]
fn a_checkpoint_cut_short_at_any_write_never_opens_as_another_database() {
    use wisckey::fs::{FaultFs, FaultKind, FaultOps, PowerLoss};
    for flushed in [false, true] {
        let source = |fault: &FaultFs| -> (Db, Entries) {
            let opts = Options {
                gc_space_amp_target: f64::INFINITY,
                ..Options::small_for_tests(Arc::new(fault.clone()))
            };
            let db = Db::open("/db", opts).expect("open");
            for i in 0..6 {
                db.put(key(i), value(i)).expect("put");
            }
            if flushed {
                db.flush().expect("flush");
            }
            let before = contents(&db);
            (db, before)
        };
        let counting = FaultFs::new(Arc::new(MemFs::new()));
        let (db, _) = source(&counting);
        let start = counting.calls();
        db.checkpoint("/copy").expect("checkpoint");
        let calls = counting.calls() - start;
        drop(db);
        let (mut refused, mut complete) = (0, 0);
        for n in 1..=calls + 1 {
            let mem = MemFs::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let (db, before) = source(&fault);
            fault.fail_at(n, FaultKind::Io, FaultOps::Writes, true);
            let result = db.checkpoint("/copy");
            fault.clear();
            drop(db);
            // What the failed checkpoint left (no power cut), and two power-cut images.
            let images = [
                ("no power cut".to_string(), mem.clone()),
                (
                    "power cut, unsynced lost".to_string(),
                    mem.power_loss_image(PowerLoss::DropUnsynced),
                ),
                (
                    "power cut, torn".to_string(),
                    mem.power_loss_image(PowerLoss::TornTail { seed: n }),
                ),
            ];
            for (what, image) in images {
                let context = format!("flushed: {flushed}; cut at write {n} of {calls} ({what})");
                let made = image.exists(Path::new("/copy")).expect("exists")
                    && (image.list(Path::new("/copy")).expect("list").iter())
                        .any(|name| name != "LOCK");
                if !made {
                    // Nothing was copied (no directory, or an empty one: an open creates a
                    // database there, as it would in any empty directory).
                    refused += 1;
                    continue;
                }
                match Db::open("/copy", Options::small_for_tests(Arc::new(image))) {
                    Ok(copy) => {
                        complete += 1;
                        assert!(
                            contents(&copy) == before,
                            "{context}: the copy opened with other contents"
                        );
                    }
                    Err(e) => {
                        refused += 1;
                        assert!(result.is_err(), "{context}: a finished checkpoint: {e}");
                    }
                }
            }
        }
        assert!(
            refused > 0 && complete > 0,
            "{refused} refused, {complete} complete"
        );
    }
}
