//! Reads verify what they read (WiscKey §3.3.3): a value-log record with a bad checksum, or
//! one holding another key, is reported as `Corruption` — never returned as data — and a
//! torn log tail is cut off on open so later writes do not sit behind it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs, PowerLoss};
use wisckey::{Db, Error, Options};

const DIR: &str = "/db";

fn options(fs: &MemFs) -> Options {
    Options {
        value_threshold: 16,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

fn vlog_files(fs: &MemFs) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list(Path::new(DIR))
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".vlog"))
        .map(|n| Path::new(DIR).join(n))
        .collect();
    v.sort();
    v
}

fn read_file(fs: &MemFs, path: &Path) -> Vec<u8> {
    fs.contents(path).expect("file exists")
}

fn write_file(fs: &MemFs, path: &Path, bytes: &[u8]) {
    fs.set_contents(path, bytes).expect("rewrite");
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
}

/// Writes two same-sized values, flushes so they are read from the log file (not replayed
/// into the memtable on reopen), and closes.
fn setup() -> MemFs {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).expect("open");
    db.put(b"alpha", [b'A'; 100]).expect("put");
    db.put(b"bravo", [b'B'; 100]).expect("put");
    db.flush().expect("flush");
    db.close().expect("close");
    fs
}

#[test]
fn flipped_value_byte_is_corruption_not_data() {
    let fs = setup();
    let path = vlog_files(&fs).remove(0);
    let mut bytes = read_file(&fs, &path);
    let at = find(&bytes, &[b'A'; 100]) + 50;
    bytes[at] ^= 0x20;
    write_file(&fs, &path, &bytes);
    let db = Db::open(DIR, options(&fs)).expect("open");
    match db.get(b"alpha") {
        Err(Error::Corruption { file, .. }) => assert!(file.ends_with(".vlog"), "{file}"),
        other => panic!("expected Corruption, got {other:?}"),
    }
    assert_eq!(
        db.get(b"bravo").expect("other key intact"),
        Some(vec![b'B'; 100])
    );
}

#[test]
fn record_of_another_key_is_corruption_not_data() {
    let fs = setup();
    let path = vlog_files(&fs).remove(0);
    let mut bytes = read_file(&fs, &path);
    // The two records have the same length; swap them whole, so each still checks out but
    // the pointer for "alpha" now finds "bravo"'s record.
    let a = find(&bytes, b"alpha");
    let b = find(&bytes, b"bravo");
    let header = 22; // fixed record header before the key
    let len = b - a;
    let (ra, rb) = (a - header, b - header);
    let rec_a = bytes[ra..ra + len].to_vec();
    let rec_b = bytes[rb..rb + len].to_vec();
    bytes[ra..ra + len].copy_from_slice(&rec_b);
    bytes[rb..rb + len].copy_from_slice(&rec_a);
    write_file(&fs, &path, &bytes);
    let db = Db::open(DIR, options(&fs)).expect("open");
    for key in [&b"alpha"[..], b"bravo"] {
        match db.get(key) {
            Err(Error::Corruption { reason, .. }) => {
                assert!(
                    reason.contains("key"),
                    "reason names the key mismatch: {reason}"
                )
            }
            other => panic!("expected Corruption for {key:?}, got {other:?}"),
        }
    }
}

#[test]
fn torn_tail_is_truncated_and_later_writes_survive() {
    let live = MemFs::new();
    let db = Db::open(DIR, options(&live)).expect("open");
    for i in 0..20u32 {
        db.put(format!("k{i:02}"), vec![i as u8; 200]).expect("put");
    }
    db.sync().expect("sync");
    // Power cut (no clean close, so nothing was flushed and open must replay the log).
    let fs = live.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    // Tear the last record: cut the file in the middle of it and add zeroed garbage.
    let path = vlog_files(&fs).pop().expect("segment");
    let mut bytes = read_file(&fs, &path);
    // Past the zeros the sync wrote ahead of the records (`vlog_zero_fill_size`), if any.
    let cut = bytes.iter().rposition(|&b| b != 0).expect("records") + 1 - 100;
    bytes.truncate(cut);
    bytes.extend_from_slice(&[0u8; 300]);
    write_file(&fs, &path, &bytes);

    let db = Db::open(DIR, options(&fs)).expect("open after tear");
    assert_eq!(db.get(b"k19").expect("get"), None, "torn record is gone");
    assert_eq!(db.get(b"k18").expect("get"), Some(vec![18u8; 200]));
    db.put(b"after", b"tear").expect("put after tear");
    db.close().expect("close");
    let db = Db::open(DIR, options(&fs)).expect("reopen");
    assert_eq!(
        db.get(b"after").expect("get").as_deref(),
        Some(&b"tear"[..])
    );
    assert_eq!(db.get(b"k18").expect("get"), Some(vec![18u8; 200]));
}
