//! Byte-flip sweep (issue 12, item 5): damage every file of a populated database — flip a
//! byte, or zero a 4 KiB range, at offsets spread over the file — then open it, read every
//! key and scan. The contract under damage:
//! - no panic (in the caller or any background thread) and no hang;
//! - never a wrong value: a key reads as its newest value, as missing, or as an error; a
//!   deleted key never comes back; a scan shows only keys with their newest values;
//! - an open that refuses deletes nothing.
//!
//! Keys lost per file kind are reported (`--nocapture`), not asserted: what a damaged byte
//! costs depends on what it hit. Damage points per file: `WISCKEY_FLIP_POINTS` (default 24;
//! the long tier uses 400).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Options, ReadOptions, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const DIR: &str = "/flip-db";
/// Longest a damaged database may take to open, read and scan.
const HANG_LIMIT: Duration = Duration::from_secs(60);

static PANICS: AtomicU64 = AtomicU64::new(0);

fn options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        // Nothing runs behind the checks' back: what is read is what the damage left.
        gc_space_amp_target: f64::INFINITY,
        ..Options::small_for_tests(fs)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Inline values, pointers of a few hundred bytes, and a few that span several blocks.
fn value(rng: &mut SmallRng, i: u32, version: u32) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0..=2 => rng.gen_range(1..60),
        3..=8 => rng.gen_range(100..900),
        _ => rng.gen_range(4000..9000),
    };
    let mut v = format!("{i}:{version}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
    v
}

/// A database with tables at several levels, several value-log segments (one collected by
/// GC), a rewritten manifest, and records after the replay head. Returns its files and the
/// model of what it holds, plus the keys deleted.
fn populate() -> (BTreeMap<PathBuf, Vec<u8>>, Model, BTreeSet<Vec<u8>>) {
    let mem = MemFs::new();
    let dir = Path::new(DIR);
    let db = Db::open(dir, options(Arc::new(mem.clone()))).expect("open");
    let mut rng = SmallRng::seed_from_u64(12);
    let mut model = Model::new();
    let mut deleted = BTreeSet::new();
    for version in 0..3u32 {
        for i in 0..400u32 {
            if version > 0 && rng.gen_range(0..3) == 0 {
                continue;
            }
            let v = value(&mut rng, i, version);
            db.put(key(i), &v).expect("put");
            model.insert(key(i), v);
            deleted.remove(&key(i));
        }
        for _ in 0..30 {
            let i = rng.gen_range(0..400u32);
            db.delete(key(i)).expect("delete");
            model.remove(&key(i));
            deleted.insert(key(i));
        }
        let mut batch = WriteBatch::new();
        for i in 400 + version * 10..410 + version * 10 {
            let v = value(&mut rng, i, version);
            batch.put(key(i), &v);
            model.insert(key(i), v);
        }
        db.write(batch).expect("batch");
        if version == 1 {
            db.compact_range(None, None).expect("compact");
            db.gc(&wisckey::GcOptions::default()).expect("gc");
        }
    }
    db.flush().expect("flush");
    // Some records only in the log, after the head.
    for i in 500..520u32 {
        let v = value(&mut rng, i, 9);
        db.put(key(i), &v).expect("put");
        model.insert(key(i), v);
    }
    db.close().expect("close");
    let files = (mem.list(dir).expect("list").into_iter())
        .filter(|n| n != "LOCK")
        .map(|n| {
            let path = dir.join(&n);
            let bytes = mem.contents(&path).expect("contents");
            (path, bytes)
        })
        .collect();
    (files, model, deleted)
}

fn image(files: &BTreeMap<PathBuf, Vec<u8>>) -> MemFs {
    let mem = MemFs::new();
    mem.create_dir_all(Path::new(DIR)).expect("mkdir");
    for (path, bytes) in files {
        let mut f = mem.create(path).expect("create");
        f.append(bytes).expect("append");
        f.sync_data().expect("sync");
    }
    mem.sync_dir(Path::new(DIR)).expect("sync dir");
    mem
}

fn kind_of(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    if name.ends_with(".sst") {
        "table"
    } else if name.ends_with(".vlog") {
        "value log"
    } else if name.starts_with("MANIFEST") {
        "manifest"
    } else if name == "CURRENT" {
        "CURRENT"
    } else {
        "other"
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    cases: u64,
    refused: u64,
    keys_lost: u64,
    /// Refused opens that `Db::repair` made open again, and images it could not repair.
    repaired: u64,
    repair_refused: u64,
    /// Keys lost over all images once every image that lost keys was repaired.
    keys_lost_after_repair: u64,
    violations: u64,
}

/// What one damaged image did: `Err(refused)` or the keys lost; violations are counted.
/// What one damaged image did: whether the open refused, keys lost, and keys still lost
/// after `Db::repair` where any were lost (None: the repair or the open after it failed).
struct Outcome {
    refused: bool,
    lost: u64,
    lost_after_repair: Option<u64>,
    violations: Vec<String>,
}

fn check_image(mem: MemFs, model: &Model, deleted: &BTreeSet<Vec<u8>>) -> Outcome {
    let dir = Path::new(DIR);
    let before: BTreeSet<String> = mem.list(dir).expect("list").into_iter().collect();
    let mut violations = Vec::new();
    let db = match Db::open(dir, options(Arc::new(mem.clone()))) {
        Ok(db) => db,
        Err(_) => {
            let after: BTreeSet<String> = mem.list(dir).expect("list").into_iter().collect();
            let gone: Vec<&String> = before.difference(&after).collect();
            if !gone.is_empty() {
                violations.push(format!("a refused open deleted {gone:?}"));
            }
            // The way past a refused open: repair, then the same checks.
            let lost_after_repair = repair_and_verify(&mem, model, deleted, &mut violations);
            return Outcome {
                refused: true,
                lost: model.len() as u64,
                lost_after_repair,
                violations,
            };
        }
    };
    let (lost, found) = verify(&db, model, deleted);
    violations.extend(found);
    let _ = db.close();
    // Keys lost to damage in a database that opens: what a repair gets back.
    let lost_after_repair = if lost > 0 {
        repair_and_verify(&mem, model, deleted, &mut violations)
    } else {
        Some(0)
    };
    Outcome {
        refused: false,
        lost,
        lost_after_repair,
        violations,
    }
}

/// Repairs the image, opens it and checks it; keys still lost, or None if repair or the
/// open after it failed.
fn repair_and_verify(
    mem: &MemFs,
    model: &Model,
    deleted: &BTreeSet<Vec<u8>>,
    violations: &mut Vec<String>,
) -> Option<u64> {
    let dir = Path::new(DIR);
    Db::repair(dir, options(Arc::new(mem.clone()))).ok()?;
    let db = Db::open(dir, options(Arc::new(mem.clone()))).ok()?;
    let (lost, found) = verify(&db, model, deleted);
    violations.extend(found.into_iter().map(|v| format!("after repair: {v}")));
    Some(lost)
}

/// Keys of `model` that do not read back, and every wrong value or resurrected delete (by
/// get and by scan).
fn verify(db: &Db, model: &Model, deleted: &BTreeSet<Vec<u8>>) -> (u64, Vec<String>) {
    let mut violations = Vec::new();
    let mut lost = 0;
    // Keys `get` reads right: a scan that ends without an error must show each of them.
    let mut readable = std::collections::BTreeSet::new();
    for (k, v) in model {
        match db.get(k) {
            Ok(Some(got)) if &got == v => {
                readable.insert(k.clone());
            }
            Ok(Some(_)) => {
                violations.push(format!("wrong value for {}", String::from_utf8_lossy(k)))
            }
            Ok(None) | Err(_) => lost += 1,
        }
    }
    for k in deleted.iter().filter(|k| !model.contains_key(*k)) {
        if let Ok(Some(_)) = db.get(k) {
            violations.push(format!(
                "deleted key {} came back",
                String::from_utf8_lossy(k)
            ));
        }
    }
    if let Ok(mut it) = db.iter(&ReadOptions::default()) {
        it.seek_to_first();
        let mut scanned = std::collections::BTreeSet::new();
        let mut failed = false;
        while it.valid() {
            scanned.insert(it.key().to_vec());
            match it.value() {
                Ok(v) => {
                    if model.get(it.key()) != Some(&v) {
                        violations.push(format!(
                            "scan shows {} with a value that is not its newest",
                            String::from_utf8_lossy(it.key())
                        ));
                    }
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
            it.next();
        }
        if !failed && it.status().is_ok() {
            if let Some(skipped) = readable.difference(&scanned).next() {
                violations.push(format!(
                    "a scan that reported no error skipped {}, which get reads",
                    String::from_utf8_lossy(skipped)
                ));
            }
        }
    }
    (lost, violations)
}

#[test]
fn damaged_bytes_never_panic_hang_or_return_a_wrong_value() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    let points: u64 = std::env::var("WISCKEY_FLIP_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    // Shown when the test fails (libtest prints a failed test's output).
    eprintln!("byte-flip sweep: workload seed 12, damage seed 77, {points} points per file");
    let (files, model, deleted) = populate();
    let model = Arc::new(model);
    let deleted = Arc::new(deleted);
    // The undamaged image reads back exactly.
    let sound = check_image(image(&files), &model, &deleted);
    assert!(
        !sound.refused && sound.lost == 0 && sound.violations.is_empty(),
        "{:?}",
        sound.violations
    );

    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut all_violations = Vec::new();
    let mut rng = SmallRng::seed_from_u64(77);
    for (path, bytes) in &files {
        if bytes.is_empty() {
            continue;
        }
        for point in 0..points {
            let mut damaged = files.clone();
            let target = damaged.get_mut(path).expect("file");
            // Even points flip one byte (spread evenly, so headers and ends are hit);
            // odd points zero a 4 KiB range at a random aligned offset.
            let what = if point % 2 == 0 {
                let at = (point / 2 * bytes.len() as u64 / points.div_ceil(2).max(1)) as usize;
                let at = at.min(bytes.len() - 1);
                target[at] ^= 1 << rng.gen_range(0..8);
                format!("flip at {at}")
            } else {
                let blocks = bytes.len().div_ceil(4096);
                let start = rng.gen_range(0..blocks) * 4096;
                let end = (start + 4096).min(bytes.len());
                target[start..end].fill(0);
                format!("zero {start}..{end}")
            };
            let (tx, rx) = mpsc::channel();
            let (m, d) = (Arc::clone(&model), Arc::clone(&deleted));
            let mem = image(&damaged);
            std::thread::spawn(move || {
                let _ = tx.send(check_image(mem, &m, &d));
            });
            let tally = tallies.entry(kind_of(path)).or_default();
            tally.cases += 1;
            let context = format!("{} {what}", path.display());
            match rx.recv_timeout(HANG_LIMIT) {
                Ok(outcome) => {
                    tally.refused += u64::from(outcome.refused);
                    tally.keys_lost += outcome.lost;
                    match outcome.lost_after_repair {
                        Some(lost) => tally.keys_lost_after_repair += lost,
                        None => tally.repair_refused += 1,
                    }
                    tally.repaired +=
                        u64::from(outcome.refused && outcome.lost_after_repair.is_some());
                    tally.violations += outcome.violations.len() as u64;
                    (all_violations.extend(
                        (outcome.violations.into_iter()).map(|v| format!("{context}: {v}")),
                    ));
                }
                // A panic drops the sender (counted by the hook); no answer in time is a hang.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    tally.violations += 1;
                    all_violations.push(format!("{context}: panicked"));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    tally.violations += 1;
                    all_violations.push(format!("{context}: no answer in {HANG_LIMIT:?}"));
                }
            }
        }
    }
    eprintln!(
        "byte-flip sweep: {points} damage points per file, {} keys",
        model.len()
    );
    eprintln!(
        "| file kind | cases | opens refused | keys lost (sum) | refused opens repaired / repairs failed | keys lost after repair (sum) | violations |"
    );
    eprintln!("|---|---:|---:|---:|---:|---:|---:|");
    for (kind, t) in &tallies {
        eprintln!(
            "| {kind} | {} | {} | {} | {} / {} | {} | {} |",
            t.cases,
            t.refused,
            t.keys_lost,
            t.repaired,
            t.repair_refused,
            t.keys_lost_after_repair,
            t.violations
        );
    }
    // Repair must get past every kind of damage here (RELIABILITY's table says so).
    let repairs_failed: u64 = tallies.values().map(|t| t.repair_refused).sum();
    assert_eq!(repairs_failed, 0, "repairs that failed");
    let panics = PANICS.load(Ordering::SeqCst);
    assert!(
        all_violations.is_empty() && panics == 0,
        "{panics} panics; violations: {all_violations:#?}"
    );
}
