//! The value log: the database's only recovery log and the home of large values (WiscKey
//! §3.2–3.4). Every put, delete and write batch is appended here before it is acknowledged;
//! the LSM-tree holds either the value inline or a [`ValuePointer`] to its record here.
//!
//! The log is a numbered sequence of segment files (`filename::vlog_file_name`), each a
//! header followed by records; a write batch is a run of consecutive records whose last one
//! carries `LAST_IN_BATCH`, and never spans segments. Byte layout: `docs/FORMAT.md`;
//! invariants: `docs/DESIGN.md`.
//!
//! - [`ValueLog`]: the log as the database uses it — writer, reader, published positions;
//! - [`VlogWriter`]: single appender with a user-space buffer and segment rollover;
//! - [`VlogReader`]: verified point reads by pointer, `Send + Sync`;
//! - [`scan`]: sequential replay of complete batches for recovery and GC.
//!
//! This module knows nothing about the LSM-tree.

mod cache;
pub mod format;
mod log;
mod reader;
mod scan;
mod writer;

use std::path::Path;

pub use format::{
    punchable, ValuePointer, FORMAT_VERSION, PUNCH_ALIGN, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
pub use log::{PointerRead, ValueLog};
pub use reader::{extract_value, LiveRange, VlogReader};
pub use scan::{
    declared_end_of_previous, sample_segment_records, scan, scan_log, scan_sealed_segment, scan_segment_range, scan_segments, LogDamage, SampleCoverage,
    ScanOutcome, ScannedRecord,
};
pub use writer::{BatchEntry, VlogWriter};

use crate::error::{Error, Result};
use crate::filename::{parse_file_name, FileKind};
use crate::fs::FileSystem;

/// Sizes and limits of the value log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlogOptions {
    /// Target segment size: a batch that would cross it starts a new segment (unless the
    /// segment holds no records yet, so a huge batch still fits somewhere).
    pub segment_size: u64,
    /// Appended bytes are kept in memory until the buffer reaches this size, then written
    /// with one `append`.
    pub buffer_size: usize,
    pub max_key_size: usize,
    pub max_value_size: usize,
    /// Disk space reserved ahead of the write position, in chunks of this many bytes
    /// (`fallocate` with KEEP_SIZE), so a full device is reported before a write is
    /// acknowledged rather than when the buffer is written out. 0 disables it.
    pub preallocate_size: u64,
    /// After every this many bytes written out to the active segment, the OS is asked to
    /// start writing them to the device (a hint, not a sync). 0 disables it.
    pub write_back_interval: u64,
    /// Segments are written with `O_DIRECT` where the file system allows
    /// ([`crate::fs::FileSystem::create_direct`]): appended bytes bypass the page cache.
    pub direct_writes: bool,
    /// Segments are written through a shared mapping where the file system allows
    /// ([`crate::fs::FileSystem::create_mapped`]): for write-outs of a put or a few, which
    /// must each reach the OS before the write is acknowledged. Ignored with `direct_writes`.
    pub mapped_writes: bool,
    /// Sync writes keep this many bytes past the log's end written with zeros
    /// ([`VlogWriter::sync_write`]), so their `fdatasync` overwrites written blocks and
    /// flushes data only. 0 disables it.
    pub zero_fill_size: u64,
}

#[cfg(test)]
impl VlogOptions {
    /// Small limits for tests (keys up to 64 bytes, values up to 4 KiB), no preallocation,
    /// write-back hints, `O_DIRECT` or zeros ahead.
    pub(crate) fn for_tests(segment_size: u64, buffer_size: usize) -> VlogOptions {
        VlogOptions {
            segment_size,
            buffer_size,
            max_key_size: 64,
            max_value_size: 4096,
            preallocate_size: 0,
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
        }
    }
}

impl Default for VlogOptions {
    fn default() -> Self {
        VlogOptions {
            segment_size: 256 << 20,
            buffer_size: 1 << 20,
            max_key_size: 64 << 10,
            max_value_size: 256 << 20,
            preallocate_size: 4 << 20,
            write_back_interval: 1 << 20,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 1 << 20,
        }
    }
}

impl VlogOptions {
    /// Rejects limits that the record format cannot represent (a record's length must fit
    /// the u32 in a [`ValuePointer`]).
    pub fn validate(&self) -> Result<()> {
        let max_record =
            (RECORD_HEADER_LEN as u128) + self.max_key_size as u128 + self.max_value_size as u128;
        if max_record > u128::from(u32::MAX) {
            return Err(Error::InvalidArgument(format!(
                "max_key_size + max_value_size + {RECORD_HEADER_LEN} must not exceed {}",
                u32::MAX
            )));
        }
        if self.segment_size <= SEGMENT_HEADER_LEN {
            return Err(Error::InvalidArgument(format!(
                "segment_size must exceed the {SEGMENT_HEADER_LEN}-byte segment header"
            )));
        }
        if self.buffer_size == 0 {
            return Err(Error::InvalidArgument(
                "buffer_size must be positive".into(),
            ));
        }
        Ok(())
    }

    /// Largest record these limits allow (saturating, so unvalidated options are harmless).
    pub fn max_record_len(&self) -> u64 {
        (RECORD_HEADER_LEN as u64)
            .saturating_add(self.max_key_size as u64)
            .saturating_add(self.max_value_size as u64)
    }

    /// Whether some record could be `len` bytes long: at least a header, at most
    /// [`VlogOptions::max_record_len`].
    pub fn record_len_possible(&self, len: u32) -> bool {
        (RECORD_HEADER_LEN as u64..=self.max_record_len()).contains(&u64::from(len))
    }
}

/// Numbers of the value-log segments present in `dir`, ascending.
pub fn list_segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let mut segments: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::ValueLog(n)) => Some(n),
            _ => None,
        })
        .collect();
    segments.sort_unstable();
    Ok(segments)
}

/// The newest segment when its header does not verify (see [`torn_last_segment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornSegment {
    pub segment: u64,
    /// The file's length.
    pub len: u64,
    /// Valid records found after the header slot.
    pub records: u64,
    /// The offset of the first of them that carries `FLAG_SYNCED_BEFORE`: the header was
    /// synced before it, so the bad header is damage, not a crash while the segment was
    /// created.
    pub synced_record_at: Option<u64>,
}

/// The newest segment, if its header does not verify. A crash right after the segment was
/// created leaves that: the writer syncs a header with the records after it, so such a
/// segment holds no acknowledged sync write — unless a record in it says an earlier sync
/// covered it ([`TornSegment::synced_record_at`]), which the caller must treat as damage.
/// A header that verifies but names another segment is no crash's doing (a file copied or
/// renamed into the directory): `Corruption`. Reads only.
pub fn torn_last_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &VlogOptions,
) -> Result<Option<TornSegment>> {
    let Some(&last) = list_segments(fs, dir)?.last() else {
        return Ok(None);
    };
    let path = crate::filename::vlog_file_name(dir, last);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let len = file.len()?;
    let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
    match file.read_exact_at(0, &mut header, &name) {
        Ok(()) => match format::SegmentHeader::decode(&header, &name) {
            Ok(h) if h.segment == last => return Ok(None),
            Ok(h) => {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!(
                        "the segment's header names segment {}: a file copied or renamed \
                         into the database? Nothing was changed; move the file away or \
                         restore the right one",
                        h.segment
                    ),
                ))
            }
            Err(Error::Corruption { .. }) => {}
            Err(e) => return Err(e),
        },
        Err(Error::Corruption { .. }) => {}
        Err(e) => return Err(e),
    }
    let (records, synced_record_at) = scan::probe_segment_body(fs, dir, last, opts)?;
    Ok(Some(TornSegment {
        segment: last,
        len,
        records,
        synced_record_at,
    }))
}
