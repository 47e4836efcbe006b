//! The compaction policy, as pure functions of a [`Version`], a [`CompactionPolicy`] and the
//! per-level compact pointers. No I/O: the caller runs the returned [`CompactionTask`] and
//! records `edit.set_compact_pointer(task.level, task.largest_input_key())`.
//!
//! Rules (LevelDB's leveled policy):
//! - score(L0) = files / l0_compaction_trigger; score(Ln) = bytes / max_bytes_for_level(n),
//!   where L1 = level1_max_bytes and each deeper level is level_size_multiplier times larger;
//!   the last level is never a compaction source. The highest score >= 1 wins (ties: the
//!   shallower level);
//! - L0: the oldest L0 file, expanded transitively to every L0 file overlapping it;
//!   Ln: the first file after the level's compact pointer (wrapping around), expanded so a
//!   user key is never split between a compacted and a left-behind file;
//! - next_inputs: the files of the output level overlapping the inputs' user-key range;
//!   grandparents: files two levels down overlapping inputs + next_inputs (they bound
//!   trivial moves; the job cuts outputs by size only).
//!
//! Thread-safety: pure functions over immutable data.

use std::sync::Arc;

use crate::key::{compare_internal, user_key};
use crate::version::{FileMeta, Version, NUM_LEVELS};

/// Tunables of the leveled compaction policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Number of L0 files that makes L0 due for compaction.
    pub l0_compaction_trigger: usize,
    pub level1_max_bytes: u64,
    pub level_size_multiplier: u64,
    /// Size at which the compaction job cuts output tables.
    pub target_file_size: u64,
    /// Largest grandparent overlap allowed for a trivial move.
    pub max_grandparent_overlap_bytes: u64,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        let target_file_size = 8 << 20;
        CompactionPolicy {
            l0_compaction_trigger: 4,
            level1_max_bytes: 64 << 20,
            level_size_multiplier: 10,
            target_file_size,
            max_grandparent_overlap_bytes: target_file_size.saturating_mul(10),
        }
    }
}

/// One compaction: merge `inputs` (at `level`) with `next_inputs` (at `output_level`).
#[derive(Debug, Clone)]
pub struct CompactionTask {
    pub level: usize,
    pub output_level: usize,
    pub inputs: Vec<Arc<FileMeta>>,
    pub next_inputs: Vec<Arc<FileMeta>>,
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Copied from the policy: grandparent overlap above this forbids a trivial move.
    pub max_grandparent_overlap_bytes: u64,
}

impl CompactionTask {
    /// True when the single input can be moved to the output level by editing the manifest
    /// only: nothing there overlaps it, and it will not overlap too much of the level below.
    pub fn is_trivial_move(&self) -> bool {
        self.inputs.len() == 1
            && self.next_inputs.is_empty()
            && total_bytes(&self.grandparents) <= self.max_grandparent_overlap_bytes
    }

    fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(&self.next_inputs)
    }

    /// Smallest user key over inputs and next_inputs.
    pub fn smallest_user_key(&self) -> &[u8] {
        self.all_inputs()
            .map(|f| f.smallest_user_key())
            .min()
            .unwrap_or_default()
    }

    /// Largest user key over inputs and next_inputs.
    pub fn largest_user_key(&self) -> &[u8] {
        self.all_inputs()
            .map(|f| f.largest_user_key())
            .max()
            .unwrap_or_default()
    }

    /// Largest internal key of `inputs`: the level's next compact pointer.
    pub fn largest_input_key(&self) -> &[u8] {
        self.inputs
            .iter()
            .map(|f| f.largest.as_slice())
            .max_by(|a, b| compare_internal(a, b))
            .unwrap_or_default()
    }

    /// Bytes read by the compaction.
    pub fn input_bytes(&self) -> u64 {
        total_bytes(&self.inputs) + total_bytes(&self.next_inputs)
    }
}

fn total_bytes(files: &[Arc<FileMeta>]) -> u64 {
    files.iter().map(|f| f.file_size).sum()
}

/// Size budget of `level` (>= 1): L1 = level1_max_bytes, times the multiplier per level.
pub fn max_bytes_for_level(p: &CompactionPolicy, level: usize) -> u64 {
    (2..=level).fold(p.level1_max_bytes, |bytes, _| {
        bytes.saturating_mul(p.level_size_multiplier)
    })
}

/// `(level, score)` for every level that can be compacted (all but the last), in level
/// order. A score >= 1 means the level is due.
pub fn compaction_scores(v: &Version, p: &CompactionPolicy) -> Vec<(usize, f64)> {
    (0..NUM_LEVELS - 1)
        .map(|level| {
            let score = if level == 0 {
                v.num_files(0) as f64 / p.l0_compaction_trigger.max(1) as f64
            } else {
                v.level_bytes(level) as f64 / max_bytes_for_level(p, level).max(1) as f64
            };
            (level, score)
        })
        .collect()
}

/// The most urgent size-triggered compaction, or `None` when no level is due.
/// `compact_pointers[level]` is where the previous compaction of that level ended.
pub fn pick_compaction(
    v: &Version,
    p: &CompactionPolicy,
    compact_pointers: &[Option<Vec<u8>>],
) -> Option<CompactionTask> {
    let (level, _) = compaction_scores(v, p)
        .into_iter()
        .filter(|&(_, score)| score >= 1.0)
        .fold(None, |best: Option<(usize, f64)>, cur| match best {
            Some(b) if b.1 >= cur.1 => Some(b),
            _ => Some(cur),
        })?;
    let files = v.files(level);
    let inputs = if level == 0 {
        let oldest = files.last()?;
        v.overlapping_files(
            0,
            Some(oldest.smallest_user_key()),
            Some(oldest.largest_user_key()),
        )
    } else {
        let pointer = compact_pointers.get(level).and_then(|p| p.as_deref());
        let after = pointer.map_or(0, |ptr| {
            files.partition_point(|f| compare_internal(&f.largest, ptr).is_le())
        });
        let first = files.get(after).or_else(|| files.first())?;
        with_boundary_files(files, vec![Arc::clone(first)])
    };
    Some(build_task(
        v,
        level,
        inputs,
        p.max_grandparent_overlap_bytes,
    ))
}

/// A compaction of every file at `level` overlapping the user-key range `[begin, end]`
/// (`None` = unbounded) into `level + 1`, for a manual compact_range. `None` when nothing
/// overlaps or `level` is the last level. Trivial moves use the default policy's bound.
pub fn pick_range_compaction(
    v: &Version,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionTask> {
    if level + 1 >= NUM_LEVELS {
        return None;
    }
    let mut inputs = v.overlapping_files(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    if level > 0 {
        inputs = with_boundary_files(v.files(level), inputs);
    }
    let bound = CompactionPolicy::default().max_grandparent_overlap_bytes;
    Some(build_task(v, level, inputs, bound))
}

/// Adds the files of a sorted level that continue the user key the inputs end on: leaving
/// such a file behind would keep an older version of the key above the newer one.
fn with_boundary_files(
    files: &[Arc<FileMeta>],
    mut inputs: Vec<Arc<FileMeta>>,
) -> Vec<Arc<FileMeta>> {
    loop {
        let Some(largest) = inputs
            .iter()
            .map(|f| f.largest.clone())
            .max_by(|a, b| compare_internal(a, b))
        else {
            return inputs;
        };
        let next = files
            .iter()
            .filter(|f| !inputs.iter().any(|i| i.number == f.number))
            .filter(|f| {
                f.smallest_user_key() == user_key(&largest)
                    && compare_internal(&f.smallest, &largest).is_gt()
            })
            .min_by(|a, b| compare_internal(&a.smallest, &b.smallest));
        match next {
            Some(f) => inputs.push(Arc::clone(f)),
            None => return inputs,
        }
    }
}

fn build_task(
    v: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
    max_grandparent_overlap_bytes: u64,
) -> CompactionTask {
    let output_level = level + 1;
    let range = |files: &[&Arc<FileMeta>]| -> (Vec<u8>, Vec<u8>) {
        let lo = files
            .iter()
            .map(|f| f.smallest_user_key())
            .min()
            .unwrap_or_default();
        let hi = files
            .iter()
            .map(|f| f.largest_user_key())
            .max()
            .unwrap_or_default();
        (lo.to_vec(), hi.to_vec())
    };
    let (lo, hi) = range(&inputs.iter().collect::<Vec<_>>());
    // A user key split across two output-level files goes in whole: a tombstone of it in
    // the first may be dropped (nothing deeper holds the key), and the older versions in
    // the second, left out, would come back.
    let next_inputs = with_boundary_files(
        v.files(output_level),
        v.overlapping_files(output_level, Some(&lo), Some(&hi)),
    );
    let (all_lo, all_hi) = range(&inputs.iter().chain(&next_inputs).collect::<Vec<_>>());
    let grandparents = if output_level + 1 < NUM_LEVELS {
        v.overlapping_files(output_level + 1, Some(&all_lo), Some(&all_hi))
    } else {
        Vec::new()
    };
    CompactionTask {
        level,
        output_level,
        inputs,
        next_inputs,
        grandparents,
        max_grandparent_overlap_bytes,
    }
}

#[cfg(test)]
#[path = "picker_tests.rs"]
mod tests;
