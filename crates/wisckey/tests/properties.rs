//! The read-side conveniences: `Db::get_into` reuses the caller's buffer, `Db::get_with`
//! lends the value where it lies (and reuses its scratch buffer), `Db::property`
//! answers its documented names (and `None` for others), and `Db::approximate_size` tracks
//! the bytes a range really holds.

use wisckey::{Db, Options, ReadOptions};

fn options() -> Options {
    Options {
        value_threshold: 64,
        gc_space_amp_target: f64::INFINITY,
        ..Options::default()
    }
}

/// A database holding a value in the log ("big"), an inline one ("small") and a deleted key.
fn open_with_each_kind_of_value(dir: &tempfile::TempDir) -> Db {
    let db = Db::open(dir.path(), options()).expect("open");
    db.put(b"big", vec![9u8; 3000]).expect("put"); // in the value log
    db.put(b"small", b"inline").expect("put");
    db.put(b"gone", b"x").expect("put");
    db.delete(b"gone").expect("delete");
    db
}

#[test]
fn get_into_reuses_the_callers_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_with_each_kind_of_value(&dir);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let address = buf.as_ptr();
    for round in 0..3 {
        assert!(db.get_into(b"big", &mut buf).expect("get_into"));
        assert_eq!(buf, vec![9u8; 3000]);
        assert!(db.get_into(b"small", &mut buf).expect("get_into"));
        assert_eq!(buf, b"inline");
        assert!(!db.get_into(b"gone", &mut buf).expect("get_into"));
        assert!(buf.is_empty());
        assert!(!db.get_into(b"never", &mut buf).expect("get_into"));
        assert_eq!(
            (buf.as_ptr(), buf.capacity()),
            (address, 4096),
            "round {round}: the buffer was reallocated"
        );
        if round == 1 {
            db.flush().expect("flush"); // now from a table
        }
    }
    // A value larger than the buffer grows it; a snapshot read sees the old value.
    let snapshot = ReadOptions {
        snapshot: Some(db.snapshot()),
        ..Default::default()
    };
    db.put(b"big", vec![1u8; 10_000]).expect("put");
    assert!(db.get_into(b"big", &mut buf).expect("get_into"));
    assert_eq!(buf.len(), 10_000);
    assert!(db
        .get_into_opt(b"big", &snapshot, &mut buf)
        .expect("get_into_opt"));
    assert_eq!(buf, vec![9u8; 3000]);
}

#[test]
fn get_with_lends_every_kind_of_value_and_reuses_its_scratch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_with_each_kind_of_value(&dir);
    let mut scratch: Vec<u8> = Vec::with_capacity(4096);
    let address = scratch.as_ptr();
    let lent = |key: &[u8], scratch: &mut Vec<u8>| {
        db.get_with(key, scratch, |value| value.to_vec())
            .expect("get_with")
    };
    // Round 0 reads "big" from the log's write buffer, then from the file (twice: the
    // value cache admits it on its second miss), then from the cache; the other keys
    // from the memtable, then from a table.
    for round in 0..4 {
        assert_eq!(
            lent(b"big", &mut scratch),
            Some(vec![9u8; 3000]),
            "round {round}"
        );
        assert_eq!(lent(b"small", &mut scratch), Some(b"inline".to_vec()));
        assert_eq!(lent(b"gone", &mut scratch), None);
        assert_eq!(lent(b"never", &mut scratch), None);
        assert_eq!(
            (scratch.as_ptr(), scratch.capacity()),
            (address, 4096),
            "round {round}: the scratch buffer was reallocated"
        );
        if round == 0 {
            db.flush().expect("flush");
        }
    }
    // What `use_value` returns comes back; a snapshot read lends the old value.
    let snapshot = ReadOptions {
        snapshot: Some(db.snapshot()),
        ..Default::default()
    };
    db.put(b"big", vec![1u8; 10_000]).expect("put");
    let len = db.get_with(b"big", &mut scratch, <[u8]>::len);
    assert_eq!(len.expect("get_with"), Some(10_000));
    let old = db.get_with_opt(b"big", &snapshot, &mut scratch, |v| v.to_vec());
    assert_eq!(old.expect("get_with_opt"), Some(vec![9u8; 3000]));
}

#[test]
fn properties_answer_their_documented_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let number = |name: &str| -> f64 {
        db.property(name)
            .expect("property")
            .unwrap_or_else(|| panic!("{name} unanswered"))
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(number("wisckey.num-files-at-level0"), 0.0);
    for i in 0..300u32 {
        db.put(format!("k{i:04}"), vec![(i % 256) as u8; 1000])
            .expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(number("wisckey.num-files-at-level0"), 1.0);
    assert_eq!(number("wisckey.num-files-at-level6"), 0.0);
    let level0_bytes = number("wisckey.bytes-at-level0");
    assert!(level0_bytes > 0.0);
    assert_eq!(number("wisckey.total-sst-size"), level0_bytes);
    let live = number("wisckey.vlog-live-bytes");
    assert!(live >= 300_000.0, "{live}");
    assert!(number("wisckey.vlog-total-bytes") >= live);
    assert!(number("wisckey.space-amplification") >= 1.0);
    assert_eq!(number("wisckey.estimate-num-keys"), 300.0);
    assert_eq!(number("wisckey.num-immutable-memtables"), 0.0);
    assert!(number("wisckey.last-sequence") >= 300.0);
    // Overwrites: the log holds dead bytes now, and the key estimate counts versions.
    for i in 0..300u32 {
        db.put(format!("k{i:04}"), vec![0u8; 1000]).expect("put");
    }
    db.flush().expect("flush");
    assert!(number("wisckey.space-amplification") > 1.5);
    assert_eq!(number("wisckey.estimate-num-keys"), 600.0);

    let stats = db
        .property("wisckey.stats")
        .expect("stats")
        .expect("answered");
    assert!(
        stats.contains("level") && stats.contains("value log"),
        "{stats}"
    );
    assert_eq!(
        stats
            .lines()
            .filter(|l| l.trim_start().starts_with('0'))
            .count(),
        1
    );
    for unknown in [
        "wisckey.nonsense",
        "leveldb.stats",
        "wisckey.num-files-at-level7",
        "wisckey.num-files-at-levelx",
        "",
    ] {
        assert_eq!(db.property(unknown).expect("property"), None, "{unknown}");
    }
    for name in Db::PROPERTY_NAMES {
        let name = name.replace("<N>", "1");
        assert!(db.property(&name).expect("property").is_some(), "{name}");
    }
}

#[test]
fn approximate_size_follows_the_data_in_the_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        target_file_size: 16 << 10,
        block_size: 1024,
        ..options()
    };
    let db = Db::open(dir.path(), options).expect("open");
    assert_eq!(db.approximate_size::<&str, _>(..).expect("empty"), 0);
    let n = 4000u32;
    let value_len = 1000u64;
    for i in 0..n {
        db.put(format!("k{i:05}"), vec![7u8; value_len as usize])
            .expect("put");
        if i == 0 {
            // Writes still in the memtable are not counted.
            assert_eq!(db.approximate_size::<&str, _>(..).expect("unflushed"), 0);
        }
        if i % 1000 == 999 {
            db.flush().expect("flush"); // four tables of disjoint key ranges
        }
    }
    let tables: usize = db.level_file_counts().iter().sum();
    assert!(tables > 1, "{tables} tables");

    let total = db.approximate_size::<&str, _>(..).expect("all");
    let data = u64::from(n) * value_len;
    assert!(
        total >= data && total <= data * 3 / 2,
        "all: {total} for {data} bytes of values"
    );
    let half = db.approximate_size("k00000".."k02000").expect("half");
    assert!(
        half >= total * 4 / 10 && half <= total * 6 / 10,
        "first half {half} of {total}"
    );
    let tenth = db.approximate_size("k01000"..="k01399").expect("tenth");
    assert!(
        tenth >= total / 20 && tenth <= total / 5,
        "a tenth: {tenth} of {total}"
    );
    let small = db.approximate_size("k02000".."k02001").expect("one key");
    assert!(small > 0 && small < total / 20, "one key: {small}");
    assert_eq!(db.approximate_size("x".."z").expect("past the end"), 0);
    assert_eq!(db.approximate_size("a".."b").expect("before the start"), 0);

    // The same after a compaction, which cuts the key index into other tables.
    db.compact_range(None, None).expect("compact");
    let after = db.approximate_size::<&str, _>(..).expect("all");
    assert!(after >= data && after <= data * 3 / 2, "{after}");
    let half = db.approximate_size("k00000".."k02000").expect("half");
    assert!(
        half >= after * 4 / 10 && half <= after * 6 / 10,
        "{half} of {after}"
    );
}

/// `Db::prefetch_keys` is a hint: around it, with versions spread over the memtable (with
/// chains of versions), the tables and, while flushes run, immutable memtables, and keys
/// repeated, absent or deleted in one batch, every read
/// (`get`, and `multi_get`, which touches its keys the same way) returns what a model says.
#[test]
fn prefetch_keys_never_changes_what_reads_return() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use std::collections::HashMap;
    let seed = 0x5eed_f00d_u64;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        memtable_size: 32 << 10,
        ..options()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for step in 0..4000 {
        let key = format!("k{:04}", rng.gen_range(0..600)).into_bytes();
        if rng.gen_bool(0.1) {
            db.delete(&key).expect("delete");
            model.remove(&key);
        } else {
            // Inline and log values both.
            let value = vec![(step % 251) as u8; rng.gen_range(1..200)];
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
        if step % 97 == 0 {
            let batch: Vec<Vec<u8>> = (0..rng.gen_range(0..40))
                .map(|_| format!("k{:04}", rng.gen_range(0..700)).into_bytes())
                .collect();
            db.prefetch_keys(&batch);
            let got = db.multi_get(&batch).expect("multi_get");
            for (key, value) in batch.iter().zip(got) {
                assert_eq!(
                    value.as_ref(),
                    model.get(key),
                    "seed {seed:#x}, step {step}"
                );
                let single = db.get(key).expect("get");
                assert_eq!(
                    single.as_ref(),
                    model.get(key),
                    "seed {seed:#x}, step {step}"
                );
            }
        }
    }
    // The reads crossed tables too, not only memtables.
    let table_bytes: u64 = (db.property("wisckey.total-sst-size").expect("property"))
        .expect("a documented property")
        .parse()
        .expect("a number");
    assert!(table_bytes > 0, "no table was written");
}
