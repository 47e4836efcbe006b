//! On-disk formats are forever: a small database written by format version 1 is checked in
//! (`tests/fixtures/format-v1/`) and must keep opening with exactly these contents. It holds
//! an SSTable (flushed inline values, pointers and a tombstone), a manifest with a value-log
//! head, and value-log records after the head that open must replay.
//!
//! Regenerate only when a format version is deliberately bumped (and then add a new
//! fixture directory instead of replacing the old one):
//! `cargo test -p wisckey --test format_fixture -- --ignored regenerate_fixture`
//! (the format-4 manifest fixture: `… -- --ignored regenerate_v4_fixture`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs, PowerLoss};
use wisckey::{Db, Options, ReadOptions, WriteOptions};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1")
}

fn options() -> Options {
    Options {
        value_threshold: 64,
        ..Options::default()
    }
}

/// Writes `image`'s database files in `dir` (not LOCK or RESERVE) into `out`, replacing it.
fn write_fixture(image: &MemFs, dir: &Path, out: &Path) {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).expect("mkdir");
    for name in image.list(dir).expect("list") {
        if name == "LOCK" || name == "RESERVE" {
            continue;
        }
        let bytes = image.contents(&dir.join(&name)).expect("contents");
        std::fs::write(out.join(&name), bytes).expect("write fixture file");
    }
}

/// Copies fixture `from` into a fresh `db` directory under `temp`; returns it and the names.
fn copy_fixture(from: &Path, temp: &Path) -> (PathBuf, Vec<String>) {
    let dir = temp.join("db");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(from).expect("fixture exists") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy");
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    (dir, names)
}

/// Every key and value, in order.
fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().expect("value")));
        it.next();
    }
    it.status().expect("status");
    got
}

/// The contents the fixture must hold.
fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = vec![
        (b"".to_vec(), b"empty key".to_vec()),
        (b"inline".to_vec(), b"small value".to_vec()),
        (b"pointer".to_vec(), vec![b'p'; 300]),
        (b"replayed-inline".to_vec(), b"after the head".to_vec()),
        (b"replayed-pointer".to_vec(), vec![b'r'; 500]),
    ];
    v.sort();
    v
}

#[test]
#[ignore = "writes the fixture into the source tree; run only when bumping a format version"]
fn regenerate_fixture() {
    let mem = MemFs::new();
    let dir = Path::new("/fixture");
    let db = Db::open(dir, options().with_fs(Arc::new(mem.clone()))).expect("open");
    db.put(b"", b"empty key").expect("put");
    db.put(b"inline", b"small value").expect("put");
    db.put(b"pointer", vec![b'p'; 300]).expect("put");
    db.put(b"deleted", b"gone").expect("put");
    db.delete(b"deleted").expect("delete");
    db.flush().expect("flush");
    db.put(b"replayed-inline", b"after the head").expect("put");
    db.put_opt(
        b"replayed-pointer",
        vec![b'r'; 500],
        &WriteOptions { sync: true },
    )
    .expect("sync put");
    // A power cut here leaves the last two writes only in the log, after the head.
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    write_fixture(&image, dir, &fixture_dir());
}

#[test]
fn format_v1_fixture_still_opens_with_the_same_contents() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (dir, names) = copy_fixture(&fixture_dir(), temp.path());
    assert!(
        names.iter().any(|n| n.ends_with(".sst")),
        "fixture has a table"
    );
    assert!(
        names.iter().any(|n| n.ends_with(".vlog")),
        "fixture has a value log"
    );
    let db = Db::open(&dir, options()).expect("open the v1 fixture");
    assert_eq!(scan(&db), expected());
    assert_eq!(db.get(b"deleted").expect("get"), None);
    assert!(
        db.vlog_head().is_some(),
        "the fixture's manifest carries a head"
    );
}

/// The names of `dir`'s value-log segments.
fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".vlog"))
        .collect();
    names.sort();
    names
}

/// A segment of an older format is never appended to: the first write rolls to a new one.
/// An empty batch writes nothing, so it must not roll (nor, on a full disk, fail for want
/// of a segment it does not need).
#[test]
fn an_empty_batch_does_not_roll_past_an_older_formats_segment() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (dir, _) = copy_fixture(&fixture_dir(), temp.path());
    let before = segments(&dir);
    let db = Db::open(&dir, options()).expect("open the v1 fixture");
    for sync in [false, true] {
        db.write_opt(wisckey::WriteBatch::new(), &WriteOptions { sync })
            .expect("empty batch");
    }
    assert_eq!(segments(&dir), before, "an empty batch rolled the log");
    db.put(b"new", b"value").expect("put");
    assert_eq!(
        segments(&dir).len(),
        before.len() + 1,
        "the first record goes to a new segment"
    );
    assert_eq!(db.get(b"new").expect("get"), Some(b"value".to_vec()));
}

/// Manifest format 3 (segment sizes and dead bytes, tags 11 and 12) after a value-log GC
/// and a power cut: `tests/fixtures/manifest-v3-gc/` still holds the collected segments'
/// files (their unlinking was not durable) although its manifest records their removal, so
/// open must ignore them and the sweep delete them; records after the head are replayed.
fn v3_fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-v3-gc")
}

fn v3_options() -> Options {
    Options {
        value_threshold: 64,
        vlog_segment_size: 4096,
        gc_space_amp_target: f64::INFINITY,
        ..Options::default()
    }
}

fn v3_expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = (0..12u8)
        .map(|i| (format!("key{i:02}").into_bytes(), vec![b'a' + i; 400]))
        .collect();
    v.push((b"replayed".to_vec(), vec![b'z'; 300]));
    v.sort();
    v
}

// The format-3 fixture is frozen: it was written by the build of commit c9b97c2 (its
// generator is in that commit); newer builds write manifest format 4.

#[test]
fn manifest_v3_fixture_after_gc_still_opens_with_the_same_contents() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (dir, names) = copy_fixture(&v3_fixture_dir(), temp.path());
    let segments: Vec<&String> = names.iter().filter(|n| n.ends_with(".vlog")).collect();
    let db = Db::open(&dir, v3_options()).expect("open the v3 fixture");
    let after_open = (std::fs::read_dir(&dir).expect("ls").flatten())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".vlog"))
        .count();
    assert!(
        after_open < segments.len(),
        "open deletes the collected segments' files ({segments:?} -> {after_open} files)"
    );
    assert_eq!(scan(&db), v3_expected());
    assert_eq!(db.get(b"deleted").expect("get"), None);
    assert!(
        db.recovery_report().replayed_records > 0,
        "records after the head"
    );
    let stats = db.stats().expect("stats");
    assert!(
        (stats.value_log.segments.iter()).all(|s| s.dead_bytes <= s.size),
        "{stats:?}"
    );
}

fn v4_fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-v4-punched")
}

fn v4_options() -> Options {
    Options {
        value_threshold: 64,
        vlog_segment_size: 16 << 10,
        // Finite (hole punching is part of GC) but never reached: nothing is collected.
        gc_space_amp_target: 1000.0,
        ..Options::default()
    }
}

fn v4_value(i: u8, version: u8) -> Vec<u8> {
    vec![b'a' + i + 3 * version; 5000]
}

/// Four keys; the first two overwritten once. The first segment holds three first values
/// (two dead, punched out; one live).
fn v4_expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = (0..4u8)
        .map(|i| (format!("key{i}").into_bytes(), v4_value(i, u8::from(i < 2))))
        .collect();
    v.push((b"replayed".to_vec(), vec![b'z'; 300]));
    v.sort();
    v
}

#[test]
#[ignore = "writes the fixture into the source tree; run only when bumping a format version"]
fn regenerate_v4_fixture() {
    let mem = MemFs::new();
    let dir = Path::new("/fixture");
    let db = Db::open(dir, v4_options().with_fs(Arc::new(mem.clone()))).expect("open");
    for (version, keys) in [(0u8, 0..4u8), (1, 0..2)] {
        for i in keys {
            db.put(format!("key{i}"), v4_value(i, version))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    let punch_only = wisckey::GcOptions {
        space_amp_target: 1000.0,
        compact_first: false,
        ..wisckey::GcOptions::default()
    };
    db.gc(&punch_only).expect("gc");
    let stats = db.stats().expect("stats");
    assert!(stats.gc.bytes_punched > 0, "{stats:?}");
    db.put_opt(b"replayed", vec![b'z'; 300], &WriteOptions { sync: true })
        .expect("sync put");
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    write_fixture(&image, dir, &v4_fixture_dir());
}

/// Manifest format 4 records the ranges GC punched out of segments: they are still known
/// after a reopen, every value reads, and a collection steps over the holes.
#[test]
fn manifest_v4_fixture_with_punched_ranges_still_opens_with_the_same_contents() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (dir, _) = copy_fixture(&v4_fixture_dir(), temp.path());
    let db = Db::open(&dir, v4_options()).expect("open the v4 fixture");
    assert_eq!(scan(&db), v4_expected());
    let stats = db.stats().expect("stats");
    let punched: u64 = stats
        .value_log
        .segments
        .iter()
        .map(|s| s.punched_bytes)
        .sum();
    assert_eq!(
        punched, 4096,
        "the fixture's punched range is known: {stats:?}"
    );
    let first = std::fs::read(dir.join("000001.vlog")).expect("read");
    assert!(
        first[4096..8192].iter().all(|&b| b == 0),
        "the fixture's hole reads as zeros"
    );
    let done = db.gc(&wisckey::GcOptions::default()).expect("gc");
    assert!(done.segments_collected > 0, "{done:?}");
    assert_eq!(scan(&db), v4_expected());
    drop(db);
    let db = Db::open(&dir, v4_options()).expect("reopen");
    assert_eq!(scan(&db), v4_expected());
}
