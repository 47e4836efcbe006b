//! `Db::check`: reads everything the database holds and reports what does not verify, by
//! file and offset. Changes nothing. An error of the process's situation rather than of the
//! stored bytes (no permission, no file handles or memory) stops the check with that error
//! instead of being reported as damage; a missing file and a failed read (EIO) are damage.
//!
//! Three passes over one moment's state (a held `Version`, so no file it reads is deleted
//! under it):
//! 1. every entry of every table (each block's checksum, each internal key), each table
//!    opened afresh and read past the block cache: a block that went bad on disk after it
//!    was cached must not pass;
//! 2. every key's newest value through an iterator: a pointer must resolve to a value-log
//!    record whose checksum holds and that carries the same key;
//! 3. every record of every sealed segment before the replay head (and its file's length
//!    against the size the manifest sealed it at), then of the log from
//!    its segment on up to what had reached the OS when the check began (records written
//!    since open are verified by nothing else: inline values and deletes are read from the
//!    memtable). GC's punched ranges are stepped over: GC waits while a segment is read,
//!    so none is punched under the scan; a segment GC collected since the check began is
//!    skipped. A read-only handle that salvaged reports the damage its open stepped over
//!    (still on disk: it changes nothing).

use serde::Serialize;

use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};
use crate::filename::{table_file_name, vlog_file_name};
use crate::key::parse_internal_key;
use crate::options::ReadOptions;
use crate::iter::InternalIterator;
use crate::sstable::Table;

/// What [`crate::Db::check`] read and what it found wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckReport {
    /// Table files read, and their entries.
    pub tables: u64,
    /// Entries read from the tables.
    pub table_entries: u64,
    /// Keys read through an iterator, and how many of their values were pointers resolved
    /// in the value log.
    pub keys: u64,
    /// Of the keys, those whose value is a pointer into the value log (each resolved).
    pub pointers: u64,
    /// Sealed value-log segments scanned, and their records (punched ones not counted).
    pub segments: u64,
    /// Records read from those segments.
    pub segment_records: u64,
    /// Everything that did not verify. Empty: the database is sound.
    pub problems: Vec<CheckProblem>,
}

impl CheckReport {
    /// Whether nothing was found wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// Records a problem; an error that says nothing about the stored bytes (see
    /// [`not_about_the_data`]) is returned instead: the check stops with it.
    fn add(&mut self, fallback_file: &str, error: Error) -> Result<()> {
        if not_about_the_data(&error) {
            return Err(error);
        }
        let (file, offset, what) = located(error, fallback_file);
        self.problems.push(CheckProblem { file, offset, what });
        Ok(())
    }

    /// A key's value that did not read: named by the file (and offset) that failed where the
    /// error knows it, and always by the key, which is what a user acts on.
    fn add_value(&mut self, key: &[u8], error: Error) -> Result<()> {
        if not_about_the_data(&error) {
            return Err(error);
        }
        let (file, offset, reason) = located(error, "the value log");
        let what = format!("value of key {}: {reason}", crate::key::printable_key(key));
        self.problems.push(CheckProblem { file, offset, what });
        Ok(())
    }
}

/// Errors of the process's situation, not of what is stored: no permission, no file
/// handles or memory left, a closed database. Reported as damage, they made `wisckey
/// check` exit 2 on a sound database (a `check || repair` script would repair it). A
/// missing file and a failed read (EIO: a bad sector) stay problems: they are the data's.
fn not_about_the_data(error: &Error) -> bool {
    match error {
        Error::Io { source, .. } => {
            matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::OutOfMemory
            ) || error.is_out_of_handles()
                || matches!(
                    source.raw_os_error(),
                    Some(libc::ENOMEM | libc::EACCES | libc::EPERM)
                )
        }
        Error::Closed | Error::Locked(_) | Error::InvalidArgument(_) => true,
        _ => false,
    }
}

/// The file, offset and reason of an error; `fallback_file` where it names no file.
fn located(error: Error, fallback_file: &str) -> (String, Option<u64>, String) {
    match error {
        Error::Corruption {
            file,
            offset,
            reason,
        } => (file, Some(offset), reason),
        other => (fallback_file.to_string(), None, other.to_string()),
    }
}

/// One thing that did not verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckProblem {
    /// The file it is in.
    pub file: String,
    /// Byte offset in the file, where known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

/// Which pass of [`crate::Db::check_with_progress`] is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum CheckPhase {
    /// Reading every table entry; `done` and `total` count table bytes.
    Tables,
    /// Reading every key's newest value; `done` counts keys, `total` is the table entries
    /// found in the first pass (an upper estimate: old versions and deletes count there).
    Values,
    /// Reading the sealed value-log segments; `done` and `total` count segment bytes.
    Segments,
}

/// How far [`crate::Db::check_with_progress`] has come in its current pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckProgress {
    /// The pass.
    pub phase: CheckPhase,
    /// Work done in this pass (units per [`CheckPhase`]).
    pub done: u64,
    /// Work this pass has in all (at least `done`).
    pub total: u64,
}

/// Keys between two progress reports of the values pass.
const KEYS_PER_REPORT: u64 = 4096;

pub(crate) fn check(
    db: &crate::Db,
    inner: &DbInner,
    progress: &mut dyn FnMut(CheckProgress),
) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let (version, head) = {
        let state = inner.state.lock();
        let active = crate::position::LogPosition::new(inner.vlog.end().segment, 0);
        let head = state.versions.vlog_head().unwrap_or(active);
        (state.versions.current(), head)
    };
    let head_segment = head.segment;
    // After the head: the log's bytes that had reached the OS (whole batches); read-only,
    // the valid log replay found (a torn tail past it stays in the file).
    let written_end = match inner.read_only_log_end {
        Some(end) => end,
        None if inner.read_only => head,
        None => inner.vlog.flushed_end(),
    };
    let mut tell = |phase, done: u64, total: u64| {
        progress(CheckProgress {
            phase,
            done,
            total: total.max(done),
        })
    };

    // Saturating: the sizes come from the manifest this check may find damaged.
    let table_bytes = (version.all_files()).fold(0u64, |t, (_, f)| t.saturating_add(f.file_size));
    let mut tables_done = 0u64;
    tell(CheckPhase::Tables, 0, table_bytes);
    for (_, file) in version.all_files() {
        tables_done = tables_done.saturating_add(file.file_size);
        report.tables += 1;
        let path = table_file_name(&inner.dir, file.number);
        let name = path.display().to_string();
        let opened = (inner.fs.open_read(&path))
            .and_then(|f| Table::open(f, file.number, name.clone(), file.file_size, None));
        let mut it = match opened {
            Ok(table) => Arc::new(table).iter(),
            Err(e) => {
                report.add(&name, e)?;
                continue;
            }
        };
        it.seek_to_first();
        while it.valid() {
            report.table_entries += 1;
            if parse_internal_key(it.key()).is_none() {
                report.add(
                    &name,
                    Error::corruption(&name, 0, "an entry's internal key does not parse"),
                )?;
            }
            it.next();
        }
        if let Err(e) = it.status() {
            report.add(&name, e)?;
        }
        tell(CheckPhase::Tables, tables_done, table_bytes);
    }

    let mut it = db.iter(&ReadOptions::default())?;
    // A check reads everything once; it says nothing about which ranges users scan.
    it.without_scan_heat();
    it.seek_to_first();
    tell(CheckPhase::Values, 0, report.table_entries);
    while it.valid() {
        report.keys += 1;
        if report.keys % KEYS_PER_REPORT == 0 {
            tell(CheckPhase::Values, report.keys, report.table_entries);
        }
        if it.value_in_log() {
            report.pointers += 1;
        }
        if let Err(e) = it.value() {
            report.add_value(it.key(), e)?;
        }
        it.next();
    }
    if let Err(e) = it.status() {
        report.add("the key index", e)?;
    }
    drop(it);
    tell(CheckPhase::Values, report.keys, report.keys);

    let sealed = |segment: u64, size: Option<u64>| size.is_some() && segment < head_segment;
    let segment_bytes: u64 = (version.vlog_segments().iter())
        .filter(|(&n, meta)| sealed(n, meta.sealed_size))
        .filter_map(|(_, meta)| meta.sealed_size)
        .sum();
    let mut segments_done = 0u64;
    tell(CheckPhase::Segments, 0, segment_bytes);
    for (&segment, meta) in version.vlog_segments() {
        let Some(size) = meta
            .sealed_size
            .filter(|_| sealed(segment, meta.sealed_size))
        else {
            continue;
        };
        // GC punches and collects under `gc_lock`: held for this segment's scan, the
        // punched ranges read now stay true while it is read. The version taken at the
        // start may not know ranges punched since (they read as zeros, not records).
        let no_gc = inner.lock_out_gc();
        let current = inner.state.lock().versions.current();
        let Some(meta) = current.vlog_segments().get(&segment) else {
            // Collected since the check began: nothing left to check.
            segments_done += size;
            continue;
        };
        report.segments += 1;
        let mut records = 0u64;
        let scanned = crate::vlog::scan_sealed_segment(
            inner.fs.as_ref(),
            &inner.dir,
            segment,
            &meta.punched,
            inner.vlog.options(),
            0,
            &mut |batch| {
                records += batch.len() as u64;
                Ok(())
            },
        );
        drop(no_gc);
        report.segment_records += records;
        let name = vlog_file_name(&inner.dir, segment).display().to_string();
        match scanned {
            Ok(len) if len != size => report.add(&name, not_its_sealed_size(&name, len, size))?,
            Ok(_) => {}
            Err(e) => report.add(&name, e)?,
        }
        segments_done += size;
        tell(CheckPhase::Segments, segments_done, segment_bytes);
    }

    if inner.read_only {
        // A read-only open that salvaged stepped over damage in memory and left it on disk
        // (it changes nothing): the scan below stops at the replay's end before it, so it
        // is reported from what the open found.
        for damage in &inner.recovery_report.salvaged {
            let name = vlog_file_name(&inner.dir, damage.at.segment);
            report.problems.push(CheckProblem {
                file: name.display().to_string(),
                offset: Some(damage.at.offset),
                what: format!(
                    "stepped over by this read-only open (RecoveryMode::SalvagePrefix), {} \
                     bytes: {}",
                    damage.bytes_dropped, damage.reason
                ),
            });
        }
    }

    for segment in head_segment..=written_end.segment {
        let no_gc = inner.lock_out_gc();
        let current = inner.state.lock().versions.current();
        let path = vlog_file_name(&inner.dir, segment);
        let name = path.display().to_string();
        let listed = current.vlog_segments().get(&segment);
        // A segment the version no longer lists, below the newest it does, was collected.
        let newest_listed = current.vlog_segments().keys().next_back().copied();
        if listed.is_none() && newest_listed.is_some_and(|newest| segment < newest) {
            continue;
        }
        let until = if segment == written_end.segment {
            written_end.offset
        } else {
            match listed.and_then(|meta| meta.sealed_size) {
                Some(size) => {
                    // Bytes past the sealed size are read by nothing; a different length
                    // says the file is not the one the manifest sealed.
                    match inner.fs.file_size(&path) {
                        Ok(len) if len != size => {
                            report.add(&name, not_its_sealed_size(&name, len, size))?
                        }
                        Ok(_) => {}
                        Err(e) => report.add(&name, e)?,
                    }
                    size
                }
                // Finished before the manifest recorded it: cut to its records at the roll.
                None => match inner.fs.file_size(&path) {
                    Ok(size) => size,
                    Err(e) => {
                        report.add(&name, e)?;
                        continue;
                    }
                },
            }
        };
        let from = if segment == head_segment { head.offset } else { 0 };
        // Ranges GC punched since the check began (the head moved past this segment
        // meanwhile) may straddle where this scan starts or ends: clipped to the scan, it
        // steps over them instead of reading zeros as records.
        let start = from.max(crate::vlog::SEGMENT_HEADER_LEN);
        let punched: std::collections::BTreeMap<u64, u64> = (listed.iter())
            .flat_map(|meta| meta.punched.iter())
            .map(|(&range_start, &range_end)| (range_start.max(start), range_end.min(until)))
            .filter(|&(range_start, range_end)| range_start < range_end)
            .collect();
        report.segments += 1;
        let mut records = 0u64;
        let scanned = crate::vlog::scan_segment_range(
            inner.fs.as_ref(),
            &inner.dir,
            segment,
            from..until,
            &punched,
            inner.vlog.options(),
            &mut |batch| {
                records += batch.len() as u64;
                Ok(())
            },
        );
        drop(no_gc);
        report.segment_records += records;
        match scanned {
            Ok(end) if end < until => report.add(
                &name,
                Error::corruption(
                    &name,
                    end,
                    format!(
                        "the records after the replay head stop verifying here, before offset \
                         {until} (what had been written when the check began)"
                    ),
                ),
            )?,
            Ok(_) => {}
            Err(e) => report.add(&name, e)?,
        }
    }
    Ok(report)
}

/// A sealed segment whose file is not the length the manifest recorded when it sealed it:
/// cut short, records (dead or not) are gone; grown, something wrote to a finished file.
fn not_its_sealed_size(name: &str, len: u64, sealed: u64) -> Error {
    Error::corruption(
        name,
        len.min(sealed),
        format!("the segment is {len} bytes; the manifest sealed it at {sealed}"),
    )
}
