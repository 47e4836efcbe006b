//! Hole punching: giving back the disk blocks of dead records inside a segment that is not
//! (yet) worth collecting whole, without rewriting anything.
//!
//! Owns the queue of dead record ranges that flushes find (a flush looks up, for every key it
//! writes, the value it shadows) and the rule for when a range may be punched.
//!
//! Invariants (docs/DESIGN.md, "Hole punching"):
//! - a range waits until no reader that could still follow a pointer to it is left: every
//!   `Version` that was live when the shadowing flush was installed has been dropped (so
//!   every get, iterator and read-ahead job that captured the older view is gone), and no
//!   snapshot older than the sequence visible at that install is open;
//! - only whole records are punched, only in sealed segments wholly before the replay head's
//!   segment (replay never reads them) that GC has not removed;
//! - the ranges are recorded in the manifest before any block is deallocated, so every
//!   reader of a segment (GC's scan, sampling) steps over them and never parses zeros.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Weak;

use crate::version::{add_range, SegmentMeta, Version};
use crate::vlog::punchable;

/// Ready ranges kept at most (each a few dozen bytes); beyond it, newly ready ranges are
/// forgotten (their segments are still collected whole).
const MAX_READY_RANGES: usize = 1 << 20;
/// Ranges waiting for readers kept at most (24 bytes each): a snapshot held open while
/// writes go on keeps every flush's dead ranges waiting; beyond this, a flush's ranges are
/// forgotten (their segments are still collected whole).
const MAX_WAITING_RANGES: usize = 1 << 20;
/// Recorded spans whose deallocation failed, kept at most for another try; beyond it, a
/// failed span keeps its blocks until its segment is collected whole.
const MAX_UNPUNCHED_SPANS: usize = 1 << 12;

/// Dead records found by one flush, waiting for the readers that could still reach them.
#[derive(Debug)]
struct Waiting {
    /// `(segment, offset, len)` of dead records.
    ranges: Vec<(u64, u64, u64)>,
    /// Every version that was live when the flush was installed.
    older_versions: Vec<Weak<Version>>,
    /// The sequence visible when the flush was installed: a snapshot at or after it sees the
    /// shadowing entries.
    visible_at: u64,
}

/// Where the segments stand, as hole punching needs it.
#[derive(Debug, Clone, Copy)]
pub struct PunchLimits<'a> {
    pub listed: &'a BTreeMap<u64, SegmentMeta>,
    pub head_segment: u64,
    pub removed: &'a BTreeSet<u64>,
}

/// Whole blocks to deallocate: `[start, end)` of `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PunchSpan {
    pub segment: u64,
    pub start: u64,
    pub end: u64,
    /// Bytes of the span not punched before (a span grows as dead neighbours join it).
    pub newly_freed: u64,
}

/// Dead record ranges on their way to being punched.
#[derive(Debug, Default)]
pub struct PunchQueue {
    waiting: VecDeque<Waiting>,
    /// Per segment, dead ranges no reader can reach (start -> end, merged), not yet punched.
    ready: BTreeMap<u64, BTreeMap<u64, u64>>,
    ready_ranges: usize,
    /// Ranges in `waiting`, all batches together.
    waiting_ranges: usize,
    /// Spans recorded in the manifest whose `punch_hole` failed (an I/O error; a full disk
    /// with no room to split an extent): recorded, they are never taken again from `ready`,
    /// so they are tried again from here each round until they go through.
    unpunched: Vec<PunchSpan>,
}

impl PunchQueue {
    /// Queues the dead records a flush found.
    pub fn push(
        &mut self,
        mut ranges: Vec<(u64, u64, u64)>,
        older_versions: Vec<Weak<Version>>,
        visible_at: u64,
    ) {
        ranges.truncate(MAX_WAITING_RANGES - self.waiting_ranges);
        if !ranges.is_empty() {
            self.waiting_ranges += ranges.len();
            self.waiting.push_back(Waiting {
                ranges,
                older_versions,
                visible_at,
            });
        }
    }

    /// Whether anything is queued.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.ready.is_empty() && self.unpunched.is_empty()
    }

    /// Keeps a recorded span whose deallocation failed, for [`PunchQueue::take_unpunched`].
    pub fn punch_failed(&mut self, span: PunchSpan) {
        if self.unpunched.len() < MAX_UNPUNCHED_SPANS {
            self.unpunched.push(span);
        }
    }

    /// Takes the recorded spans whose deallocation failed, to try again; those of segments
    /// that left the log or that GC removed are forgotten (their files go whole).
    pub fn take_unpunched(&mut self, at: PunchLimits<'_>) -> Vec<PunchSpan> {
        let mut spans = std::mem::take(&mut self.unpunched);
        spans.retain(|s| at.listed.contains_key(&s.segment) && !at.removed.contains(&s.segment));
        spans
    }

    /// Moves the ranges no reader can reach any more to the ready set. `oldest_snapshot`:
    /// the oldest open snapshot's sequence, if any.
    pub fn promote(&mut self, oldest_snapshot: Option<u64>) {
        let mut still_waiting = VecDeque::new();
        for waiting in std::mem::take(&mut self.waiting) {
            let readers_gone = waiting.older_versions.iter().all(|v| v.strong_count() == 0)
                && oldest_snapshot.is_none_or(|s| s >= waiting.visible_at);
            if !readers_gone {
                still_waiting.push_back(waiting);
                continue;
            }
            self.waiting_ranges -= waiting.ranges.len();
            self.make_ready(waiting.ranges);
        }
        self.waiting = still_waiting;
    }

    /// Returns ranges [`PunchQueue::take`] gave out to the ready set, when they could not be
    /// recorded (the manifest edit failed): a later round takes them again.
    pub fn put_back(&mut self, ranges: Vec<(u64, u64, u64)>) {
        self.make_ready(ranges);
    }

    fn make_ready(&mut self, ranges: Vec<(u64, u64, u64)>) {
        for (segment, offset, len) in ranges {
            if self.ready_ranges >= MAX_READY_RANGES {
                break;
            }
            let ranges = self.ready.entry(segment).or_default();
            let before = ranges.len();
            add_range(ranges, offset, offset.saturating_add(len));
            self.ready_ranges = self.ready_ranges + ranges.len() - before;
        }
    }

    /// Takes the ready ranges worth punching now: in segments that are sealed, before the
    /// replay head's segment and not removed, those that (merged with the segment's punched
    /// ranges) free at least one block more than is already punched. Returns
    /// `(segment, offset, len)` to record in the manifest and the `(segment, start, end)`
    /// block spans to punch once it is recorded. Ranges of segments that left the log are
    /// forgotten; ranges not worth punching yet stay (a later dead neighbour may join them).
    pub fn take(&mut self, at: PunchLimits<'_>) -> (Vec<(u64, u64, u64)>, Vec<PunchSpan>) {
        let mut record = Vec::new();
        let mut punch = Vec::new();
        let segments: Vec<u64> = self.ready.keys().copied().collect();
        for segment in segments {
            let Some(meta) = at.listed.get(&segment) else {
                self.forget(segment);
                continue;
            };
            if at.removed.contains(&segment) {
                self.forget(segment);
                continue;
            }
            let Some(sealed_size) = meta.sealed_size else {
                continue;
            };
            if segment >= at.head_segment {
                continue;
            }
            let Some(ready) = self.ready.get_mut(&segment) else {
                continue;
            };
            // Ranges the flush reported in the header or past the sealed size cannot be
            // records of it.
            let before = ready.len();
            ready.retain(|&start, end| {
                start >= crate::vlog::SEGMENT_HEADER_LEN && start < sealed_size && *end <= sealed_size
            });
            self.ready_ranges -= before - ready.len();
            let mut merged = (*meta.punched).clone();
            for (&start, &end) in ready.iter() {
                add_range(&mut merged, start, end);
            }
            let mut taken = Vec::new();
            for (&start, &end) in &merged {
                let Some((first, last)) = punchable(start, end) else {
                    continue;
                };
                let already: u64 = (meta.punched.range(start..end))
                    .filter_map(|(&s, &e)| punchable(s, e))
                    .map(|(s, e)| e - s)
                    .sum();
                if last - first <= already {
                    continue;
                }
                for (&s, &e) in ready.range(start..end) {
                    record.push((segment, s, e - s));
                    taken.push(s);
                }
                punch.push(PunchSpan {
                    segment,
                    start: first,
                    end: last,
                    newly_freed: last - first - already,
                });
            }
            for s in taken {
                ready.remove(&s);
                self.ready_ranges -= 1;
            }
            if ready.is_empty() {
                self.ready.remove(&segment);
            }
        }
        (record, punch)
    }

    fn forget(&mut self, segment: u64) {
        if let Some(ranges) = self.ready.remove(&segment) {
            self.ready_ranges -= ranges.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn span(segment: u64, start: u64, end: u64, newly_freed: u64) -> PunchSpan {
        PunchSpan {
            segment,
            start,
            end,
            newly_freed,
        }
    }

    fn sealed(size: u64, punched: &[(u64, u64)]) -> SegmentMeta {
        SegmentMeta {
            sealed_size: Some(size),
            dead_bytes: 0,
            punched: Arc::new(punched.iter().copied().collect()),
        }
    }

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        let mut r = BTreeMap::new();
        add_range(&mut r, 100, 200);
        add_range(&mut r, 300, 400);
        add_range(&mut r, 200, 250);
        assert_eq!(r, BTreeMap::from([(100, 250), (300, 400)]));
        add_range(&mut r, 240, 310);
        assert_eq!(r, BTreeMap::from([(100, 400)]));
        add_range(&mut r, 50, 60);
        add_range(&mut r, 120, 130);
        assert_eq!(r, BTreeMap::from([(50, 60), (100, 400)]));
    }

    /// Defect: while a snapshot stayed open, every flush's dead ranges waited in memory
    /// (24 bytes each) without bound.
    #[test]
    fn ranges_waiting_for_a_snapshot_are_bounded() {
        let mut q = PunchQueue::default();
        let batch: Vec<(u64, u64, u64)> = (0..4096u64).map(|i| (1, 32 + i * 100, 100)).collect();
        for flush in 0..(MAX_WAITING_RANGES / batch.len() + 8) as u64 {
            q.push(batch.clone(), Vec::new(), 10 + flush);
        }
        q.promote(Some(9));
        let waiting: usize = q.waiting.iter().map(|w| w.ranges.len()).sum();
        assert_eq!(waiting, MAX_WAITING_RANGES);
        assert_eq!(q.waiting_ranges, waiting);
        // Released: the count follows, and new ranges are taken again.
        q.promote(None);
        assert!(q.waiting.is_empty());
        assert_eq!(q.waiting_ranges, 0);
        q.push(vec![(2, 32, 100)], Vec::new(), 99);
        assert_eq!(q.waiting_ranges, 1);
    }

    #[test]
    fn a_range_waits_for_older_versions_and_older_snapshots() {
        let mut q = PunchQueue::default();
        let old = Arc::new(Version::empty());
        q.push(vec![(1, 32, 9000)], vec![Arc::downgrade(&old)], 50);
        q.promote(None);
        assert!(
            q.ready.is_empty(),
            "a version from before the flush is alive"
        );
        drop(old);
        q.promote(Some(49));
        assert!(
            q.ready.is_empty(),
            "a snapshot older than the flush is open"
        );
        q.promote(Some(50));
        assert_eq!(q.ready[&1], BTreeMap::from([(32, 9032)]));
    }

    #[test]
    fn only_sealed_segments_before_the_head_not_removed_are_punched_by_whole_blocks() {
        let mut q = PunchQueue::default();
        // Segment 1: one record spanning blocks 1..=2 wholly. Segment 2: a small record
        // (no whole block). Segment 3: at the head. Segment 4: removed. Segment 5: gone.
        let ranges = vec![
            (1, 4000, 9000),
            (2, 100, 200),
            (3, 32, 20000),
            (4, 32, 20000),
            (5, 32, 20000),
        ];
        q.push(ranges, Vec::new(), 0);
        q.promote(None);
        let listed = BTreeMap::from([
            (1, sealed(1 << 20, &[])),
            (2, sealed(1 << 20, &[])),
            (3, sealed(1 << 20, &[])),
            (4, sealed(1 << 20, &[])),
        ]);
        let removed = BTreeSet::from([4]);
        let at = PunchLimits {
            listed: &listed,
            head_segment: 3,
            removed: &removed,
        };
        let (record, punch) = q.take(at);
        assert_eq!(record, vec![(1, 4000, 9000)]);
        assert_eq!(punch, vec![span(1, 4096, 12288, 8192)]);
        // Segment 2's range stays until a neighbour makes a whole block; 3 waits for the
        // head; 4 and 5 are forgotten.
        assert_eq!(q.ready.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    }

    /// Defect: ranges dropped for lying past the sealed size stayed counted, so the count
    /// drifted up to its cap and then every newly ready range was discarded.
    #[test]
    fn ranges_past_the_sealed_size_are_dropped_from_the_count_too() {
        let mut q = PunchQueue::default();
        q.push(vec![(1, 4000, 9000), (1, 20_000, 500)], Vec::new(), 0);
        q.promote(None);
        assert_eq!(q.ready_ranges, 2);
        let listed = BTreeMap::from([(1, sealed(16_384, &[]))]);
        let removed = BTreeSet::new();
        let at = PunchLimits {
            listed: &listed,
            head_segment: 9,
            removed: &removed,
        };
        let (record, _) = q.take(at);
        assert_eq!(record, vec![(1, 4000, 9000)]);
        assert!(q.is_empty());
        assert_eq!(q.ready_ranges, 0, "nothing is ready, nothing is counted");
    }

    /// Defect: ranges taken for a punch whose manifest edit then failed were lost (never
    /// punched; their segments only ever came back whole).
    #[test]
    fn ranges_put_back_after_a_failed_record_are_taken_again() {
        let mut q = PunchQueue::default();
        q.push(vec![(1, 4000, 9000), (1, 20_000, 100)], Vec::new(), 0);
        q.promote(None);
        let listed = BTreeMap::from([(1, sealed(1 << 20, &[]))]);
        let removed = BTreeSet::new();
        let at = PunchLimits {
            listed: &listed,
            head_segment: 9,
            removed: &removed,
        };
        let (record, punch) = q.take(at);
        assert_eq!(record, vec![(1, 4000, 9000)]);
        q.put_back(record.clone());
        assert_eq!(q.ready_ranges, 2);
        assert_eq!(q.take(at), (record, punch));
        assert_eq!(q.ready_ranges, 1, "the range too small to punch stays");
    }

    #[test]
    fn a_neighbour_of_a_punched_range_is_punched_when_it_frees_a_block_more() {
        let mut q = PunchQueue::default();
        q.push(vec![(1, 8192, 100), (1, 3000, 1000)], Vec::new(), 0);
        q.promote(None);
        // Already punched: [4000, 8192) (one whole block, 4096..8192).
        let listed = BTreeMap::from([(1, sealed(1 << 20, &[(4000, 8192)]))]);
        let removed = BTreeSet::new();
        let at = PunchLimits {
            listed: &listed,
            head_segment: 9,
            removed: &removed,
        };
        // Merged: [3000, 8292) frees 4096..8192 only, as before: nothing to do.
        let (record, punch) = q.take(at);
        assert!(
            record.is_empty() && punch.is_empty(),
            "{record:?} {punch:?}"
        );
        q.push(vec![(1, 8292, 4000)], Vec::new(), 0);
        q.promote(None);
        let (record, punch) = q.take(at);
        assert_eq!(record, vec![(1, 3000, 1000), (1, 8192, 4100)]);
        assert_eq!(punch, vec![span(1, 4096, 12288, 4096)]);
        assert!(q.is_empty());
    }
}
