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
