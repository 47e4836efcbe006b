//! Tests of `VersionSet`: create/apply/recover round trips, torn and corrupt manifests,
//! CURRENT validation, rollover, and failure atomicity of `log_and_apply`.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::coding::put_fixed32;
use crate::error::Error;
use crate::fs::{FaultFs, FaultKind, FaultOps, FileSystem, FsOp, MemFs};
use crate::key::{make_internal_key, ValueKind};
use crate::version::manifest::{MANIFEST_FORMAT_VERSION, MANIFEST_MAGIC};
use crate::version::testutil::meta;

const DIR: &str = "/db";

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// The set works through `fs.fault`, a `FaultFs` over `fs.mem`, which holds the files.
struct TestFs {
    mem: MemFs,
    fault: Arc<FaultFs>,
}

impl TestFs {
    fn new() -> TestFs {
        let mem = MemFs::new();
        let fault = Arc::new(FaultFs::new(Arc::new(mem.clone())));
        TestFs { mem, fault }
    }

    /// Names of the files in `dir`, sorted.
    fn names(&self, dir: &Path) -> Vec<String> {
        let mut names = self.mem.list(dir).expect("list");
        names.sort();
        names
    }

    fn read(&self, path: &Path) -> Option<Vec<u8>> {
        self.mem.contents(path)
    }

    fn write(&self, path: &Path, bytes: &[u8]) {
        self.mem.set_contents(path, bytes).expect("set_contents");
    }

    /// From now on every call of the listed ops fails with ENOSPC (an `append` after
    /// writing half its bytes), until `fault.clear()`.
    fn fail_every(&self, ops: &'static [FsOp]) {
        let kind = FaultKind::NoSpacePartial;
        self.fault.fail_at(1, kind, FaultOps::Only(ops), true);
    }
}

fn new_set() -> (TestFs, VersionSet) {
    let fs = TestFs::new();
    let set = VersionSet::create(Arc::clone(&fs.fault) as Arc<dyn FileSystem>, dir(), None)
        .expect("create");
    (fs, set)
}

fn recover(fs: &TestFs) -> Result<VersionSet> {
    VersionSet::recover(Arc::clone(&fs.fault) as Arc<dyn FileSystem>, dir())
}

/// Everything observable about a set's state, for equality checks across recovery.
fn state(set: &VersionSet) -> String {
    let v = set.current();
    let files: Vec<_> = v
        .all_files()
        .map(|(l, f)| (l, f.as_ref().clone()))
        .collect();
    format!(
        "{files:?} seq={} head={:?} tail={:?} seg={} ptrs={:?} extra={:?}",
        set.last_sequence(),
        set.vlog_head(),
        set.vlog_tail(),
        set.next_vlog_segment(),
        set.compact_pointers(),
        set.extra(2000),
    )
}

fn flush_edit(set: &mut VersionSet, lo: &[u8], hi: &[u8]) -> VersionEdit {
    let number = set.new_file_number();
    let mut edit = VersionEdit::new();
    edit.add_file(0, meta(number, lo, hi));
    edit
}

/// Applies a handful of edits of every kind; returns the set.
fn populated() -> (TestFs, VersionSet) {
    let (fs, mut set) = new_set();
    let e = flush_edit(&mut set, b"a", b"m");
    set.log_and_apply(e).expect("flush 1");
    let mut e = flush_edit(&mut set, b"k", b"z");
    set.set_last_sequence(42);
    e.vlog_head = Some(LogPosition::new(1, 4096));
    set.log_and_apply(e).expect("flush 2");
    let l0: Vec<u64> = set.current().files(0).iter().map(|f| f.number).collect();
    let out = set.new_file_number();
    let mut e = VersionEdit::new();
    for n in &l0 {
        e.delete_file(0, *n);
    }
    e.add_file(1, meta(out, b"a", b"z"));
    e.set_compact_pointer(1, &make_internal_key(b"q", 7, ValueKind::Value));
    e.vlog_tail = Some(LogPosition::new(1, 100));
    e.next_vlog_segment = Some(3);
    e.extra.push((2000, b"future".to_vec()));
    set.log_and_apply(e).expect("compaction");
    (fs, set)
}

#[test]
fn create_apply_recover_round_trip() {
    let (fs, set) = populated();
    let before = state(&set);
    assert_eq!(set.current().num_files(1), 1);
    assert_eq!(set.current().num_files(0), 0);
    let used = set.current().files(1)[0].number;
    drop(set);
    let mut back = recover(&fs).expect("recover");
    assert_eq!(state(&back), before);
    assert!(back.new_file_number() > used);
    assert_eq!(back.vlog_head(), Some(LogPosition::new(1, 4096)));
    assert_eq!(back.last_sequence(), 42);
    // Recovering twice in a row (a crash right after open) gives the same state again.
    drop(back);
    assert_eq!(state(&recover(&fs).expect("recover again")), before);
}

#[test]
fn new_database_state_and_create_refuses_existing() {
    let (fs, set) = new_set();
    assert_eq!(set.manifest_file_number(), 1);
    assert_eq!(set.next_vlog_segment(), 1);
    assert_eq!((set.vlog_head(), set.last_sequence()), (None, 0));
    assert_eq!(
        fs.read(&dir().join("CURRENT")).expect("CURRENT"),
        b"MANIFEST-000001\n"
    );
    assert_eq!(fs.names(dir()), vec!["CURRENT", "MANIFEST-000001"]);
    let again = VersionSet::create(Arc::clone(&fs.fault) as Arc<dyn FileSystem>, dir(), None);
    assert!(matches!(again, Err(Error::InvalidArgument(_))));
}

/// A manifest whose counter is near `u64::MAX` (crafted or damaged bytes whose checksum
/// still matches) is refused as corruption; the open took the next manifest's number from
/// it and overflowed (a panic with overflow checks, a wrapped number 0 without).
#[test]
fn a_manifest_counting_past_the_largest_file_number_is_corruption() {
    let (fs, mut set) = new_set();
    let mut e = VersionEdit::new();
    e.next_file_number = Some(u64::MAX - 1);
    set.log_and_apply(e).expect("applied in memory and written");
    drop(set);
    let recovered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| recover(&fs).map(|_| ())));
    let err = recovered.expect("no panic").expect_err("refused");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("18446744073709551614"), "{err}");
}

#[test]
fn recover_writes_new_manifest_and_removes_old() {
    let (fs, set) = populated();
    let old = set.manifest_file_number();
    drop(set);
    let back = recover(&fs).expect("recover");
    let new = back.manifest_file_number();
    assert!(new > old);
    let current = fs.read(&dir().join("CURRENT")).expect("CURRENT");
    assert_eq!(current, format!("MANIFEST-{new:06}\n").into_bytes());
    assert_eq!(
        fs.names(dir()),
        vec!["CURRENT".to_owned(), format!("MANIFEST-{new:06}")]
    );
}

fn manifest_path(set: &VersionSet) -> std::path::PathBuf {
    crate::filename::manifest_file_name(dir(), set.manifest_file_number())
}

#[test]
fn torn_last_record_is_ignored_at_every_cut() {
    let (fs, mut set) = new_set();
    let e = flush_edit(&mut set, b"a", b"b");
    set.log_and_apply(e).expect("first");
    let path = manifest_path(&set);
    let good_len = fs.read(&path).expect("manifest").len();
    let expected = state(&set);
    let e = flush_edit(&mut set, b"c", b"d");
    set.log_and_apply(e).expect("second");
    let full = fs.read(&path).expect("manifest");
    drop(set);
    for cut in good_len..full.len() {
        fs.write(&path, &full[..cut]);
        fs.write(&dir().join("CURRENT"), b"MANIFEST-000001\n");
        let back = recover(&fs).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(state(&back), expected, "cut {cut}");
    }
    // A checksum failure in the last record is also a torn append.
    let mut flipped = full.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    fs.write(&path, &flipped);
    fs.write(&dir().join("CURRENT"), b"MANIFEST-000001\n");
    assert_eq!(state(&recover(&fs).expect("flipped tail")), expected);
}

#[test]
fn corrupt_middle_record_is_corruption() {
    let (fs, mut set) = new_set();
    let path = manifest_path(&set);
    let first_len = fs.read(&path).expect("manifest").len();
    for (lo, hi) in [(b"a", b"b"), (b"c", b"d")] {
        let e = flush_edit(&mut set, lo, hi);
        set.log_and_apply(e).expect("apply");
    }
    let mut bytes = fs.read(&path).expect("manifest");
    bytes[first_len + 9] ^= 0x01; // inside the second record's payload
    fs.write(&path, &bytes);
    drop(set);
    match recover(&fs) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, "MANIFEST-000001");
            assert_eq!(offset, first_len as u64);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// A damaged CURRENT is damage to a database, not a foreign directory (issue 10); a missing
/// one is still "not a database".
#[test]
fn damaged_current_is_corruption_and_missing_current_is_not_a_database() {
    let (fs, set) = new_set();
    drop(set);
    for garbage in [
        &b""[..],
        b"MANIFEST-000001",
        b"hello\n",
        b"MANIFEST-x\n",
        b"\xff\xfe\n",
    ] {
        fs.write(&dir().join("CURRENT"), garbage);
        assert!(
            matches!(recover(&fs), Err(Error::Corruption { ref file, .. }) if file == "CURRENT"),
            "{garbage:?}"
        );
    }
    fs.write(&dir().join("CURRENT"), &[b'M'; 1000]);
    assert!(matches!(recover(&fs), Err(Error::Corruption { .. })));
    let empty = TestFs::new();
    assert!(matches!(recover(&empty), Err(Error::NotADatabase(_))));
}

#[test]
fn manifest_header_is_checked() {
    let (fs, set) = new_set();
    let path = manifest_path(&set);
    drop(set);
    let good = fs.read(&path).expect("manifest");
    let mut newer = MANIFEST_MAGIC.to_vec();
    put_fixed32(&mut newer, MANIFEST_FORMAT_VERSION + 1);
    newer.extend_from_slice(&good[12..]);
    fs.write(&path, &newer);
    assert!(matches!(
        recover(&fs),
        Err(Error::UnsupportedVersion { found, .. }) if found == MANIFEST_FORMAT_VERSION + 1
    ));
    // A version no build could have reached yet (a flipped high bit): damage, which repair
    // rebuilds around, not a newer database it must leave alone.
    let mut flipped = good.clone();
    flipped[10] ^= 0x08;
    fs.write(&path, &flipped);
    assert!(recover(&fs).expect_err("damaged version").is_corruption());
    let mut bad_magic = good.clone();
    bad_magic[0] ^= 0xff;
    fs.write(&path, &bad_magic);
    assert!(matches!(recover(&fs), Err(Error::NotADatabase(_))));
    fs.write(&path, &good[..10]);
    assert!(recover(&fs).expect_err("short header").is_corruption());
    fs.write(&path, &good[..12]);
    assert!(recover(&fs).expect_err("no records").is_corruption());
}

#[test]
fn failed_sync_leaves_state_unchanged_and_next_apply_recovers() {
    let (fs, mut set) = populated();
    let before = state(&set);
    let version_before = set.current();
    // An append that tears half-way leaves garbage; the next apply must not append after it.
    fs.fail_every(&[FsOp::Append]);
    let e = flush_edit(&mut set, b"a", b"c");
    assert!(set.log_and_apply(e.clone()).is_err());
    assert_eq!(state(&set), before);
    assert!(Arc::ptr_eq(&set.current(), &version_before));
    fs.fault.clear();
    fs.fail_every(&[FsOp::SyncData]);
    assert!(set.log_and_apply(e.clone()).is_err());
    assert_eq!(state(&set), before);
    assert!(Arc::ptr_eq(&set.current(), &version_before));
    fs.fault.clear();
    let old_manifest = set.manifest_file_number();
    set.log_and_apply(e).expect("healthy again");
    assert!(
        set.manifest_file_number() > old_manifest,
        "rolled to a fresh manifest"
    );
    let after = state(&set);
    drop(set);
    assert_eq!(state(&recover(&fs).expect("recover")), after);
}

#[test]
fn failed_roll_keeps_old_manifest_current() {
    let (fs, mut set) = populated();
    set.set_manifest_size_limit(1);
    let before = state(&set);
    let old = set.manifest_file_number();
    fs.fail_every(&[FsOp::Rename]);
    let e = flush_edit(&mut set, b"a", b"c");
    assert!(set.log_and_apply(e.clone()).is_err());
    assert_eq!(state(&set), before);
    assert_eq!(
        fs.read(&dir().join("CURRENT")),
        Some(format!("MANIFEST-{old:06}\n").into_bytes())
    );
    fs.fault.clear();
    set.log_and_apply(e).expect("roll succeeds");
    let after = state(&set);
    drop(set);
    assert_eq!(state(&recover(&fs).expect("recover")), after);
}

#[test]
fn manifest_rolls_over_past_the_size_limit() {
    let (fs, mut set) = new_set();
    set.set_manifest_size_limit(200);
    let mut seen = std::collections::HashSet::new();
    for i in 0..30u8 {
        let e = flush_edit(&mut set, &[b'a' + i % 26], &[b'a' + i % 26]);
        set.log_and_apply(e).expect("apply");
        seen.insert(set.manifest_file_number());
        let size = fs.mem.file_size(&manifest_path(&set)).expect("size");
        assert!(size < 4000, "manifest stays bounded: {size}");
    }
    assert!(seen.len() > 2, "rolled several times");
    let manifests = fs
        .names(dir())
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST"))
        .count();
    assert_eq!(manifests, 1, "old manifests removed");
    let expected = state(&set);
    drop(set);
    assert_eq!(state(&recover(&fs).expect("recover")), expected);
}

#[test]
fn live_table_files_include_versions_still_referenced() {
    let (_fs, mut set) = new_set();
    let e = flush_edit(&mut set, b"a", b"b");
    let v1 = set.log_and_apply(e).expect("flush");
    let n1 = v1.files(0)[0].number;
    let mut e = VersionEdit::new();
    e.delete_file(0, n1);
    let n2 = set.new_file_number();
    e.add_file(1, meta(n2, b"a", b"b"));
    set.log_and_apply(e).expect("compact");
    assert_eq!(set.live_table_files(), [n1, n2].into_iter().collect());
    drop(v1);
    assert_eq!(set.live_table_files(), [n2].into_iter().collect());
}

#[test]
fn invalid_edits_are_rejected_without_writing() {
    let (fs, mut set) = populated();
    let path = manifest_path(&set);
    let len = fs.read(&path).expect("manifest").len();
    let mut e = VersionEdit::new();
    e.delete_file(3, 999);
    assert!(matches!(set.log_and_apply(e), Err(Error::Internal(_))));
    let mut e = VersionEdit::new();
    e.extra.push((7, Vec::new()));
    assert!(matches!(
        set.log_and_apply(e),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(fs.read(&path).expect("manifest").len(), len);
}

#[test]
fn file_numbers_in_edits_are_marked_used() {
    let (fs, mut set) = new_set();
    let mut e = VersionEdit::new();
    e.add_file(2, meta(500, b"a", b"b"));
    set.log_and_apply(e).expect("apply");
    assert!(set.new_file_number() > 500);
    drop(set);
    let mut back = recover(&fs).expect("recover");
    assert!(back.new_file_number() > 500);
}

#[test]
fn zero_filled_tail_is_torn_and_random_flips_never_panic() {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let (fs, set) = populated();
    let path = manifest_path(&set);
    let current = fs.read(&dir().join("CURRENT")).expect("CURRENT");
    let expected = state(&set);
    drop(set);
    let good = fs.read(&path).expect("manifest");
    let mut padded = good.clone();
    padded.extend_from_slice(&[0u8; 64]);
    fs.write(&path, &padded);
    assert_eq!(state(&recover(&fs).expect("zero tail")), expected);

    // States recovery may legitimately produce: those after each whole record (a flip in
    // the last record, or in a length pointing past the end, reads as a torn tail).
    let mut prefixes = std::collections::HashSet::new();
    let mut pos = 12;
    while pos < good.len() {
        let len = crate::coding::decode_fixed32(&good[pos + 4..]).expect("length") as usize;
        pos += 8 + len;
        fs.write(&path, &good[..pos]);
        fs.write(&dir().join("CURRENT"), &current);
        prefixes.insert(state(&recover(&fs).expect("prefix")));
    }
    assert!(prefixes.contains(&expected) && prefixes.len() == 4);

    let seed = 0x5eed_0002;
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..300 {
        let mut bytes = good.clone();
        let i = rng.gen_range(0..bytes.len());
        bytes[i] ^= rng.gen_range(1..=255u8);
        fs.write(&path, &bytes);
        fs.write(&dir().join("CURRENT"), &current);
        let attempt = std::panic::AssertUnwindSafe(|| recover(&fs).map(|s| state(&s)));
        let outcome = std::panic::catch_unwind(attempt);
        match outcome {
            Err(_) => panic!("seed {seed} round {round}: recover panicked (byte {i})"),
            Ok(Err(_)) => {}
            Ok(Ok(got)) => assert!(
                prefixes.contains(&got),
                "seed {seed} round {round}: flip at {i} invented state {got}"
            ),
        }
    }
}
