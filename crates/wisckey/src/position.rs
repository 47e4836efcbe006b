//! A position in the value log: segment number and byte offset inside that segment.
//!
//! Positions order by segment, then offset, which is the order the log was written in.
//! The manifest persists `head` (replay starts here on open). Format 1 and 2 manifests also
//! held a `tail` (the oldest byte GC had not yet freed); this build only carries a loaded
//! one forward, since the manifest's segment set says what is live.

/// Where in the value log a record starts (or where replay begins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogPosition {
    /// The segment's number.
    pub segment: u64,
    /// Byte offset inside the segment.
    pub offset: u64,
}

impl LogPosition {
    /// The position `offset` bytes into `segment`.
    pub fn new(segment: u64, offset: u64) -> LogPosition {
        LogPosition { segment, offset }
    }
}
