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

/// The rule flush and compaction share for dropping versions: entries arrive in internal-key
/// order (per user key, newest first); an entry is shadowed when a newer version of its key
/// has already been seen at a sequence every reader can see (`oldest_snapshot`).
#[derive(Debug)]
pub(crate) struct ShadowTracker {
    oldest_snapshot: u64,
    current_user_key: Option<Vec<u8>>,
    last_sequence_for_key: u64,
}

impl ShadowTracker {
    pub fn new(oldest_snapshot: u64) -> ShadowTracker {
        ShadowTracker {
            oldest_snapshot,
            current_user_key: None,
            last_sequence_for_key: u64::MAX,
        }
    }

    /// Takes the next entry; returns (whether it starts a new user key, whether it is
    /// shadowed).
    pub fn next(&mut self, user_key: &[u8], sequence: u64) -> (bool, bool) {
        let new_user_key = self.current_user_key.as_deref() != Some(user_key);
        if new_user_key {
            self.current_user_key = Some(user_key.to_vec());
            self.last_sequence_for_key = u64::MAX;
        }
        let shadowed = self.last_sequence_for_key <= self.oldest_snapshot;
        self.last_sequence_for_key = sequence;
        (new_user_key, shadowed)
    }
}
