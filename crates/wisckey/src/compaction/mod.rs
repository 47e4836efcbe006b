//! Compaction: choosing what to compact (`picker`, a pure function of a `Version`, a policy
//! and the compact pointers) and running the job that merges the chosen tables (`job`).
//!
//! Thread-safety: everything here is plain data or pure functions.

pub mod picker;

pub use picker::{
    compaction_scores, max_bytes_for_level, pick_compaction, pick_range_compaction,
    CompactionPolicy, CompactionTask,
};
mod job;

pub(crate) use job::run;

use crate::key::ValueKind;
use crate::version::VersionEdit;

/// Told about every entry a flush or compaction drops, so that the caller can account for
/// what the entry referenced: compaction does not know what a stored value means.
pub(crate) trait DroppedEntries {
    /// `stored` is the LSM value of a dropped entry of `kind`.
    fn dropped(&mut self, kind: ValueKind, stored: &[u8]);
    /// Adds what was counted to the edit that installs the flush or compaction.
    fn record(&mut self, edit: &mut VersionEdit);
}
