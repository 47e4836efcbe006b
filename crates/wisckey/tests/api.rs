//! The Rust iterator surface: `Db::range` (any `RangeBounds`, both ends, one snapshot),
//! `Db::prefix`, `Db::keys` and `Range::keys` (no value read: the value log is never
//! touched), `for (k, v) in db.iter(..)?`, and `Db::contains_key`. Answers are checked
//! against a `BTreeMap` over a seeded set of keys and random ranges.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{HookFs, Hooks};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::MemFs;
use wisckey::{Db, Error, Options, ReadOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn populated(fs: Arc<dyn wisckey::fs::FileSystem>) -> (Db, Model) {
    let options = Options {
        // No background GC: its sampling reads the value log, which the key-only test counts.
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(fs)
    };
    let db = Db::open(Path::new("/api"), options).expect("open");
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(5);
    for i in 0..600u32 {
        let key = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
        if i % 7 == 0 {
            db.delete(&key).expect("delete");
            model.remove(&key);
        } else {
            let value = vec![(i % 251) as u8; [10, 100, 3000][i as usize % 3]];
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
        if i == 300 {
            db.flush().expect("flush");
        }
    }
    (db, model)
}

fn bound(rng: &mut SmallRng) -> Bound<Vec<u8>> {
    let key = format!("k{:04}", rng.gen_range(0..420)).into_bytes();
    match rng.gen_range(0..3) {
        0 => Bound::Included(key),
        1 => Bound::Excluded(key),
        _ => Bound::Unbounded,
    }
}

fn valid_range(lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    match (lower, upper) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        (Bound::Excluded(a), Bound::Included(b)) => a < b,
        _ => true,
    }
}

#[test]
fn ranges_from_both_ends_match_the_model() {
    let (db, model) = populated(Arc::new(MemFs::new()));
    let mut rng = SmallRng::seed_from_u64(17);
    for case in 0..300 {
        let (lower, upper) = (bound(&mut rng), bound(&mut rng));
        if !valid_range(&lower, &upper) {
            continue;
        }
        let range = (lower.clone(), upper.clone());
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(range.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let context = format!("case {case}: {lower:?}..{upper:?}");
        let forward: Vec<_> = (db.range(range.clone()).expect("range"))
            .collect::<Result<_, _>>()
            .expect("forward");
        assert_eq!(forward, expected, "{context}: forward");
        let mut backward: Vec<_> = (db.range(range.clone()).expect("range").rev())
            .collect::<Result<_, _>>()
            .expect("backward");
        backward.reverse();
        assert_eq!(backward, expected, "{context}: backward");
        // Both ends at once, in a random interleaving: every entry exactly once.
        let mut both = db.range(range.clone()).expect("range");
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if rng.gen_bool(0.5) {
                both.next().map(|e| (true, e))
            } else {
                both.next_back().map(|e| (false, e))
            };
            match item {
                Some((true, e)) => front.push(e.expect("front")),
                Some((false, e)) => back.push(e.expect("back")),
                None => break,
            }
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, expected, "{context}: from both ends");
        let keys: Vec<Vec<u8>> = (db.keys(range.clone()).expect("keys"))
            .collect::<Result<_, _>>()
            .expect("keys");
        let expected_keys: Vec<Vec<u8>> = expected.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, expected_keys, "{context}: keys");
    }
    // Every form of RangeBounds the standard library has.
    let all: Vec<_> = db
        .range::<&[u8], _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("all");
    assert_eq!(all.len(), model.len());
    let from = db.range("k0200"..).expect("range").count();
    assert_eq!(from, model.range(b"k0200".to_vec()..).count());
    let to = db.range(..="k0100").expect("range").count();
    assert_eq!(to, model.range(..=b"k0100".to_vec()).count());
    let backwards = db.range("k0300".."k0100");
    assert!(
        matches!(backwards, Err(Error::InvalidArgument(_))),
        "{backwards:?}"
    );
}

#[test]
fn a_range_reads_one_snapshot_while_writes_go_on() {
    let (db, model) = populated(Arc::new(MemFs::new()));
    let mut range = db.range::<&[u8], _>(..).expect("range");
    let first = range.next().expect("an entry").expect("entry");
    // Writes after the range was made are not seen by either end.
    for (k, _) in model.iter().take(50) {
        db.delete(k).expect("delete");
    }
    db.put("k9999", "new").expect("put");
    db.flush().expect("flush");
    let mut seen = vec![first];
    while let Some(e) = range.next_back() {
        seen.push(e.expect("entry"));
    }
    seen[1..].reverse();
    let expected: Vec<_> = model.into_iter().collect();
    assert_eq!(seen, expected);
}

#[test]
fn prefix_iter_into_iterator_and_contains_key() {
    let db = Db::open(
        Path::new("/api"),
        Options::small_for_tests(Arc::new(MemFs::new())),
    )
    .expect("open");
    for (k, v) in [
        ("a", "1"),
        ("user:1", "ann"),
        ("user:2", "bob"),
        ("user;", "x"),
    ] {
        db.put(k, v).expect("put");
    }
    db.put([0xffu8, 0xff, 1], "high").expect("put");
    let users: Vec<_> = db
        .prefix("user:")
        .expect("prefix")
        .collect::<Result<_, _>>()
        .expect("users");
    assert_eq!(
        users,
        [
            (b"user:1".to_vec(), b"ann".to_vec()),
            (b"user:2".to_vec(), b"bob".to_vec())
        ]
    );
    assert_eq!(db.prefix([0xffu8, 0xff]).expect("prefix").count(), 1);
    assert_eq!(db.prefix("").expect("prefix").count(), 5);

    let mut all = Vec::new();
    for entry in db.iter(&ReadOptions::default()).expect("iter") {
        all.push(entry.expect("entry").0);
    }
    assert_eq!(all.len(), 5);
    // From a cursor's current position on.
    let mut cursor = db.iter(&ReadOptions::default()).expect("iter");
    cursor.seek(b"user:2");
    let rest: Vec<_> = cursor.into_iter().map(|e| e.expect("entry").0).collect();
    assert_eq!(
        rest,
        [b"user:2".to_vec(), b"user;".to_vec(), vec![0xff, 0xff, 1]]
    );
    // A cursor past the end gives nothing more, whether a seek or the scan took it there.
    let mut cursor = db.iter(&ReadOptions::default()).expect("iter");
    cursor.seek(&[0xffu8, 0xff, 0xff]);
    assert!(!cursor.valid());
    assert_eq!(cursor.into_iter().count(), 0, "a seek past the last key");
    let mut cursor = db.iter(&ReadOptions::default()).expect("iter");
    cursor.seek_to_last();
    cursor.next();
    assert_eq!(cursor.into_iter().count(), 0, "a scan that reached the end");

    assert!(db.contains_key("user:1").expect("contains"));
    assert!(!db.contains_key("user:3").expect("contains"));
    db.delete("user:1").expect("delete");
    assert!(!db.contains_key("user:1").expect("contains"));
}

/// Counts positional reads of value-log files.
#[derive(Debug, Default)]
struct CountLogReads(AtomicU64);

impl Hooks for CountLogReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        if path.extension().is_some_and(|e| e == "vlog") {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[test]
fn key_only_scans_and_contains_key_never_read_the_value_log() {
    let fs = HookFs::new(CountLogReads::default());
    let (db, model) = populated(Arc::new(fs.clone()));
    db.flush().expect("flush");
    let reads = || fs.hooks.0.load(Ordering::Relaxed);
    let before = reads();
    let keys = db.keys::<&[u8], _>(..).expect("keys").count();
    let back = db
        .range::<&[u8], _>(..)
        .expect("range")
        .keys()
        .rev()
        .count();
    for k in model.keys() {
        assert!(db.contains_key(k).expect("contains"));
    }
    assert_eq!((keys, back), (model.len(), model.len()));
    assert_eq!(reads() - before, 0, "key-only work read the value log");
    // The same scan with values reads it.
    let values = db.range::<&[u8], _>(..).expect("range").count();
    assert_eq!(values, model.len());
    assert!(
        reads() > before,
        "values of 100 and 3000 bytes live in the log"
    );
}

/// Tracks value-log reads in flight at once (each held a moment so that parallel ones meet).
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicU64,
    most: AtomicU64,
}

impl Hooks for InFlight {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        if path.extension().is_some_and(|e| e == "vlog") {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Ok(())
    }

    fn after_read(&self, path: &Path) {
        if path.extension().is_some_and(|e| e == "vlog") {
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn multi_get_answers_like_get_at_one_moment_with_reads_in_parallel() {
    let fs = HookFs::new(InFlight::default());
    let (db, model) = populated(Arc::new(fs.clone()));
    db.flush().expect("flush");
    let mut rng = SmallRng::seed_from_u64(23);
    let keys: Vec<Vec<u8>> = (0..64)
        .map(|_| format!("k{:04}", rng.gen_range(0..420)).into_bytes())
        .collect();
    let snapshot = db.snapshot();
    let values = db.multi_get(&keys).expect("multi_get");
    for (key, value) in keys.iter().zip(&values) {
        assert_eq!(
            value.as_ref(),
            model.get(key),
            "{}",
            String::from_utf8_lossy(key)
        );
    }
    assert!(
        fs.hooks.most.load(Ordering::SeqCst) > 1,
        "the value-log reads of one multi_get overlap"
    );
    // With a bound on the bytes it may hold: the same values when they fit, `None` when
    // they add up to one byte more than allowed.
    let total: usize = values.iter().flatten().map(Vec::len).sum();
    let none = ReadOptions::default();
    let within = db.multi_get_within(&keys, &none, total).expect("within");
    assert_eq!(within.as_ref(), Some(&values));
    assert!(
        total > 0
            && db
                .multi_get_within(&keys, &none, total - 1)
                .expect("over")
                .is_none()
    );
    // At a snapshot: later writes are not seen.
    for key in &keys {
        db.delete(key).expect("delete");
    }
    let opts = ReadOptions {
        snapshot: Some(snapshot),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.multi_get_opt(&keys, &opts)
            .expect("multi_get at snapshot"),
        values
    );
    assert!(db
        .multi_get(&keys)
        .expect("multi_get")
        .iter()
        .all(Option::is_none));
    assert!(db.multi_get::<&[u8]>(&[]).expect("empty").is_empty());
}

#[test]
fn delete_range_removes_exactly_the_range_at_once() {
    let (db, mut model) = populated(Arc::new(MemFs::new()));
    let deleted = db.delete_range("k0100".."k0200").expect("delete_range");
    let expected: Vec<Vec<u8>> = model
        .range(b"k0100".to_vec()..b"k0200".to_vec())
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(deleted, expected.len() as u64);
    for k in &expected {
        model.remove(k);
    }
    let left: Vec<_> = db
        .range::<&[u8], _>(..)
        .expect("range")
        .collect::<Result<_, _>>()
        .expect("scan");
    let model: Vec<_> = model.into_iter().collect();
    assert_eq!(left, model);
    assert_eq!(db.delete_range("k0100".."k0200").expect("again"), 0);
    // Too many keys for one batch: refused, nothing deleted.
    let small = Db::open(
        Path::new("/small"),
        Options {
            max_batch_size: 1 << 20,
            ..Options::small_for_tests(Arc::new(MemFs::new()))
        },
    )
    .expect("open");
    let long_key = vec![b'x'; 60_000];
    for i in 0..40u8 {
        let mut k = long_key.clone();
        k.push(i);
        small.put(&k, "v").expect("put");
    }
    let refused = small.delete_range::<&[u8], _>(..);
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    assert_eq!(small.keys::<&[u8], _>(..).expect("keys").count(), 40);
}
