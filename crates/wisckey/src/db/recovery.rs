//! Opening a database: validation, creation, locking, manifest recovery and value-log
//! replay (there is no LSM write-ahead log: the value log from the persisted head onward
//! *is* the log, §3.4.2).
//!
//! Invariants on open:
//! - nothing in a directory that is not a wisckey database is changed: the check for foreign
//!   files runs before the LOCK file is created;
//! - replay starts at the manifest's head, re-inserts every complete batch into a fresh
//!   memtable with its original sequence numbers, and stops at the first torn or invalid
//!   record; the log is truncated there so later appends never sit behind garbage;
//! - new writes get sequence numbers above everything in the tables and in the log.

use std::collections::HashSet;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::write::WriteQueue;
use super::{make_table_cache, DbInner, State};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, vlog_file_name, CURRENT, LOCK};
use crate::fs::FileSystem;
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::{Options, MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::position::LogPosition;
use crate::snapshot::SnapshotRegistry;
use crate::version::{TableSource, VersionSet};
use crate::vlog::{self, VlogOptions, VlogReader, VlogWriter};

pub(crate) fn open(dir: &Path, options: Options) -> Result<DbInner> {
    options.validate()?;
    let fs = Arc::clone(&options.fs);
    let exists = fs.exists(&dir.join(CURRENT))?;
    if exists && options.error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "database {} already exists (error_if_exists is set)",
            dir.display()
        )));
    }
    if !exists {
        prepare_new_directory(&*fs, dir, &options)?;
    }
    let lock = fs.lock(&dir.join(LOCK))?;
    let mut versions = if exists {
        VersionSet::recover(Arc::clone(&fs), dir)?
    } else {
        VersionSet::create(Arc::clone(&fs), dir)?
    };

    let vlog_options = VlogOptions {
        segment_size: options.vlog_segment_size,
        buffer_size: options.vlog_buffer_size,
        max_key_size: MAX_KEY_SIZE,
        max_value_size: MAX_VALUE_SIZE,
    };
    let mem = MemTable::new();
    let replayed = replay_value_log(&*fs, dir, &versions, &vlog_options, &options, &mem)?;
    let (vlog_writer, max_replayed_seq) = (replayed.writer, replayed.max_sequence);
    let last_sequence = versions.last_sequence().max(max_replayed_seq);
    versions.set_last_sequence(last_sequence);

    let table_cache = make_table_cache(dir, &options);
    let tables: Arc<dyn TableSource> = table_cache.clone();
    let flushed_end = vlog_writer.flushed_end();
    let first_live_segment = versions.vlog_tail().map_or(0, |t| t.segment);
    let inner = DbInner {
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        state: Mutex::new(State {
            mem: Arc::new(mem),
            imms: VecDeque::new(),
            versions,
            bg_error: None,
            pending_outputs: HashSet::new(),
        }),
        bg_cv: Condvar::new(),
        writers: WriteQueue::default(),
        vlog: Mutex::new(vlog_writer),
        vlog_reader: Arc::new(VlogReader::new(
            Arc::clone(&fs),
            dir.to_path_buf(),
            vlog_options.clone(),
        )),
        vlog_flushed_end: Mutex::new(flushed_end),
        vlog_end: Mutex::new(flushed_end),
        vlog_options,
        vlog_first_live_segment: AtomicU64::new(first_live_segment),
        table_cache,
        tables,
        snapshots: Arc::new(SnapshotRegistry::default()),
        visible_seq: AtomicU64::new(last_sequence),
        // The replayed records count towards the memtable's log budget, so repeated crashes
        // cannot make the next replay longer than `memtable_max_log_bytes`.
        log_bytes_in_mem: AtomicU64::new(replayed.log_bytes),
        shutting_down: AtomicBool::new(false),
        compaction_lock: Mutex::new(()),
        deletion_lock: Mutex::new(()),
        manual_compaction: AtomicBool::new(false),
        last_log_flush: Mutex::new(std::time::Instant::now()),
        readers: std::sync::OnceLock::new(),
        options,
        _lock: lock,
    };
    super::background::delete_obsolete_files(&inner)?;
    Ok(inner)
}

/// Checks that `dir` may become a new database and creates it. A directory that holds
/// files wisckey never writes is refused untouched. Our own leftovers without a CURRENT file
/// come from a creation that crashed before it finished — no write was ever acknowledged
/// there — and are removed.
fn prepare_new_directory(fs: &dyn FileSystem, dir: &Path, options: &Options) -> Result<()> {
    if !options.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "database {} does not exist (create_if_missing is false)",
            dir.display()
        )));
    }
    if fs.exists(dir)? {
        let names = fs.list(dir)?;
        if let Some(foreign) = names.iter().find(|n| parse_file_name(n).is_none()) {
            return Err(Error::NotADatabase(format!(
                "{} has no CURRENT file and holds '{foreign}', which wisckey did not write",
                dir.display()
            )));
        }
        for name in names.iter().filter(|n| n.as_str() != LOCK) {
            fs.remove(&dir.join(name))?;
        }
    } else {
        fs.create_dir_all(dir)?;
    }
    Ok(())
}

/// What replay found.
struct Replayed {
    /// Positioned at the end of the valid log.
    writer: VlogWriter,
    /// Highest sequence number replayed (0 if none).
    max_sequence: u64,
    /// Log bytes replayed into the memtable.
    log_bytes: u64,
}

/// Replays the value log from the persisted head into `mem`, truncates a torn tail, and
/// returns a writer positioned at the end.
fn replay_value_log(
    fs: &dyn FileSystem,
    dir: &Path,
    versions: &VersionSet,
    vlog_options: &VlogOptions,
    options: &Options,
    mem: &MemTable,
) -> Result<Replayed> {
    let torn = vlog::remove_torn_last_segment(fs, dir)?;
    let segments = vlog::list_segments(fs, dir)?;
    let Some(&first) = segments.first() else {
        let first_segment = torn.unwrap_or(1).max(versions.next_vlog_segment());
        let writer = VlogWriter::create(
            Arc::clone(&options.fs),
            dir.to_path_buf(),
            first_segment,
            vlog_options.clone(),
        )?;
        return Ok(Replayed {
            writer,
            max_sequence: 0,
            log_bytes: 0,
        });
    };
    let start = versions
        .vlog_head()
        .unwrap_or_else(|| LogPosition::new(first, 0));
    let mut max_seq = 0;
    let mut log_bytes = 0u64;
    let mut encoded = Vec::new();
    let end = vlog::scan(fs, dir, start, vlog_options, &mut |batch| {
        for record in batch {
            match record.kind {
                ValueKind::Value if record.value.len() >= options.value_threshold => {
                    encoded.clear();
                    record.ptr.encode(&mut encoded);
                    mem.add(
                        record.sequence,
                        ValueKind::ValuePointer,
                        &record.key,
                        &encoded,
                    );
                }
                kind => mem.add(record.sequence, kind, &record.key, &record.value),
            }
            max_seq = max_seq.max(record.sequence);
            log_bytes += u64::from(record.ptr.len);
        }
        Ok(())
    })?;
    // Segments after the end hold nothing valid (scan proved it); drop them so the writer's
    // next segment number follows the end.
    let mut removed = false;
    for &segment in segments.iter().filter(|&&s| s > end.segment) {
        fs.remove(&vlog_file_name(dir, segment))?;
        removed = true;
    }
    if removed {
        fs.sync_dir(dir)?;
    }
    let writer = VlogWriter::open(
        Arc::clone(&options.fs),
        dir.to_path_buf(),
        end,
        vlog_options.clone(),
    )?;
    Ok(Replayed {
        writer,
        max_sequence: max_seq,
        log_bytes,
    })
}
