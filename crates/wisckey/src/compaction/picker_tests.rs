//! Picker tests on synthetic versions (metadata only, no table files).

use super::*;
use crate::key::{make_internal_key, ValueKind};
use crate::version::testutil::meta;
use crate::version::VersionEdit;

fn sized(number: u64, lo: &[u8], hi: &[u8], size: u64) -> FileMeta {
    FileMeta {
        file_size: size,
        ..meta(number, lo, hi)
    }
}

fn version(files: Vec<(usize, FileMeta)>) -> Version {
    let mut edit = VersionEdit::new();
    edit.new_files = files;
    Version::empty()
        .apply(&edit)
        .expect("valid synthetic version")
}

fn small_policy() -> CompactionPolicy {
    CompactionPolicy {
        l0_compaction_trigger: 4,
        level1_max_bytes: 1000,
        level_size_multiplier: 10,
        target_file_size: 100,
        max_grandparent_overlap_bytes: 1000,
    }
}

fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
    n.sort_unstable();
    n
}

const NO_POINTERS: [Option<Vec<u8>>; NUM_LEVELS] = [None, None, None, None, None, None, None];

#[test]
fn nothing_to_do_returns_none() {
    let p = small_policy();
    assert!(pick_compaction(&Version::empty(), &p, &NO_POINTERS).is_none());
    let v = version(vec![
        (0, meta(1, b"a", b"b")),
        (0, meta(2, b"a", b"b")),
        (0, meta(3, b"a", b"b")),
        (1, sized(4, b"a", b"z", 999)),
        (6, sized(5, b"a", b"z", u64::MAX / 2)),
    ]);
    let scores = compaction_scores(&v, &p);
    assert_eq!(scores.len(), NUM_LEVELS - 1, "last level is never a source");
    assert!(scores.iter().all(|&(_, s)| s < 1.0));
    assert!(pick_compaction(&v, &p, &NO_POINTERS).is_none());
}

#[test]
fn l0_trigger_picks_overlapping_l0_files_and_l1() {
    let p = small_policy();
    let v = version(vec![
        (0, meta(1, b"a", b"c")),
        (0, meta(2, b"c", b"e")),
        (0, meta(3, b"x", b"y")),
        (0, meta(4, b"d", b"f")),
        (1, meta(10, b"a", b"b")),
        (1, meta(11, b"f", b"g")),
        (1, meta(12, b"h", b"i")),
        (2, meta(20, b"g", b"h")),
        (2, meta(21, b"p", b"q")),
    ]);
    assert_eq!(compaction_scores(&v, &p)[0], (0, 1.0));
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L0 due");
    assert_eq!((t.level, t.output_level), (0, 1));
    // Seeded with the oldest file (1), expanded 1 -> 2 -> 4; file 3 does not overlap.
    assert_eq!(numbers(&t.inputs), vec![1, 2, 4]);
    assert_eq!(numbers(&t.next_inputs), vec![10, 11]);
    assert_eq!(numbers(&t.grandparents), vec![20]);
    assert_eq!(
        (t.smallest_user_key(), t.largest_user_key()),
        (&b"a"[..], &b"g"[..])
    );
    assert!(!t.is_trivial_move());
}

#[test]
fn oversized_level_is_picked_over_smaller_scores() {
    let p = small_policy();
    let v = version(vec![
        (0, meta(1, b"a", b"b")),
        (0, meta(2, b"a", b"b")),
        (0, meta(3, b"a", b"b")),
        (0, meta(4, b"a", b"b")), // L0 score 1.0
        (1, sized(10, b"a", b"c", 500)),
        (1, sized(11, b"d", b"f", 1000)),   // L1 score 1.5
        (2, sized(20, b"a", b"z", 12_000)), // L2 score 1.2
    ]);
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L1 due");
    assert_eq!((t.level, t.output_level), (1, 2));
    assert_eq!(numbers(&t.inputs), vec![10]);
    assert_eq!(numbers(&t.next_inputs), vec![20]);
    assert_eq!(max_bytes_for_level(&p, 3), 100_000);
}

#[test]
fn compact_pointer_rotates_through_the_level() {
    let p = small_policy();
    let v = version(vec![
        (1, sized(10, b"a", b"b", 600)),
        (1, sized(11, b"c", b"d", 600)),
        (1, sized(12, b"e", b"f", 600)),
    ]);
    let mut pointers = NO_POINTERS.to_vec();
    let mut picked = Vec::new();
    for _ in 0..4 {
        let t = pick_compaction(&v, &p, &pointers).expect("L1 due");
        assert_eq!(t.inputs.len(), 1);
        picked.push(t.inputs[0].number);
        pointers[1] = Some(t.largest_input_key().to_vec());
    }
    assert_eq!(picked, vec![10, 11, 12, 10], "round-robin with wrap-around");
    // A pointer between files starts at the next file.
    pointers[1] = Some(make_internal_key(b"bb", 1, ValueKind::Value));
    let t = pick_compaction(&v, &p, &pointers).expect("L1 due");
    assert_eq!(t.inputs[0].number, 11);
}

#[test]
fn a_user_key_split_across_files_is_compacted_together() {
    let p = small_policy();
    let mut f10 = sized(10, b"a", b"k", 600);
    f10.largest = make_internal_key(b"k", 9, ValueKind::Value);
    let mut f11 = sized(11, b"k", b"m", 600);
    f11.smallest = make_internal_key(b"k", 8, ValueKind::Value);
    let v = version(vec![(1, f10), (1, f11), (1, sized(12, b"n", b"p", 600))]);
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L1 due");
    assert_eq!(numbers(&t.inputs), vec![10, 11]);
    let t = pick_range_compaction(&v, 1, Some(b"b"), Some(b"c")).expect("overlaps 10");
    assert_eq!(numbers(&t.inputs), vec![10, 11]);
}

/// The same split on the output level: the file holding the key's older versions is an
/// input too, or a tombstone dropped from the first would let them come back.
#[test]
fn a_user_key_split_across_output_level_files_is_compacted_together() {
    let mut f20 = sized(20, b"c", b"k", 100);
    f20.largest = make_internal_key(b"k", 9, ValueKind::Deletion);
    let mut f21 = sized(21, b"k", b"m", 100);
    f21.smallest = make_internal_key(b"k", 5, ValueKind::Value);
    let v = version(vec![
        (1, sized(10, b"a", b"d", 100)),
        (2, f20),
        (2, f21),
        (2, sized(22, b"n", b"p", 100)),
    ]);
    let t = pick_range_compaction(&v, 1, Some(b"a"), Some(b"b")).expect("overlaps 10");
    assert_eq!(numbers(&t.inputs), vec![10]);
    assert_eq!(numbers(&t.next_inputs), vec![20, 21]);
}

#[test]
fn trivial_move_needs_one_input_no_next_inputs_and_small_grandparent_overlap() {
    let p = small_policy();
    let v = version(vec![
        (1, sized(10, b"a", b"c", 1500)),
        (3, sized(30, b"a", b"b", 500)),
    ]);
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L1 due");
    assert!(t.next_inputs.is_empty());
    assert!(t.is_trivial_move());
    let v = version(vec![
        (1, sized(10, b"a", b"c", 1500)),
        (3, sized(30, b"a", b"b", 5000)),
    ]);
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L1 due");
    assert!(!t.is_trivial_move(), "too much grandparent overlap");
    let v = version(vec![
        (1, sized(10, b"a", b"c", 1500)),
        (2, sized(20, b"c", b"d", 10)),
    ]);
    let t = pick_compaction(&v, &p, &NO_POINTERS).expect("L1 due");
    assert!(!t.is_trivial_move(), "next level overlaps");
    assert_eq!(t.input_bytes(), 1510);
}

#[test]
fn range_compaction_takes_overlapping_files() {
    let v = version(vec![
        (0, meta(1, b"a", b"c")),
        (0, meta(2, b"m", b"n")),
        (2, meta(20, b"a", b"b")),
        (2, meta(21, b"c", b"d")),
        (2, meta(22, b"x", b"y")),
        (3, meta(30, b"d", b"e")),
    ]);
    let t = pick_range_compaction(&v, 2, Some(b"b"), Some(b"c")).expect("overlap");
    assert_eq!((t.level, t.output_level), (2, 3));
    assert_eq!(numbers(&t.inputs), vec![20, 21]);
    assert_eq!(numbers(&t.next_inputs), vec![30]);
    let t = pick_range_compaction(&v, 0, None, None).expect("all of L0");
    assert_eq!(numbers(&t.inputs), vec![1, 2]);
    assert!(
        pick_range_compaction(&v, 1, None, None).is_none(),
        "empty level"
    );
    assert!(pick_range_compaction(&v, 2, Some(b"e"), Some(b"w")).is_none());
    assert!(pick_range_compaction(&v, NUM_LEVELS - 1, None, None).is_none());
}
