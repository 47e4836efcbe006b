//! `Db::repair` reads the value log as open and GC do: it steps over the ranges GC punched
//! (recorded in a manifest that still loads) exactly, keeps a batch cut by a punched range
//! or by damage in a segment that was synced whole, cuts the newest segment at a hole no
//! synced record vouches for (a torn tail, as open would), and refuses, changing nothing,
//! a database a newer build wrote.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs, PowerLoss};
use wisckey::{Db, Error, GcOptions, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

fn options(fs: &MemFs) -> Options {
    Options {
        // GC runs only when a test asks, so the log's contents are the test's choice.
        gc_space_amp_target: f64::INFINITY,
        vlog_flush_interval: std::time::Duration::from_secs(3600),
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

/// Flushes queue the records they find dead for punching only while GC is on: on, with a
/// target the log never reaches, so background GC neither punches nor collects what is
/// partly live; the tests punch with their own `Db::gc`.
fn punching(fs: &MemFs) -> Options {
    Options {
        gc_space_amp_target: 1000.0,
        ..options(fs)
    }
}

/// Punch what is ready now, collect nothing.
fn punch_only() -> GcOptions {
    GcOptions {
        space_amp_target: 1000.0,
        compact_first: false,
        ..GcOptions::default()
    }
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

fn names(fs: &MemFs, dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = (fs.list(dir).expect("list").into_iter())
        .filter(|n| n.ends_with(suffix) || (suffix == "MANIFEST" && n.starts_with(suffix)))
        .collect();
    names.sort();
    names
}

fn remove_all(fs: &MemFs, dir: &Path, suffix: &str) {
    for name in names(fs, dir, suffix) {
        fs.remove(&dir.join(name)).expect("remove");
    }
}

/// Every file under `dir` (recursively) with its bytes.
fn tree(fs: &MemFs, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    (fs.file_names().into_iter())
        .filter(|p| p.starts_with(dir))
        .map(|p| {
            let bytes = fs.contents(&p).expect("contents");
            (p.display().to_string(), bytes)
        })
        .collect()
}

fn segment_numbers(db: &Db) -> Vec<u64> {
    let stats = db.stats().expect("stats");
    stats.value_log.segments.iter().map(|s| s.segment).collect()
}

/// Runs full GC rounds until segment `n` is gone (at most a few).
fn gc_until_collected(db: &Db, n: u64, context: &str) {
    for _ in 0..8 {
        if !segment_numbers(db).contains(&n) {
            return;
        }
        db.gc(&GcOptions {
            min_dead_fraction: 0.0,
            ..GcOptions::default()
        })
        .unwrap_or_else(|e| panic!("{context}: gc: {e}"));
    }
    panic!("{context}: segment {n} was never collected");
}

#[derive(Debug, Clone, Copy)]
enum Lose {
    Nothing,
    Current,
    Tables,
    Manifest,
    ManifestAndTables,
}

/// Defect: a batch `{a, b}` ending segment 1 whose record `b` GC punched (the overwrite
/// made it dead; only whole 4 KiB blocks are zeroed, so `b` no longer verifies) was left
/// out as "incomplete at the end of its segment" although it was acknowledged whole: `a`'s
/// table pointer was reported lost, and `a..end` was recorded as punched, so GC's scan of
/// segment 1 stepped over `a` and collected the segment without relocating it — `a`'s only
/// copy was destroyed.
#[test]
fn a_batch_cut_by_a_punched_record_at_a_segment_end_is_kept_and_survives_gc() {
    let a_value = vec![b'a'; 100];
    for lose in [
        Lose::Nothing,
        Lose::Current,
        Lose::Manifest,
        Lose::ManifestAndTables,
    ] {
        let context = format!("{lose:?} lost");
        let fs = MemFs::new();
        let dir = Path::new(DIR);
        let db = Db::open(dir, punching(&fs)).expect("open");
        let mut batch = WriteBatch::new();
        batch.put(b"a", &a_value);
        batch.put(b"b", vec![b'b'; 16 << 10]);
        db.write(batch).expect("write");
        // Too large for what is left of segment 1: the log rolls, the batch ends segment 1.
        db.put(b"filler", vec![b'f'; 56 << 10]).expect("put");
        db.put(b"b", vec![b'c'; 16 << 10]).expect("put");
        db.flush().expect("flush");
        db.gc(&punch_only()).expect("gc");
        let stats = db.stats().expect("stats");
        let first = &stats.value_log.segments[0];
        assert_eq!(first.segment, 1, "{context}: {:?}", stats.value_log);
        assert!(first.punched_bytes >= 8192, "{context}: {first:?}");
        let expected = contents(&db);
        assert_eq!(expected.len(), 3);
        db.close().expect("close");

        match lose {
            Lose::Nothing => {}
            Lose::Current | Lose::Tables => fs.remove(&dir.join("CURRENT")).expect("remove"),
            Lose::Manifest => {
                fs.remove(&dir.join("CURRENT")).expect("remove");
                remove_all(&fs, dir, "MANIFEST");
            }
            Lose::ManifestAndTables => {
                fs.remove(&dir.join("CURRENT")).expect("remove");
                remove_all(&fs, dir, "MANIFEST");
                remove_all(&fs, dir, ".sst");
            }
        }
        let report = Db::repair(dir, punching(&fs)).expect("repair");
        assert_eq!(report.lost_values, 0, "{context}: {report:?}");
        assert_eq!(report.incomplete_batch_records, 0, "{context}: {report:?}");
        if matches!(lose, Lose::Nothing | Lose::Current) {
            // The manifest names the punched range: nothing there is damage.
            assert_eq!(report.problems_total, 0, "{context}: {:?}", report.problems);
            assert_eq!(report.damaged_log_bytes, 0, "{context}: {report:?}");
        }

        let db = Db::open(dir, punching(&fs)).expect("open after repair");
        assert!(contents(&db) == expected, "{context}: contents differ");
        gc_until_collected(&db, 1, &context);
        assert_eq!(
            db.get(b"a").expect("get a").as_deref(),
            Some(&a_value[..]),
            "{context}"
        );
        db.close().expect("close");
        let db = Db::open(dir, punching(&fs)).expect("reopen");
        assert!(contents(&db) == expected, "{context}: contents differ");
        let check = db.check().expect("check");
        assert!(check.is_ok(), "{context}: {:?}", check.problems);
    }
}

/// A segment synced whole (a later one's header says how far) whose file was cut short
/// inside its last batch: the batch was acknowledged whole, so what is left of it is taken
/// (and the cut reported), not left out as a never-acknowledged tail.
#[test]
fn a_synced_segment_cut_short_inside_a_batch_keeps_what_is_left_of_it() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(&fs)).expect("open");
    let a_value = vec![b'a'; 100];
    let mut batch = WriteBatch::new();
    batch.put(b"a", &a_value);
    batch.put(b"b", vec![b'b'; 16 << 10]);
    db.write(batch).expect("write");
    db.put(b"filler", vec![b'f'; 56 << 10]).expect("put");
    db.flush().expect("flush");
    let expected = contents(&db);
    db.close().expect("close");
    let segment = dir.join(&names(&fs, dir, ".vlog")[0]);
    let bytes = fs.contents(&segment).expect("segment");
    let b_at = record_offsets(&bytes, &[b"b".to_vec()])[&b"b".to_vec()];
    fs.set_contents(&segment, &bytes[..b_at]).expect("cut");
    fs.remove(&dir.join("CURRENT")).expect("remove");

    let report = Db::repair(dir, options(&fs)).expect("repair");
    assert_eq!(report.incomplete_batch_records, 0, "{report:?}");
    assert_eq!(report.lost_values, 1, "only b's value is gone: {report:?}");
    assert!(
        (report.problems.iter()).any(|p| p.what.contains("end inside a batch")),
        "{:?}",
        report.problems
    );
    let db = Db::open(dir, options(&fs)).expect("open after repair");
    // GC cannot read the segment cleanly to its end (the batch has no last record): it
    // keeps it, and everything in it.
    db.gc(&GcOptions {
        min_dead_fraction: 0.0,
        ..GcOptions::default()
    })
    .expect("gc");
    assert_eq!(db.get(b"a").expect("get a"), Some(a_value));
    assert_eq!(
        db.get(b"filler").expect("get"),
        expected.get(&b"filler"[..]).cloned()
    );
    assert!(matches!(db.get(b"b"), Err(Error::Corruption { .. })));
}

/// A segment whose header does not verify is set aside unread, so the writes in it are not
/// taken: keys whose newest write was there read as their older entries afterwards. The
/// report counts them (defect: they reverted without a word) and names the segment; keys
/// written again in a later segment, and a batch cut short in the damaged one, are not
/// counted.
#[test]
fn keys_whose_newest_write_is_in_a_set_aside_segment_are_counted_as_reverted() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(&fs)).expect("open");
    let old = |i: u32| format!("old value {i} ").repeat(8).into_bytes();
    let new = |i: u32| format!("new value {i} ").repeat(8).into_bytes();
    let newest = |i: u32| format!("newest value {i} ").repeat(8).into_bytes();
    for i in 0..10u32 {
        db.put(format!("k{i}"), old(i)).expect("put");
    }
    db.flush().expect("flush");
    // Fillers until `segments` segment files exist; returns the fillers that went to the
    // segment that was active before the last one started (the one that started holds
    // the last filler).
    let mut fillers = 0u32;
    let mut fill_until = |segments: usize| {
        let first = fillers;
        while names(&fs, dir, ".vlog").len() < segments {
            db.put(format!("filler{fillers}"), vec![b'f'; 4 << 10])
                .expect("put");
            fillers += 1;
        }
        (first..fillers - 1)
            .map(|f| format!("filler{f}"))
            .collect::<Vec<_>>()
    };
    // The filler that started the second segment is the first of its records.
    let first_of_second = fill_until(2).len() + 1;
    // The second segment: new values of k0..k4, all unflushed, and one batch of k5 and k6.
    for i in 0..5u32 {
        db.put(format!("k{i}"), new(i)).expect("put");
    }
    let mut pair = WriteBatch::new();
    pair.put(b"k5", new(5));
    pair.put(b"k6", new(6));
    db.write(pair).expect("write");
    let mut second_fillers = vec![format!("filler{}", first_of_second - 1)];
    second_fillers.extend(fill_until(3));
    // The third: newer values of k0 and k1, synced.
    for i in 0..2u32 {
        let mut batch = WriteBatch::new();
        batch.put(format!("k{i}"), newest(i));
        db.write_opt(batch, &WriteOptions { sync: true })
            .expect("sync put");
    }
    let segments = names(&fs, dir, ".vlog");
    assert_eq!(segments.len(), 3, "{segments:?}");
    let image = fs.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    // The second segment's header is damaged, and so is k6's record: the k5 + k6 batch is
    // then a batch without its last record, which repair never takes whole.
    let second = dir.join(&segments[1]);
    let mut bytes = image.contents(&second).expect("segment");
    let k6_at = record_offsets(&bytes, &[b"k6".to_vec()])[&b"k6".to_vec()];
    bytes[0] ^= 0xff;
    bytes[k6_at + 30] ^= 0xff;
    image.set_contents(&second, &bytes).expect("damage");

    let report = Db::repair(dir, options(&image)).expect("repair");
    // k2..k4 and the second segment's fillers; not k0 and k1 (newer in the third segment),
    // nor k5 (its batch lost its last record).
    let expected = 3 + second_fillers.len() as u64;
    assert_eq!(report.keys_reverted, expected, "{report:?}");
    assert_eq!(report.lost_values, 0, "{report:?}");
    let counted = format!("{expected} keys whose newest write found is here");
    assert!(
        (report.problems.iter())
            .any(|p| p.file.ends_with(&segments[1]) && p.what.contains(&counted)),
        "{:?}",
        report.problems
    );
    let db = Db::open(dir, options(&image)).expect("open after repair");
    for i in 0..2u32 {
        assert_eq!(db.get(format!("k{i}")).expect("get"), Some(newest(i)));
    }
    for i in 2..10u32 {
        assert_eq!(
            db.get(format!("k{i}")).expect("get"),
            Some(old(i)),
            "k{i} reads its older value"
        );
    }
    for filler in &second_fillers {
        assert_eq!(db.get(filler).expect("get"), None, "{filler}");
    }
    assert_eq!(
        db.get("filler0").expect("get"),
        Some(vec![b'f'; 4 << 10]),
        "the first segment's writes are taken"
    );
}

/// Defect: the records GC punched (recorded per record, zeroed by whole 4 KiB blocks, so
/// each keeps non-zero bytes at its head and tail) were reported as damage, one problem
/// per record, in a repair of a sound database.
#[test]
fn punched_records_are_not_reported_as_damage() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, punching(&fs)).expect("open");
    let value = |name: &str, version: u8| {
        let mut v = format!("{name}:{version}:").into_bytes();
        v.resize(12 << 10, b'a' + version);
        v
    };
    // Dead and live records alternate, so no segment is wholly dead and each dead one is
    // punched where it lies.
    for i in 0..12u32 {
        db.put(format!("dead{i:02}"), value("dead", 0))
            .expect("put");
        db.put(format!("live{i:02}"), value("live", 0))
            .expect("put");
    }
    for i in 0..12u32 {
        db.put(format!("dead{i:02}"), value("dead", 1))
            .expect("put");
    }
    db.flush().expect("flush");
    db.gc(&punch_only()).expect("gc");
    let stats = db.stats().expect("stats");
    let punched_segments = (stats.value_log.segments.iter())
        .filter(|s| s.punched_bytes > 0)
        .count();
    assert!(punched_segments >= 2, "{:?}", stats.value_log);
    assert!(stats.gc.bytes_punched >= 12 * 8192, "{:?}", stats.gc);
    let expected = contents(&db);
    db.close().expect("close");

    let report = Db::repair(dir, punching(&fs)).expect("repair");
    assert_eq!(report.problems_total, 0, "{:?}", report.problems);
    assert_eq!(report.damaged_log_bytes, 0, "{report:?}");
    assert_eq!(report.lost_values, 0, "{report:?}");
    assert!(report.punched_log_bytes >= 12 * (12 << 10), "{report:?}");

    let db = Db::open(dir, punching(&fs)).expect("open after repair");
    assert!(contents(&db) == expected, "contents differ after repair");
    // The punched ranges are still known: GC reads every old segment cleanly.
    db.gc(&GcOptions {
        min_dead_fraction: 0.0,
        ..GcOptions::default()
    })
    .expect("gc after repair");
    assert!(contents(&db) == expected, "contents differ after GC");
    let check = db.check().expect("check");
    assert!(check.is_ok(), "{:?}", check.problems);
}

/// The offsets of the records in segment `bytes` whose key is one of `keys`, by key.
fn record_offsets(bytes: &[u8], keys: &[Vec<u8>]) -> BTreeMap<Vec<u8>, usize> {
    let mut found = BTreeMap::new();
    for key in keys {
        let at = (22..bytes.len() - key.len())
            .find(|&i| {
                &bytes[i..i + key.len()] == key.as_slice()
                    && u32::from_le_bytes(bytes[i - 18..i - 14].try_into().expect("4 bytes"))
                        == key.len() as u32
            })
            .unwrap_or_else(|| panic!("{} not found", String::from_utf8_lossy(key)));
        found.insert(key.clone(), at - 22);
    }
    found
}

/// Defect: in the newest segment, repair took every batch around a hole a power cut left
/// in unsynced data — half of the batch the hole cut, the rest of the next one, every later
/// one — where open cuts the log at the hole (no record after it says it was synced: a torn
/// tail). A batch is all-or-nothing and recovery yields a prefix: repair must agree with
/// open.
#[test]
fn a_hole_in_the_unsynced_tail_of_the_newest_segment_ends_the_log_as_open_would() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(
        dir,
        Options {
            write_through_to_os: true,
            ..options(&fs)
        },
    )
    .expect("open");
    db.put_opt(b"base", vec![b's'; 200], &WriteOptions { sync: true })
        .expect("sync put");
    let key = |batch: u32, n: u32| format!("batch{batch}-{n}").into_bytes();
    for batch in 0..6u32 {
        let mut b = WriteBatch::new();
        b.put(key(batch, 1), vec![b'0' + batch as u8; 300]);
        b.put(key(batch, 2), vec![b'0' + batch as u8; 300]);
        db.write(b).expect("write");
    }
    // What the OS holds now, and what a power cut would leave: the durable bytes plus the
    // unsynced records, with a hole from inside batch 2's second record to inside batch
    // 3's first (those pages never reached the disk; later ones did).
    let segment = dir.join(names(&fs, dir, ".vlog").last().expect("a segment"));
    let mut bytes = fs.contents(&segment).expect("segment");
    let keys: Vec<Vec<u8>> = (0..6).flat_map(|b| [key(b, 1), key(b, 2)]).collect();
    let at = record_offsets(&bytes, &keys);
    for (k, &offset) in &at {
        if k.as_slice() > key(2, 1).as_slice() {
            assert_eq!(
                bytes[offset + 21] & 0x02,
                0,
                "no record after the hole is synced"
            );
        }
    }
    let hole = at[&key(2, 2)] + 40..at[&key(3, 1)] + 40;
    bytes[hole].fill(0);
    let image = fs.power_loss_image(PowerLoss::DropUnsynced);
    drop(db);
    image.set_contents(&segment, &bytes).expect("write image");
    image.sync_dir(dir).expect("sync dir");

    let opened = image.power_loss_image(PowerLoss::DropUnsynced);
    let db = Db::open(dir, options(&opened)).expect("open the image");
    let expected = contents(&db);
    drop(db);
    assert!(
        expected.contains_key(&key(1, 2)),
        "the batches before the hole stay"
    );
    assert!(
        !expected.contains_key(&key(2, 1)),
        "open cuts the log at the hole"
    );

    let report = Db::repair(dir, options(&image)).expect("repair");
    assert_eq!(report.incomplete_batch_records, 6, "{report:?}");
    let db = Db::open(dir, options(&image)).expect("open after repair");
    let seen = contents(&db);
    let extra: Vec<String> = (seen.keys())
        .filter(|k| !expected.contains_key(*k))
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert!(extra.is_empty(), "repair took records open cut: {extra:?}");
    assert!(seen == expected, "repair and open disagree");
    // New writes go on, and GC over the old segment keeps everything.
    db.put(b"after", b"repair").expect("put");
    db.gc(&GcOptions::default()).expect("gc");
    db.close().expect("close");
    let db = Db::open(dir, options(&image)).expect("reopen");
    assert_eq!(
        db.get(b"after").expect("get").as_deref(),
        Some(&b"repair"[..])
    );
    assert_eq!(contents(&db).len(), expected.len() + 1);
}

/// Over many power cuts of a log of non-sync batches (each a torn image of what the OS
/// held: a random prefix of the unsynced bytes, sometimes with a zeroed range inside it),
/// a repair keeps exactly what open keeps: whole batches, a prefix of the log.
#[test]
fn repair_keeps_what_open_keeps_after_any_power_cut() {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(
        dir,
        Options {
            write_through_to_os: true,
            ..options(&fs)
        },
    )
    .expect("open");
    let mut images = Vec::new();
    for batch in 0..120u32 {
        let mut b = WriteBatch::new();
        for n in 0..3u32 {
            let len = [20, 200, 900][(batch + n) as usize % 3];
            b.put(
                format!("key{:02}", (batch * 7 + n) % 50),
                vec![b'a' + (batch % 26) as u8; len],
            );
        }
        let sync = batch % 17 == 0;
        db.write_opt(b, &WriteOptions { sync }).expect("write");
        if batch % 10 == 9 {
            db.flush().expect("flush");
        }
        if batch % 3 == 2 {
            for seed in 0..4u64 {
                images.push(fs.power_loss_image(PowerLoss::TornTail {
                    seed: u64::from(batch) * 4 + seed,
                }));
            }
        }
    }
    drop(db);
    let (mut compared, mut refused) = (0, 0);
    for (i, image) in images.iter().enumerate() {
        let opened = image.power_loss_image(PowerLoss::DropUnsynced);
        let expected = match Db::open(dir, options(&opened)) {
            Ok(db) => contents(&db),
            Err(_) => {
                // Damage open will not cut past (a later synced record): nothing to agree with.
                refused += 1;
                continue;
            }
        };
        let repaired = image.power_loss_image(PowerLoss::DropUnsynced);
        Db::repair(dir, options(&repaired)).unwrap_or_else(|e| panic!("image {i}: repair: {e}"));
        let db = Db::open(dir, options(&repaired)).expect("open after repair");
        let seen = contents(&db);
        assert!(seen == expected, "image {i}: repair and open disagree");
        compared += 1;
    }
    eprintln!(
        "{} images: {compared} compared, {refused} refused by open",
        images.len()
    );
    assert!(
        compared > images.len() / 2,
        "{compared} compared, {refused} refused"
    );
}

/// The other side of the rule above: damage in the part of the newest segment that was
/// synced — before the replay head a manifest records (the tables lost), or up to a record
/// a table points at (the manifest lost; a flush syncs the log first) — is stepped over,
/// and the records after it are taken, not cut off as a torn tail.
#[test]
fn damage_in_the_synced_part_of_the_newest_segment_is_stepped_over() {
    for lose in [Lose::Current, Lose::Tables, Lose::Manifest] {
        let context = format!("{lose:?} lost");
        let fs = MemFs::new();
        let dir = Path::new(DIR);
        let db = Db::open(dir, options(&fs)).expect("open");
        let key = |i: u32| format!("key{i:03}").into_bytes();
        let value = |i: u32| format!("{i:03}").repeat(100).into_bytes();
        for i in 0..150u32 {
            db.put(key(i), value(i)).expect("put");
        }
        db.flush().expect("flush");
        db.close().expect("close");
        let segments = names(&fs, dir, ".vlog");
        assert_eq!(segments.len(), 1, "{context}: one segment, the newest");
        let segment = dir.join(&segments[0]);
        let mut bytes = fs.contents(&segment).expect("segment");
        let keys: Vec<Vec<u8>> = (0..150).map(key).collect();
        let at = record_offsets(&bytes, &keys);
        let hole = 8192..12288;
        let destroyed: Vec<&Vec<u8>> = (at.iter())
            .filter(|&(k, &offset)| offset < hole.end && offset + 22 + k.len() + 300 > hole.start)
            .map(|(k, _)| k)
            .collect();
        assert!(destroyed.len() >= 12, "{context}");
        bytes[hole].fill(0);
        fs.set_contents(&segment, &bytes).expect("write");
        fs.remove(&dir.join("CURRENT")).expect("remove");
        match lose {
            Lose::Tables => remove_all(&fs, dir, ".sst"),
            Lose::Manifest => remove_all(&fs, dir, "MANIFEST"),
            _ => {}
        }

        let report = Db::repair(dir, options(&fs)).expect("repair");
        assert_eq!(report.incomplete_batch_records, 0, "{context}: {report:?}");
        assert_eq!(report.torn_log_bytes, 0, "{context}: {report:?}");
        assert!(report.damaged_log_bytes >= 4096, "{context}: {report:?}");
        // Without tables, a destroyed record's key is simply gone.
        let pointers_lost = if matches!(lose, Lose::Tables) {
            0
        } else {
            destroyed.len() as u64
        };
        assert_eq!(report.lost_values, pointers_lost, "{context}: {report:?}");
        let db = Db::open(dir, options(&fs)).expect("open after repair");
        let check_reads = |db: &Db| {
            for i in 0..150u32 {
                match db.get(key(i)) {
                    Ok(Some(got)) => assert_eq!(got, value(i), "{context}: key {i}"),
                    Ok(None) | Err(Error::Corruption { .. }) => {
                        assert!(destroyed.contains(&&key(i)), "{context}: key {i} lost")
                    }
                    Err(e) => panic!("{context}: key {i}: {e}"),
                }
            }
        };
        check_reads(&db);
        // The records after the damage were taken, not recorded as punched: collecting the
        // segment relocates them.
        gc_until_collected(&db, 1, &context);
        check_reads(&db);
    }
}

/// Defect: a manifest (or table) of a newer format was taken for damage: repair moved
/// everything to `lost/` and rebuilt the index in the older format. It is refused with
/// `UnsupportedVersion`, before anything is written.
#[test]
fn repair_refuses_a_newer_format_and_changes_nothing() {
    let build = || {
        let fs = MemFs::new();
        let dir = Path::new(DIR);
        let db = Db::open(dir, options(&fs)).expect("open");
        for i in 0..200u32 {
            db.put(format!("key{i:03}"), vec![b'v'; 300]).expect("put");
        }
        db.flush().expect("flush");
        db.close().expect("close");
        fs
    };
    let bump = |fs: &MemFs, path: &Path, at: usize| {
        let mut bytes = fs.contents(path).expect("contents");
        let version = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        bytes[at..at + 4].copy_from_slice(&(version + 1).to_le_bytes());
        fs.set_contents(path, &bytes).expect("write");
    };
    let dir = Path::new(DIR);
    for (what, without_current) in [("manifest", false), ("manifest", true), ("table", false)] {
        let context = format!("a newer {what} (CURRENT lost: {without_current})");
        let fs = build();
        if without_current {
            fs.remove(&dir.join("CURRENT")).expect("remove");
        }
        if what == "manifest" {
            let manifest = dir.join(&names(&fs, dir, "MANIFEST")[0]);
            // The format version follows the 8-byte magic (docs/FORMAT.md).
            bump(&fs, &manifest, 8);
        } else {
            let table = dir.join(&names(&fs, dir, ".sst")[0]);
            let len = fs.contents(&table).expect("contents").len();
            // The footer's last 56 bytes: the version at 40, covered by the footer's
            // checksum at 44 (docs/FORMAT.md), which a newer build computes with its
            // version (else the version field reads as damaged).
            let footer = len - 56;
            bump(&fs, &table, footer + 40);
            let mut bytes = fs.contents(&table).expect("contents");
            let crc = crc32c::crc32c(&bytes[footer..footer + 44]);
            let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
            bytes[footer + 44..footer + 48].copy_from_slice(&masked.to_le_bytes());
            fs.set_contents(&table, &bytes).expect("write");
        }
        let before = tree(&fs, dir);
        let refused = Db::repair(dir, options(&fs));
        assert!(
            matches!(refused, Err(Error::UnsupportedVersion { .. })),
            "{context}: {refused:?}"
        );
        assert!(tree(&fs, dir) == before, "{context}: the directory changed");
    }
}
