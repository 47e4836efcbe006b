//! [`FileMeta`] and [`Version`]: an immutable snapshot of which table files form each level,
//! plus [`VersionBuilder`], which applies [`VersionEdit`]s to produce the next version.
//!
//! Invariants of every `Version` (checked by `VersionBuilder::build`):
//! - L0 files may overlap and are ordered NEWEST FIRST (higher file number = newer);
//! - L1+ files are sorted by smallest key and do not overlap (`largest` of one file sorts
//!   strictly before `smallest` of the next, by `compare_internal`);
//! - every file's `smallest <= largest`; a file number appears at most once in the version.
//!
//! Thread-safety: immutable after construction; shared as `Arc<Version>`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::{EmptyIterator, InternalIterator};
use crate::key::{compare_internal, user_key};

use super::edit::VersionEdit;
use super::level_iter::LevelIterator;
use super::{AscendingGets, TableSource, NUM_LEVELS};

/// One table file: its number, size and key range (internal keys, inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub number: u64,
    pub file_size: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

impl FileMeta {
    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// Whether the file's user-key range contains `ukey`.
    pub fn contains_user_key(&self, ukey: &[u8]) -> bool {
        self.smallest_user_key() <= ukey && ukey <= self.largest_user_key()
    }

    /// Whether the file's user-key range meets `[smallest, largest]` (`None` = unbounded).
    pub fn overlaps_user_range(&self, smallest: Option<&[u8]>, largest: Option<&[u8]>) -> bool {
        let after = smallest.is_some_and(|lo| self.largest_user_key() < lo);
        let before = largest.is_some_and(|hi| self.smallest_user_key() > hi);
        !after && !before
    }
}

/// What the manifest knows of one value-log segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentMeta {
    /// The segment's final file size once the writer has moved past it (`None` while it may
    /// still be appended to).
    pub sealed_size: Option<u64>,
    /// Bytes of its records that no reader can need any more: records whose pointer was
    /// dropped by a flush or compaction, and records of inline values and tombstones once
    /// their memtable is flushed. Exact, never more than the records' bytes.
    pub dead_bytes: u64,
    /// Record ranges GC punched out (start offset -> end offset; sorted, disjoint, adjacent
    /// ranges merged). Every record in them is dead; readers of the segment step over them.
    /// Shared between versions: only a punch copies it.
    pub punched: Arc<BTreeMap<u64, u64>>,
}

impl SegmentMeta {
    /// Bytes of disk blocks given back by the punched ranges.
    pub fn punched_bytes(&self) -> u64 {
        (self.punched.iter())
            .map(|(&start, &end)| crate::vlog::punchable(start, end).map_or(0, |(s, e)| e - s))
            .sum()
    }

    /// Adds `[start, end)` to the punched ranges.
    fn add_punched(&mut self, start: u64, end: u64) {
        add_range(Arc::make_mut(&mut self.punched), start, end);
    }
}

/// Adds `[start, end)` to a set of disjoint ranges (start -> end), merging it with the
/// ranges it overlaps or touches.
pub(crate) fn add_range(ranges: &mut BTreeMap<u64, u64>, mut start: u64, mut end: u64) {
    if let Some((&s, &e)) = ranges.range(..=start).next_back() {
        if e >= start {
            start = s;
            end = end.max(e);
            ranges.remove(&s);
        }
    }
    while let Some((&s, &e)) = ranges.range(start..).next() {
        if s > end {
            break;
        }
        end = end.max(e);
        ranges.remove(&s);
    }
    ranges.insert(start, end);
}

/// The set of table files at each level at one point in time, and the value-log segments
/// that are part of the log (every segment from the oldest live one up to the replay
/// head's; newer segments are listed when the head passes into them).
#[derive(Debug, Clone)]
pub struct Version {
    levels: Vec<Vec<Arc<FileMeta>>>,
    vlog_segments: Arc<BTreeMap<u64, SegmentMeta>>,
}

impl Default for Version {
    fn default() -> Self {
        Version::empty()
    }
}

impl Version {
    /// A version with no files.
    pub fn empty() -> Version {
        Version {
            levels: vec![Vec::new(); NUM_LEVELS],
            vlog_segments: Arc::new(BTreeMap::new()),
        }
    }

    /// This version with `segments` as its value-log segment set.
    pub(crate) fn with_vlog_segments(&self, segments: BTreeMap<u64, SegmentMeta>) -> Version {
        Version {
            levels: self.levels.clone(),
            vlog_segments: Arc::new(segments),
        }
    }

    /// The value-log segments listed in this version, with their accounting.
    pub fn vlog_segments(&self) -> &BTreeMap<u64, SegmentMeta> {
        &self.vlog_segments
    }

    /// Whether a reader of this version may follow a pointer into `segment`: it is listed,
    /// or newer than every listed segment (written since the replay head last moved).
    /// Segments GC removed are neither.
    pub fn vlog_segment_readable(&self, segment: u64) -> bool {
        self.vlog_segments.contains_key(&segment)
            || self
                .vlog_segments
                .last_key_value()
                .is_none_or(|(&newest, _)| segment > newest)
    }

    /// The version that results from applying `edit` to `self`. Errors (deleting a missing
    /// file, adding a duplicate number, overlapping files at L1+) are `Internal`: the engine
    /// built an edit that does not fit its own version. (Recovery, which applies edits read
    /// from disk, reports the same failures as `Corruption`.)
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let mut builder = VersionBuilder::new(self);
        builder.apply(edit).map_err(Error::Internal)?;
        builder.build().map_err(Error::Internal)
    }

    /// Files at `level`: L0 newest first, L1+ in key order. Empty for out-of-range levels.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    pub fn num_files(&self, level: usize) -> usize {
        self.files(level).len()
    }

    /// Total size in bytes of the files at `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        // Saturating: the sizes come from the manifest, which may be damaged.
        (self.files(level).iter()).fold(0, |total, f| total.saturating_add(f.file_size))
    }

    /// Every file at every level, level by level in [`files`](Self::files) order (level 0
    /// newest first, deeper levels in key order).
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
    }

    /// The newest entry for `user_key(lookup_ikey)` with sequence <= the lookup's sequence,
    /// as `(found internal key, value)`. The found entry may be a tombstone; the caller
    /// interprets its kind.
    pub fn get(
        &self,
        tables: &dyn TableSource,
        lookup_ikey: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_with(lookup_ikey, |_, file| {
            tables.get(file.number, file.file_size, lookup_ikey)
        })
    }

    /// [`Version::get`] for one of a run of lookups in ascending key order, through the
    /// table cursors in `gets` (the same answers; fewer index searches and block-cache
    /// lookups when consecutive keys share a data block).
    pub fn get_ascending(
        &self,
        tables: &dyn TableSource,
        gets: &mut AscendingGets,
        lookup_ikey: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_with(lookup_ikey, |level, file| {
            gets.get(tables, level, file.number, file.file_size, lookup_ikey)
        })
    }

    /// The newest entry for `lookup_ikey`'s user key at or below its sequence: the first
    /// table that has one, newest first (L0 files whose range holds the key, newest first;
    /// then the one file of each deeper level that can), each asked through `probe` (with
    /// its level).
    fn get_with(
        &self,
        lookup_ikey: &[u8],
        mut probe: impl FnMut(usize, &FileMeta) -> Result<Option<(Vec<u8>, Vec<u8>)>>,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let ukey = user_key(lookup_ikey);
        for file in self.files(0).iter().filter(|f| f.contains_user_key(ukey)) {
            if let Some(hit) = probe(0, file)? {
                return Ok(Some(hit));
            }
        }
        for level in 1..NUM_LEVELS {
            let files = self.files(level);
            // The only file that can hold the first entry >= lookup_ikey in this level.
            let idx = files.partition_point(|f| compare_internal(&f.largest, lookup_ikey).is_lt());
            let Some(file) = files.get(idx) else { continue };
            if file.smallest_user_key() > ukey {
                continue;
            }
            if let Some(hit) = probe(level, file)? {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }

    /// One iterator per L0 file (newest first), then one lazy [`LevelIterator`] per
    /// non-empty deeper level. A table that fails to open yields an iterator whose
    /// `status()` reports the error.
    pub fn iterators(&self, tables: &Arc<dyn TableSource>) -> Vec<Box<dyn InternalIterator>> {
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        for file in self.files(0) {
            match tables.iter(file.number, file.file_size) {
                Ok(it) => out.push(it),
                Err(e) => out.push(Box::new(EmptyIterator::with_error(e))),
            }
        }
        for level in 1..NUM_LEVELS {
            if !self.files(level).is_empty() {
                out.push(Box::new(LevelIterator::new(
                    Arc::clone(tables),
                    self.files(level).to_vec(),
                )));
            }
        }
        out
    }

    /// Files at `level` whose user-key range meets `[smallest_user, largest_user]`
    /// (`None` = unbounded). For L0 the range grows to cover every file it touches,
    /// transitively, so the result can be compacted without leaving an older overlapping
    /// L0 file behind.
    pub fn overlapping_files(
        &self,
        level: usize,
        smallest_user: Option<&[u8]>,
        largest_user: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let files = self.files(level);
        if level != 0 {
            return files
                .iter()
                .filter(|f| f.overlaps_user_range(smallest_user, largest_user))
                .cloned()
                .collect();
        }
        let mut lo: Option<Vec<u8>> = smallest_user.map(<[u8]>::to_vec);
        let mut hi: Option<Vec<u8>> = largest_user.map(<[u8]>::to_vec);
        loop {
            let picked: Vec<Arc<FileMeta>> = files
                .iter()
                .filter(|f| f.overlaps_user_range(lo.as_deref(), hi.as_deref()))
                .cloned()
                .collect();
            let mut grew = false;
            for f in &picked {
                if lo.as_deref().is_some_and(|l| f.smallest_user_key() < l) {
                    lo = Some(f.smallest_user_key().to_vec());
                    grew = true;
                }
                if hi.as_deref().is_some_and(|h| f.largest_user_key() > h) {
                    hi = Some(f.largest_user_key().to_vec());
                    grew = true;
                }
            }
            if !grew {
                return picked;
            }
        }
    }

    /// Whether any file in a level deeper than `level` may hold `user_key` (so a tombstone
    /// for it at `level` must be kept).
    pub fn has_overlap_below(&self, level: usize, user_key: &[u8]) -> bool {
        ((level + 1)..NUM_LEVELS).any(|lvl| {
            let files = self.files(lvl);
            let idx = files.partition_point(|f| f.largest_user_key() < user_key);
            files
                .get(idx)
                .is_some_and(|f| f.smallest_user_key() <= user_key)
        })
    }
}

/// Accumulates edits on top of a base version; used for `log_and_apply` (one edit) and for
/// recovery (every edit in a manifest, built once at the end).
#[derive(Debug)]
pub(crate) struct VersionBuilder {
    levels: Vec<BTreeMap<u64, Arc<FileMeta>>>,
    vlog_segments: BTreeMap<u64, SegmentMeta>,
}

impl VersionBuilder {
    pub(crate) fn new(base: &Version) -> VersionBuilder {
        let levels = (0..NUM_LEVELS)
            .map(|l| {
                base.files(l)
                    .iter()
                    .map(|f| (f.number, Arc::clone(f)))
                    .collect()
            })
            .collect();
        VersionBuilder {
            levels,
            vlog_segments: BTreeMap::clone(&base.vlog_segments),
        }
    }

    /// Deletions first, then additions (so a file can move levels in one edit).
    pub(crate) fn apply(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        for &(level, number) in &edit.deleted_files {
            let files = self
                .levels
                .get_mut(level)
                .ok_or_else(|| format!("level {level} out of range"))?;
            if files.remove(&number).is_none() {
                return Err(format!("deleted file {number} is not at level {level}"));
            }
        }
        for (level, file) in &edit.new_files {
            if *level >= NUM_LEVELS {
                return Err(format!("level {level} out of range"));
            }
            if compare_internal(&file.smallest, &file.largest) == Ordering::Greater {
                return Err(format!("file {} has smallest > largest", file.number));
            }
            if self.levels.iter().any(|l| l.contains_key(&file.number)) {
                return Err(format!("file {} added twice", file.number));
            }
            self.levels[*level].insert(file.number, Arc::new(file.clone()));
        }
        self.apply_segments(edit)
    }

    /// Segments: added, sealed, dead bytes, punched ranges, then removed. Dead bytes of a segment that is
    /// not listed are ignored: a compaction may drop pointers into a segment GC removed.
    fn apply_segments(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        for &segment in &edit.vlog_segments_added {
            self.vlog_segments.entry(segment).or_default();
        }
        for &(segment, size) in &edit.vlog_segments_sealed {
            let meta = self
                .vlog_segments
                .get_mut(&segment)
                .ok_or_else(|| format!("sealed value-log segment {segment} is not listed"))?;
            meta.sealed_size = Some(size);
        }
        for &(segment, bytes) in &edit.vlog_dead_bytes {
            if let Some(meta) = self.vlog_segments.get_mut(&segment) {
                meta.dead_bytes = meta.dead_bytes.saturating_add(bytes);
            }
        }
        for &(segment, offset, len) in &edit.vlog_punched {
            let Some(meta) = self.vlog_segments.get_mut(&segment) else {
                continue;
            };
            let end = offset.checked_add(len);
            let sealed = meta.sealed_size;
            match (end, sealed) {
                (Some(end), Some(size))
                    if offset >= crate::vlog::SEGMENT_HEADER_LEN && end <= size && len > 0 =>
                {
                    meta.add_punched(offset, end);
                }
                _ => {
                    return Err(format!(
                        "punched range {offset}+{len} does not fit value-log segment {segment} \
                         (sealed size {sealed:?})"
                    ))
                }
            }
        }
        for segment in &edit.vlog_segments_removed {
            self.vlog_segments.remove(segment);
        }
        Ok(())
    }

    pub(crate) fn build(self) -> std::result::Result<Version, String> {
        let mut levels = Vec::with_capacity(NUM_LEVELS);
        for (level, files) in self.levels.into_iter().enumerate() {
            let mut files: Vec<Arc<FileMeta>> = files.into_values().collect();
            if level == 0 {
                files.reverse(); // BTreeMap order is ascending by number; L0 is newest first.
            } else {
                files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
                for pair in files.windows(2) {
                    if compare_internal(&pair[0].largest, &pair[1].smallest) != Ordering::Less {
                        return Err(format!(
                            "files {} and {} overlap at level {level}",
                            pair[0].number, pair[1].number
                        ));
                    }
                }
            }
            levels.push(files);
        }
        Ok(Version {
            levels,
            vlog_segments: Arc::new(self.vlog_segments),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, seek_key, ValueKind};
    use crate::version::testutil::{meta, MockTables};

    fn version_with(files: &[(usize, FileMeta)]) -> Version {
        let mut edit = VersionEdit::new();
        edit.new_files = files.to_vec();
        Version::empty().apply(&edit).expect("valid version")
    }

    #[test]
    fn get_prefers_newest_l0_file_then_shallower_levels() {
        let tables = MockTables::default();
        tables.put(10, &[(b"k", 5, b"l0-old")]);
        tables.put(11, &[(b"k", 6, b"l0-new")]);
        tables.put(20, &[(b"k", 3, b"l1")]);
        tables.put(30, &[(b"k", 1, b"l2"), (b"m", 1, b"l2-m")]);
        let v = version_with(&[
            (0, meta(10, b"a", b"z")),
            (0, meta(11, b"j", b"k")),
            (1, meta(20, b"k", b"k")),
            (2, meta(30, b"b", b"m")),
        ]);
        assert_eq!(v.files(0)[0].number, 11, "L0 newest first");
        let hit = v.get(&tables, &seek_key(b"k", 100)).expect("get");
        assert_eq!(hit.map(|h| h.1), Some(b"l0-new".to_vec()));
        let hit = v.get(&tables, &seek_key(b"m", 100)).expect("get");
        assert_eq!(hit.map(|h| h.1), Some(b"l2-m".to_vec()));
        assert_eq!(v.get(&tables, &seek_key(b"zz", 100)).expect("get"), None);
    }

    /// A run of ascending lookups answers as `get` does and holds at most one cursor per
    /// deeper level (plus the L0 tables met), however many tables a level has: the
    /// database's table cache is not bypassed by a GC judgement over a big database.
    #[test]
    fn ascending_gets_answer_as_get_does_and_hold_one_table_per_deeper_level() {
        let tables = MockTables::default();
        let key = |i: u32| format!("k{i:04}").into_bytes();
        let mut files = vec![(0, meta(1, b"k0000", b"k9999"))];
        let l0: Vec<(Vec<u8>, u64, Vec<u8>)> =
            (0..200).step_by(7).map(|i| (key(i), 50, b"l0".to_vec())).collect();
        let rows: Vec<(&[u8], u64, &[u8])> =
            l0.iter().map(|(k, s, v)| (&k[..], *s, &v[..])).collect();
        tables.put(1, &rows);
        // 20 tables in L1 and 10 in L2, each over its own slice of the keys; L1 lacks every
        // third key, so those lookups go on to L2.
        for (level, count) in [(1usize, 20u32), (2, 10)] {
            let span = 200 / count;
            for t in 0..count {
                let number = 100 * level as u64 + u64::from(t);
                let range = t * span..(t + 1) * span;
                let keys: Vec<Vec<u8>> = (range.clone())
                    .filter(|i| level == 2 || i % 3 != 0)
                    .map(key)
                    .collect();
                let value = format!("l{level}").into_bytes();
                let rows: Vec<(&[u8], u64, &[u8])> =
                    keys.iter().map(|k| (&k[..], 10 / level as u64, &value[..])).collect();
                tables.put(number, &rows);
                let (lo, hi) = (key(range.start), key(range.end - 1));
                files.push((level, meta(number, &lo, &hi)));
            }
        }
        let v = version_with(&files);
        let mut gets = AscendingGets::default();
        for i in 0..210 {
            let lookup = seek_key(&key(i), 100);
            let expected = v.get(&tables, &lookup).expect("get");
            assert_eq!(v.get_ascending(&tables, &mut gets, &lookup).expect("ascending"), expected);
            if i < 200 {
                assert!(expected.is_some(), "key {i}");
            }
        }
        // At most one at a time in each of L0 (one table there), L1 and L2; each was met.
        assert_eq!(tables.most_cursors_open(), 3);
    }

    #[test]
    fn get_respects_lookup_sequence() {
        let tables = MockTables::default();
        tables.put(10, &[(b"k", 9, b"v9")]);
        tables.put(20, &[(b"a", 1, b"a1"), (b"k", 4, b"v4"), (b"k", 2, b"v2")]);
        tables.put(21, &[(b"k", 1, b"v1"), (b"p", 1, b"p1")]);
        // L1 files split one user key across a boundary: internal keys do not overlap.
        let mut f20 = meta(20, b"a", b"k");
        f20.largest = make_internal_key(b"k", 2, ValueKind::Value);
        let mut f21 = meta(21, b"k", b"p");
        f21.smallest = make_internal_key(b"k", 1, ValueKind::Value);
        let v = version_with(&[(0, meta(10, b"k", b"k")), (1, f20), (1, f21)]);
        let at = |seq| {
            v.get(&tables, &seek_key(b"k", seq))
                .expect("get")
                .map(|h| h.1)
        };
        assert_eq!(at(100), Some(b"v9".to_vec()));
        assert_eq!(at(8), Some(b"v4".to_vec()));
        assert_eq!(at(3), Some(b"v2".to_vec()));
        assert_eq!(at(1), Some(b"v1".to_vec()));
        assert_eq!(at(0), None);
    }

    #[test]
    fn get_surfaces_table_errors() {
        let tables = MockTables::default();
        tables.fail(10);
        let v = version_with(&[(0, meta(10, b"a", b"z"))]);
        assert!(v.get(&tables, &seek_key(b"k", 1)).is_err());
    }

    #[test]
    fn l0_overlap_expands_transitively_and_deeper_levels_do_not() {
        let v = version_with(&[
            (0, meta(1, b"a", b"c")),
            (0, meta(2, b"c", b"e")),
            (0, meta(3, b"e", b"g")),
            (0, meta(4, b"x", b"y")),
            (1, meta(5, b"a", b"b")),
            (1, meta(6, b"d", b"f")),
            (1, meta(7, b"h", b"i")),
        ]);
        let nums = |fs: Vec<Arc<FileMeta>>| fs.iter().map(|f| f.number).collect::<Vec<_>>();
        assert_eq!(
            nums(v.overlapping_files(0, Some(b"a"), Some(b"a"))),
            vec![3, 2, 1]
        );
        assert_eq!(nums(v.overlapping_files(0, None, None)), vec![4, 3, 2, 1]);
        assert_eq!(
            nums(v.overlapping_files(0, Some(b"h"), Some(b"w"))),
            Vec::<u64>::new()
        );
        assert_eq!(
            nums(v.overlapping_files(1, Some(b"b"), Some(b"d"))),
            vec![5, 6]
        );
        assert_eq!(nums(v.overlapping_files(1, Some(b"g"), None)), vec![7]);
        assert_eq!(v.level_bytes(1), 300);
        assert_eq!(v.num_files(0), 4);
    }

    #[test]
    fn has_overlap_below_checks_only_deeper_levels() {
        let v = version_with(&[(1, meta(1, b"c", b"f")), (3, meta(2, b"m", b"p"))]);
        assert!(v.has_overlap_below(0, b"d"));
        assert!(!v.has_overlap_below(1, b"d"));
        assert!(v.has_overlap_below(2, b"p"));
        assert!(!v.has_overlap_below(0, b"g"));
        assert!(!v.has_overlap_below(3, b"n"));
    }

    #[test]
    fn apply_rejects_inconsistent_edits() {
        let v = version_with(&[(1, meta(1, b"c", b"f"))]);
        let mut overlap = VersionEdit::new();
        overlap.add_file(1, meta(2, b"e", b"g"));
        assert!(v.apply(&overlap).is_err());
        let mut missing = VersionEdit::new();
        missing.delete_file(2, 1);
        assert!(v.apply(&missing).is_err());
        let mut dup = VersionEdit::new();
        dup.add_file(3, meta(1, b"x", b"y"));
        assert!(v.apply(&dup).is_err());
        let mut moved = VersionEdit::new();
        moved.delete_file(1, 1);
        moved.add_file(2, meta(1, b"c", b"f"));
        let v2 = v.apply(&moved).expect("trivial move");
        assert_eq!((v2.num_files(1), v2.num_files(2)), (0, 1));
    }

    #[test]
    fn punched_ranges_merge_and_must_lie_in_a_sealed_segment() {
        let edit = |f: &dyn Fn(&mut VersionEdit)| {
            let mut e = VersionEdit::new();
            f(&mut e);
            e
        };
        let v = Version::empty()
            .apply(&edit(&|e| {
                e.vlog_segments_added = vec![1, 2];
                e.vlog_segments_sealed = vec![(1, 100_000)];
            }))
            .expect("segments");
        for bad in [(1, 0, 100), (1, 99_000, 2_000), (1, 500, 0), (2, 500, 100)] {
            let punch = edit(&|e| e.vlog_punched = vec![bad]);
            assert!(v.apply(&punch).is_err(), "{bad:?}");
        }
        let v = v
            .apply(&edit(&|e| {
                e.vlog_punched = vec![(1, 100, 50), (1, 300, 100), (1, 150, 150), (9, 1, 1)]
            }))
            .expect("punch");
        let meta = &v.vlog_segments()[&1];
        assert_eq!(*meta.punched, BTreeMap::from([(100, 400)]));
        assert_eq!(meta.punched_bytes(), 0, "no whole block in 100..400");
    }
}
