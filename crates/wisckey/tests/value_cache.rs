//! The value cache (`Options::value_cache_size`): a hot key's value is read from the log
//! twice (it is admitted on its second miss), then served from memory; scans and `Db::check` never read through it and never fill it, so a scan cannot
//! flush it and `check` always sees the disk; overwrites and GC never make a get return a
//! value the key no longer has.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{HookFs, LogReads};
use wisckey::fs::FileSystem;
use wisckey::{Db, GcOptions, Options, ReadOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    // Above the 64-byte threshold: every value lives behind a pointer.
    format!("value-{i}-{round}-").repeat(12).into_bytes()
}

fn open(fs: &HookFs<LogReads>, cache_bytes: usize) -> Db {
    let mut options = Options::small_for_tests(Arc::new(fs.clone()) as Arc<dyn FileSystem>);
    // Background GC samples the log; these tests count the reads of gets and scans.
    options.gc_space_amp_target = f64::INFINITY;
    options.value_cache_size = cache_bytes;
    Db::open(Path::new("/db"), options).expect("open")
}

fn log_reads(fs: &HookFs<LogReads>) -> usize {
    fs.hooks.reads.load(Ordering::SeqCst)
}

#[test]
fn a_hot_key_is_read_from_the_log_twice_then_from_memory() {
    let fs = HookFs::new(LogReads::default());
    let db = open(&fs, 1 << 20);
    for i in 0..100 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let before = log_reads(&fs);
    for _ in 0..50 {
        assert_eq!(db.get(key(7)).expect("get"), Some(value(7, 0)));
    }
    assert_eq!(log_reads(&fs) - before, 2, "50 gets of one key");
    let mut scratch = Vec::new();
    let lent = db.get_with(key(7), &mut scratch, |v| v == value(7, 0));
    assert_eq!(lent.expect("get_with"), Some(true));
    assert_eq!(log_reads(&fs) - before, 2, "get_with lent the cached value");
    let values = db.multi_get(&[key(7), key(8)]).expect("multi_get");
    assert_eq!(values, vec![Some(value(7, 0)), Some(value(8, 0))]);
    assert_eq!(
        log_reads(&fs) - before,
        3,
        "multi_get read only the uncached key"
    );
    // A key read once is not kept: every other key of a sweep is read again.
    let before = log_reads(&fs);
    for i in 20..100 {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i, 0)));
    }
    assert_eq!(log_reads(&fs) - before, 80, "first gets of 80 keys");
}

#[test]
fn without_a_cache_every_get_reads_the_log() {
    let fs = HookFs::new(LogReads::default());
    let db = open(&fs, 0);
    db.put(key(1), value(1, 0)).expect("put");
    db.flush().expect("flush");
    let before = log_reads(&fs);
    for _ in 0..10 {
        assert_eq!(db.get(key(1)).expect("get"), Some(value(1, 0)));
    }
    assert_eq!(log_reads(&fs) - before, 10);
}

#[test]
fn scans_and_check_neither_use_nor_fill_the_cache() {
    let fs = HookFs::new(LogReads::default());
    let db = open(&fs, 1 << 20);
    for i in 0..200 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    for _ in 0..2 {
        for i in 0..200 {
            db.get(key(i)).expect("get");
        }
    }
    // Every value is cached now (each was missed twice); a scan still reads each from the log.
    let before = log_reads(&fs);
    let scanned: Vec<_> = db
        .range::<Vec<u8>, _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan");
    assert_eq!(scanned.len(), 200);
    assert!(
        log_reads(&fs) - before >= 1,
        "the scan read nothing from the log"
    );
    // A scan without read-ahead reads each value itself, past the cache.
    let before = log_reads(&fs);
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek(&key(150));
    assert_eq!(it.value().expect("value"), value(150, 0));
    drop(it);
    assert_eq!(log_reads(&fs) - before, 1);
    // check reads every value from the disk.
    let before = log_reads(&fs);
    let report = db.check().expect("check");
    assert!(report.is_ok(), "{report:?}");
    assert!(log_reads(&fs) - before >= 1);

    // A fresh key read by scans only is not cached: its first get reads the log.
    let fresh = HookFs::new(LogReads::default());
    let db = open(&fresh, 1 << 20);
    db.put(key(1), value(1, 0)).expect("put");
    db.flush().expect("flush");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    assert_eq!(it.value().expect("value"), value(1, 0));
    drop(it);
    let before = log_reads(&fresh);
    assert_eq!(db.get(key(1)).expect("get"), Some(value(1, 0)));
    assert_eq!(log_reads(&fresh) - before, 1);
}

#[test]
fn overwrites_deletes_and_gc_never_return_a_stale_cached_value() {
    let fs = HookFs::new(LogReads::default());
    let db = open(&fs, 1 << 20);
    for round in 0..4 {
        for i in 0..300 {
            db.put(key(i), value(i, round)).expect("put");
        }
        db.flush().expect("flush");
        for i in 0..300 {
            assert_eq!(db.get(key(i)).expect("get"), Some(value(i, round)));
        }
    }
    for i in (0..300).step_by(5) {
        db.delete(key(i)).expect("delete");
    }
    let outcome = db.gc(&GcOptions::default()).expect("gc");
    assert!(outcome.segments_collected > 0, "{outcome:?}");
    for i in 0..300 {
        let expected = (i % 5 != 0).then(|| value(i, 3));
        assert_eq!(db.get(key(i)).expect("get"), expected, "key {i}");
    }
    db.close().expect("close");
}
