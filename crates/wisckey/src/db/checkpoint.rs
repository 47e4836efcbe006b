//! `Db::checkpoint`: a consistent copy of an open database in another directory, which opens
//! as a database of its own (a backup, or a fork for tests and analytics).
//!
//! Invariants:
//! - the copy holds exactly the writes of a prefix of the log: the tables of one `Version`,
//!   and every value-log segment that version lists plus the newer ones, the last cut at a
//!   position the writer had written out and synced (a batch boundary); its manifest's replay
//!   head is that version's, so opening the copy replays the log from there;
//! - every file is copied, none shared: GC punches holes in sealed segments in place, which
//!   would reach a copy through a hard link (tables are small next to the log); a
//!   segment's punched ranges are not copied but left holes (zeros) in the copy, whose
//!   manifest records them punched too;
//! - GC neither collects nor punches while the copy is made (`gc_lock` is held), so every
//!   segment read is complete and its punched ranges are the ones recorded;
//! - never writes into the database: a target inside its directory, also one named through
//!   a link, is refused;
//! - never overwrites: the target must not exist, and the checkpoint holds the new
//!   directory's `LOCK` while it copies (two checkpoints racing to one target: one refuses);
//!   every copied file is synced, then the directory, then the manifest and CURRENT (a crash
//!   leaves a directory without CURRENT, which open refuses, never a half copy that opens);
//!   `CHECKPOINT-INCOMPLETE` is made durable first and removed last, so even a copy cut
//!   short before any data file (a directory that would otherwise pass for an interrupted
//!   creation, which open completes into an empty database) is refused as incomplete.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::DbInner;
use crate::error::{Error, Result};
use crate::filename::{table_file_name, vlog_file_name, CHECKPOINT_INCOMPLETE};
use crate::fs::FileSystem;
use crate::position::LogPosition;
use crate::version::{RebuiltCounters, SegmentMeta, VersionSet};
use crate::vlog::SEGMENT_HEADER_LEN;

/// Bytes copied per read.
const COPY_CHUNK: usize = 1 << 20;

/// What [`crate::Db::checkpoint`] copied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// Table files and their bytes.
    pub tables: u64,
    /// Bytes of the copied tables.
    pub table_bytes: u64,
    /// Value-log segments and their bytes.
    pub segments: u64,
    /// Bytes of the copied segments.
    pub segment_bytes: u64,
    /// The copy's last sequence number in its tables (its log may hold later ones).
    pub last_sequence: u64,
}

pub(crate) fn checkpoint(inner: &DbInner, target: &Path) -> Result<CheckpointReport> {
    // The database's files are read through its own file system (read-only for a read-only
    // handle); the copy is written through the one the database was opened with.
    let fs = &*inner.copy_fs;
    if target.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "checkpoint target is an empty path; name a new directory".into(),
        ));
    }
    if fs.exists(target)? {
        // Even an empty one, as RocksDB's checkpoint: the copy creates its directory, so no
        // file another process put there (or puts there while it is empty) mixes with it.
        return Err(Error::InvalidArgument(format!(
            "checkpoint target {} already exists; name a new directory (one that does not \
             exist yet, not even empty)",
            target.display()
        )));
    }
    if crate::fs::path_is_within(fs, target, &inner.dir)? {
        // The copy would become a directory of the database (one `repair` refuses to rebuild
        // around, and the next checkpoint would copy it again).
        return Err(Error::InvalidArgument(format!(
            "checkpoint target {} is inside the database directory {}; name a directory \
             outside it",
            target.display(),
            inner.dir.display()
        )));
    }
    if fs.exists(&target.join(crate::filename::CURRENT))? {
        return Err(Error::InvalidArgument(format!(
            "{} already holds a database",
            target.display()
        )));
    }
    if inner.read_only && !inner.recovery_report.salvaged.is_empty() {
        // A read-only open that salvaged left the damage on disk (it changes nothing), and
        // the copy would carry it: a read-write open with salvage cuts it first.
        return Err(Error::InvalidArgument(format!(
            "this read-only handle stepped over log damage (RecoveryMode::SalvagePrefix); a \
             copy would carry it. Open {} read-write with SalvagePrefix once, then checkpoint",
            inner.dir.display()
        )));
    }
    let _no_gc = inner.lock_out_gc();
    if !inner.read_only {
        // Everything acknowledged so far reaches the log file (a read-only handle has
        // written nothing).
        super::write::sync_log(inner)?;
    }
    let (version, head, last_sequence) = {
        let state = inner.state.lock();
        let versions = &state.versions;
        (
            versions.current(),
            versions.vlog_head(),
            versions.last_sequence(),
        )
    };
    let end = inner.vlog.flushed_end();
    let listed = version.vlog_segments();
    let first = listed.keys().next().copied().unwrap_or(end.segment);
    let head = head.unwrap_or(LogPosition::new(first, SEGMENT_HEADER_LEN));

    crate::fs::create_dir_all_durably(fs, target)?;
    let _claim = claim_target(fs, target)?;
    let marker = target.join(CHECKPOINT_INCOMPLETE);
    fs.create(&marker)?.sync_data()?;
    fs.sync_dir(target)?;
    let mut report = CheckpointReport {
        last_sequence,
        ..CheckpointReport::default()
    };
    let mut tables = Vec::new();
    let mut next_file = 1;
    for (level, file) in version.all_files() {
        let from = table_file_name(&inner.dir, file.number);
        copy_file(
            &*inner.fs,
            fs,
            &from,
            &table_file_name(target, file.number),
            file.file_size,
        )?;
        report.tables += 1;
        report.table_bytes += file.file_size;
        next_file = next_file.max(file.number + 1);
        tables.push((level, file.as_ref().clone()));
    }
    let newest_listed = listed.keys().next_back().copied().unwrap_or(0);
    let mut segments = BTreeMap::new();
    for segment in first..=end.segment {
        let meta = match listed.get(&segment) {
            Some(meta) => meta.clone(),
            // Past the head's segment: written since, not listed yet.
            None if segment > newest_listed => SegmentMeta::default(),
            // Collected by GC, its file not deleted yet: not part of the log.
            None => continue,
        };
        let from = vlog_file_name(&inner.dir, segment);
        let len = if segment == end.segment {
            end.offset
        } else {
            inner.fs.file_size(&from)?
        };
        // Punched ranges are left holes in the copy too: copied as zeros, a checkpoint
        // of a log GC punched would take the disk space GC gave back.
        let to = vlog_file_name(target, segment);
        copy_file_around(&*inner.fs, fs, &from, &to, len, &meta.punched)?;
        report.segments += 1;
        report.segment_bytes += len;
        let sealed_size = (segment < end.segment).then_some(len);
        segments.insert(
            segment,
            SegmentMeta {
                sealed_size,
                ..meta
            },
        );
    }
    fs.sync_dir(target)?;
    let counters = RebuiltCounters {
        next_file_number: next_file,
        last_sequence,
        vlog_head: head,
    };
    VersionSet::write_rebuilt(fs, target, tables, segments, counters)?;
    // Complete: CURRENT names a manifest whose files are all synced. A crash before this
    // removal is durable leaves the marker beside CURRENT; the copy's first read-write open
    // sweeps it.
    fs.remove(&marker)?;
    fs.sync_dir(target)?;
    Ok(report)
}

/// Takes the new directory's `LOCK` for this checkpoint and checks that nothing else is in
/// it. Two checkpoints to one target (threads of one process, or read-only handles in two
/// processes) can both pass the existence check before either creates the directory: the
/// loser then finds the lock held, or, taking it once the winner is done, the winner's
/// files, and refuses instead of overwriting a finished copy. The lock is released when
/// the guard drops; the copy's own opens take the same file.
fn claim_target(fs: &dyn FileSystem, target: &Path) -> Result<Box<dyn crate::fs::FileLock>> {
    let taken = |what: &str| {
        Error::InvalidArgument(format!(
            "checkpoint target {} {what}; name a new directory",
            target.display()
        ))
    };
    let lock = match fs.lock(&target.join(crate::filename::LOCK)) {
        Ok(lock) => lock,
        Err(Error::Locked(_)) => return Err(taken("is being written by another checkpoint")),
        Err(e) => return Err(e),
    };
    if fs.list(target)?.iter().any(|name| name != crate::filename::LOCK) {
        return Err(taken("was filled by another checkpoint meanwhile"));
    }
    Ok(lock)
}

/// Copies the first `len` bytes of `from` (on `from_fs`) into a new file `to` (on `to_fs`),
/// synced.
pub(crate) fn copy_file(
    from_fs: &dyn FileSystem,
    to_fs: &dyn FileSystem,
    from: &Path,
    to: &Path,
    len: u64,
) -> Result<()> {
    copy_file_around(from_fs, to_fs, from, to, len, &BTreeMap::new())
}

/// [`copy_file`], but the ranges of `holes` (start to end) are neither read nor written:
/// the copy is extended over them (`set_len`: a hole where the file system keeps sparse
/// files, zeros to every reader).
fn copy_file_around(
    from_fs: &dyn FileSystem,
    to_fs: &dyn FileSystem,
    from: &Path,
    to: &Path,
    len: u64,
    holes: &BTreeMap<u64, u64>,
) -> Result<()> {
    let source = from_fs.open_read(from)?;
    let name = from.display().to_string();
    let mut target = to_fs.create(to)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut offset = 0;
    while offset < len {
        let in_hole = (holes.range(..=offset).next_back()).filter(|(_, &end)| end > offset);
        if let Some((_, &end)) = in_hole {
            let end = end.min(len);
            target.set_len(end)?;
            offset = end;
            continue;
        }
        let next_hole = holes.range(offset..).find(|(&start, &end)| end > start);
        let data_end = next_hole.map_or(len, |(&start, _)| start.min(len));
        let n = (data_end - offset).min(COPY_CHUNK as u64) as usize;
        source.read_exact_at(offset, &mut buf[..n], &name)?;
        target.append(&buf[..n])?;
        offset += n as u64;
    }
    target.sync_data()
}
