//! `Db::open_read_only`: it writes nothing (every file's name, length, mtime and bytes stay
//! as they were, a torn tail included), it still replays the unflushed log so reads see
//! every acknowledged write, every write API is refused with `Error::ReadOnly` (a
//! checkpoint copies without writing to the database), read-only
//! opens share the directory, and a read-write open excludes them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use wisckey::{Db, Error, GcOptions, Options, WriteBatch, WriteOptions};

/// Name -> (length, mtime, bytes) of every file in `dir`.
fn files(dir: &Path) -> BTreeMap<String, (u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        if meta.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(entry.path()).expect("read");
            let mtime = meta.modified().expect("mtime");
            out.insert(name, (meta.len(), mtime, bytes));
        }
    }
    out
}

fn options() -> Options {
    Options {
        create_if_missing: false,
        value_threshold: 64,
        // Large: nothing is flushed behind the test's back.
        memtable_size: 64 << 20,
        memtable_max_log_bytes: 64 << 20,
        ..Options::default()
    }
}

fn value(i: u32) -> Vec<u8> {
    // Some inline (under value_threshold), most in the value log.
    let len = if i % 3 == 0 {
        10
    } else {
        500 + (i as usize % 7) * 100
    };
    vec![(i % 251) as u8; len]
}

/// A database whose first 200 keys are flushed into tables and whose last 200 are only in
/// the value log (sync writes, never flushed), as a power cut leaves it, with 100 bytes of
/// a torn record after the log's valid end. Returns the directory and the expected state.
fn crashed_database(root: &Path) -> (std::path::PathBuf, BTreeMap<Vec<u8>, Vec<u8>>) {
    let live = root.join("live");
    let image = root.join("image");
    let mut expected = BTreeMap::new();
    let db = Db::open(
        &live,
        Options {
            create_if_missing: true,
            ..options()
        },
    )
    .expect("open");
    for i in 0..200u32 {
        let key = format!("key{i:05}").into_bytes();
        db.put(&key, value(i)).expect("put");
        expected.insert(key, value(i));
    }
    db.flush().expect("flush");
    for i in 200..400u32 {
        let key = format!("key{i:05}").into_bytes();
        db.put_opt(&key, value(i), &WriteOptions { sync: true })
            .expect("put");
        expected.insert(key, value(i));
    }
    db.delete_opt(b"key00001", &WriteOptions { sync: true })
        .expect("delete");
    expected.remove(&b"key00001"[..]);
    // What a power cut now would leave (every write above was synced or flushed).
    std::fs::create_dir(&image).expect("mkdir");
    for (name, (_, _, bytes)) in files(&live) {
        std::fs::write(image.join(name), bytes).expect("copy");
    }
    drop(db);
    // A torn tail: half a record after the valid end of the newest segment.
    let newest = (files(&image).into_keys())
        .filter(|n| n.ends_with(".vlog"))
        .max()
        .expect("a segment");
    let mut segment = std::fs::read(image.join(&newest)).expect("read");
    segment.extend_from_slice(&[0x5a; 100]);
    std::fs::write(image.join(&newest), segment).expect("tear");
    (image, expected)
}

#[test]
fn read_only_open_writes_nothing_and_sees_unflushed_writes() {
    let root = tempfile::tempdir().expect("tempdir");
    let (dir, expected) = crashed_database(root.path());
    let before = files(&dir);
    assert!(
        before.keys().any(|n| n.ends_with(".sst")),
        "{:?}",
        before.keys()
    );

    let db = Db::open_read_only(&dir, options()).expect("open read-only");
    assert!(db.is_read_only());
    assert!(db.recovery_report().replayed_records >= 200);
    // Every acknowledged write, flushed or only in the log, through every read API.
    let mut buf = Vec::with_capacity(4096);
    for (key, want) in &expected {
        assert_eq!(db.get(key).expect("get").as_ref(), Some(want));
        assert!(db.get_into(key, &mut buf).expect("get_into"));
        assert_eq!(&buf, want);
    }
    assert_eq!(db.get(b"key00001").expect("get"), None);
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
        .range::<&[u8], _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(scanned, expected);
    let keys: Vec<&Vec<u8>> = expected.keys().collect();
    let values = db.multi_get(&keys).expect("multi_get");
    assert!(values
        .iter()
        .zip(expected.values())
        .all(|(got, want)| got.as_ref() == Some(want)));
    let report = db.check().expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(db.stats().expect("stats").value_log.live_bytes > 0);
    assert!(db.property("wisckey.stats").expect("property").is_some());

    // Every write API is refused, naming what it refused.
    let refused = |what: &str, result: wisckey::Result<()>| match result {
        Err(Error::ReadOnly(msg)) => assert!(!msg.is_empty(), "{what}"),
        other => panic!("{what} on a read-only database: {other:?}"),
    };
    refused("put", db.put(b"new", b"v"));
    refused(
        "put_opt",
        db.put_opt(b"new", b"v", &WriteOptions { sync: true }),
    );
    refused("delete", db.delete(b"key00002"));
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"b");
    refused("write", db.write(batch));
    refused("delete_range", db.delete_range::<&[u8], _>(..).map(drop));
    refused("flush", db.flush());
    refused("sync", db.sync());
    refused("compact_range", db.compact_range(None, None));
    refused("gc", db.gc(&GcOptions::default()).map(drop));
    // A checkpoint copies without writing to the database (its files are compared below).
    let copy = root.path().join("copy");
    db.checkpoint(&copy)
        .expect("checkpoint of a read-only handle");
    assert_eq!(
        db.get(b"key00002").expect("get"),
        expected.get(&b"key00002"[..]).cloned()
    );

    // Another read-only open shares the directory; a read-write open is locked out.
    let second = Db::open_read_only(&dir, options()).expect("second read-only open");
    assert_eq!(second.get(b"key00399").expect("get"), Some(value(399)));
    match Db::open(&dir, options()) {
        Err(Error::Locked(msg)) => assert!(msg.contains("LOCK"), "{msg}"),
        other => panic!("read-write open beside read-only ones: {other:?}"),
    }
    second.close().expect("close");
    db.close().expect("close");

    let after = files(&dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "no file created or removed"
    );
    for (name, (len, mtime, bytes)) in &before {
        let (len2, mtime2, bytes2) = &after[name];
        assert_eq!(
            (len, mtime),
            (len2, mtime2),
            "{name}: length or mtime changed"
        );
        assert!(bytes == bytes2, "{name}: bytes changed");
    }

    // The copy opens on its own and holds every acknowledged write, the ones only in the
    // log included (the torn bytes copied with the newest segment are cut at its open).
    let copied = Db::open(&copy, options()).expect("open the copy");
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = copied
        .range::<&[u8], _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(scanned, expected);
    assert!(copied.check().expect("check").is_ok());
    copied.close().expect("close");

    // A read-write open afterwards still sees everything (and cuts the torn tail).
    let db = Db::open(&dir, options()).expect("read-write open");
    // The junk, and the zeros the sync writes had written ahead of their records
    // (`vlog_zero_fill_size`), which lie before it.
    let torn = db.recovery_report().torn_tail_bytes;
    let fill = options().vlog_zero_fill_size;
    assert!(torn > 100 && torn <= 100 + fill, "{torn}");
    for (key, want) in &expected {
        assert_eq!(db.get(key).expect("get").as_ref(), Some(want));
    }
}

#[test]
fn read_only_open_is_refused_while_a_writer_holds_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Db::open(dir.path(), Options::default()).expect("open");
    writer.put(b"k", b"v").expect("put");
    match Db::open_read_only(dir.path(), Options::default()) {
        Err(Error::Locked(msg)) => assert!(msg.contains("LOCK"), "{msg}"),
        other => panic!("read-only open beside a writer: {other:?}"),
    }
    writer.close().expect("close");
    let reader = Db::open_read_only(dir.path(), Options::default()).expect("open read-only");
    assert_eq!(reader.get(b"k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn read_only_open_of_a_missing_database_creates_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("db");
    let options = Options {
        create_if_missing: true, // ignored by a read-only open
        ..Options::default()
    };
    match Db::open_read_only(&dir, options.clone()) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("does not exist"), "{msg}"),
        other => panic!("read-only open of nothing: {other:?}"),
    }
    assert!(!dir.exists());
    // An empty directory stays empty too.
    std::fs::create_dir(&dir).expect("mkdir");
    assert!(Db::open_read_only(&dir, options).is_err());
    assert_eq!(std::fs::read_dir(&dir).expect("read_dir").count(), 0);
}

/// A directory copied without its LOCK file opens read-only without one (creating it
/// would be a write).
#[test]
fn read_only_open_without_a_lock_file_creates_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    std::fs::remove_file(dir.path().join("LOCK")).expect("remove LOCK");
    let reader = Db::open_read_only(dir.path(), Options::default()).expect("open read-only");
    assert_eq!(reader.get(b"k").expect("get"), Some(b"v".to_vec()));
    reader.close().expect("close");
    assert!(!dir.path().join("LOCK").exists());
}

/// A segment file after the replayed log (a torn newest segment, which a read-only open
/// leaves as it is) is shown in `stats` at its file's length, not as a bare header (as a
/// read-write handle's segment being created is).
#[test]
fn read_only_stats_show_a_file_after_the_log_at_its_length() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let options = Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(std::sync::Arc::new(wisckey::fs::PosixFs::new()))
    };
    let db = Db::open(dir, options.clone()).expect("open");
    for i in 0..200u32 {
        db.put(format!("key{i:05}"), vec![b'v'; 300]).expect("put");
    }
    db.close().expect("close");
    let newest = (std::fs::read_dir(dir).expect("ls").flatten())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".vlog")
                .and_then(|n| n.parse::<u64>().ok())
        })
        .max()
        .expect("a segment");
    let stray = newest + 1;
    std::fs::write(dir.join(format!("{stray:06}.vlog")), vec![0u8; 200 << 10]).expect("write");
    let db = Db::open_read_only(dir, options).expect("read-only open");
    let stats = db.stats().expect("stats").value_log;
    let view = (stats.segments.iter())
        .find(|s| s.segment == stray)
        .expect("the file after the log is shown");
    assert_eq!(view.size, 200 << 10, "{view:?}");
}
