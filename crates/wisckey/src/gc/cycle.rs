//! One collection of one victim segment: read it sequentially, keep what the index still
//! points to, hand the survivors to the index for relocation in key-ordered batches.
//!
//! The segment is scanned record by record without copying values at or above the copy
//! limit; only survivors' values are read (one positional read each, in file order). The
//! victim's file is not touched: removing it from the log and deleting it is the caller's
//! next step, once every relocation returned and the log is synced.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::GcIndex;
use crate::error::Result;
use crate::filename::vlog_file_name;
use crate::fs::FileSystem;
use crate::key::ValueKind;
use crate::position::LogPosition;
use crate::vlog::{self, LiveRange, ValuePointer, VlogOptions, VlogReader};

/// A record to relocate: the key's newest value is still the record at `old`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub old: ValuePointer,
}

/// What collecting segments did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GcOutcome {
    /// Victim segments whose records were all relocated or found dead.
    pub segments_collected: u64,
    /// Bytes of victim segments read: their files' lengths less their punched ranges (dead
    /// records, stepped over).
    pub bytes_read: u64,
    /// Records appended again at the log's head, and their bytes.
    pub records_relocated: u64,
    /// Bytes of the relocated records.
    pub bytes_relocated: u64,
    /// Records found dead (not relocated).
    pub records_dropped: u64,
}

impl GcOutcome {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &GcOutcome) {
        self.segments_collected += other.segments_collected;
        self.bytes_read += other.bytes_read;
        self.records_relocated += other.records_relocated;
        self.bytes_relocated += other.bytes_relocated;
        self.records_dropped += other.records_dropped;
    }
}

/// Where a cycle reads from.
#[derive(Debug, Clone, Copy)]
pub struct SegmentSource<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub reader: &'a VlogReader,
    pub options: &'a VlogOptions,
    /// Values shorter than this are copied while scanning (they are cheap); longer ones are
    /// read only if they survive.
    pub copy_values_below: usize,
    /// Survivors are handed over in batches of about this many value bytes.
    pub batch_bytes: usize,
}

/// Relocates every live record of sealed segment `victim`, stepping over its `punched`
/// ranges. Fails (and the victim must then be kept) if the segment does not read cleanly to
/// its end.
pub fn collect_segment(
    src: SegmentSource<'_>,
    victim: u64,
    punched: &BTreeMap<u64, u64>,
    index: &dyn GcIndex,
) -> Result<GcOutcome> {
    let file_len = src.fs.file_size(&vlog_file_name(src.dir, victim))?;
    // Punched ranges are stepped over, not read.
    let punched_len: u64 = (punched.iter())
        .map(|(&start, &end)| end.min(file_len).saturating_sub(start))
        .sum();
    let mut outcome = GcOutcome {
        bytes_read: file_len.saturating_sub(punched_len),
        ..GcOutcome::default()
    };
    let mut pending: Vec<Relocation> = Vec::new();
    let mut pending_bytes = 0usize;
    let flush = |pending: &mut Vec<Relocation>, outcome: &mut GcOutcome| -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        // Key order within a batch: scans of relocated data read the log sequentially
        // (WiscKey §3.3.2).
        pending.sort_by(|a, b| a.key.cmp(&b.key));
        let offered = pending.len() as u64;
        let (relocated, bytes) = index.relocate_if_unchanged(std::mem::take(pending))?;
        outcome.records_relocated += relocated;
        outcome.bytes_relocated += bytes;
        outcome.records_dropped += offered - relocated;
        Ok(())
    };
    let end = LogPosition::new(victim, file_len);
    vlog::scan_sealed_segment(
        src.fs,
        src.dir,
        victim,
        punched,
        src.options,
        src.copy_values_below,
        &mut |batch| {
            for record in batch {
                if record.kind != ValueKind::Value
                    || index.newest_pointer(&record.key)? != Some(record.ptr)
                {
                    outcome.records_dropped += 1;
                    continue;
                }
                let value = if record.value.len() == record.value_len {
                    record.value.clone()
                } else {
                    src.reader
                        .read_value_uncached(&record.ptr, &record.key, LiveRange { end })?
                };
                pending_bytes += value.len() + record.key.len();
                pending.push(Relocation {
                    key: record.key.clone(),
                    value,
                    old: record.ptr,
                });
                if pending_bytes >= src.batch_bytes {
                    pending_bytes = 0;
                    flush(&mut pending, &mut outcome)?;
                }
            }
            Ok(())
        },
    )?;
    flush(&mut pending, &mut outcome)?;
    outcome.segments_collected = 1;
    Ok(outcome)
}

/// What [`sample_segment`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSample {
    /// Bytes of the records read that are dead.
    pub dead: u64,
    /// Bytes of the records read.
    pub sampled: u64,
    /// Every record of the segment was read: `dead` is the segment's dead bytes, exactly.
    pub complete: bool,
}

/// Estimates the dead fraction of sealed segment `segment` from about `windows *
/// window_bytes` of its records, read in windows spread over the segment
/// (`vlog::sample_segment_records`): each put record is live if the index's newest pointer
/// for its key is that record (the same hint collection uses). Dead counts in the manifest
/// lag behind the truth (a pointer is counted dead only when the entry shadowing it is
/// flushed; garbage from before manifest format 4 may not be counted at all); a sample
/// does not, and a record once dead stays dead, so a sample stays a fair estimate as the
/// log grows.
pub fn sample_segment(
    src: SegmentSource<'_>,
    segment: u64,
    punched: &BTreeMap<u64, u64>,
    (windows, window_bytes): (u64, u64),
    index: &dyn GcIndex,
) -> Result<SegmentSample> {
    let mut dead = 0u64;
    let mut sampled = 0u64;
    let coverage = vlog::sample_segment_records(
        src.fs,
        src.dir,
        segment,
        punched,
        windows,
        window_bytes,
        src.options,
        &mut |record| {
            let len = u64::from(record.ptr.len);
            sampled += len;
            let live = record.kind == ValueKind::Value
                && index.newest_pointer(&record.key)? == Some(record.ptr);
            if !live {
                dead += len;
            }
            Ok(())
        },
    )?;
    Ok(SegmentSample {
        dead,
        sampled,
        complete: coverage.complete,
    })
}
