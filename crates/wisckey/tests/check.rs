//! `Db::check` reads everything and reports, by file and offset, what does not verify; a
//! sound database reports nothing.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use common::{HookFs, Hooks};
use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Error, Options};

fn options(fs: &MemFs) -> Options {
    Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

fn populate(fs: &MemFs, dir: &Path) {
    let db = Db::open(dir, options(fs)).expect("open");
    for round in 0..3u32 {
        for i in 0..300u32 {
            let len = if i % 5 == 0 { 20 } else { 700 };
            db.put(format!("key{i:04}"), vec![(i + round) as u8; len])
                .expect("put");
        }
        db.flush().expect("flush");
    }
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
}

fn files_ending(fs: &MemFs, dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = (fs.list(dir).expect("list").into_iter())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn damage(fs: &MemFs, path: &Path, at: usize) {
    let mut bytes = fs.contents(path).expect("contents");
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x40;
    fs.set_contents(path, &bytes).expect("write");
}

#[test]
fn a_sound_database_checks_clean_and_every_part_is_read() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    let db = Db::open(dir, options(&fs)).expect("open");
    let report = db.check().expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.keys, 300);
    assert_eq!(report.pointers, 240, "values of 700 bytes live in the log");
    assert!(
        report.tables > 0 && report.table_entries >= 300,
        "{report:?}"
    );
    assert!(
        report.segments > 0 && report.segment_records >= 600,
        "{report:?}"
    );
}

#[test]
fn damage_in_a_table_or_a_segment_is_reported_by_file() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);

    let table = files_ending(&fs, dir, ".sst").remove(0);
    damage(&fs, &dir.join(&table), 100);
    let db = Db::open(dir, options(&fs)).expect("open");
    let report = db.check().expect("check");
    assert!(
        report.problems.iter().any(|p| p.file.ends_with(&table)),
        "the damaged table is named: {:?}",
        report.problems
    );
    db.close().expect("close");

    let fs = MemFs::new();
    populate(&fs, dir);
    // The newest values live in the last segments; the first one holds the first round
    // (overwritten, so dead: damage there costs no value, and check still reports it).
    let segment = files_ending(&fs, dir, ".vlog").remove(0);
    damage(&fs, &dir.join(&segment), 5000);
    let db = Db::open(dir, options(&fs)).expect("open");
    let report = db.check().expect("check");
    let problem = (report.problems.iter())
        .find(|p| p.file.ends_with(&segment))
        .unwrap_or_else(|| panic!("the damaged segment is named: {:?}", report.problems));
    assert!(problem.offset.is_some_and(|o| o <= 5000), "{problem:?}");
    assert_eq!(report.keys, 300, "every key still reads");
}

/// Defect: only the records a sealed segment still had were verified, so one cut short at
/// a record boundary checked clean (its lost records were all dead, so no key's value
/// failed to read).
#[test]
fn a_sealed_segment_cut_short_is_reported() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    let segments = files_ending(&fs, dir, ".vlog");
    assert!(segments.len() > 2, "{segments:?}");
    let first = dir.join(&segments[0]);
    let bytes = fs.contents(&first).expect("contents");
    // Its header alone: a segment without records reads cleanly.
    fs.set_contents(&first, &bytes[..32]).expect("cut");
    let db = Db::open(dir, options(&fs)).expect("open");
    let report = db.check().expect("check");
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert!(problem.file.ends_with(&segments[0]), "{problem:?}");
    let expected = format!(
        "the segment is 32 bytes; the manifest sealed it at {}",
        bytes.len()
    );
    assert!(problem.what.contains(&expected), "{problem:?}");
}

/// `check_with_progress` reports each pass in order, never going backwards within one, and
/// ends each pass at its total; its report is `check`'s.
#[test]
fn check_reports_progress_through_its_three_passes() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    let db = Db::open(dir, options(&fs)).expect("open");
    let mut seen: Vec<wisckey::CheckProgress> = Vec::new();
    let report = db.check_with_progress(|p| seen.push(p)).expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report, db.check().expect("check"));
    use wisckey::CheckPhase::{Segments, Tables, Values};
    let phases: Vec<wisckey::CheckPhase> = seen.iter().map(|p| p.phase).collect();
    let firsts = |phase| {
        phases
            .iter()
            .position(|&p| p == phase)
            .expect("phase reported")
    };
    assert!(firsts(Tables) < firsts(Values) && firsts(Values) < firsts(Segments));
    for pair in seen.windows(2) {
        if pair[0].phase == pair[1].phase {
            assert!(pair[0].done <= pair[1].done, "{pair:?}");
        }
    }
    for phase in [Tables, Values, Segments] {
        let last = seen.iter().rev().find(|p| p.phase == phase).expect("phase");
        assert_eq!(last.done, last.total, "{last:?}");
        assert!(seen
            .iter()
            .filter(|p| p.phase == phase)
            .all(|p| p.done <= p.total));
    }
    let tables = seen
        .iter()
        .rev()
        .find(|p| p.phase == Tables)
        .expect("tables");
    assert!(tables.total > 0);
    let values = seen
        .iter()
        .rev()
        .find(|p| p.phase == Values)
        .expect("values");
    assert_eq!(values.done, report.keys);
}

/// A damaged value is reported with its key, and keys that are not text are shown in hex:
/// two keys a lossy text conversion would print alike stay apart.
#[test]
fn a_damaged_value_names_its_key_even_when_the_key_is_binary() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    db.put([0xff, 0x01], vec![0xab; 700]).expect("put");
    db.put([0xfe, 0x01], vec![0xcd; 700]).expect("put");
    db.put("text key", vec![0xef; 700]).expect("put");
    db.close().expect("close");

    let damaged_value = |byte: u8| {
        for name in files_ending(&fs, dir, ".vlog") {
            let bytes = fs.contents(&dir.join(&name)).expect("contents");
            if let Some(at) = bytes
                .windows(700)
                .position(|w| w.iter().all(|&b| b == byte))
            {
                damage(&fs, &dir.join(&name), at + 350);
                return;
            }
        }
        panic!("no segment holds the value of {byte:#x}");
    };
    damaged_value(0xab);
    damaged_value(0xef);

    let db = Db::open(dir, options(&fs)).expect("open");
    let report = db.check().expect("check");
    let whats: Vec<&str> = report.problems.iter().map(|p| p.what.as_str()).collect();
    assert!(
        whats.iter().any(|w| w.starts_with("value of key 0xff01: ")),
        "{whats:?}"
    );
    assert!(
        whats
            .iter()
            .any(|w| w.starts_with("value of key 'text key': ")),
        "{whats:?}"
    );
    assert!(!whats.iter().any(|w| w.contains("0xfe01")), "{whats:?}");
    assert!(
        (report.problems.iter()).all(|p| p.file.ends_with(".vlog") && p.offset.is_some()),
        "the segment and offset are kept: {:?}",
        report.problems
    );
}

/// Records written since the open lie after the replay head: replay verified none of them,
/// and inline values and deletes are read from the memtable, so only the log pass sees
/// them. It skipped the log from the head on: a damaged one passed the check, and the next
/// open refused the database (or cut acknowledged writes off as a torn tail).
#[test]
fn damage_in_records_written_since_the_open_is_reported() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..200u32 {
        db.put(format!("small{i:04}"), [i as u8; 20]).expect("put");
        db.delete(format!("key{i:04}")).expect("delete");
    }
    db.sync().expect("written out");
    assert!(
        db.check().expect("check").is_ok(),
        "sound before the damage"
    );
    let segment = files_ending(&fs, dir, ".vlog").pop().expect("a segment");
    let len = fs.contents(&dir.join(&segment)).expect("contents").len();
    damage(&fs, &dir.join(&segment), len - 100);
    let report = db.check().expect("check");
    let problem = (report.problems.iter())
        .find(|p| p.file.ends_with(&segment))
        .unwrap_or_else(|| panic!("the damaged segment is named: {:?}", report.problems));
    assert!(
        problem.offset.is_some_and(|o| o <= len as u64 - 100),
        "{problem:?}"
    );
}

/// A table block that went bad on disk after it was cached: the check reads the disk, not
/// the block cache.
#[test]
fn damage_in_a_cached_table_block_is_reported() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..300u32 {
        db.get(format!("key{i:04}")).expect("get").expect("present");
    }
    let table = files_ending(&fs, dir, ".sst").remove(0);
    damage(&fs, &dir.join(&table), 100);
    let report = db.check().expect("check");
    assert!(
        report.problems.iter().any(|p| p.file.ends_with(&table)),
        "the damaged table is named: {:?}",
        report.problems
    );
}

/// A read-only open keeps a torn tail in the file (it may not cut it): the check reads the
/// log up to the end replay found, and a crash's torn tail is no damage.
#[test]
fn a_read_only_check_after_a_crash_takes_no_torn_tail_for_damage() {
    use wisckey::fs::PowerLoss;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir);
    // No flush (which syncs the log) during the writes.
    let big_memtable = |fs: &MemFs| Options {
        memtable_size: 4 << 20,
        memtable_max_log_bytes: 4 << 20,
        ..options(fs)
    };
    let db = Db::open(dir, big_memtable(&fs)).expect("open");
    for i in 0..300u32 {
        db.put(format!("late{i:04}"), [i as u8; 30]).expect("put");
        if i % 50 == 49 && i < 250 {
            db.sync().expect("sync");
        }
    }
    // The last 50 reach the file unsynced (the log's flusher writes them out): a power
    // cut tears them.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut torn_images = 0;
    for seed in 1..=20 {
        let image = fs.power_loss_image(PowerLoss::TornTail { seed });
        let db = Db::open_read_only(dir, big_memtable(&image)).expect("read-only open");
        torn_images += usize::from(db.recovery_report().torn_tail_bytes > 0);
        let report = db.check().expect("check");
        assert!(report.is_ok(), "seed {seed}: {:?}", report.problems);
    }
    assert!(torn_images > 0, "no image had a torn tail");
    drop(db);
}

/// Fails every read of a table with the errno stored (0: none).
#[derive(Debug, Default)]
struct TableReadsFail {
    errno: AtomicI32,
}

impl Hooks for TableReadsFail {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        let errno = self.errno.load(Ordering::SeqCst);
        if errno != 0 && path.extension().is_some_and(|e| e == "sst") {
            let error = std::io::Error::from_raw_os_error(errno);
            return Err(Error::io(format!("read {}", path.display()), error));
        }
        Ok(())
    }
}

/// An error of the process's situation (no permission) stops the check with that error; it
/// is not reported as damage, which made `wisckey check` exit 2 on a sound database. A
/// failed read (EIO, a bad sector) is the data's: reported as a problem.
#[test]
fn a_permission_error_stops_the_check_and_is_not_damage() {
    let fs = HookFs::new(TableReadsFail::default());
    let dir = Path::new("/db");
    populate(&fs.mem, dir);
    let opts = Options {
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Db::open(dir, opts).expect("open");
    fs.hooks.errno.store(libc::EACCES, Ordering::SeqCst);
    match db.check() {
        Err(Error::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied)
        }
        other => panic!("expected the permission error, got {other:?}"),
    }
    fs.hooks.errno.store(libc::EIO, Ordering::SeqCst);
    let report = db.check().expect("a failed read is reported, not returned");
    assert!(
        report.problems.iter().any(|p| p.file.ends_with(".sst")),
        "{:?}",
        report.problems
    );
    fs.hooks.errno.store(0, Ordering::SeqCst);
    assert!(db.check().expect("check").is_ok());
}
