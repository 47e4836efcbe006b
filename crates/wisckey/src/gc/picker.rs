//! Victim choice: a pure function of the segment accounting in the current `Version`, the
//! replay head, the active segment and the segments waiting to be deleted.
//!
//! A segment is collectable only if it is sealed (its size is final), lies wholly before
//! the replay head's segment (replay needs everything from the head on), and holds dead
//! bytes. Among those, victims are taken by cost–benefit (LFS: `(1 - u) * age / (1 + u)`,
//! `u` the live fraction, `age` the distance from the head in segments), over *all* sealed
//! segments, until the log's projected space amplification is at the target. Segments GC
//! already removed that readers still pin are left out of that measure: they wait only for
//! the readers, and no victim lowers them (counting them, every victim collected under an
//! open iterator raised the ratio and GC went on to rewrite every segment it could).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::version::SegmentMeta;
use crate::vlog::SEGMENT_HEADER_LEN;

/// Why a segment is, or is not, collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentState {
    /// Chosen (or choosable) as a victim.
    Collectable,
    /// The writer appends to it.
    Active,
    /// It holds records at or after the replay head: they are not in tables yet and replay
    /// needs them (a flush moves the head; GC forces one when this blocks it).
    PinnedByReplayHead,
    /// GC removed it from the log; the file stays until no snapshot or iterator that could
    /// read it is left.
    PinnedByReaders,
    /// Sealed, but too little of it is dead to be worth rewriting the rest.
    BelowThreshold,
    /// Nothing in it is dead.
    AllLive,
    /// A collection of it failed on damage, in it or (in a background round) in a table
    /// its records were judged against; it is kept (the error logged) and not tried again
    /// until the next open.
    Unreadable,
}

/// One segment as GC sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentView {
    /// The segment's number.
    pub segment: u64,
    /// The file's length.
    pub size: u64,
    /// Bytes of blocks punched out of it (dead records given back early): it takes
    /// `size - punched_bytes` on disk.
    pub punched_bytes: u64,
    /// Bytes of records still needed (size minus dead bytes minus the header).
    pub live_bytes: u64,
    /// Dead bytes: the manifest's exact count, or the sampled estimate where larger.
    pub dead_bytes: u64,
    /// Whether it is collected, and if not why.
    pub state: SegmentState,
}

/// In which order collectable segments become victims.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VictimOrder {
    /// Best `(1 - u) * age / (1 + u)` first (`u` the live fraction): mostly dead, old
    /// segments first. The default.
    #[default]
    CostBenefit,
    /// Oldest first, as the WiscKey paper's GC reads the log from its tail (it keeps the
    /// log one contiguous range, at the price of rewriting mostly-live old segments).
    OldestFirst,
}

/// The knobs of victim choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VictimPolicy {
    /// Collect until the log's bytes on disk are at most this many times its live bytes.
    /// `1.0` collects every segment with at least `min_dead_fraction` dead.
    pub space_amp_target: f64,
    /// A segment with a smaller dead fraction is never rewritten (most of its bytes would
    /// be copied to free little).
    pub min_dead_fraction: f64,
    pub order: VictimOrder,
}

/// What the picker decided.
#[derive(Debug, Clone, PartialEq)]
pub struct VictimChoice {
    /// Victims, best first.
    pub victims: Vec<u64>,
    /// Every segment with its state (victims are `Collectable`).
    pub segments: Vec<SegmentView>,
    /// Bytes of log on disk (including segments waiting for deletion; without punched
    /// blocks).
    pub log_bytes: u64,
    /// Live bytes of the log.
    pub live_bytes: u64,
}

impl VictimChoice {
    /// Log bytes on disk per live byte (1.0 for an empty log).
    pub fn space_amp(&self) -> f64 {
        space_amp(self.log_bytes, self.live_bytes)
    }

    /// [`VictimChoice::space_amp`] without the segments GC already collected that readers
    /// still pin: what GC's own progress is measured by. Those wait only for readers, so
    /// they must not make GC look as if it were losing ground and slow writers down.
    pub fn space_amp_gc_can_lower(&self) -> f64 {
        let (on_disk, live) = self.gc_can_lower_counting(0);
        space_amp(on_disk, live)
    }

    /// The bytes on disk and live bytes [`VictimChoice::space_amp_gc_can_lower`] divides,
    /// with `uncounted_dead` more bytes dead than the segments' counts show (the garbage of
    /// the log not flushed yet, which the counts take as live).
    pub fn gc_can_lower_counting(&self, uncounted_dead: u64) -> (u64, u64) {
        (
            self.log_bytes.saturating_sub(pinned_by_readers(&self.segments)),
            self.live_bytes.saturating_sub(uncounted_dead),
        )
    }
}

/// Bytes on disk of the segments GC removed that readers still pin.
fn pinned_by_readers(segments: &[SegmentView]) -> u64 {
    (segments.iter())
        .filter(|s| s.state == SegmentState::PinnedByReaders)
        .map(|s| s.size - s.punched_bytes)
        .sum()
}

/// Bytes on disk per live byte; 1.0 when there is nothing on disk.
pub fn space_amp(on_disk: u64, live: u64) -> f64 {
    if on_disk == 0 {
        1.0
    } else {
        on_disk as f64 / live.max(1) as f64
    }
}

/// Chooses victims.
///
/// - `listed`: the current version's segments with their accounting;
/// - `sizes`: bytes on disk of every segment file present (listed or not);
/// - `head_segment`: the replay head's segment; `active`: the writer's segment;
/// - `removed`: segments GC removed whose files wait for readers;
/// - `estimated_dead`: dead bytes estimated by sampling; a segment's dead bytes are taken as
///   the larger of the manifest's exact (but lagging) count and the estimate.
pub fn pick_victims(
    listed: &BTreeMap<u64, SegmentMeta>,
    sizes: &BTreeMap<u64, u64>,
    head_segment: u64,
    active: u64,
    removed: &BTreeSet<u64>,
    estimated_dead: &BTreeMap<u64, u64>,
    policy: VictimPolicy,
) -> VictimChoice {
    let mut segments = Vec::new();
    let mut log_bytes = 0u64;
    let mut live_bytes = 0u64;
    for (&segment, &size) in sizes {
        let meta = listed.get(&segment);
        let size = meta.and_then(|m| m.sealed_size).unwrap_or(size);
        let punched_bytes = meta.map_or(0, SegmentMeta::punched_bytes).min(size);
        // Saturating: sealed sizes come from the manifest, which may be damaged.
        log_bytes = log_bytes.saturating_add(size - punched_bytes);
        let estimate = estimated_dead.get(&segment).copied().unwrap_or(0);
        let dead = meta
            .map_or(0, |m| m.dead_bytes)
            .max(estimate)
            .min(size.saturating_sub(SEGMENT_HEADER_LEN));
        let live = if removed.contains(&segment) {
            0
        } else {
            size.saturating_sub(SEGMENT_HEADER_LEN).saturating_sub(dead)
        };
        live_bytes = live_bytes.saturating_add(live);
        let state = if removed.contains(&segment) {
            SegmentState::PinnedByReaders
        } else if segment == active {
            SegmentState::Active
        } else if segment >= head_segment || meta.is_none_or(|m| m.sealed_size.is_none()) {
            SegmentState::PinnedByReplayHead
        } else if dead == 0 {
            SegmentState::AllLive
        } else if (dead as f64) < policy.min_dead_fraction * size as f64 {
            SegmentState::BelowThreshold
        } else {
            SegmentState::Collectable
        };
        segments.push(SegmentView {
            segment,
            size,
            punched_bytes,
            live_bytes: live,
            dead_bytes: dead,
            state,
        });
    }

    let mut candidates: Vec<&SegmentView> = segments
        .iter()
        .filter(|s| s.state == SegmentState::Collectable)
        .collect();
    let score = |s: &SegmentView| {
        let u = s.live_bytes as f64 / s.size.max(1) as f64;
        let age = head_segment.saturating_sub(s.segment) as f64;
        (1.0 - u) * age / (1.0 + u)
    };
    match policy.order {
        VictimOrder::CostBenefit => candidates.sort_by(|a, b| {
            score(b)
                .total_cmp(&score(a))
                .then(a.segment.cmp(&b.segment))
        }),
        VictimOrder::OldestFirst => candidates.sort_by_key(|s| s.segment),
    }
    let mut victims = Vec::new();
    // Judged without what readers pin: no victim lowers it
    // ([`VictimChoice::space_amp_gc_can_lower`]).
    let mut projected = log_bytes.saturating_sub(pinned_by_readers(&segments));
    for candidate in candidates {
        // A segment with nothing live costs nothing to collect (and may be mostly holes
        // already): it is always a victim.
        if candidate.live_bytes > 0
            && space_amp(projected, live_bytes) <= policy.space_amp_target
            && policy.space_amp_target > 1.0
        {
            continue;
        }
        // Collecting it frees its blocks and rewrites its live bytes at the head.
        projected = projected - (candidate.size - candidate.punched_bytes) + candidate.live_bytes;
        victims.push(candidate.segment);
    }
    VictimChoice {
        victims,
        segments,
        log_bytes,
        live_bytes,
    }
}

/// What a collection does next (see [`next_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcStep {
    /// Flush the memtable: the head moves forward and the memtable's garbage is counted.
    Flush,
    /// Seal the active segment, then flush: the garbage is in the head's or the active
    /// segment, which GC cannot collect (and relocations would land in it).
    SealAndFlush,
    /// Estimate the dead bytes of segments whose counts may lag.
    Sample,
    /// Collect this segment.
    Collect(u64),
    /// Nothing worth doing.
    Done,
}

/// Steps already taken in this collection (each is taken at most once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepsTaken {
    pub flushed: bool,
    pub sealed: bool,
    pub sampled: bool,
}

/// The next step of a collection, a pure function of the victim choice and where the log
/// stands:
/// - the log from the head's segment on is out of GC's reach and may be all garbage: flush
///   once it exceeds both the slack the target leaves (`(target - 1) × live` of the log
///   before the head) and two
///   segments (so a big database is not made to flush more often);
/// - over the target (judged, as victim choice is, without the segments readers pin) with
///   garbage in the head's or the active segment (background: once it is at least
///   `min_seal_size`): seal and flush first, so relocations do not land in a segment about
///   to be collected;
/// - collect the best victim;
/// - no victim: sample once (counts lag), then flush once if the log has moved past the
///   head's segment, else done.
pub fn next_step(
    choice: &VictimChoice,
    policy: VictimPolicy,
    head_segment: u64,
    active: u64,
    segment_size: u64,
    min_seal_size: u64,
    taken: StepsTaken,
) -> GcStep {
    let unflushed: u64 = (choice.segments.iter())
        .filter(|s| s.segment >= head_segment)
        .map(|s| s.size)
        .sum();
    // Slack from what is known to be live: the unflushed log's own bytes would count
    // themselves as live and let it grow with itself.
    let known_live: u64 = (choice.segments.iter())
        .filter(|s| s.segment < head_segment)
        .map(|s| s.live_bytes)
        .sum();
    let slack = (policy.space_amp_target - 1.0).max(0.0) * known_live as f64;
    let allowance = (slack as u64).max(segment_size.saturating_mul(2));
    if !taken.flushed && active > head_segment && unflushed > allowance {
        return GcStep::Flush;
    }
    let over =
        policy.space_amp_target <= 1.0 || choice.space_amp_gc_can_lower() > policy.space_amp_target;
    let garbage_at_head = choice.segments.iter().any(|s| {
        matches!(
            s.state,
            SegmentState::Active | SegmentState::PinnedByReplayHead
        ) && s.size >= min_seal_size
            && s.dead_bytes > 0
            && s.dead_bytes as f64 >= policy.min_dead_fraction * s.size as f64
    });
    if over && !taken.sealed && garbage_at_head {
        return GcStep::SealAndFlush;
    }
    if let Some(&victim) = choice.victims.first() {
        return GcStep::Collect(victim);
    }
    if !taken.sampled {
        return GcStep::Sample;
    }
    if !taken.flushed && active > head_segment {
        return GcStep::Flush;
    }
    GcStep::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn meta(size: Option<u64>, dead: u64) -> SegmentMeta {
        SegmentMeta {
            sealed_size: size,
            dead_bytes: dead,
            punched: Default::default(),
        }
    }

    fn policy(target: f64) -> VictimPolicy {
        VictimPolicy {
            space_amp_target: target,
            min_dead_fraction: 0.1,
            order: VictimOrder::CostBenefit,
        }
    }

    #[test]
    fn only_sealed_segments_before_the_head_are_victims_and_states_say_why() {
        let listed = BTreeMap::from([
            (1, meta(Some(10 * MIB), 9 * MIB)),
            (2, meta(Some(10 * MIB), 0)),
            (3, meta(Some(10 * MIB), MIB / 2)),
            (4, meta(Some(10 * MIB), 9 * MIB)),
            (5, meta(None, 9 * MIB)),
        ]);
        let sizes: BTreeMap<u64, u64> = [
            (1, 10 * MIB),
            (2, 10 * MIB),
            (3, 10 * MIB),
            (4, 10 * MIB),
            (5, 10 * MIB),
            (6, MIB),
            (7, MIB),
        ]
        .into_iter()
        .collect();
        let removed = BTreeSet::from([7]);
        let choice = pick_victims(
            &listed,
            &sizes,
            4,
            6,
            &removed,
            &BTreeMap::new(),
            policy(1.0),
        );
        assert_eq!(choice.victims, vec![1]);
        let states: Vec<SegmentState> = choice.segments.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            vec![
                SegmentState::Collectable,
                SegmentState::AllLive,
                SegmentState::BelowThreshold,
                SegmentState::PinnedByReplayHead,
                SegmentState::PinnedByReplayHead,
                SegmentState::Active,
                SegmentState::PinnedByReaders,
            ]
        );
        assert_eq!(choice.log_bytes, 52 * MIB);
    }

    #[test]
    fn a_segment_with_nothing_live_is_a_victim_even_under_the_target_and_punched_blocks_are_not_disk_use(
    ) {
        let mut punched = meta(Some(10 * MIB), 10 * MIB - SEGMENT_HEADER_LEN);
        punched.punched = std::sync::Arc::new(BTreeMap::from([(4096, 8 * MIB)]));
        let listed = BTreeMap::from([
            (1, meta(Some(10 * MIB), MIB)),
            (2, punched),
            (3, meta(Some(10 * MIB), 0)),
        ]);
        let sizes: BTreeMap<u64, u64> = (1..=3).map(|s| (s, 10 * MIB)).collect();
        let choice = pick_victims(
            &listed,
            &sizes,
            3,
            3,
            &BTreeSet::new(),
            &BTreeMap::new(),
            policy(100.0),
        );
        assert_eq!(choice.victims, vec![2]);
        assert_eq!(choice.segments[1].punched_bytes, 8 * MIB - 4096);
        assert_eq!(choice.log_bytes, 30 * MIB - (8 * MIB - 4096));
    }

    /// Collected segments that readers pin stay on disk and in `space_amp`, but not in
    /// what GC's progress (and the writer slowdown) is judged by.
    #[test]
    fn segments_pinned_by_readers_are_not_garbage_gc_can_lower() {
        let listed = BTreeMap::from([(2, meta(Some(10 * MIB), 0))]);
        let sizes: BTreeMap<u64, u64> = [(1, 10 * MIB), (2, 10 * MIB), (3, MIB)]
            .into_iter()
            .collect();
        let removed = BTreeSet::from([1]);
        let choice = pick_victims(
            &listed,
            &sizes,
            3,
            3,
            &removed,
            &BTreeMap::new(),
            policy(1.5),
        );
        assert_eq!(choice.segments[0].state, SegmentState::PinnedByReaders);
        let live = choice.live_bytes as f64;
        assert!((choice.space_amp() - (21 * MIB) as f64 / live).abs() < 1e-9);
        assert!((choice.space_amp_gc_can_lower() - (11 * MIB) as f64 / live).abs() < 1e-9);
    }

    /// Defect: victim choice measured the target with the pinned segments' bytes in, so each
    /// victim collected under an open iterator raised the ratio and GC took the next one.
    #[test]
    fn segments_pinned_by_readers_do_not_make_victims_under_the_target() {
        let listed = BTreeMap::from([
            (2, meta(Some(10 * MIB), 5 * MIB)),
            (3, meta(Some(10 * MIB), 5 * MIB)),
        ]);
        let sizes: BTreeMap<u64, u64> = [(1, 10 * MIB), (2, 10 * MIB), (3, 10 * MIB), (4, MIB)]
            .into_iter()
            .collect();
        let pinned = BTreeSet::from([1]);
        // Without segment 1 the log is at about 1.9 times its live bytes; with it, 2.8.
        let choice = pick_victims(
            &listed,
            &sizes,
            4,
            4,
            &pinned,
            &BTreeMap::new(),
            policy(2.0),
        );
        assert!(choice.space_amp() > 2.0 && choice.space_amp_gc_can_lower() < 2.0);
        assert!(choice.victims.is_empty(), "{:?}", choice.victims);
        let step = next_step(&choice, policy(2.0), 4, 4, 10 * MIB, 0, StepsTaken::default());
        assert_eq!(step, GcStep::Sample);
        // Over the target without them, the victims are chosen as before.
        let choice = pick_victims(
            &listed,
            &sizes,
            4,
            4,
            &pinned,
            &BTreeMap::new(),
            policy(1.5),
        );
        assert_eq!(choice.victims.len(), 1);
    }

    #[test]
    fn next_step_flushes_seals_collects_samples_then_stops() {
        let none = BTreeSet::new();
        let no_estimates = BTreeMap::new();
        let step = |listed: &BTreeMap<u64, SegmentMeta>,
                    sizes: &BTreeMap<u64, u64>,
                    head: u64,
                    active: u64,
                    taken: StepsTaken| {
            let choice = pick_victims(
                listed,
                sizes,
                head,
                active,
                &none,
                &no_estimates,
                policy(1.5),
            );
            next_step(&choice, policy(1.5), head, active, 10 * MIB, 0, taken)
        };
        // Four segments past the head, more than two segments and the slack: flush.
        let listed = BTreeMap::from([(1, meta(Some(10 * MIB), 0))]);
        let sizes: BTreeMap<u64, u64> = (1..=5).map(|s| (s, 10 * MIB)).collect();
        assert_eq!(
            step(&listed, &sizes, 1, 5, StepsTaken::default()),
            GcStep::Flush
        );
        // A victim: collect it.
        let listed = BTreeMap::from([(1, meta(Some(10 * MIB), 9 * MIB)), (2, meta(None, 0))]);
        let sizes = BTreeMap::from([(1, 10 * MIB), (2, MIB)]);
        assert_eq!(
            step(&listed, &sizes, 2, 2, StepsTaken::default()),
            GcStep::Collect(1)
        );
        // Garbage only in the active segment, over the target: seal and flush.
        let listed = BTreeMap::from([(1, meta(None, 6 * MIB))]);
        let sizes = BTreeMap::from([(1, 10 * MIB)]);
        assert_eq!(
            step(&listed, &sizes, 1, 1, StepsTaken::default()),
            GcStep::SealAndFlush
        );
        // Nothing known dead: sample once, then done.
        let listed = BTreeMap::from([(1, meta(Some(10 * MIB), 0)), (2, meta(None, 0))]);
        let sizes = BTreeMap::from([(1, 10 * MIB), (2, MIB)]);
        assert_eq!(
            step(&listed, &sizes, 2, 2, StepsTaken::default()),
            GcStep::Sample
        );
        let sampled = StepsTaken {
            sampled: true,
            ..StepsTaken::default()
        };
        assert_eq!(step(&listed, &sizes, 2, 2, sampled), GcStep::Done);
        // ... unless the log has moved past the head's segment: flush once.
        let sizes = BTreeMap::from([(1, 10 * MIB), (2, MIB), (3, MIB)]);
        assert_eq!(step(&listed, &sizes, 2, 3, sampled), GcStep::Flush);
    }

    #[test]
    fn a_sampled_estimate_counts_where_it_exceeds_the_lagging_count() {
        let listed = BTreeMap::from([
            (1, meta(Some(10 * MIB), MIB / 4)),
            (2, meta(Some(10 * MIB), 0)),
        ]);
        let sizes = BTreeMap::from([(1, 10 * MIB), (2, 10 * MIB), (3, MIB)]);
        let none = BTreeSet::new();
        let counted_only =
            pick_victims(&listed, &sizes, 3, 3, &none, &BTreeMap::new(), policy(1.0));
        assert!(
            counted_only.victims.is_empty(),
            "2.5% dead is below the threshold"
        );
        // Sampling found segment 2 mostly dead and segment 1 less dead than its count.
        let estimates = BTreeMap::from([(1, 0), (2, 8 * MIB)]);
        let sampled = pick_victims(&listed, &sizes, 3, 3, &none, &estimates, policy(1.0));
        assert_eq!(sampled.victims, vec![2]);
        assert_eq!(
            sampled.segments[0].dead_bytes,
            MIB / 4,
            "the exact count is a floor"
        );
        assert!(sampled.space_amp() > counted_only.space_amp());
    }

    #[test]
    fn victims_stop_at_the_target_and_prefer_old_empty_segments() {
        let listed: BTreeMap<u64, SegmentMeta> = (1..=10)
            .map(|s| {
                (
                    s,
                    meta(Some(10 * MIB), if s % 2 == 0 { 8 * MIB } else { 5 * MIB }),
                )
            })
            .collect();
        let sizes: BTreeMap<u64, u64> = (1..=11).map(|s| (s, 10 * MIB)).collect();
        let none = BTreeSet::new();
        let all = pick_victims(
            &listed,
            &sizes,
            11,
            11,
            &none,
            &BTreeMap::new(),
            policy(1.0),
        );
        assert_eq!(
            all.victims.len(),
            10,
            "target 1.0 takes every collectable segment"
        );
        assert_eq!(all.victims[0], 2, "oldest mostly-dead segment first");
        let some = pick_victims(
            &listed,
            &sizes,
            11,
            11,
            &none,
            &BTreeMap::new(),
            policy(1.5),
        );
        assert!(!some.victims.is_empty() && some.victims.len() < 10);
        // The projected amplification after the chosen victims is at the target.
        let freed: u64 = (some.segments.iter())
            .filter(|s| some.victims.contains(&s.segment))
            .map(|s| s.size - s.live_bytes)
            .sum();
        let projected = space_amp(all.log_bytes - freed, all.live_bytes);
        assert!(projected <= 1.5, "{projected}");
        let tail_first = VictimPolicy {
            order: VictimOrder::OldestFirst,
            ..policy(1.5)
        };
        let oldest = pick_victims(&listed, &sizes, 11, 11, &none, &BTreeMap::new(), tail_first);
        assert_eq!(
            oldest.victims[..2],
            [1, 2],
            "tail first takes the oldest segments"
        );
        let at_target = pick_victims(
            &listed,
            &sizes,
            11,
            11,
            &none,
            &BTreeMap::new(),
            policy(100.0),
        );
        assert!(
            at_target.victims.is_empty(),
            "nothing to do under the target"
        );
    }
}
