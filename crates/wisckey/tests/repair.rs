//! `Db::repair` rebuilds the key index from the value log and whatever table entries still
//! read: with the manifest lost, the tables lost, or either damaged, every key the log holds
//! comes back with its newest value; nothing is deleted; a power cut at any step of a repair
//! is undone by repairing again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use wisckey::fs::{FaultFs, FaultKind, FaultOps, FileSystem, MemFs, PowerLoss};
use wisckey::{Db, Error, GcOptions, Options, WriteBatch};

const DIR: &str = "/db";

fn options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        // GC runs only when a test asks, so the log's contents are the test's choice.
        gc_space_amp_target: f64::INFINITY,
        vlog_flush_interval: std::time::Duration::from_secs(3600),
        ..Options::small_for_tests(fs)
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the workload did: the newest state, and every value each key ever had.
#[derive(Default)]
struct Model {
    state: BTreeMap<Vec<u8>, Vec<u8>>,
    history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

impl Model {
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.state.insert(key.to_vec(), value.to_vec());
        self.history
            .entry(key.to_vec())
            .or_default()
            .insert(value.to_vec());
    }

    fn delete(&mut self, key: &[u8]) {
        self.state.remove(key);
    }
}

/// A seeded mix of puts (inline and log-sized values), deletes and batches over 200 keys,
/// with flushes and compactions; `gc` runs a full GC now and then. Closed cleanly.
fn populate(fs: &MemFs, seed: u64, gc: bool) -> Model {
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    let mut model = Model::default();
    let mut rng = seed;
    for op in 0..3000u32 {
        let key = format!("key{:04}", splitmix(&mut rng) % 200).into_bytes();
        let len = match splitmix(&mut rng) % 4 {
            0 => 10,
            1 => 100,
            2 => 700,
            _ => 3000,
        };
        let value: Vec<u8> = format!("{op}:").bytes().cycle().take(len).collect();
        match splitmix(&mut rng) % 10 {
            0 | 1 => {
                db.delete(&key).expect("delete");
                model.delete(&key);
            }
            2 => {
                let mut batch = WriteBatch::new();
                let other = format!("key{:04}", splitmix(&mut rng) % 200).into_bytes();
                batch.put(&key, &value);
                batch.delete(&other);
                db.write(batch).expect("batch");
                model.put(&key, &value);
                model.delete(&other);
            }
            _ => {
                db.put(&key, &value).expect("put");
                model.put(&key, &value);
            }
        }
        if op % 700 == 699 {
            db.compact_range(None, None).expect("compact");
        }
        if gc && op % 1000 == 999 {
            db.gc(&GcOptions::default()).expect("gc");
        }
    }
    db.close().expect("close");
    model
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut seen = BTreeMap::new();
    let mut it = db.iter(&Default::default()).expect("iter");
    it.seek_to_first();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().expect("value").to_vec());
        it.next();
    }
    it.status().expect("scan");
    seen
}

/// The keys of `seen` that `expected` does not hold (deleted keys that came back, say).
fn keys_not_in(
    seen: &BTreeMap<Vec<u8>, Vec<u8>>,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Vec<String> {
    (seen.keys())
        .filter(|k| !expected.contains_key(*k))
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

fn names(fs: &MemFs, dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = (fs.list(dir).expect("list").into_iter())
        .filter(|n| n.ends_with(suffix) || (suffix == "MANIFEST" && n.starts_with(suffix)))
        .collect();
    names.sort();
    names
}

fn remove_all(fs: &MemFs, dir: &Path, suffix: &str) -> usize {
    let found = names(fs, dir, suffix);
    for name in &found {
        fs.remove(&dir.join(name)).expect("remove");
    }
    found.len()
}

/// Opens the repaired database, checks it holds `expected` by get and by scan, that new
/// writes work and survive a reopen, and that a GC over the old segments keeps everything.
fn open_and_verify(fs: &MemFs, expected: &BTreeMap<Vec<u8>, Vec<u8>>, context: &str) {
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(fs.clone())))
        .unwrap_or_else(|e| panic!("{context}: open after repair: {e}"));
    assert!(
        contents(&db) == *expected,
        "{context}: contents differ after repair"
    );
    for (key, value) in expected {
        assert_eq!(db.get(key).expect("get").as_ref(), Some(value), "{context}");
    }
    db.put(b"after-repair", b"new").expect("put after repair");
    db.gc(&GcOptions::default())
        .unwrap_or_else(|e| panic!("{context}: gc after repair: {e}"));
    db.close().expect("close");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("reopen");
    let mut with_new = expected.clone();
    with_new.insert(b"after-repair".to_vec(), b"new".to_vec());
    assert!(
        contents(&db) == with_new,
        "{context}: contents differ after GC and reopen"
    );
    let check = db.check().expect("check");
    assert!(
        check.is_ok(),
        "{context}: check after repair: {:?}",
        check.problems
    );
}

#[test]
fn a_lost_manifest_and_current_are_rebuilt_exactly_and_nothing_is_deleted() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let model = populate(&fs, 1, true);
    let tables_before = names(&fs, dir, ".sst");
    let segments_before = names(&fs, dir, ".vlog");
    assert!(!tables_before.is_empty());
    assert_eq!(remove_all(&fs, dir, "MANIFEST"), 1);
    fs.remove(&dir.join("CURRENT")).expect("remove CURRENT");
    let refused = Db::open(dir, options(Arc::new(fs.clone())));
    assert!(
        matches!(refused, Err(Error::Corruption { .. })),
        "{refused:?}"
    );

    let report = Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.keys, model.state.len() as u64, "{report:?}");
    assert_eq!(report.lost_values, 0);
    assert_eq!(report.tables_read, tables_before.len() as u64);
    assert_eq!(report.segments_scanned, segments_before.len() as u64);
    // The replaced tables are kept, not deleted; every segment stays where it was.
    assert_eq!(report.moved_to, "lost/repair-1");
    let kept = names(&fs, &dir.join("lost/repair-1"), ".sst");
    assert_eq!(kept, tables_before);
    for segment in &segments_before {
        assert!(fs.exists(&dir.join(segment)).expect("exists"), "{segment}");
    }
    open_and_verify(&fs, &model.state, "manifest lost");
}

#[test]
fn lost_tables_come_back_from_the_log() {
    // Without GC the log holds every write: the rebuilt index is exact.
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let model = populate(&fs, 2, false);
    let removed = remove_all(&fs, dir, ".sst");
    assert!(removed > 0);
    let refused = Db::open(dir, options(Arc::new(fs.clone())));
    assert!(
        matches!(refused, Err(Error::Corruption { .. })),
        "{refused:?}"
    );
    let report = Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    // The manifest still loads: the missing tables are named, and their key ranges are
    // rebuilt from the log.
    assert_eq!(report.problems.len(), removed, "{:?}", report.problems);
    assert!(
        (report.problems.iter()).all(|p| p.what.contains("listed in the manifest but missing")),
        "{:?}",
        report.problems
    );
    assert_eq!(report.tables_read, 0);
    assert_eq!(report.keys, model.state.len() as u64);
    open_and_verify(&fs, &model.state, "tables lost, no GC");
}

#[test]
fn lost_tables_after_gc_bring_back_every_value_the_log_still_holds() {
    // GC keeps only the records the index points at, so where a key's newest write was a
    // delete or an inline value, its record may be gone: the key may come back with an
    // older value or not at all. Every key whose newest value lives in the log is exact.
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let model = populate(&fs, 3, true);
    remove_all(&fs, dir, ".sst");
    remove_all(&fs, dir, "MANIFEST");
    Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open after repair");
    let seen = contents(&db);
    let threshold = options(Arc::new(fs.clone())).value_threshold;
    let mut exact = 0;
    for (key, value) in &model.state {
        if value.len() >= threshold {
            assert_eq!(
                seen.get(key),
                Some(value),
                "{}",
                String::from_utf8_lossy(key)
            );
            exact += 1;
        }
    }
    for (key, value) in &seen {
        let ever = model.history.get(key).is_some_and(|h| h.contains(value));
        assert!(
            ever,
            "{} holds a value it never had",
            String::from_utf8_lossy(key)
        );
    }
    assert!(exact > 50, "{exact} keys with values in the log");
}

#[test]
fn damaged_tables_and_log_ranges_are_stepped_over_and_reported() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let model = populate(&fs, 4, false);
    // Damage a data block of every table (the manifest stays) and zero 4 KiB in the middle
    // of the first sealed segment.
    for table in names(&fs, dir, ".sst") {
        let path = dir.join(&table);
        let mut bytes = fs.contents(&path).expect("contents");
        bytes[40] ^= 0x55;
        fs.set_contents(&path, &bytes).expect("write");
    }
    let segment = dir.join(&names(&fs, dir, ".vlog")[0]);
    let mut bytes = fs.contents(&segment).expect("contents");
    assert!(bytes.len() > 20_000);
    bytes[8192..12288].fill(0);
    fs.set_contents(&segment, &bytes).expect("write");
    // A flipped byte in a record: damage, not a hole.
    bytes[16000] ^= 0x01;
    fs.set_contents(&segment, &bytes).expect("write");

    let report = Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    assert!(report.problems_total > 0, "{report:?}");
    // The zeroed block and the records it cut are one damaged range.
    assert!(report.damaged_log_bytes > 4096, "{report:?}");
    let listed = |file: &str| report.problems.iter().any(|p| p.file.ends_with(file));
    assert!(listed(".sst"), "{:?}", report.problems);
    assert!(listed(".vlog"), "{:?}", report.problems);

    // Every key reads its newest value, or (its value's record was destroyed) an error, or,
    // where both its table block and its newest records were destroyed, an older value.
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open after repair");
    let mut exact = 0;
    for key in model.history.keys() {
        match (db.get(key), model.state.get(key)) {
            (Ok(got), want) if got.as_ref() == want => exact += 1,
            (Ok(Some(got)), _) => assert!(
                model.history[key].contains(&got),
                "{} reads a value it never had",
                String::from_utf8_lossy(key)
            ),
            (Ok(None), _) => {}
            (Err(Error::Corruption { .. }), _) => {}
            (Err(e), _) => panic!("{}: {e}", String::from_utf8_lossy(key)),
        }
    }
    assert!(
        exact * 10 >= model.history.len() * 9,
        "{exact} of {} exact",
        model.history.len()
    );
    // The stepped-over ranges are recorded: GC and check read the old segment cleanly.
    db.gc(&GcOptions::default())
        .expect("gc over the damaged segment");
    drop(db);
}

/// A table's bloom filter only says "not here": when it alone is damaged, repair reports it
/// and still takes every entry the table holds — after GC, some of them (inline values,
/// deletes) are nowhere else.
#[test]
fn a_table_whose_filter_alone_is_damaged_gives_up_none_of_its_entries() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let model = populate(&fs, 5, true);
    let tables = names(&fs, dir, ".sst");
    assert!(!tables.is_empty());
    for table in &tables {
        let path = dir.join(table);
        let mut bytes = fs.contents(&path).expect("contents");
        let footer = bytes.len() - 56;
        let field = |at: usize| {
            u64::from_le_bytes(
                bytes[footer + at..footer + at + 8]
                    .try_into()
                    .expect("8 bytes"),
            )
        };
        let (filter_offset, filter_size) = (field(0) as usize, field(8));
        assert!(filter_size > 0, "{table} has no filter");
        bytes[filter_offset + 1] ^= 0x55;
        fs.set_contents(&path, &bytes).expect("write");
    }
    let report = Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    assert_eq!(report.problems_total, tables.len() as u64, "{report:?}");
    assert!(
        report.problems.iter().all(|p| p.file.ends_with(".sst")),
        "{:?}",
        report.problems
    );
    assert_eq!(
        (report.lost_values, report.keys_reverted),
        (0, 0),
        "{report:?}"
    );
    open_and_verify(&fs, &model.state, "filters damaged");
}

#[test]
fn repair_refuses_an_open_database_and_a_directory_without_data() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    db.put(b"k", b"v").expect("put");
    let locked = Db::repair(dir, options(Arc::new(fs.clone())));
    assert!(matches!(locked, Err(Error::Locked(_))), "{locked:?}");
    db.close().expect("close");

    let missing = Db::repair(Path::new("/nowhere"), options(Arc::new(fs.clone())));
    assert!(
        matches!(missing, Err(Error::InvalidArgument(_))),
        "{missing:?}"
    );
    fs.create_dir_all(Path::new("/empty")).expect("mkdir");
    let empty = Db::repair(Path::new("/empty"), options(Arc::new(fs.clone())));
    assert!(matches!(empty, Err(Error::NotADatabase(_))), "{empty:?}");
    // Refused before anything was written: it left no LOCK file behind.
    let left = fs.list(Path::new("/empty")).expect("list");
    assert!(left.is_empty(), "{left:?}");

    // A sound database repairs to itself.
    Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// Repairs a copy of `damaged` with a power cut at each of the repair's writes (two images
/// each: unsynced bytes dropped, and a torn tail), then opens the result or, where it does
/// not open, repairs it again and opens that; `verify` gets each database with its context.
/// Returns the repair's write count and how many images needed the second repair.
fn repair_with_a_power_cut_at_each_write(
    damaged: &MemFs,
    mut verify: impl FnMut(&Db, &MemFs, &str),
) -> (u64, u64) {
    let dir = Path::new(DIR);
    let counting = FaultFs::new(Arc::new(damaged.power_loss_image(PowerLoss::DropUnsynced)));
    Db::repair(dir, options(Arc::new(counting.clone()))).expect("fault-free repair");
    let total_calls = counting.calls();
    let mut repaired_again = 0;
    for n in 1..=total_calls {
        for loss in [PowerLoss::DropUnsynced, PowerLoss::TornTail { seed: n }] {
            let context = format!("power cut at call {n} of {total_calls} of repair ({loss:?})");
            let image = damaged.power_loss_image(PowerLoss::DropUnsynced);
            let fault = FaultFs::new(Arc::new(image.clone()));
            fault.fail_at(n, FaultKind::Io, FaultOps::Writes, true);
            let _ = Db::repair(dir, options(Arc::new(fault)));
            let after = image.power_loss_image(loss);
            let db = match Db::open(dir, options(Arc::new(after.clone()))) {
                Ok(db) => db,
                Err(_) => {
                    repaired_again += 1;
                    Db::repair(dir, options(Arc::new(after.clone())))
                        .unwrap_or_else(|e| panic!("{context}: repair again: {e}"));
                    Db::open(dir, options(Arc::new(after.clone())))
                        .unwrap_or_else(|e| panic!("{context}: open after repairing again: {e}"))
                }
            };
            verify(&db, &after, &context);
        }
    }
    (total_calls, repaired_again)
}

#[test]
fn a_power_cut_at_any_step_of_repair_is_undone_by_repairing_again() {
    let dir = Path::new(DIR);
    let base = MemFs::new();
    let model = populate(&base, 5, true);
    remove_all(&base, dir, "MANIFEST");
    base.remove(&dir.join("CURRENT")).expect("remove CURRENT");
    let damaged = base.power_loss_image(PowerLoss::DropUnsynced);
    let (total_calls, repaired_again) =
        repair_with_a_power_cut_at_each_write(&damaged, |db, _, context| {
            assert!(contents(db) == model.state, "{context}: contents differ");
        });
    assert!(total_calls > 10, "{total_calls} calls");
    eprintln!(
        "{total_calls} calls, {} images, {repaired_again} repaired again",
        total_calls * 2
    );
    assert!(repaired_again > 0 && repaired_again < total_calls * 2);
}

/// Key `i` of the deleted ones.
fn doomed(i: u32) -> Vec<u8> {
    format!("doomed{i:03}").into_bytes()
}

/// Writes 40 live keys and 40 doomed ones, overwrites a churn key, deletes the doomed
/// keys (with a flush before the deletes when `flush_between`: the values and their deletes
/// then sit in different tables), churns again and flushes.
fn write_then_delete_doomed(db: &Db, flush_between: bool) {
    for i in 0..40u32 {
        db.put(format!("live{i:03}"), vec![b'l'; 3000])
            .expect("put");
        db.put(doomed(i), vec![b'd'; 300]).expect("put");
    }
    let churn = |db: &Db| {
        for j in 0..60u32 {
            db.put(b"churn", vec![j as u8; 3000]).expect("put");
        }
    };
    churn(db);
    if flush_between {
        db.flush().expect("flush");
    }
    for i in 0..40u32 {
        db.delete(doomed(i)).expect("delete");
    }
    churn(db);
    db.flush().expect("flush");
}

/// A GC of the segments at least half dead (without compacting first); it must collect.
fn collect_half_dead_segments(db: &Db) {
    let gc = GcOptions {
        min_dead_fraction: 0.5,
        compact_first: false,
        ..GcOptions::default()
    };
    let outcome = db.gc(&gc).expect("gc");
    assert!(outcome.segments_collected > 0, "{outcome:?}");
}

/// A GC that collects the churn's segments (and the deletes' records with them) but keeps
/// segment 1, which holds the doomed keys' old values.
fn collect_all_but_the_old_values(db: &Db) {
    collect_half_dead_segments(db);
    let segments = db.stats().expect("stats").value_log.segments;
    assert_eq!(
        segments.first().map(|s| s.segment),
        Some(1),
        "the old values' segment stays"
    );
}

/// Repairs the database with `options`; its report must name a problem saying `what`.
fn repair_reporting(options: Options, what: &str) {
    let report = Db::repair(Path::new(DIR), options).expect("repair");
    assert!(
        report.problems.iter().any(|p| p.what.contains(what)),
        "no problem says {what:?}: {:?}",
        report.problems
    );
}

/// Opens the repaired database with `options`: no deleted key is back, and it holds
/// `expected`.
fn assert_repaired_to(options: Options, expected: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(Path::new(DIR), options).expect("open after repair");
    let seen = contents(&db);
    let back = keys_not_in(&seen, expected);
    assert!(back.is_empty(), "deleted keys came back: {back:?}");
    assert!(seen == *expected, "contents differ");
}

/// A closed database whose deletes compaction purged together with the values they shadow,
/// and whose delete records GC collected, while the old values' records stay in segment 1:
/// the log alone would bring the keys back. Returns it and its contents.
fn purged_deletes_with_old_values_in_the_log() -> (MemFs, BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    write_then_delete_doomed(&db, false);
    db.compact_range(None, None).expect("compact");
    collect_all_but_the_old_values(&db);
    for i in 0..40u32 {
        assert_eq!(db.get(doomed(i)).expect("get"), None);
    }
    let expected = contents(&db);
    db.close().expect("close");
    (fs, expected)
}

#[test]
fn deletes_that_compaction_purged_and_gc_collected_stay_deleted_after_repair() {
    // Compaction drops a delete together with the value it shadows at the last level; GC
    // then collects the delete's record (dead once flushed) but leaves the old value's
    // record in a segment that is mostly live. The log alone would bring the key back;
    // repair must let the tables, which cover those records, decide.
    let dir = Path::new(DIR);
    let (fs, expected) = purged_deletes_with_old_values_in_the_log();
    for lose_manifest in [false, true] {
        let image = fs.power_loss_image(PowerLoss::DropUnsynced);
        image.remove(&dir.join("CURRENT")).expect("remove CURRENT");
        if lose_manifest {
            remove_all(&image, dir, "MANIFEST");
        }
        Db::repair(dir, options(Arc::new(image.clone()))).expect("repair");
        let db = Db::open(dir, options(Arc::new(image.clone()))).expect("open after repair");
        let seen = contents(&db);
        let back = keys_not_in(&seen, &expected);
        assert!(
            back.is_empty(),
            "manifest lost: {lose_manifest}: deleted keys came back: {back:?}"
        );
        assert!(
            seen == expected,
            "manifest lost: {lose_manifest}: contents differ"
        );
    }
}

/// Defect: repair refused only a directory without tables and segments, so another
/// engine's database (LevelDB: `CURRENT`, `MANIFEST-000005`, `000012.sst`, `000013.log`,
/// `LOG`) had its tables, manifest and CURRENT moved to `lost/` and a new wisckey manifest
/// written in their place. It is refused, and nothing in the directory changes.
#[test]
fn repair_refuses_another_engines_database_and_changes_nothing() {
    let fs = MemFs::new();
    let dir = Path::new("/leveldb");
    fs.create_dir_all(dir).expect("mkdir");
    let files: [(&str, &[u8]); 5] = [
        ("CURRENT", b"MANIFEST-000005\n"),
        ("MANIFEST-000005", b"leveldb manifest"),
        ("000012.sst", b"leveldb table"),
        ("000013.log", b"leveldb wal"),
        ("LOG", b"leveldb info log"),
    ];
    for (name, bytes) in files {
        fs.set_contents(&dir.join(name), bytes).expect("write");
    }
    let before: BTreeMap<String, Vec<u8>> = (fs.list(dir).expect("list").into_iter())
        .map(|n| {
            let bytes = fs.contents(&dir.join(&n)).expect("contents");
            (n, bytes)
        })
        .collect();
    let refused = Db::repair(dir, options(Arc::new(fs.clone())));
    match &refused {
        Err(Error::NotADatabase(why)) => {
            assert!(why.contains("000013.log") || why.contains("LOG"), "{why}")
        }
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    let after: BTreeMap<String, Vec<u8>> = (fs.list(dir).expect("list").into_iter())
        .map(|n| {
            let bytes = fs.contents(&dir.join(&n)).expect("contents");
            (n, bytes)
        })
        .collect();
    assert_eq!(after, before, "the directory changed");
}

/// Names other programs leave in any directory (NFS's `.nfsXXXX` for a deleted file still
/// held open, a mount root's `lost+found`) do not make repair refuse a wisckey database.
#[test]
fn repair_passes_over_dot_files_and_lost_and_found() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    db.put(b"k", b"v").expect("put");
    db.close().expect("close");
    fs.set_contents(&dir.join(".nfs000000000001"), b"x")
        .expect("write");
    fs.create_dir_all(&dir.join("lost+found")).expect("mkdir");
    Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// The same database, its CURRENT lost, repaired with a power cut at each of the repair's
/// writes, then opened or, where it does not open, repaired again. A cut among the renames
/// that move the old tables aside left the old manifest loading with tables missing: the
/// second repair no longer trusted it, took the old values in the log for the newest, and
/// brought the deleted keys back.
#[test]
fn a_repair_cut_short_and_run_again_keeps_purged_deletes_deleted() {
    let dir = Path::new(DIR);
    let (fs, expected) = purged_deletes_with_old_values_in_the_log();
    for lose_current in [true, false] {
        let damaged = fs.power_loss_image(PowerLoss::DropUnsynced);
        if lose_current {
            damaged
                .remove(&dir.join("CURRENT"))
                .expect("remove CURRENT");
        }
        let damaged = damaged.power_loss_image(PowerLoss::DropUnsynced);
        repair_with_a_power_cut_at_each_write(&damaged, |db, after, context| {
            let context = format!("CURRENT lost: {lose_current}; {context}");
            let seen = contents(db);
            let back = keys_not_in(&seen, &expected);
            assert!(
                back.is_empty(),
                "{context}: deleted keys came back: {back:?}"
            );
            assert!(seen == expected, "{context}: contents differ");
            // A rebuilt manifest the cut left beside the old one (CURRENT never named it)
            // is swept by the open: kept, it would be the "newest manifest" a later repair
            // without CURRENT goes by, though stale.
            let manifests = (names(after, dir, "").into_iter())
                .filter(|n| n.starts_with("MANIFEST-"))
                .count();
            assert_eq!(manifests, 1, "{context}: manifests left");
        });
    }
}

/// [`options`] without background compactions of level 0, so tables change only when a
/// test compacts.
fn options_without_l0_compactions(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        l0_compaction_trigger: 32,
        l0_slowdown_trigger: 48,
        l0_stop_trigger: 64,
        ..options(fs)
    }
}

/// The bytes of every manifest in `fs`'s database directory, to put back later.
fn save_manifests(fs: &MemFs) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(DIR);
    (names(fs, dir, "").into_iter())
        .filter(|n| n.starts_with("MANIFEST-"))
        .map(|n| {
            let bytes = fs.contents(&dir.join(&n)).expect("contents");
            (n, bytes)
        })
        .collect()
}

/// Puts `saved` back over the same manifests (which must still be there): the manifests
/// lose every edit made since, as when their last records are damaged.
fn restore_manifests(fs: &MemFs, saved: &[(String, Vec<u8>)]) {
    let dir = Path::new(DIR);
    for (name, bytes) in saved {
        assert!(
            fs.contents(&dir.join(name)).is_some(),
            "{name} was replaced since"
        );
        fs.set_contents(&dir.join(name), bytes).expect("write");
    }
}

/// A table cut short before its footer (a flush or a repair interrupted) and listed by no
/// manifest was never installed: it must not turn the whole key space into a gap, where
/// the log's old values outrank deletes compaction purged.
#[test]
fn an_unfinished_table_does_not_let_the_log_bring_purged_deletes_back() {
    let dir = Path::new(DIR);
    let (fs, expected) = purged_deletes_with_old_values_in_the_log();
    remove_all(&fs, dir, "MANIFEST");
    fs.remove(&dir.join("CURRENT")).expect("remove CURRENT");
    fs.set_contents(&dir.join("000999.sst"), b"not a table")
        .expect("write");
    let report = Db::repair(dir, options(Arc::new(fs.clone()))).expect("repair");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file.ends_with("000999.sst") && p.what.contains("never finished")),
        "{:?}",
        report.problems
    );
    assert_repaired_to(options(Arc::new(fs.clone())), &expected);
}

/// The manifest's last edit, a compaction that purged deletes with the values they shadow,
/// is lost (its record damaged, read as a torn tail): the manifest lists the compaction's
/// inputs, which are gone, and not its outputs, which are there. The outputs say the inputs
/// were replaced; taking the inputs' ranges as lost instead let the old values' records in
/// the log outrank the purged deletes.
#[test]
fn a_manifest_that_lost_its_last_compaction_does_not_bring_purged_deletes_back() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let opts = || options_without_l0_compactions(Arc::new(fs.clone()));
    let db = Db::open(dir, opts()).expect("open");
    write_then_delete_doomed(&db, true);
    // GC first (the deletes' records go), then the compaction that purges them, last.
    collect_all_but_the_old_values(&db);
    let saved = save_manifests(&fs);
    db.compact_range(None, None).expect("compact");
    for i in 0..40u32 {
        assert_eq!(db.get(doomed(i)).expect("get"), None);
    }
    let expected = contents(&db);
    db.close().expect("close");
    restore_manifests(&fs, &saved);
    assert!(
        Db::open(dir, opts()).is_err(),
        "the stale manifest's missing tables are refused"
    );

    repair_reporting(opts(), "a lost edit replaced it");
    assert_repaired_to(opts(), &expected);
}

/// A manifest that lost its last edits but lists every table still there (the lost edits
/// only added tables: flushes) is older than the tables they added. Trusted, it set those
/// tables aside unread as leftovers, and where GC had collected their writes' records the
/// keys reverted to older values without a word.
#[test]
fn a_manifest_older_than_tables_present_does_not_set_them_aside_unread() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options_without_l0_compactions(Arc::new(fs.clone()))).expect("open");
    let inline = |i: u32| format!("inline{i:03}").into_bytes();
    for i in 0..40u32 {
        db.put(inline(i), b"first").expect("put");
    }
    db.flush().expect("flush");
    let saved = save_manifests(&fs);
    for i in 0..40u32 {
        db.put(inline(i), b"second").expect("put");
    }
    for j in 0..120u32 {
        db.put(b"churn", vec![j as u8; 3000]).expect("put");
    }
    db.flush().expect("flush");
    collect_half_dead_segments(&db);
    let expected = contents(&db);
    for i in 0..40u32 {
        assert_eq!(expected.get(&inline(i)), Some(&b"second".to_vec()));
    }
    db.close().expect("close");
    restore_manifests(&fs, &saved);

    repair_reporting(
        options_without_l0_compactions(Arc::new(fs.clone())),
        "older than tables present",
    );
    let db = Db::open(dir, options_without_l0_compactions(Arc::new(fs.clone())))
        .expect("open after repair");
    assert!(contents(&db) == expected, "contents differ");
}

/// A stale manifest still tells its own leftovers apart: here a compaction's input (holding
/// values whose deletes the compaction purged) was never swept, and a finished table
/// written after the manifest's last edit makes the manifest untrusted. The input, numbered
/// before that edit and unlisted, must stay unread: read, its old values outranked the
/// purged deletes.
#[test]
fn a_stale_manifest_still_sets_its_own_leftovers_aside() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let opts = || options_without_l0_compactions(Arc::new(fs.clone()));
    let db = Db::open(dir, opts()).expect("open");
    write_then_delete_doomed(&db, true);
    collect_all_but_the_old_values(&db);
    let inputs: Vec<(String, Vec<u8>)> = (names(&fs, dir, ".sst").into_iter())
        .map(|name| {
            let bytes = fs.contents(&dir.join(&name)).expect("contents");
            (name, bytes)
        })
        .collect();
    assert!(inputs.len() >= 2, "{inputs:?}");
    db.compact_range(None, None).expect("compact");
    let expected = contents(&db);
    db.close().expect("close");
    // The sweep's deletion of the oldest input (the doomed keys' values; their deletes are
    // in a later one) was lost; so was the edit that installed a flush's output (a copy of
    // a table, under a number past every edit).
    let (oldest, bytes) = &inputs[0];
    fs.set_contents(&dir.join(oldest), bytes)
        .expect("restore input");
    let newest = names(&fs, dir, ".sst").last().cloned().expect("a table");
    let bytes = fs.contents(&dir.join(&newest)).expect("contents");
    fs.set_contents(&dir.join("000900.sst"), &bytes)
        .expect("write");

    repair_reporting(opts(), "older than tables present");
    assert_repaired_to(opts(), &expected);
}
