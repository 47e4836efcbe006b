//! Hole punching: dead records of segments GC does not collect whole give their disk blocks
//! back early, and no reader ever reads a punched record (docs/DESIGN.md, "Hole punching").

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, DbStats, GcOptions, Options, ReadOptions};

mod common;
mod util;

const VALUE_LEN: usize = 12 << 10;
const KEYS: u32 = 40;

/// Background GC on with a target it never reaches: it neither collects nor punches (its
/// rounds punch only over the target), so every byte given back in these tests is punched
/// by the test's own `Db::gc`, none collected, unless a test asks.
fn options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        gc_space_amp_target: 1000.0,
        vlog_segment_size: 1 << 20,
        ..Options::small_for_tests(fs)
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

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(i: u32, version: u32) -> Vec<u8> {
    let mut v = format!("{i}:{version}:").into_bytes();
    v.resize(VALUE_LEN, b'a' + (i % 26) as u8);
    v
}

/// Writes every key at `version`, then flushes (the flush finds the records it shadows).
fn write_all(db: &Db, keys: impl Iterator<Item = u32>, version: u32, model: &mut Model) {
    for i in keys {
        db.put(key(i), value(i, version)).expect("put");
        model.insert(key(i), value(i, version));
    }
    db.flush().expect("flush");
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn check(db: &Db, model: &Model, opts: &ReadOptions) {
    for (k, v) in model {
        let got = db.get_opt(k, opts).expect("get");
        assert!(got.as_ref() == Some(v), "{}", String::from_utf8_lossy(k));
    }
    let mut it = db.iter(opts).expect("iter");
    it.seek_to_first();
    let mut seen = Model::new();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().expect("value"));
        it.next();
    }
    it.status().expect("status");
    assert!(seen == *model, "a scan shows exactly the model");
}

/// Opens a database on `fs` and writes every key, half of them again, then every key once
/// more: a contiguous run of dead records (ready to punch once its flush's readers are gone)
/// at the start of the sealed first segment, whose other records are live.
fn open_with_a_dead_run(fs: Arc<dyn FileSystem>, dir: &Path) -> (Db, Model) {
    let db = Db::open(dir, options(fs)).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    write_all(&db, 0..KEYS / 2, 1, &mut model);
    write_all(&db, 0..KEYS, 2, &mut model);
    (db, model)
}

/// Opens a database at `/db` on `mem` whose background GC aims at `target`.
fn open_with_background_target(mem: &MemFs, target: f64) -> Db {
    let options = Options {
        gc_space_amp_target: target,
        ..options(Arc::new(mem.clone()))
    };
    Db::open(Path::new("/db"), options).expect("open")
}

/// The database's stats once `done` holds for them, or after 20 s (background GC's rounds
/// come after every flush and at least once a second), whichever is first.
fn stats_once(db: &Db, done: impl Fn(&DbStats) -> bool) -> DbStats {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let stats = db.stats().expect("stats");
        if done(&stats) || std::time::Instant::now() > deadline {
            return stats;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn punched(stats: &DbStats) -> u64 {
    stats
        .value_log
        .segments
        .iter()
        .map(|s| s.punched_bytes)
        .sum()
}

/// Overwritten records of a segment that is not collected are punched out: their blocks
/// read as zeros, the stats count them, every newest value still reads, a reopen steps over
/// them, and collecting the segment later (its scan skips the punched ranges) keeps
/// everything live.
#[test]
fn dead_records_are_punched_out_and_every_reader_steps_over_them() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(mem.clone()))).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    assert_eq!(util::zeroed_log_blocks(&mem, dir), 0);
    // Half the keys get a new value, then every key: all records so far are garbage, one
    // contiguous run at the start of the first segment (the newest values fill the rest of
    // it and roll the log into a second segment, so the replay head leaves the first).
    write_all(&db, 0..KEYS / 2, 1, &mut model);
    write_all(&db, 0..KEYS, 2, &mut model);
    db.gc(&punch_only()).expect("gc");
    let stats = db.stats().expect("stats");
    let dead_run = u64::from(KEYS + KEYS / 2) * VALUE_LEN as u64;
    assert!(
        stats.gc.bytes_punched >= dead_run - 8192,
        "the overwritten records' blocks are punched: {:?}",
        stats.gc
    );
    assert_eq!(stats.gc.work.segments_collected, 0, "nothing collected");
    assert_eq!(punched(&stats), stats.gc.bytes_punched);
    assert!(
        util::zeroed_log_blocks(&mem, dir) * 4096 >= stats.gc.bytes_punched,
        "punched blocks read as zeros"
    );
    assert!(
        stats.value_log.log_bytes + stats.gc.bytes_punched
            == stats.value_log.segments.iter().map(|s| s.size).sum::<u64>(),
        "disk use excludes punched blocks: {:?}",
        stats.value_log
    );
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");

    // The punched ranges are manifest state: a reopen knows them.
    let db = Db::open(dir, options(Arc::new(mem.clone()))).expect("reopen");
    let reopened = db.stats().expect("stats");
    assert_eq!(punched(&reopened), stats.gc.bytes_punched);
    check(&db, &model, &ReadOptions::default());
    // Collecting everything reads the punched segments (stepping over the holes).
    let done = db.gc(&GcOptions::default()).expect("gc");
    assert!(done.segments_collected > 0, "{done:?}");
    check(&db, &model, &ReadOptions::default());
    // What collection read and freed is what those segments still held on disk: their
    // punched blocks were neither read nor freed a second time.
    let after = db.stats().expect("stats");
    let collected: Vec<_> = (reopened.value_log.segments.iter())
        .filter(|s| !(after.value_log.segments.iter()).any(|a| a.segment == s.segment))
        .collect();
    let on_disk_of_collected: u64 = collected.iter().map(|s| s.size - s.punched_bytes).sum();
    let punched_of_collected: u64 = collected.iter().map(|s| s.punched_bytes).sum();
    assert!(punched_of_collected > 0, "a punched segment was collected");
    assert_eq!(after.gc.bytes_freed, on_disk_of_collected, "{:?}", after.gc);
    assert!(
        done.bytes_read <= on_disk_of_collected,
        "the punched ranges were not read: {done:?}"
    );
    db.close().expect("close");
    let db = Db::open(dir, options(Arc::new(mem))).expect("reopen");
    check(&db, &model, &ReadOptions::default());
}

/// A round collects its victims before it punches: collecting a segment frees its blocks by
/// one deletion, punching costs a call per run of dead records, and behind one flush of
/// small values lie a million such runs. Punching first, background GC spent whole
/// overwrite phases punching segments it was about to collect and collected nothing
/// (docs/BENCHMARKS.md, "Collect first, punch after").
#[test]
fn a_round_collects_its_victims_before_it_punches() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let (db, model) = open_with_a_dead_run(Arc::new(mem.clone()), dir);
    let done = db
        .gc(&GcOptions {
            compact_first: false,
            ..GcOptions::default()
        })
        .expect("gc");
    assert!(done.segments_collected > 0, "{done:?}");
    let stats = db.stats().expect("stats");
    assert_eq!(
        stats.gc.bytes_punched, 0,
        "a victim's dead records were punched before it was collected: {:?}",
        stats.gc
    );
    assert!(stats.gc.bytes_freed > 0, "{:?}", stats.gc);
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
    let db = Db::open(dir, options(Arc::new(mem))).expect("reopen");
    check(&db, &model, &ReadOptions::default());
}

/// A record is punched only once no reader can follow a pointer to it: an iterator opened
/// before the overwrite (it holds the older version) and a snapshot taken before it (it
/// reads at the older sequence) each hold the punch back, and read the old values.
#[test]
fn an_older_iterator_or_snapshot_holds_punching_back() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(mem.clone()))).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    let old_model = model.clone();

    // An iterator alone.
    let mut iter = db.iter(&ReadOptions::default()).expect("iter");
    write_all(&db, 0..KEYS, 1, &mut model);
    write_all(&db, 0..KEYS, 2, &mut model);
    db.gc(&punch_only()).expect("gc");
    assert_eq!(db.stats().expect("stats").gc.bytes_punched, 0);
    iter.seek_to_first();
    let mut seen = Model::new();
    while iter.valid() {
        seen.insert(iter.key().to_vec(), iter.value().expect("old value"));
        iter.next();
    }
    iter.status().expect("status");
    assert!(
        seen == old_model,
        "the iterator reads the values it was opened on"
    );
    drop(iter);
    db.gc(&punch_only()).expect("gc");
    let after_iter = db.stats().expect("stats").gc.bytes_punched;
    assert!(after_iter > 0, "punched once the iterator is gone");

    // A snapshot alone.
    let snapshot = db.snapshot();
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..ReadOptions::default()
    };
    let snapshot_model = model.clone();
    write_all(&db, 0..KEYS, 3, &mut model);
    write_all(&db, 0..KEYS, 4, &mut model);
    db.gc(&punch_only()).expect("gc");
    let with_snapshot = db.stats().expect("stats").gc.bytes_punched;
    check(&db, &snapshot_model, &at_snapshot);
    drop(at_snapshot);
    drop(snapshot);
    db.gc(&punch_only()).expect("gc");
    let without = db.stats().expect("stats").gc.bytes_punched;
    assert!(
        without > with_snapshot,
        "the records the snapshot could read are punched once it is gone ({with_snapshot} -> {without})"
    );
    check(&db, &model, &ReadOptions::default());
}

/// Background GC punches only once the log is over its target: under it the space is not
/// asked for (and punching costs: it drops the ranges' cached pages). Garbage under the
/// target stays put even once no reader can reach it; the first round after a flush takes
/// the log over the target gives it back (here by collecting its segment, a victim, before
/// any punch: `a_round_collects_its_victims_before_it_punches`).
///
/// No segment is ever wholly dead here: such a segment is collected even under the target,
/// and a collection that brings the log back under it leaves nothing to punch.
#[test]
fn background_gc_punches_only_over_its_target() {
    let mem = MemFs::new();
    let target = 1.5;
    let db = open_with_background_target(&mem, target);
    let mut model = Model::new();
    // 120 keys of 12 KiB: keys 0..85 fill the first 1 MiB segment, the rest start the
    // second. Then keys 0..50 again: their old records are garbage in the sealed first
    // segment (35 of its records stay live), before the replay head; 170 records for 120
    // live ones is under the target.
    const LIVE_KEYS: u32 = 120;
    const FIRST_SEGMENT_DEAD: u32 = 50;
    write_all(&db, 0..LIVE_KEYS, 0, &mut model);
    write_all(&db, 0..FIRST_SEGMENT_DEAD, 1, &mut model);
    let under = db.stats().expect("stats");
    let dead_bytes = u64::from(FIRST_SEGMENT_DEAD) * VALUE_LEN as u64;
    let dead: u64 = under.value_log.segments.iter().map(|s| s.dead_bytes).sum();
    assert!(
        dead >= dead_bytes,
        "the flush counted the overwritten records: {:?}",
        under.value_log
    );
    assert!(under.value_log.space_amp < target, "{:?}", under.value_log);
    // Background rounds run after every flush and at least once a second: give it several,
    // long enough for every reader of the older versions (a compaction, say) to be gone.
    // Watched meanwhile: should a round punch, the log as it stood just before says why
    // (this test failed twice in CI: victim choice read the log's sizes before its dead
    // counts, docs/RELIABILITY.md, "Defects these tests found").
    let mut last_seen = under.clone();
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    while std::time::Instant::now() < until {
        let now = db.stats().expect("stats");
        assert_eq!(
            now.gc.bytes_punched, 0,
            "punched under the target: {:?}\nnow: {:?}\njust before: {:?}",
            now.gc, now.value_log, last_seen.value_log
        );
        last_seen = now;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = db.stats().expect("stats");
    assert_eq!(stats.gc.bytes_punched, 0, "punched under the target");
    assert_eq!(punched(&stats), 0);
    assert_eq!(stats.gc.work.segments_collected, 0, "{:?}", stats.gc);

    // Twenty keys of the second segment again: 190 records for 120 live ones is over the
    // target, and the first segment's garbage has been ready to punch for seconds. Now it
    // is given back: the round collects the first segment (59% dead, a victim), and would
    // punch what victims leave.
    write_all(&db, 100..LIVE_KEYS, 1, &mut model);
    let given_back = |stats: &DbStats| stats.gc.bytes_punched + stats.gc.bytes_freed;
    let over = stats_once(&db, |stats| given_back(stats) >= dead_bytes);
    assert!(
        given_back(&over) >= dead_bytes,
        "the first segment's garbage is given back over the target: {:?} {:?}",
        over.gc,
        over.value_log
    );
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
}

/// A background round that collects first still punches what collection leaves: with the
/// log over its target and every sealed segment under the 20% dead threshold (no victim),
/// the round's punch after collecting is the only way that garbage comes back.
#[test]
fn background_gc_punches_what_collection_leaves_while_over_its_target() {
    let mem = MemFs::new();
    let target = 1.1;
    let db = open_with_background_target(&mem, target);
    let mut model = Model::new();
    // 255 keys of 12 KiB fill three 1 MiB segments (85 records each). Then a run of 12 keys
    // at the start of each: about 14% of each sealed segment is dead, under the threshold,
    // while the log (255 + 36 records for 255 live) is over 1.1.
    const LIVE_KEYS: u32 = 255;
    write_all(&db, 0..LIVE_KEYS, 0, &mut model);
    write_all(&db, (0..12).chain(85..97).chain(170..182), 1, &mut model);
    // The log is now ~1.14x its live bytes (a background round may already be punching it,
    // so that is not asserted); punched until it is back under its target (a round punches
    // the ranges that are ready; once under, the rest waits).
    // (The ranges are recorded, and so left out of disk use, before their blocks are
    // deallocated and counted in `bytes_punched`: wait for both.)
    let stats = stats_once(&db, |stats| {
        stats.gc.bytes_punched > 0 && stats.value_log.space_amp <= target
    });
    assert_eq!(stats.gc.work.segments_collected, 0, "{:?}", stats.gc);
    assert!(
        stats.gc.bytes_punched > 0 && stats.value_log.space_amp <= target,
        "the sealed segments' garbage is punched back under the target: {:?} {:?}",
        stats.gc,
        stats.value_log
    );
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
}

/// On a real file system the punched blocks stop taking disk space (where the file system
/// can punch holes; elsewhere GC says so and gives space back by whole segments only).
#[test]
fn punching_gives_disk_blocks_back_on_a_real_file_system() {
    use std::os::unix::fs::MetadataExt;
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let allocated = |dir: &Path| -> u64 {
        (std::fs::read_dir(dir).expect("ls").flatten())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".vlog"))
            .map(|e| e.metadata().expect("stat").blocks() * 512)
            .sum()
    };
    let db = Db::open(&dir, options(Arc::new(wisckey::fs::PosixFs::new()))).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    write_all(&db, 0..KEYS, 1, &mut model);
    write_all(&db, 0..KEYS, 2, &mut model);
    // Background GC wakes after every flush and may punch too: what it punched before
    // `before` is in neither figure, what it punches later is in both.
    let before = allocated(&dir);
    let punched_earlier = db.stats().expect("stats").gc.bytes_punched;
    db.gc(&punch_only()).expect("gc");
    let punched_total = db.stats().expect("stats").gc.bytes_punched;
    let punched = punched_total - punched_earlier;
    let after = allocated(&dir);
    if !can_punch_holes(temp.path()) {
        eprintln!("SKIPPED: this file system does not punch holes; nothing to measure");
    } else {
        assert!(
            punched_total > 0,
            "GC punched nothing on a file system that can punch"
        );
        assert!(
            after + punched / 2 <= before,
            "allocated {before} -> {after} bytes after punching {punched}"
        );
    }
    check(&db, &model, &ReadOptions::default());
}

/// Whether the file system under `dir` punches holes (asked of a scratch file, so the
/// answer does not depend on what GC did). Elsewhere than Linux the engine punches nothing.
#[cfg(not(target_os = "linux"))]
fn can_punch_holes(_dir: &Path) -> bool {
    false
}

/// Whether the file system under `dir` punches holes (asked of a scratch file, so the
/// answer does not depend on what GC did).
#[cfg(target_os = "linux")]
fn can_punch_holes(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let path = dir.join("punch-probe");
    let file = std::fs::File::create(&path).expect("probe file");
    std::io::Write::write_all(&mut &file, &[7u8; 64 << 10]).expect("probe write");
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on a descriptor this function owns for the call's duration; it
    // reads and writes no memory of ours.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), mode, 16 << 10, 16 << 10) } == 0;
    drop(file);
    std::fs::remove_file(&path).expect("remove probe");
    done
}

/// `Db::check` once scanned each sealed segment with the punched ranges of the version it
/// took when it began: ranges GC punched after that read as zeros inside records, and a
/// healthy database was reported damaged. Here GC punches between the check's start and its
/// segment scan (from the progress callback, on the checking thread).
#[test]
fn a_check_while_gc_punches_reports_no_damage() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let (db, model) = open_with_a_dead_run(Arc::new(mem.clone()), dir);
    let mut punched_during_check = 0;
    let report = db
        .check_with_progress(|p| {
            if p.phase == wisckey::CheckPhase::Segments && p.done == 0 {
                db.gc(&punch_only()).expect("gc");
                punched_during_check = db.stats().expect("stats").gc.bytes_punched;
            }
        })
        .expect("check");
    assert!(
        punched_during_check >= u64::from(KEYS + KEYS / 2) * VALUE_LEN as u64 - 8192,
        "the test must punch while the check runs: {punched_during_check}"
    );
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report.segments > 0 && report.segment_records > 0,
        "{report:?}"
    );
    check(&db, &model, &ReadOptions::default());
}

/// Fails the next `n` manifest records that record punched ranges with EIO (a record is one
/// append: an 8-byte frame header, then the encoded edit).
#[derive(Debug, Default)]
struct FailPunchEdits {
    n: std::sync::atomic::AtomicUsize,
    /// Refuse to create the disk reserve: the database then counts its disk as short of
    /// space, where GC punches before it collects.
    refuse_reserve: bool,
    /// Manifest records appended or tried, in order: "punch" (records punched ranges) or
    /// "removal" (removes value-log segments).
    edits: std::sync::Mutex<Vec<&'static str>>,
}

impl common::Hooks for FailPunchEdits {
    fn before_create(&self, path: &Path) -> wisckey::Result<()> {
        if self.refuse_reserve && path.file_name().is_some_and(|n| n == "RESERVE") {
            return Err(common::injected("create", path, "ENOSPC"));
        }
        Ok(())
    }

    fn before_append(&self, path: &Path, data: &[u8]) -> wisckey::Result<()> {
        use std::sync::atomic::Ordering;
        let manifest =
            (path.file_name().and_then(|n| n.to_str())).is_some_and(|n| n.starts_with("MANIFEST-"));
        let edit = (data.get(8..))
            .filter(|_| manifest)
            .and_then(|edit| wisckey::version::VersionEdit::decode(edit, "", 0).ok());
        let records_punches = edit.as_ref().is_some_and(|e| !e.vlog_punched.is_empty());
        if let Some(edit) = &edit {
            let mut edits = self.edits.lock().expect("edits");
            if records_punches {
                edits.push("punch");
            }
            if !edit.vlog_segments_removed.is_empty() {
                edits.push("removal");
            }
        }
        if records_punches
            && (self.n)
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(common::injected("append", path, "EIO"));
        }
        Ok(())
    }
}

/// Defect: a punch whose manifest edit failed failed the whole collection before any victim
/// was looked at (on a full disk, where every round punches first, GC returned `NoSpace`
/// without trying even a segment with nothing live), and the ranges it had taken were lost.
/// Now the ranges go back to the queue and the collection goes on. (EIO here: the
/// background thread would collect a segment with nothing live before the test's `Db::gc`
/// could, and on ENOSPC the collection goes on to those only.)
#[test]
fn a_failed_punch_neither_stops_the_collection_nor_loses_its_ranges() {
    use std::sync::atomic::Ordering;
    let fs = common::HookFs::new(FailPunchEdits::default());
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    // Something queued, so this round probes for hole punching (which appends to a
    // scratch file); its ranges lie in the head's segment, so nothing is punched yet.
    write_all(&db, 0..2, 1, &mut model);
    db.gc(&punch_only()).expect("gc");
    // Half the keys overwritten again and again, with one new key each time: dead ranges
    // wait in sealed segments that all stay partly live, which background GC leaves alone.
    let round = |db: &Db, version: u32, model: &mut Model| {
        write_all(db, (0..KEYS / 2).chain([KEYS + version]), version, model);
    };
    for version in 2..10 {
        round(&db, version, &mut model);
    }
    // No compaction left for the background to do: the next manifest edit is the punch's.
    db.compact_range(None, None).expect("compact");
    let punched = |db: &Db| db.stats().expect("stats").gc.bytes_punched;
    let before = punched(&db);
    fs.hooks.n.store(1, Ordering::SeqCst);
    db.gc(&punch_only())
        .expect("a failed punch fails no collection");
    assert_eq!(
        fs.hooks.n.load(Ordering::SeqCst),
        0,
        "the punch's edit failed"
    );
    assert_eq!(punched(&db), before, "nothing recorded, nothing punched");
    // The ranges were put back: the next round punches them.
    db.gc(&punch_only()).expect("gc");
    assert!(punched(&db) > before, "the ranges were lost");

    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
    let db = Db::open(dir, options(Arc::new(fs.mem.clone()))).expect("reopen");
    check(&db, &model, &ReadOptions::default());
}

/// On a disk short of space (here: the disk reserve could not be made) a round punches
/// before it collects, since punching needs no room and relocations do; a punch whose
/// manifest edit fails must not stop the collection after it (it used to fail the whole
/// round before any victim was looked at). Every punch edit fails here, the background
/// rounds' too (a failed punch puts its ranges back), so the test's own round always has
/// ranges to try first.
#[test]
fn on_a_short_disk_a_failed_punch_does_not_stop_the_collection_after_it() {
    use std::sync::atomic::Ordering;
    const ALWAYS: usize = 1 << 30;
    let fs = common::HookFs::new(FailPunchEdits {
        n: ALWAYS.into(),
        refuse_reserve: true,
        ..FailPunchEdits::default()
    });
    let dir = Path::new("/db");
    let options = Options {
        disk_reserve_size: 64 << 10,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(dir, options.clone()).expect("open");
    let mut model = Model::new();
    write_all(&db, 0..KEYS, 0, &mut model);
    for version in 1..6 {
        write_all(
            &db,
            (0..KEYS / 2).chain([KEYS + version]),
            version,
            &mut model,
        );
    }
    db.compact_range(None, None).expect("compact");
    let failed_before = ALWAYS - fs.hooks.n.load(Ordering::SeqCst);
    fs.hooks.edits.lock().expect("edits").clear();
    let done = db
        .gc(&GcOptions {
            compact_first: false,
            ..GcOptions::default()
        })
        .expect("gc goes on past a failed punch");
    let failed = ALWAYS - fs.hooks.n.load(Ordering::SeqCst);
    assert!(
        failed > failed_before,
        "the round's punch was tried, and failed"
    );
    assert!(done.segments_collected > 0, "{done:?}");
    let edits = fs.hooks.edits.lock().expect("edits").clone();
    let first = |kind| edits.iter().position(|&e| e == kind);
    assert!(
        first("punch").is_some_and(|p| first("removal").is_some_and(|r| p < r)),
        "on a short disk the punch comes before the collection: {edits:?}"
    );
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
    fs.hooks.n.store(0, Ordering::SeqCst);
    let db = Db::open(dir, options).expect("reopen");
    check(&db, &model, &ReadOptions::default());
}

/// Fails the next `n` hole punches in value-log segments with EIO (the probe's scratch file
/// is let through).
#[derive(Debug, Default)]
struct FailLogPunches {
    n: std::sync::atomic::AtomicUsize,
}

impl common::Hooks for FailLogPunches {
    fn before_punch_hole(&self, path: &Path) -> wisckey::Result<()> {
        use std::sync::atomic::Ordering;
        let log = path.extension().is_some_and(|e| e == "vlog");
        if log
            && (self.n)
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(common::injected("punch_hole", path, "EIO"));
        }
        Ok(())
    }
}

/// Defect: a range whose `punch_hole` failed after it was recorded in the manifest was never
/// tried again (recorded, it is never queued again), so its blocks stayed allocated until the
/// whole segment was collected. Now the next round punches it.
#[test]
fn a_recorded_range_whose_punch_failed_is_punched_by_a_later_round() {
    use std::sync::atomic::Ordering;
    let fs = common::HookFs::new(FailLogPunches::default());
    let dir = Path::new("/db");
    let (db, model) = open_with_a_dead_run(Arc::new(fs.clone()), dir);
    fs.hooks.n.store(usize::MAX, Ordering::SeqCst);
    db.gc(&punch_only())
        .expect("a failed punch fails no collection");
    let stats = db.stats().expect("stats");
    assert_eq!(stats.gc.bytes_punched, 0, "nothing was deallocated");
    assert!(punched(&stats) > 0, "the ranges were recorded: {stats:?}");
    assert_eq!(util::zeroed_log_blocks(&fs.mem, dir), 0);
    check(&db, &model, &ReadOptions::default());

    fs.hooks.n.store(0, Ordering::SeqCst);
    db.gc(&punch_only()).expect("gc");
    let stats = db.stats().expect("stats");
    assert_eq!(
        stats.gc.bytes_punched,
        punched(&stats),
        "the recorded ranges are punched now: {:?}",
        stats.gc
    );
    assert!(util::zeroed_log_blocks(&fs.mem, dir) * 4096 >= stats.gc.bytes_punched);
    check(&db, &model, &ReadOptions::default());
    db.close().expect("close");
    let db = Db::open(dir, options(Arc::new(fs.mem.clone()))).expect("reopen");
    check(&db, &model, &ReadOptions::default());
}

/// Counts the bytes appended to value-log segments under `/copy`.
#[derive(Debug, Default)]
struct CopiedLogBytes {
    bytes: std::sync::atomic::AtomicU64,
}

impl common::Hooks for CopiedLogBytes {
    fn after_append(&self, path: &Path, data: &[u8]) {
        if path.starts_with("/copy") && path.extension().is_some_and(|e| e == "vlog") {
            (self.bytes).fetch_add(data.len() as u64, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Defect: a checkpoint copied punched ranges as zeros, so a copy of a log GC had punched
/// took back the disk space GC had given back. They are left holes in the copy, which
/// records them as punched too.
#[test]
fn a_checkpoint_leaves_punched_ranges_unwritten() {
    let fs = common::HookFs::new(CopiedLogBytes::default());
    let dir = Path::new("/db");
    let (db, model) = open_with_a_dead_run(Arc::new(fs.clone()), dir);
    db.gc(&punch_only()).expect("gc");
    let stats = db.stats().expect("stats");
    let punched_bytes = punched(&stats);
    assert!(
        punched_bytes >= u64::from(KEYS) * VALUE_LEN as u64,
        "{:?}",
        stats.gc
    );
    let report = db.checkpoint("/copy").expect("checkpoint");
    let appended = fs.hooks.bytes.load(std::sync::atomic::Ordering::SeqCst);
    // The stats count the whole blocks punched; the recorded ranges (left out of the copy)
    // are whole records, which cover those blocks and the pieces of blocks around them.
    assert!(
        appended <= report.segment_bytes - punched_bytes,
        "{appended} bytes copied of {}, {punched_bytes} of them punched",
        report.segment_bytes
    );
    drop(db);
    let copy = Db::open("/copy", options(Arc::new(fs.clone()))).expect("open the copy");
    assert_eq!(punched(&copy.stats().expect("stats")), punched_bytes);
    check(&copy, &model, &ReadOptions::default());
    let checked = copy.check().expect("check");
    assert!(checked.is_ok(), "{:?}", checked.problems);
    // Collecting the copy's segments steps over the holes too.
    let done = copy.gc(&GcOptions::default()).expect("gc");
    assert!(done.segments_collected > 0, "{done:?}");
    check(&copy, &model, &ReadOptions::default());
}
