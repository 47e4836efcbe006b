//! Value-log garbage collection (WiscKey §3.3.2): give back the space of value-log records
//! that no reader can need any more, online, crash-safe at every step.
//!
//! Owns: the accounting of dead log bytes ([`DeadBytes`], fed by flushes and recorded in
//! the manifest), hole punching of dead records ([`punch`]), the choice of victim segments
//! ([`picker`], a pure function of the current `Version`, the replay head and the pins),
//! and the collection
//! cycle ([`cycle`]): read a victim sequentially, keep the records the key index still
//! points to, have the index relocate them (append at the log's head under write
//! leadership, in key order), sync, remove the victim from the manifest, and delete its file
//! once nothing can read it. [`cluster`] rewrites a key range's scattered values in key
//! order through the same relocation path (`Db::cluster_values`); [`heat`] counts which
//! ranges scans read out of order, so the GC thread clusters the ones read again and again.
//! [`pace`] slows writers to what GC frees while it is far behind its target.
//!
//! Invariants (docs/DESIGN.md, "Value-log GC"):
//! - GC never decides liveness on its own: the final check that a record is the key's newest
//!   value happens under write leadership, in the same critical section as the append, so a
//!   delete or overwrite racing GC is never shadowed and replay never resurrects a key;
//! - a victim leaves the manifest only after its survivors are durable, and its file is
//!   deleted only when no live `Version` lists it and no snapshot older than the relocation
//!   exists (`db::background::delete_obsolete_files`);
//! - only sealed segments wholly before the replay head's segment are collected or punched
//!   (replay needs everything from the head on);
//! - a punched record is one no reader can reach, recorded in the manifest before its
//!   blocks are deallocated ([`punch`]).
//!
//! GC talks to the key index only through [`GcIndex`], so another index (a hash or bucketed
//! one) could stand behind it without GC or the log changing.

pub mod cluster;
pub mod cycle;
pub(crate) mod heat;
pub mod pace;
pub mod picker;
pub mod punch;

use std::collections::BTreeMap;

use crate::error::Result;
use crate::key::ValueKind;
use crate::version::VersionEdit;
use crate::vlog::{ValuePointer, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

pub use cluster::{ClusterOutcome, ClusterPlanner};
pub use cycle::{GcOutcome, Relocation};
pub use picker::{
    next_step, pick_victims, GcStep, SegmentState, SegmentView, StepsTaken, VictimOrder,
    VictimPolicy,
};

/// Dead log bytes per segment, and the dead records behind them, counted while a flush
/// writes a memtable: every entry shadowed by a newer one of the same key (in the memtable
/// or, for the memtable's newest entry of a key, the tables' newest entry it shadows).
#[derive(Debug, Default)]
pub(crate) struct DeadBytes {
    by_segment: BTreeMap<u64, u64>,
    /// `(segment, offset, len)` of each dead record a pointer referenced (hole punching).
    records: Vec<(u64, u64, u64)>,
}

impl DeadBytes {
    /// Counts `bytes` of `segment` as dead.
    pub fn add(&mut self, segment: u64, bytes: u64) {
        *self.by_segment.entry(segment).or_insert(0) += bytes;
    }

    /// Counts the log record an entry referenced as dead, now that a newer entry of the
    /// same key shadows it. Only a pointer references a record still counted as live:
    /// records of inline values and tombstones are counted when their memtable is flushed.
    pub fn shadowed(&mut self, kind: ValueKind, stored: &[u8]) {
        if kind == ValueKind::ValuePointer {
            if let Some(ptr) = ValuePointer::decode(stored) {
                // No record lies there (a damaged pointer: its reads fail as corruption):
                // neither counted nor punched. A range into the segment header, say, made
                // every later punching edit fail and held all punching back.
                let len = u64::from(ptr.len);
                let possible = ptr.offset >= SEGMENT_HEADER_LEN
                    && len >= RECORD_HEADER_LEN as u64
                    && ptr.offset.checked_add(len).is_some();
                if possible {
                    self.add(ptr.segment, len);
                    self.records.push((ptr.segment, ptr.offset, len));
                }
            }
        }
    }

    /// The dead bytes counted.
    pub fn total(&self) -> u64 {
        self.by_segment.values().sum()
    }

    /// Adds the counts to the edit that installs the flush.
    pub fn record(&mut self, edit: &mut VersionEdit) {
        edit.vlog_dead_bytes.extend(
            std::mem::take(&mut self.by_segment)
                .into_iter()
                .filter(|&(_, b)| b > 0),
        );
    }

    /// The dead records counted, for hole punching.
    pub fn take_records(&mut self) -> Vec<(u64, u64, u64)> {
        std::mem::take(&mut self.records)
    }
}

/// The view a liveness judgement was made in, as the key index marks it: the write leader's
/// check before relocating looks only at what changed since (`None`: at everything).
/// Relocations handed over with a mark must all have been judged in that view or a later one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JudgedIn(pub(crate) Option<u64>);

/// What GC needs from the key index (the LSM-tree behind `db/`).
pub trait GcIndex {
    /// The pointer stored as each key's newest value (`None` where its newest entry is not a
    /// pointer), all judged in one view, and that view's mark. Hints taken without write
    /// leadership: GC uses them to skip records that are surely dead. One call for many keys
    /// lets the index look them up in key order, in one view.
    fn newest_pointers(&self, keys: &[&[u8]]) -> Result<(Vec<Option<ValuePointer>>, JudgedIn)>;

    /// Whether the write leader could no longer check relocations judged in the view marked
    /// `judged_in` against the memtables alone (they have been flushed since): GC then
    /// judges them again in a fresh view, outside the leader's critical section, rather than
    /// have the leader look each up in the tables while writers wait behind it.
    fn judgement_outdated(&self, judged_in: JudgedIn) -> bool;

    /// Under write leadership: appends, as new versions, those relocations whose key still
    /// has `old` as its newest pointer, and returns how many were appended and their log
    /// bytes. `judged_in`: the mark of the view they were judged live in (or an earlier one).
    /// Not synced: GC syncs the log and flushes before it removes a victim; a clustering
    /// pass's old copies are punched only after the flush of the memtable holding the
    /// relocations, which syncs the log first.
    fn relocate_if_unchanged(
        &self,
        relocations: Vec<Relocation>,
        judged_in: JudgedIn,
    ) -> Result<(u64, u64)>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer(segment: u64, offset: u64, len: u32) -> Vec<u8> {
        let mut stored = Vec::new();
        ValuePointer {
            segment,
            offset,
            len,
        }
        .encode(&mut stored);
        stored
    }

    /// A shadowed pointer no record can lie at (damaged: its reads fail as corruption) is
    /// neither counted nor queued for punching: one into the segment header made every
    /// later punching edit fail, and one near `u64::MAX` overflowed its range's end.
    #[test]
    fn pointers_no_record_can_lie_at_are_not_counted_or_punched() {
        let mut dead = DeadBytes::default();
        dead.shadowed(ValueKind::ValuePointer, &pointer(3, 0, 8192));
        dead.shadowed(ValueKind::ValuePointer, &pointer(3, 64, 4));
        dead.shadowed(ValueKind::ValuePointer, &pointer(3, u64::MAX - 10, 100));
        assert_eq!(dead.total(), 0);
        assert!(dead.take_records().is_empty());
        dead.shadowed(ValueKind::ValuePointer, &pointer(3, 32, 100));
        assert_eq!(dead.total(), 100);
        assert_eq!(dead.take_records(), vec![(3, 32, 100)]);
    }
}
