//! Value-log garbage collection (WiscKey §3.3.2): give back the space of value-log records
//! that no reader can need any more, online, crash-safe at every step.
//!
//! Owns: the accounting of dead log bytes ([`DeadBytes`], fed by flushes and compactions
//! and recorded in the manifest), the choice of victim segments ([`picker`], a pure
//! function of the current `Version`, the replay head and the pins), and the collection
//! cycle ([`cycle`]): read a victim sequentially, keep the records the key index still
//! points to, have the index relocate them (append at the log's head under write
//! leadership, in key order), sync, remove the victim from the manifest, and delete its file
//! once nothing can read it.
//!
//! Invariants (docs/DESIGN.md, "Value-log GC"):
//! - GC never decides liveness on its own: the final check that a record is the key's newest
//!   value happens under write leadership, in the same critical section as the append, so a
//!   delete or overwrite racing GC is never shadowed and replay never resurrects a key;
//! - a victim leaves the manifest only after its survivors are durable, and its file is
//!   deleted only when no live `Version` lists it and no snapshot older than the relocation
//!   exists (`db::background::delete_obsolete_files`);
//! - only sealed segments wholly before the replay head's segment are collected (replay
//!   needs everything from the head on).
//!
//! GC talks to the key index only through [`GcIndex`], so another index (a hash or bucketed
//! one) could stand behind it without GC or the log changing.

pub mod cycle;
pub mod picker;

use std::collections::BTreeMap;

use crate::compaction::DroppedEntries;
use crate::error::Result;
use crate::key::ValueKind;
use crate::version::VersionEdit;
use crate::vlog::ValuePointer;

pub use cycle::{GcOutcome, Relocation};
pub use picker::{
    next_step, pick_victims, GcStep, SegmentState, SegmentView, StepsTaken, VictimOrder,
    VictimPolicy,
};

/// Dead log bytes per segment, counted while a flush or compaction drops entries.
#[derive(Debug, Default)]
pub(crate) struct DeadBytes {
    by_segment: BTreeMap<u64, u64>,
}

impl DeadBytes {
    /// Counts `bytes` of `segment` as dead.
    pub fn add(&mut self, segment: u64, bytes: u64) {
        *self.by_segment.entry(segment).or_insert(0) += bytes;
    }
}

impl DroppedEntries for DeadBytes {
    fn dropped(&mut self, kind: ValueKind, stored: &[u8]) {
        // Only a pointer references a log record that is still counted as live; inline
        // values and tombstones were counted dead when their memtable was flushed.
        if kind == ValueKind::ValuePointer {
            if let Some(ptr) = ValuePointer::decode(stored) {
                self.add(ptr.segment, u64::from(ptr.len));
            }
        }
    }

    fn record(&mut self, edit: &mut VersionEdit) {
        edit.vlog_dead_bytes.extend(
            std::mem::take(&mut self.by_segment)
                .into_iter()
                .filter(|&(_, b)| b > 0),
        );
    }
}

/// What GC needs from the key index (the LSM-tree behind `db/`).
pub trait GcIndex {
    /// The pointer stored as `key`'s newest value, if its newest entry is a pointer. A hint
    /// taken without write leadership: GC uses it to skip records that are surely dead.
    fn newest_pointer(&self, key: &[u8]) -> Result<Option<ValuePointer>>;

    /// Under write leadership: appends, as new versions, those relocations whose key still
    /// has `old` as its newest pointer, makes them durable, and returns how many were
    /// appended and their log bytes.
    fn relocate_if_unchanged(&self, relocations: Vec<Relocation>) -> Result<(u64, u64)>;
}
