//! Safety steps that a test build can remove, to prove the durability tests notice their
//! absence ("prove it bites", issue 12). Owns nothing else.
//!
//! Without the `mutations` cargo feature every step is always taken and [`skipped`] is a
//! constant `false` the compiler removes. With it, the environment variable
//! `WISCKEY_REMOVE_SAFETY_STEP` (read once, the step's name as below in snake case) removes
//! one step for the whole process. Never enable the feature outside that check:
//! `.ci/prove-it-bites` runs the suite once per step and expects it to fail.

/// A step the engine takes for durability or for GC's correctness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafetyStep {
    /// A flush syncs the log through the memtable's end before it persists the head.
    SyncBeforeHeadPersistence,
    /// The first sync of a new segment syncs the directory that holds it.
    DirSyncAfterSegmentCreation,
    /// GC syncs the log and moves the replay head past its relocations and the writes that
    /// killed the victim's records (a flush) before removing it.
    HeadPastGcWrites,
    /// GC removes a victim from the manifest before its file can be deleted.
    ManifestEditBeforeSegmentDeletion,
    /// GC checks each survivor is still the key's newest value under write leadership.
    LivenessCheckUnderLeadership,
    /// Repair lets no log record win that the sound tables already cover (compaction may
    /// have dropped its delete on purpose).
    RepairCoverage,
}

impl SafetyStep {
    /// Every step, with its name for `WISCKEY_REMOVE_SAFETY_STEP`.
    pub const ALL: [(SafetyStep, &'static str); 6] = [
        (
            SafetyStep::SyncBeforeHeadPersistence,
            "sync_before_head_persistence",
        ),
        (
            SafetyStep::DirSyncAfterSegmentCreation,
            "dir_sync_after_segment_creation",
        ),
        (SafetyStep::HeadPastGcWrites, "head_past_gc_writes"),
        (
            SafetyStep::ManifestEditBeforeSegmentDeletion,
            "manifest_edit_before_segment_deletion",
        ),
        (
            SafetyStep::LivenessCheckUnderLeadership,
            "liveness_check_under_leadership",
        ),
        (SafetyStep::RepairCoverage, "repair_coverage"),
    ];
}

/// Whether this build skips `step`.
#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub(crate) fn skipped(_step: SafetyStep) -> bool {
    false
}

/// Whether this build skips `step`.
#[cfg(feature = "mutations")]
pub(crate) fn skipped(step: SafetyStep) -> bool {
    static REMOVED: std::sync::OnceLock<Option<SafetyStep>> = std::sync::OnceLock::new();
    let removed = REMOVED.get_or_init(|| {
        let name = std::env::var("WISCKEY_REMOVE_SAFETY_STEP").ok()?;
        let found = SafetyStep::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s);
        if found.is_none() {
            panic!("WISCKEY_REMOVE_SAFETY_STEP={name} names no safety step");
        }
        if let Some(step) = found {
            eprintln!("wisckey: safety step {step:?} REMOVED for this process (mutation test)");
        }
        found
    });
    *removed == Some(step)
}
