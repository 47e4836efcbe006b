//! `Db::check`: reads everything the database holds and reports what does not verify, by
//! file and offset. Changes nothing.
//!
//! Three passes over one moment's state (a held `Version`, so no file it reads is deleted
//! under it):
//! 1. every entry of every table (each block's checksum, each internal key);
//! 2. every key's newest value through an iterator: a pointer must resolve to a value-log
//!    record whose checksum holds and that carries the same key;
//! 3. every record of every sealed segment before the replay head (GC's punched ranges
//!    are stepped over); records from the head on were verified by replay at open.

use serde::Serialize;

use super::DbInner;
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::key::parse_internal_key;
use crate::options::ReadOptions;

/// What [`crate::Db::check`] read and what it found wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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

    fn add(&mut self, fallback_file: &str, error: Error) {
        let (file, offset, what) = match error {
            Error::Corruption {
                file,
                offset,
                reason,
            } => (file, Some(offset), reason),
            other => (fallback_file.to_string(), None, other.to_string()),
        };
        self.problems.push(CheckProblem { file, offset, what });
    }
}

/// One thing that did not verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckProblem {
    /// The file it is in.
    pub file: String,
    /// Byte offset in the file, where known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

pub(crate) fn check(db: &crate::Db, inner: &DbInner) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let (version, head_segment) = {
        let state = inner.state.lock();
        let active = inner.vlog.end().segment;
        let head = state.versions.vlog_head().map_or(active, |h| h.segment);
        (state.versions.current(), head)
    };

    for (_, file) in version.all_files() {
        report.tables += 1;
        let name = table_file_name(&inner.dir, file.number)
            .display()
            .to_string();
        let mut it = match inner.tables.iter(file.number, file.file_size) {
            Ok(it) => it,
            Err(e) => {
                report.add(&name, e);
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
                );
            }
            it.next();
        }
        if let Err(e) = it.status() {
            report.add(&name, e);
        }
    }

    let mut it = db.iter(&ReadOptions::default())?;
    it.seek_to_first();
    while it.valid() {
        report.keys += 1;
        if it.value_in_log() {
            report.pointers += 1;
        }
        if let Err(e) = it.value() {
            let key = String::from_utf8_lossy(it.key()).into_owned();
            report.add(&format!("value of key {key:?}"), e);
        }
        it.next();
    }
    if let Err(e) = it.status() {
        report.add("the key index", e);
    }
    drop(it);

    for (&segment, meta) in version.vlog_segments() {
        if meta.sealed_size.is_none() || segment >= head_segment {
            continue;
        }
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
        report.segment_records += records;
        if let Err(e) = scanned {
            let name = crate::filename::vlog_file_name(&inner.dir, segment);
            report.add(&name.display().to_string(), e);
        }
    }
    Ok(report)
}
