//! Opening a database: validation, creation, locking, manifest recovery and value-log
//! replay (there is no LSM write-ahead log: the value log from the persisted head onward
//! *is* the log, §3.4.2).
//!
//! Invariants on open:
//! - validate first, write last: the manifest is read, every segment it lists is checked,
//!   and the log is replayed into memory before anything on disk changes; an open refused
//!   by those checks changes nothing (except creating the LOCK file, which holds no data).
//!   The writes come after them: cutting a torn tail and deleting a torn newest segment
//!   (neither holds an acknowledged write) or moving one into `lost/torn-N/` (one that
//!   holds valid records, or is numbered past the log's reach), salvage's set-aside into
//!   `lost/salvage-N/`, the new manifest. An I/O error among these fails the open after some of them; a
//!   later open finds the same log, minus only what a torn tail or salvage dropped;
//! - a directory is initialised only if it holds nothing of ours, or only what an
//!   interrupted creation leaves (an empty manifest, its temp file, an empty first segment);
//!   anything else without CURRENT is refused, and nothing is deleted;
//! - replay starts at the manifest's head, re-inserts every complete batch into a fresh
//!   memtable with its original sequence numbers, and stops at the first torn or invalid
//!   record. A torn tail is cut off; damage (valid data after the bad bytes) or a log shorter
//!   than the head is refused unless the user chose `RecoveryMode::SalvagePrefix`, and then
//!   reported. The writer never appends where an old pointer could still point;
//! - new writes get sequence numbers above everything in the tables and in the log.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use super::write::WriteQueue;
use super::{make_table_cache, DbInner, State};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, vlog_file_name, FileKind, CURRENT, LOCK};
use crate::fs::{FileSystem, ReadOnlyFs};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::{Options, RecoveryMode};
use crate::position::LogPosition;
use crate::snapshot::SnapshotRegistry;
use crate::sstable::TableCache;
use crate::version::{LoadedState, TableSource, VersionSet};
use crate::vlog::{self, ValueLog, VlogOptions, VlogReader, VlogWriter, SEGMENT_HEADER_LEN};

/// What open found and, under `RecoveryMode::SalvagePrefix`, dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Log records replayed into the memtable.
    pub replayed_records: u64,
    /// Bytes of a torn tail that were cut off (writes a crash interrupted; never an
    /// acknowledged sync write), including the zeros that sync writes keep written ahead of
    /// the log's end (`Options::vlog_zero_fill_size`) and direct writes' block padding.
    pub torn_tail_bytes: u64,
    /// Damage that salvage stepped over (empty in `Strict` mode, which refuses instead).
    pub salvaged: Vec<SalvagedDamage>,
    /// Where salvage kept what it dropped, relative to the database directory
    /// (`lost/salvage-N/`): the segments after the damage, moved, and a copy of the segment
    /// cut short at it, as they were. `None` when nothing was dropped (and always in a
    /// read-only open, which changes nothing).
    pub salvage_kept_in: Option<String>,
    /// Where a torn newest segment that still held valid records (or one numbered past any
    /// the log reached: a file put into the directory, no crash's leftover) was moved, as
    /// it was, instead of being deleted (`lost/torn-N/`). A crash while the segment was being
    /// created leaves one (its records were never acknowledged), but so does damage to the
    /// header of a segment whose only sync covered its last record (acknowledged), and the
    /// open cannot tell the two apart. A torn newest segment's bytes count in
    /// `torn_tail_bytes`; one numbered out of the log's reach is no torn tail and does not.
    pub torn_kept_in: Option<String>,
}

/// One place where salvage dropped data.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvagedDamage {
    /// Where the dropped data started.
    pub at: LogPosition,
    /// What was wrong.
    pub reason: String,
    /// Bytes dropped (or missing).
    pub bytes_dropped: u64,
    /// Valid records dropped after the damage (0 where the bytes are missing altogether).
    pub records_dropped: u64,
}

/// An empty path names no directory (and would mean the working directory to some calls).
pub(crate) fn refuse_an_empty_path(dir: &Path) -> Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "the database path is empty; name a directory".into(),
        ));
    }
    Ok(())
}

pub(crate) fn open(dir: &Path, mut options: Options, read_only: bool) -> Result<Recovered> {
    options.validate()?;
    refuse_an_empty_path(dir)?;
    let copy_fs = Arc::clone(&options.fs);
    if read_only {
        // Every call through this file system that would change anything is refused, so
        // whatever path open (or a later call) takes, a read-only database writes nothing.
        options.fs = Arc::new(ReadOnlyFs::new(Arc::clone(&options.fs)));
    }
    let fs = Arc::clone(&options.fs);
    let exists = fs.exists(&dir.join(CURRENT))?;
    if exists && options.error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "database {} already exists (error_if_exists is set)",
            dir.display()
        )));
    }
    let vlog_options = options.vlog_options();
    let lock = if read_only {
        if !exists {
            // The same diagnosis as a read-write open (it reads only): database files
            // without CURRENT are damage to repair, not a missing database.
            let probe = Options {
                create_if_missing: false,
                ..options.clone()
            };
            return Err(match check_new_directory(&*fs, dir, &probe) {
                Ok(_) | Err(Error::InvalidArgument(_)) => Error::InvalidArgument(format!(
                    "database {} does not exist (a read-only open never creates one)",
                    dir.display()
                )),
                Err(e) => e,
            });
        }
        // Shared: read-only opens coexist, a writer and a reader exclude each other. A
        // directory without a LOCK file (a copy made without it) is opened unlocked:
        // creating the file would be a write.
        let lock_path = dir.join(LOCK);
        if fs.exists(&lock_path)? {
            Some(fs.lock_shared(&lock_path)?)
        } else {
            None
        }
    } else if exists {
        Some(fs.lock(&dir.join(LOCK))?)
    } else {
        let leftovers = check_new_directory(&*fs, dir, &options)?;
        crate::fs::create_dir_all_durably(&*fs, dir).map_err(|e| match &e {
            // Not there, yet its name is taken: a symbolic link to nothing (or a component
            // that is one). The OS's "File exists" alone left the caller guessing.
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
                Error::InvalidArgument(format!(
                    "database {} cannot be created: the path leads nowhere, yet its name is \
                     taken (a symbolic link whose target is missing?): {e}",
                    dir.display()
                ))
            }
            _ => e,
        })?;
        let lock = fs.lock(&dir.join(LOCK))?;
        // Another process may have created the database between the check and the lock.
        if !fs.exists(&dir.join(CURRENT))? {
            create_database(&fs, dir, &leftovers, &vlog_options)?;
        }
        Some(lock)
    };

    // Read and check everything; nothing is written until the log has been replayed.
    let mut loaded = VersionSet::load(&*fs, dir)?;
    check_tables_present(&*fs, dir, &loaded)?;
    let mut report = RecoveryReport::default();
    let plan = plan_replay(
        &*fs,
        dir,
        &loaded,
        &vlog_options,
        options.recovery_mode,
        &mut report,
    )?;
    let mem = MemTable::new();
    let replayed = replay_value_log(&*fs, dir, &plan, &vlog_options, &options, &mem, &mut report)?;

    // Writes: cut the log back to its valid end, then record the state in a new manifest.
    // A read-only open keeps the log as it is and the state in memory only.
    let (vlog_writer, segments, new_head) = if read_only {
        read_only_log(&fs, dir, &plan, &replayed, &vlog_options)?
    } else {
        finish_log(
            &fs,
            dir,
            loaded.next_vlog_segment(),
            &plan,
            &replayed,
            &vlog_options,
            &mut report,
        )?
    };
    let next_segment = segments.last().map_or(1, |s| s + 1);
    let mut metas = BTreeMap::new();
    // A segment the open just created is new whatever the manifest says of its number (a
    // listed segment salvage set aside may have had it).
    let created_segment = new_head.map(|_| vlog_writer.active_segment());
    for segment in segments {
        let mut meta = match loaded.vlog_segment_metas().get(&segment) {
            Some(meta) if created_segment != Some(segment) => meta.clone(),
            _ => Default::default(),
        };
        // The writer never appends to a segment before its own: those sizes are final.
        if segment < vlog_writer.active_segment() && meta.sealed_size.is_none() {
            meta.sealed_size = Some(fs.file_size(&vlog_file_name(dir, segment))?);
        }
        metas.insert(segment, meta);
    }
    if loaded.segments_unaccounted() && !read_only {
        log::info!(
            "wisckey: {} predates dead-byte accounting (manifest format 3); garbage written \
             before this open is not counted, so GC finds only what becomes dead from now on",
            dir.display()
        );
    }
    loaded.set_vlog_segments(metas, next_segment);
    if let Some(head) = new_head {
        loaded.set_vlog_head(head);
    }
    loaded.set_last_sequence(replayed.max_sequence);
    let versions = if read_only {
        VersionSet::open_read_only(Arc::clone(&fs), dir, loaded)?
    } else {
        match VersionSet::install(Arc::clone(&fs), dir, loaded.clone()) {
            // Opening must work on a full disk: give the manifest the reserve's space.
            Err(e) if e.is_no_space() && fs.exists(&dir.join(crate::filename::RESERVE))? => {
                fs.remove(&dir.join(crate::filename::RESERVE))?;
                log::warn!("wisckey: the disk is full; released the space reserve to open");
                let mut loaded = loaded;
                loaded.skip_numbers_of_failed_install();
                VersionSet::install(Arc::clone(&fs), dir, loaded)?
            }
            other => other?,
        }
    };
    let last_sequence = versions.last_sequence();
    for damage in &report.salvaged {
        log::warn!(
            "wisckey: salvage dropped {} bytes ({} valid records) of the value log at segment \
             {} offset {}: {}",
            damage.bytes_dropped,
            damage.records_dropped,
            damage.at.segment,
            damage.at.offset,
            damage.reason
        );
    }

    let table_cache = make_table_cache(dir, &options);
    let tables: Arc<dyn TableSource> = table_cache.clone();
    let state = State {
        mem: Arc::new(mem),
        imms: VecDeque::new(),
        imms_flushed: 0,
        versions,
        bg_error: None,
        no_space: None,
        pending_outputs: HashSet::new(),
        outputs_of_failed_installs: Vec::new(),
        gc_removed: BTreeMap::new(),
        gc_freed_bytes: 0,
        gc_unreadable: BTreeSet::new(),
        punch_supported: None,
    };
    let inner = DbInner {
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        read_sources: ArcSwap::from_pointee(super::ReadSources::of(&state)),
        state: Mutex::new(state),
        bg_cv: Condvar::new(),
        gc_cv: Condvar::new(),
        copy_fs,
        gc_lock: Mutex::new(()),
        gc_lock_wanted: AtomicUsize::new(0),
        gc_totals: Mutex::new(super::GcTotals::default()),
        scan_heat: Mutex::new(crate::gc::heat::ScanHeat::default()),
        auto_cluster_totals: Mutex::new(super::AutoClusterTotals::default()),
        gc_samples: Mutex::new(BTreeMap::new()),
        punches: Mutex::new(Default::default()),
        gc_pacer: Default::default(),
        uncounted_garbage: Default::default(),
        gc_freeing: Default::default(),
        writers: WriteQueue::default(),
        vlog: ValueLog::new(
            vlog_writer,
            VlogReader::new(Arc::clone(&fs), dir.to_path_buf(), vlog_options.clone())
                .with_value_cache(options.value_cache_size),
            vlog_options,
        ),
        table_cache,
        tables,
        snapshots: Arc::new(SnapshotRegistry::default()),
        visible_seq: AtomicU64::new(last_sequence),
        // The replayed records count towards the memtable's log budget, so repeated crashes
        // cannot make the next replay longer than `memtable_max_log_bytes`.
        log_bytes_in_mem: AtomicU64::new(replayed.log_bytes),
        shutting_down: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        compaction_lock: Mutex::new(()),
        deletion_lock: Mutex::new(()),
        manifest_lock: Mutex::new(()),
        manual_compaction: AtomicUsize::new(0),
        readers: std::sync::OnceLock::new(),
        compaction_lock_misses: AtomicU64::new(0),
        scan_batches_read_cached: AtomicU64::new(0),
        reserve_present: AtomicBool::new(false),
        reserve_spent: AtomicBool::new(false),
        reserve_held_for_background: AtomicBool::new(false),
        reserve_lock: Mutex::new(()),
        log_space_short: AtomicBool::new(false),
        recovery_report: RecoveryReport::default(),
        options,
        read_only,
        read_only_log_end: replayed.end.filter(|_| read_only),
        _lock: lock,
    };
    if !read_only {
        // The sweep first: it may free space the reserve needs. The reserve is made sure of
        // even where its file exists (`reserve_present` starts false): a crash between
        // its creation and its allocation left a file that holds no space.
        super::background::sweep_obsolete_files(&inner);
        super::space::ensure_reserve(&inner);
    }
    let flush_replayed = created_segment.is_some() && replayed.log_bytes > 0;
    Ok(Recovered {
        inner,
        report,
        flush_replayed,
        // `finish_log` links the new segment to the replayed end when it follows it.
        replayed_linked: !flush_replayed
            || (created_segment.zip(replayed.end)).is_some_and(|(new, end)| new == end.segment + 1),
    })
}

/// What [`open`] built.
pub(crate) struct Recovered {
    pub inner: DbInner,
    pub report: RecoveryReport,
    /// The open started a new segment after the replayed records (a head segment cut short,
    /// or salvage) and persisted the head before them: until they are in tables, every
    /// open replays them again and must cross into the new segment. The caller flushes them
    /// before handing the database out, so the head moves past them.
    pub flush_replayed: bool,
    /// The new segment's header links it to the replayed records' end, so replay reaches it
    /// from them even without that flush. Where it does not (its number had to skip), the
    /// open must fail if the flush does: writes into it would be lost to the next open.
    pub replayed_linked: bool,
}

/// The read-only counterpart of [`finish_log`]: changes nothing. The log's valid end is
/// where replay stopped; a torn tail, a torn newest segment and segments past the end stay
/// on disk as they are (they are outside the log, and no pointer reaches them). The
/// returned writer sits on the newest segment at its file's length, on the read-only file
/// system: it exists so the value log has one, and every write is refused before it.
fn read_only_log(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    plan: &ReplayPlan,
    replayed: &Replayed,
    vlog_options: &VlogOptions,
) -> Result<(VlogWriter, BTreeSet<u64>, Option<LogPosition>)> {
    let mut segments: BTreeSet<u64> = plan.present.iter().copied().collect();
    if let Some(end) = replayed.end {
        segments.retain(|&s| s <= end.segment);
    }
    let Some(&newest) = segments.last() else {
        return Err(Error::InvalidArgument(format!(
            "{} has no value-log segment yet; open it read-write once before opening it \
             read-only",
            dir.display()
        )));
    };
    let len = fs.file_size(&vlog_file_name(dir, newest))?;
    let writer = VlogWriter::open(
        Arc::clone(fs),
        dir.to_path_buf(),
        LogPosition::new(newest, len.max(SEGMENT_HEADER_LEN)),
        vlog_options.clone(),
    )?;
    Ok((writer, segments, None))
}

/// Refuses a manifest that lists table files the directory lacks: their keys would read
/// as missing, or their older versions as current. Reads only.
fn check_tables_present(fs: &dyn FileSystem, dir: &Path, loaded: &LoadedState) -> Result<()> {
    let present: HashSet<u64> = (fs.list(dir)?.iter())
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::Table(n)) => Some(n),
            _ => None,
        })
        .collect();
    let mut missing: Vec<u64> = (loaded.table_numbers().into_iter())
        .filter(|n| !present.contains(n))
        .collect();
    let Some(&first) = missing.first() else {
        return Ok(());
    };
    missing.sort_unstable();
    let name = crate::filename::table_file_name(dir, first);
    Err(Error::corruption(
        name.display().to_string(),
        0,
        format!(
            "table file is missing ({} of the {} tables MANIFEST-{:06} lists are missing: \
             {:?}). Nothing was changed: restore the files, or repair the database (its value \
             log holds the data)",
            missing.len(),
            loaded.num_tables(),
            loaded.manifest_number(),
            missing.iter().take(16).collect::<Vec<_>>()
        ),
    ))
}

/// Checks that `dir` (which has no CURRENT) may become a new database. Returns the files an
/// interrupted creation left behind, which creation replaces. A directory holding files
/// wisckey never writes is `NotADatabase`; one holding data of ours is `Corruption` naming
/// what was found. Writes nothing.
fn check_new_directory(fs: &dyn FileSystem, dir: &Path, options: &Options) -> Result<Vec<String>> {
    let does_not_exist = || {
        Err(Error::InvalidArgument(format!(
            "database {} does not exist (create_if_missing is false)",
            dir.display()
        )))
    };
    if !fs.exists(dir)? {
        return if options.create_if_missing {
            Ok(Vec::new())
        } else {
            does_not_exist()
        };
    }
    let names = fs.list(dir)?;
    if names.iter().any(|n| n == crate::filename::CHECKPOINT_INCOMPLETE) {
        return Err(Error::NotADatabase(format!(
            "{} is a checkpoint that stopped before it was complete ({} marks it): it is \
             not a database. Delete it and run the checkpoint again",
            dir.display(),
            crate::filename::CHECKPOINT_INCOMPLETE
        )));
    }
    if let Some(foreign) = super::first_foreign_name(&names, false) {
        return Err(Error::NotADatabase(format!(
            "{} has no CURRENT file and holds '{foreign}', which wisckey did not write",
            dir.display()
        )));
    }
    let mut leftovers = Vec::new();
    let mut data = Vec::new();
    for name in &names {
        let Some(kind) = parse_file_name(name) else {
            continue;
        };
        let path = dir.join(name);
        let from_creation = match kind {
            FileKind::Lock | FileKind::Reserve => true,
            // The temp file creation writes CURRENT through.
            FileKind::Temp(2) => true,
            FileKind::ValueLog(1) => fs.file_size(&path)? <= SEGMENT_HEADER_LEN,
            FileKind::Manifest(1) => crate::version::is_empty_new_manifest(fs, dir, 1),
            _ => false,
        };
        if from_creation {
            if !matches!(kind, FileKind::Lock) {
                leftovers.push(name.clone());
            }
        } else {
            data.push(name.clone());
        }
    }
    if data.is_empty() {
        return if options.create_if_missing {
            Ok(leftovers)
        } else {
            does_not_exist()
        };
    }
    data.sort();
    let newest_manifest = names
        .iter()
        .filter_map(|n| match parse_file_name(n) {
            Some(FileKind::Manifest(m)) => Some(m),
            _ => None,
        })
        .max();
    let hint = match newest_manifest {
        Some(m) => format!(
            "If only CURRENT was lost, write \"MANIFEST-{m:06}\\n\" (the newest manifest) into \
             {CURRENT}; otherwise repair the database (`wisckey repair`, `Db::repair`)"
        ),
        None => "The manifest is gone too: repair the database (`wisckey repair`, `Db::repair`)"
            .to_string(),
    };
    let shown: Vec<&str> = data.iter().take(8).map(String::as_str).collect();
    let more = data.len().saturating_sub(shown.len());
    Err(Error::corruption(
        CURRENT,
        0,
        format!(
            "missing, but {} holds database files ({}{}). Refusing to create a new database \
             over them; nothing was changed. {hint}",
            dir.display(),
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
    ))
}

/// Initialises a new database: the first value-log segment (header synced), then the
/// manifest that lists it, then CURRENT. Until CURRENT exists, what is on disk counts as an
/// interrupted creation and is replaced by the next open.
fn create_database(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    leftovers: &[String],
    vlog_options: &VlogOptions,
) -> Result<()> {
    for name in leftovers {
        fs.remove(&dir.join(name))?;
    }
    let mut writer =
        VlogWriter::create(Arc::clone(fs), dir.to_path_buf(), 1, vlog_options.clone())?;
    // Finished, not just synced: a direct write pads the header to a whole block, and the
    // file must end at its header (synced) for an interrupted creation to be recognised as
    // one (`check_new_directory`) and for the first open to find no torn tail.
    writer.finish()?;
    drop(writer);
    VersionSet::create(
        Arc::clone(fs),
        dir,
        Some(LogPosition::new(1, SEGMENT_HEADER_LEN)),
    )?;
    Ok(())
}

/// Where replay starts, decided from the manifest and the segments present.
#[derive(Debug)]
struct ReplayPlan {
    /// Segments present at open, ascending.
    present: Vec<u64>,
    /// Replay from here; `None`: nothing to replay.
    start: Option<LogPosition>,
    /// The newest segment's header never became durable: it holds nothing acknowledged.
    torn_last_segment: Option<u64>,
    /// That segment is set aside, not deleted (see `RecoveryReport::torn_kept_in`): it
    /// still holds valid records after its header, or its number lies past any the writer
    /// could have reached (no crash's leftover: a file put into the directory).
    keep_torn_segment: bool,
    /// Its number lies past any the writer could have reached: it proves nothing about the
    /// segments before it (that they were synced whole before it was created).
    torn_segment_out_of_reach: bool,
    /// The writer must start a new segment (the log's end lies where old pointers point).
    force_new_segment: bool,
    /// Salvage replays nothing past a gap after this segment: the present segments above it
    /// leave the log (set aside in `lost/`, as every segment salvage drops).
    dropped_after: Option<u64>,
}

/// Checks the segments against the manifest and decides where replay starts. Reads only.
fn plan_replay(
    fs: &dyn FileSystem,
    dir: &Path,
    loaded: &LoadedState,
    vlog_options: &VlogOptions,
    mode: RecoveryMode,
    report: &mut RecoveryReport,
) -> Result<ReplayPlan> {
    let mut present = vlog::list_segments(fs, dir)?;
    let torn_segment = vlog::torn_last_segment(fs, dir, vlog_options)?;
    let torn_last_segment = torn_segment.as_ref().map(|t| t.segment);
    // The writer creates segment n + 1 only after n; an open after a torn segment may skip
    // its number (and crash in turn), never by more than the segments it removed.
    let newest_intact = (present.iter().copied())
        .filter(|&s| Some(s) != torn_last_segment)
        .max();
    let reachable = (newest_intact.map_or(1, |s| s + 2)).max(loaded.next_vlog_segment() + 1);
    let torn_segment_out_of_reach = torn_last_segment.is_some_and(|t| t > reachable);
    let keep_torn_segment =
        torn_segment_out_of_reach || torn_segment.as_ref().is_some_and(|t| t.records > 0);
    if let Some(torn) = &torn_segment {
        if loaded
            .vlog_segments()
            .is_some_and(|s| s.contains(&torn.segment))
        {
            // Listed segments were synced before the head passed into them.
            let name = vlog_file_name(dir, torn.segment).display().to_string();
            return Err(Error::corruption(
                name,
                0,
                "segment header is damaged, but the manifest lists the segment",
            ));
        }
        if let Some(offset) = torn.synced_record_at {
            let name = vlog_file_name(dir, torn.segment).display().to_string();
            let reason = format!(
                "the segment's header is damaged, but a record at offset {offset} says the \
                 segment was synced before it ({} valid records follow the header)",
                torn.records
            );
            if mode == RecoveryMode::Strict {
                return Err(Error::corruption(
                    name,
                    0,
                    format!(
                        "{reason}. Nothing was changed. Open with \
                         RecoveryMode::SalvagePrefix to drop the segment"
                    ),
                ));
            }
            report.salvaged.push(SalvagedDamage {
                at: LogPosition::new(torn.segment, 0),
                reason,
                bytes_dropped: torn.len,
                records_dropped: torn.records,
            });
        } else if !torn_segment_out_of_reach {
            report.torn_tail_bytes += torn.len;
        }
        present.retain(|&s| s != torn.segment);
    }
    if let Some(listed) = loaded.vlog_segments() {
        // A segment below the newest listed one that the manifest does not list was removed
        // by GC (numbers are never reused) and its deletion did not happen before a crash:
        // it is not part of the log. The obsolete-file sweep deletes it after open.
        if let Some(&newest) = listed.last() {
            present.retain(|s| listed.contains(s) || *s > newest);
        }
    }
    let present_set: BTreeSet<u64> = present.iter().copied().collect();
    let manifest_name = format!("MANIFEST-{:06}", loaded.manifest_number());

    if let Some(listed) = loaded.vlog_segments() {
        let missing: Vec<u64> = listed.difference(&present_set).copied().collect();
        // Tables point only below the head, so segments missing after it hold nothing but
        // records that were never flushed: the suffix salvage gives up anyway (an earlier
        // salvage open, cut short before its manifest, set them aside in `lost/`).
        let only_after_head =
            (loaded.vlog_head()).is_some_and(|head| missing.iter().all(|&s| s > head.segment));
        if let Some(&first) = missing.first() {
            if only_after_head && mode == RecoveryMode::SalvagePrefix {
                report.salvaged.push(SalvagedDamage {
                    at: LogPosition::new(first, 0),
                    reason: format!(
                        "{} of the segments {manifest_name} lists after the replay head are \
                         missing: {:?} (how many records they held is not known)",
                        missing.len(),
                        missing.iter().take(16).collect::<Vec<_>>()
                    ),
                    bytes_dropped: 0,
                    records_dropped: 0,
                });
            } else {
                let name = vlog_file_name(dir, first).display().to_string();
                let salvage_hint = if only_after_head {
                    " (they all lie after the replay head: if an open with \
                 RecoveryMode::SalvagePrefix was interrupted, it set them aside in lost/; open \
                 with SalvagePrefix again to keep the log up to them)"
                } else {
                    ""
                };
                return Err(Error::corruption(
                    name,
                    0,
                    format!(
                    "value-log segment is missing ({} of the {} segments {manifest_name} lists \
                     are missing: {:?}){salvage_hint}. Their values cannot be read. Nothing was \
                     changed: restore the files, or repair the database \
                     (`wisckey repair`, `Db::repair`)",
                    missing.len(),
                    listed.len(),
                    missing.iter().take(16).collect::<Vec<_>>()
                ),
                ));
            }
        }
    }

    let Some(head) = loaded.vlog_head() else {
        // A format-1 database that never flushed: replay from its first segment, which must
        // be segment 1 (it is where a new database's log starts).
        return match present.first() {
            Some(&1) => Ok(ReplayPlan {
                present,
                start: Some(LogPosition::new(1, 0)),
                torn_last_segment,
                keep_torn_segment,
                torn_segment_out_of_reach,
                force_new_segment: false,
                dropped_after: None,
            }),
            Some(&first) => Err(Error::corruption(
                vlog_file_name(dir, 1).display().to_string(),
                0,
                format!(
                    "value-log segments 1..{first} are missing (no replay head is recorded, so \
                     replay must start at segment 1). Nothing was changed"
                ),
            )),
            None if loaded.num_tables() == 0 && loaded.last_sequence() == 0 => Ok(ReplayPlan {
                present,
                start: None,
                torn_last_segment,
                keep_torn_segment,
                torn_segment_out_of_reach,
                force_new_segment: true,
                dropped_after: None,
            }),
            None => Err(Error::corruption(
                dir.display().to_string(),
                0,
                "every value-log segment is missing, but the database holds tables. Nothing \
                 was changed",
            )),
        };
    };

    let head_name = vlog_file_name(dir, head.segment).display().to_string();
    if !present_set.contains(&head.segment) {
        return Err(Error::corruption(
            head_name,
            0,
            format!("the segment the replay head points into is missing ({manifest_name}). Nothing was changed"),
        ));
    }
    let head_len = fs.file_size(&vlog_file_name(dir, head.segment))?;
    if head.offset <= head_len {
        return Ok(ReplayPlan {
            present,
            start: Some(head),
            torn_last_segment,
            keep_torn_segment,
            torn_segment_out_of_reach,
            force_new_segment: false,
            dropped_after: None,
        });
    }
    let missing = head.offset - head_len;
    let reason = format!(
        "segment is {head_len} bytes, but {manifest_name} records the replay head at offset \
         {}: {missing} bytes of values already in tables are missing (the file was truncated)",
        head.offset
    );
    if mode == RecoveryMode::Strict {
        return Err(Error::corruption(
            head_name,
            head_len,
            format!(
                "{reason}. Nothing was changed. Open with RecoveryMode::SalvagePrefix to keep \
                 the surviving prefix (reads of the lost values then report corruption)"
            ),
        ));
    }
    // Records the segment held after the head were not in tables yet: they are lost too.
    // How far it was written, the next segment's header says (the writer records it when
    // the log rolls). The segments after it are replayed all the same, so the result is
    // not a prefix of the writes; the report says so rather than pass it off as one.
    let next = head.segment + 1;
    let first_later = present.iter().copied().find(|&s| s > head.segment);
    let written_to = match first_later {
        Some(first) if first == next => vlog::declared_end_of_previous(fs, dir, next)?,
        _ => None,
    };
    let lost_after_head = written_to.map_or(0, |end| end.saturating_sub(head.offset));
    // With the next segment missing nothing after the head is replayed: the later segments
    // are dropped too, and counted.
    let replay_next = present_set.contains(&next);
    let mut dropped_later = 0;
    if !replay_next {
        for &later in present.iter().filter(|&&s| s > head.segment) {
            dropped_later += fs.file_size(&vlog_file_name(dir, later))?;
        }
    }
    let reason = match (first_later, written_to) {
        (None, _) => reason,
        (Some(first), _) if first != next => format!(
            "{reason}; segment {next} is missing, so the segments after it ({first}..) are not \
             replayed: what they hold is lost"
        ),
        (_, Some(_)) if lost_after_head == 0 => reason,
        (_, Some(_)) => format!(
            "{reason}; {lost_after_head} bytes of log records after the replay head (writes \
             not yet in tables) were lost with it, while the segments after it are replayed: \
             the database keeps later writes without those (not a prefix of the writes: a \
             lost delete or overwrite reads as the older value again)"
        ),
        (_, None) => format!(
            "{reason}; segment {next}'s header does not say how far this segment was written, \
             so writes after the replay head in it may be lost, while the segments after it are \
             replayed"
        ),
    };
    report.salvaged.push(SalvagedDamage {
        at: LogPosition::new(head.segment, head_len),
        reason,
        bytes_dropped: missing + lost_after_head + dropped_later,
        records_dropped: 0,
    });
    // Old pointers reach up to the head: never append into this segment again.
    Ok(ReplayPlan {
        start: replay_next.then_some(LogPosition::new(next, 0)),
        present,
        torn_last_segment,
        keep_torn_segment,
        torn_segment_out_of_reach,
        force_new_segment: true,
        dropped_after: (!replay_next).then_some(head.segment),
    })
}

/// What replay found.
struct Replayed {
    /// End of the valid log (`None`: nothing was replayed).
    end: Option<LogPosition>,
    /// Highest sequence number replayed (0 if none).
    max_sequence: u64,
    /// Log bytes replayed into the memtable.
    log_bytes: u64,
    /// The writer must start a new segment.
    force_new_segment: bool,
}

/// Replays the value log from the plan's start into `mem`. Reads only. Damage is an error
/// in `Strict` mode and a report entry under salvage.
fn replay_value_log(
    fs: &dyn FileSystem,
    dir: &Path,
    plan: &ReplayPlan,
    vlog_options: &VlogOptions,
    options: &Options,
    mem: &MemTable,
    report: &mut RecoveryReport,
) -> Result<Replayed> {
    let Some(start) = plan.start else {
        return Ok(Replayed {
            end: None,
            max_sequence: 0,
            log_bytes: 0,
            force_new_segment: plan.force_new_segment,
        });
    };
    let mut max_seq = 0;
    let mut log_bytes = 0u64;
    let mut records = 0u64;
    let mut encoded = Vec::new();
    let present_from_start: Vec<u64> = plan
        .present
        .iter()
        .copied()
        .filter(|&s| s >= start.segment)
        .collect();
    let outcome = vlog::scan_segments(
        fs,
        dir,
        &present_from_start,
        plan.torn_last_segment.is_some() && !plan.torn_segment_out_of_reach,
        start,
        vlog_options,
        options.value_threshold,
        &mut |batch| {
            for record in batch {
                match record.kind {
                    ValueKind::Value if record.value_len >= options.value_threshold => {
                        encoded.clear();
                        record.ptr.encode(&mut encoded);
                        mem.add(
                            record.sequence,
                            ValueKind::ValuePointer,
                            &record.key,
                            &encoded,
                        );
                    }
                    kind => {
                        mem.add(record.sequence, kind, &record.key, &record.value);
                        mem.add_unreferenced_log_bytes(record.ptr.segment, record.ptr.len.into());
                    }
                }
                max_seq = max_seq.max(record.sequence);
                log_bytes += u64::from(record.ptr.len);
                records += 1;
            }
            Ok(())
        },
    )?;
    report.replayed_records = records;
    let end = outcome.end;
    let tail_bytes: u64 = {
        let mut bytes = fs
            .file_size(&vlog_file_name(dir, end.segment))?
            .saturating_sub(end.offset);
        for &later in plan.present.iter().filter(|&&s| s > end.segment) {
            bytes += fs.file_size(&vlog_file_name(dir, later))?;
        }
        bytes
    };
    match outcome.damage {
        Some(damage) if options.recovery_mode == RecoveryMode::Strict => {
            return Err(damage.to_error(dir));
        }
        Some(damage) => report.salvaged.push(SalvagedDamage {
            at: damage.at,
            reason: damage.reason,
            bytes_dropped: tail_bytes,
            records_dropped: damage.records_after,
        }),
        None => report.torn_tail_bytes += tail_bytes,
    }
    Ok(Replayed {
        end: Some(end),
        max_sequence: max_seq,
        log_bytes,
        force_new_segment: plan.force_new_segment,
    })
}

/// Cuts the log back to its valid end (removing a torn newest segment and segments past the
/// end) and returns the writer, the segments that make up the log, and a replay head to
/// persist when the writer had to start a new segment. The first writes of this open.
fn finish_log(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    next_listed_segment: u64,
    plan: &ReplayPlan,
    replayed: &Replayed,
    vlog_options: &VlogOptions,
    report: &mut RecoveryReport,
) -> Result<(VlogWriter, BTreeSet<u64>, Option<LogPosition>)> {
    let mut segments: BTreeSet<u64> = plan.present.iter().copied().collect();
    let mut dropped: Vec<u64> = plan.torn_last_segment.into_iter().collect();
    // Segments after the end hold nothing valid (or salvage chose to drop them).
    let dropped_after = replayed.end.map(|end| end.segment).or(plan.dropped_after);
    if let Some(after) = dropped_after {
        for &segment in plan.present.iter().filter(|&&s| s > after) {
            segments.remove(&segment);
            dropped.push(segment);
        }
    }
    if !report.salvaged.is_empty() {
        // Salvage drops valid records on request: keep them aside, as they are, before the
        // log is cut (the segment cut short is copied, the later ones moved).
        let moves: Vec<_> = dropped.iter().map(|&s| vlog_file_name(dir, s)).collect();
        let mut copies = Vec::new();
        if let Some(end) = replayed.end {
            let cut_short = vlog_file_name(dir, end.segment);
            if fs.file_size(&cut_short)? > end.offset {
                copies.push(cut_short);
            }
        }
        if !moves.is_empty() || !copies.is_empty() {
            report.salvage_kept_in = Some(super::repair::set_aside(
                &**fs, dir, "salvage", &moves, &copies,
            )?);
        }
    } else if !dropped.is_empty() {
        // A torn newest segment and segments after a torn tail hold nothing acknowledged,
        // unless damage (not a crash) tore a synced header: one with records is kept aside.
        let keep = plan.torn_last_segment.filter(|_| plan.keep_torn_segment);
        for &segment in dropped.iter().filter(|&&s| Some(s) != keep) {
            fs.remove(&vlog_file_name(dir, segment))?;
        }
        fs.sync_dir(dir)?;
        if let Some(segment) = keep {
            let moved = [vlog_file_name(dir, segment)];
            let set_aside = || super::repair::set_aside(&**fs, dir, "torn", &moved, &[]);
            // The open must work on a full disk, and the folder takes a block: the reserve
            // gives it one; failing that, the segment goes as a crash's leftover always did.
            let reserve = dir.join(crate::filename::RESERVE);
            let kept = match set_aside() {
                Err(e) if e.is_no_space() && fs.exists(&reserve)? => {
                    fs.remove(&reserve)?;
                    set_aside()
                }
                other => other,
            };
            match kept {
                Ok(kept_in) if plan.torn_segment_out_of_reach => {
                    log::warn!(
                        "wisckey: value-log segment {segment} (the newest) has no valid header \
                         and a number the log never reached: not part of the log (a file put \
                         into the directory?); kept, as it was, in {kept_in}"
                    );
                    report.torn_kept_in = Some(kept_in);
                }
                Ok(kept_in) => {
                    log::warn!(
                        "wisckey: the header of value-log segment {segment} (the newest) does \
                         not verify, but valid records follow it: taken for a crash while it \
                         was created, the segment is not part of the log; kept, as it was, in \
                         {kept_in}"
                    );
                    report.torn_kept_in = Some(kept_in);
                }
                Err(e) if e.is_no_space() && !plan.torn_segment_out_of_reach => {
                    log::warn!(
                        "wisckey: the header of value-log segment {segment} (the newest) does \
                         not verify, but valid records follow it; the disk is too full to keep \
                         it aside ({e}): removed, as a crash's leftover"
                    );
                    fs.remove(&moved[0])?;
                    fs.sync_dir(dir)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    let mut new_head = None;
    let writer = match replayed.end {
        Some(end) if !replayed.force_new_segment => {
            VlogWriter::open(Arc::clone(fs), dir.to_path_buf(), end, vlog_options.clone())?
        }
        _ => {
            if let Some(end) = replayed.end {
                // Cut the segment back to its valid end, but never append to it again.
                let mut file = fs.open_append(&vlog_file_name(dir, end.segment))?;
                if file.len() > end.offset {
                    file.set_len(end.offset)?;
                }
                file.sync_data()?;
            }
            // Above every number the manifest ever gave out: a listed segment that salvage
            // set aside must not lend its number (and its accounting) to a new one.
            let number = segments
                .last()
                .map_or(1, |s| s + 1)
                .max(plan.torn_last_segment.map_or(0, |t| t + 1))
                .max(next_listed_segment);
            // Where the log goes on from the segment just cut, the new header says where
            // that one ends, so a replay that starts before it (the head persisted below)
            // continues into this one.
            let prev_segment_end = match replayed.end {
                Some(end) if number == end.segment + 1 => end.offset,
                _ => 0,
            };
            let mut writer = VlogWriter::create_following(
                Arc::clone(fs),
                dir.to_path_buf(),
                number,
                prev_segment_end,
                vlog_options.clone(),
            )?;
            // The manifest will list it: its header must be durable first.
            writer.sync()?;
            segments.insert(number);
            // Replay must not start in a segment shorter than the head recorded for it. With
            // nothing replayed, it starts in the new segment.
            new_head = Some(match plan.start {
                Some(start) if replayed.log_bytes > 0 => {
                    LogPosition::new(start.segment, start.offset.max(SEGMENT_HEADER_LEN))
                }
                _ => LogPosition::new(number, SEGMENT_HEADER_LEN),
            });
            writer
        }
    };
    Ok((writer, segments, new_head))
}

/// Starts the read-ahead of the tables (`Options::table_preload_size`) on a thread of its
/// own, once the open has done its own reads and writes (so neither queues behind it): level
/// 0 newest first, then each deeper level in key order, up to the first table that would
/// pass the budget. The thread opens those tables (index and filter reads), then asks the
/// OS to read each file ahead, and ends; it stops early once the database is closing.
/// `None` when there is nothing to preload or no thread (logged: the preload only saves
/// reads).
pub(crate) fn spawn_table_preload(inner: &Arc<DbInner>) -> Option<JoinHandle<()>> {
    let version = inner.state.lock().versions.current();
    let mut bytes = 0u64;
    let tables: Vec<(u64, u64)> = (version.all_files())
        .map_while(|(_, file)| {
            bytes = (bytes.checked_add(file.file_size))
                .filter(|&total| total <= inner.options.table_preload_size)?;
            Some((file.number, file.file_size))
        })
        .collect();
    if tables.is_empty() {
        return None;
    }
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name("wisckey-preload".into())
        .spawn(move || {
            // Held until the end: the obsolete-file sweep keeps a live version's tables, so
            // a compaction cannot delete one between its open here and its cache entry.
            let _version = version;
            preload_tables(&inner.table_cache, &tables, || {
                inner.shutting_down.load(Ordering::Acquire)
            });
        })
        .inspect_err(|e| log::warn!("wisckey: no thread to preload tables: {e}"))
        .ok()
}

/// Opens the `tables` (number, size), all first so that their index and filter reads do
/// not queue behind the read-ahead, then asks the OS to read each file ahead; stops at the
/// next table once `closing` says the database is closing. A table that fails here is logged
/// and left to the read that needs it, which meets the same error.
pub(super) fn preload_tables(
    cache: &TableCache,
    tables: &[(u64, u64)],
    closing: impl Fn() -> bool,
) {
    let mut opened = Vec::with_capacity(tables.len());
    for &(number, size) in tables {
        if closing() {
            return;
        }
        match cache.get(number, size) {
            Ok(table) => opened.push(table),
            Err(e) => log::warn!("wisckey: could not preload table {number}: {e}"),
        }
    }
    for table in opened {
        if closing() {
            return;
        }
        if let Err(e) = table.prefetch() {
            log::warn!("wisckey: could not preload a table: {e}");
        }
    }
}
