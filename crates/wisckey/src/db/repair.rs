//! `Db::repair`: rebuilds the key index — tables, manifest, CURRENT — from what survives in
//! a database directory when they are damaged or lost. The value log is self-describing
//! (every record carries its key, sequence number and kind), so it is the ground truth;
//! table entries that still read add what the log no longer holds (GC drops the records of
//! inline values and tombstones once their memtable is flushed).
//!
//! Invariants:
//! - nothing is deleted and no segment byte changes: every file the rebuilt index replaces
//!   (tables, manifests, CURRENT, temp files, a segment whose header does not verify) is
//!   moved into `lost/repair-N/`; pointers into the log stay valid;
//! - newest wins by sequence number: every write, GC's relocations included, took its number
//!   from one counter, so for each key the entry with the largest number, found in a table
//!   or in the log, is its newest; a table's pointer wins only if the log holds its record
//!   (else the key is reported lost, and reads of it report `Corruption`);
//! - a log record the sound tables already cover never wins: the tables hold every flushed
//!   write except what compaction dropped on purpose (shadowed versions, tombstones with
//!   nothing below them), and the log still holds such dropped writes until GC collects
//!   them, so letting them win would resurrect deleted keys. Covered means: before the old
//!   manifest's replay head (when a manifest still loads), else a sequence number no larger
//!   than the largest in any table; and outside the key ranges of damaged blocks and of
//!   listed tables that are missing or unreadable (there, the log is all there is);
//! - a table the loadable manifest does not list (an obsolete leftover) is not read: its
//!   entries are what compaction dropped; it is set aside with the rest. A stale manifest
//!   is not trusted for this, nor for its head: one that lists a missing table (its last
//!   edit torn off), or one older than a finished table present (numbered at or past the
//!   next file number its edits record). A missing table is a gap only where no finished
//!   table written after it goes unlisted (those are the lost edit's outputs);
//!   Even then, a table it does not list numbered below that next file number is a
//!   leftover of one of its own edits (or an output never installed) and is not read;
//! - a table never finished (no footer ending in the magic) and listed by no manifest was
//!   never installed: no source, no gap. A damaged filter loses no entry: the table is
//!   read without it;
//! - the log is read as open and GC read it: the ranges a loadable manifest records as
//!   punched are stepped over unread (their blocks may be gone; a record there was dead),
//!   and stay recorded;
//! - a batch is taken from the log when its last record is read, when a recorded punched
//!   range cuts it (GC punches only sealed segments, whose batches were all acknowledged),
//!   or when a gap or the segment's end cuts it and it starts in bytes known to have been
//!   synced: the whole segment when the old manifest lists it as sealed, when the next
//!   segment's header says how far it was synced (`prev_segment_end`: the writer synced it
//!   before it started the next), or when the old manifest's replay head lies past it;
//!   else up to a record carrying `FLAG_SYNCED_BEFORE`, up to the replay head, and up to
//!   the end of a record a table entry points at (a flush syncs the log first). A gap in
//!   synced bytes is damage (reported); the batch it cut was acknowledged whole;
//! - elsewhere — the newest segment's unsynced end — the log ends, as open ends it, at the
//!   first gap (a torn tail: nothing later says those bytes were synced) or at a batch
//!   without its last record: that batch and everything after it in the segment are left
//!   out, so a batch is all-or-nothing and the log a prefix. A later segment whose header
//!   does not say where this one ended (repair's own fresh segment, left by a repair cut
//!   short) proves nothing;
//! - every byte of an old segment that is not a record taken (recorded punched ranges,
//!   gaps, a torn tail, leftovers past the length the next segment's header names) is
//!   recorded as a punched range, so readers, GC and `check` step over it; the bytes
//!   themselves stay; no record taken lies in one (GC relocates every record taken that
//!   the index points at before it collects the segment);
//! - crash-safe at every step: the new tables and a fresh segment for new writes are
//!   written and synced first, the replaced files moved aside next, CURRENT written last. A
//!   crash before that leaves a directory that open refuses and repair redoes: the new
//!   tables (tombstones included) are sources like any other;
//! - holds the LOCK throughout, so it never runs beside an open database;
//! - a manifest, table or segment of a newer format (`UnsupportedVersion`), or a failing
//!   device, stops it before it writes anything: only damage (`Corruption`, a missing
//!   CURRENT) is rebuilt around.
//!
//! Memory: the newest entry of every key (key, sequence, pointer or inline value) and one
//! segment's bytes at a time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::CheckProblem;
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, vlog_file_name, FileKind, CURRENT, LOCK};
use crate::fs::FileSystem;
use crate::key::{make_internal_key, parse_internal_key, ValueKind};
use crate::options::Options;
use crate::position::LogPosition;
use crate::sstable::{Table, TableBuilder, TableOptions};
use crate::version::{
    add_range, FileMeta, LoadedState, RebuiltCounters, SegmentMeta, VersionSet, NUM_LEVELS,
};
use crate::vlog::format::{
    decode_record, record_len_from_header, SegmentHeader, FLAG_LAST_IN_BATCH, FLAG_SYNCED_BEFORE,
};
use crate::vlog::{ValuePointer, VlogOptions, VlogWriter, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

/// Where the files a repair replaces go, under the database directory.
pub const LOST_DIR: &str = "lost";
/// At most this many problems are listed one by one; the rest are only counted.
const MAX_LISTED_PROBLEMS: usize = 1000;
/// The rebuilt tables go to the last level: they are sorted and disjoint, and nothing is
/// older than them.
const OUTPUT_LEVEL: usize = NUM_LEVELS - 1;

/// What [`crate::Db::repair`] read, rebuilt and set aside.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RepairReport {
    /// Table files found, and the entries read from their blocks that verify.
    pub tables_read: u64,
    /// Entries read from the tables.
    pub table_entries: u64,
    /// Value-log segments scanned, and the records taken from them.
    pub segments_scanned: u64,
    /// Records taken from the log.
    pub log_records: u64,
    /// Bytes of synced log ranges stepped over that hold no record that verifies but only
    /// zeros (holes punched where no loadable manifest records them, say).
    pub zeroed_log_bytes: u64,
    /// Bytes of synced log ranges stepped over that hold no record that verifies and not
    /// only zeros: damage (listed in `problems`).
    pub damaged_log_bytes: u64,
    /// Bytes of the ranges the old manifest records as punched, stepped over unread (as
    /// every reader of a segment does).
    pub punched_log_bytes: u64,
    /// Bytes left out at the end of the log that were never known to be synced: from a
    /// batch without its last record, or from a hole that no later synced record vouches
    /// for, to the segment's end (a torn tail, which open would cut off too).
    pub torn_log_bytes: u64,
    /// Records in those bytes (never acknowledged as far as the log can tell), left out.
    pub incomplete_batch_records: u64,
    /// Keys in the rebuilt index with a value, and keys whose newest entry is a delete.
    pub keys: u64,
    /// Keys whose newest entry is a delete (kept as deletes).
    pub deleted_keys: u64,
    /// Keys whose newest entry (from a table) points at a log record that is gone or does
    /// not verify: reads of them report `Corruption`, as before the repair.
    pub lost_values: u64,
    /// Keys whose newest write found (in a whole batch) lies in a segment set aside because
    /// its header does not verify or names another segment (its records, which would need
    /// its file in place, are read only to count these): they read as the older entry the
    /// rebuilt index holds, or as missing. Each such segment is listed in `problems` with
    /// its count. Keys already in `lost_values` are not counted again.
    pub keys_reverted: u64,
    /// Tables written for the rebuilt index.
    pub tables_written: u64,
    /// The largest sequence number found; new writes continue above it.
    pub last_sequence: u64,
    /// The segment new writes go to.
    pub new_segment: u64,
    /// Where the replaced files were moved (relative to the database directory), and
    /// their names. Empty when nothing was replaced.
    pub moved_to: String,
    /// The moved files' names.
    pub moved: Vec<String>,
    /// Damage found, by file and offset (the first 1,000; `problems_total` counts all).
    pub problems: Vec<CheckProblem>,
    /// Every problem found, listed or not.
    pub problems_total: u64,
}

impl RepairReport {
    fn problem(&mut self, file: &str, offset: Option<u64>, what: String) {
        self.problems_total += 1;
        if self.problems.len() < MAX_LISTED_PROBLEMS {
            self.problems.push(CheckProblem {
                file: file.to_string(),
                offset,
                what,
            });
        }
    }

    fn error(&mut self, fallback_file: &str, error: Error) {
        match error {
            Error::Corruption {
                file,
                offset,
                reason,
            } => self.problem(&file, Some(offset), reason),
            other => self.problem(fallback_file, None, other.to_string()),
        }
    }
}

/// The newest entry of one key seen so far.
#[derive(Debug)]
struct Newest {
    sequence: u64,
    kind: ValueKind,
    /// The inline value, the encoded pointer, or empty for a delete.
    value: Vec<u8>,
    /// For a pointer: the log record it names was read and verified.
    record_verified: bool,
}

/// Newest entry per user key, from tables and log records offered in any order.
#[derive(Debug, Default)]
struct KeyIndex {
    newest: HashMap<Vec<u8>, Newest>,
    last_sequence: u64,
    /// The largest sequence number in any table entry.
    last_table_sequence: u64,
}

impl KeyIndex {
    fn offer_table_entry(&mut self, user_key: &[u8], sequence: u64, kind: ValueKind, value: &[u8]) {
        self.last_sequence = self.last_sequence.max(sequence);
        self.last_table_sequence = self.last_table_sequence.max(sequence);
        if let Some(current) = self.newest.get(user_key) {
            if current.sequence >= sequence {
                return;
            }
        }
        let entry = Newest {
            sequence,
            kind,
            value: value.to_vec(),
            record_verified: false,
        };
        self.newest.insert(user_key.to_vec(), entry);
    }

    /// A verified log record; `inline` says whether its value goes into the index itself.
    /// A record the tables cover (`may_win` false) only confirms a table's pointer to it.
    #[allow(clippy::too_many_arguments)]
    fn offer_record(
        &mut self,
        user_key: &[u8],
        sequence: u64,
        kind: ValueKind,
        value: &[u8],
        ptr: ValuePointer,
        inline: bool,
        may_win: bool,
    ) {
        self.last_sequence = self.last_sequence.max(sequence);
        let mut encoded_ptr = Vec::new();
        ptr.encode(&mut encoded_ptr);
        if let Some(current) = self.newest.get_mut(user_key) {
            if current.sequence > sequence {
                return;
            }
            if current.sequence == sequence {
                // The same write, seen through a table: keep its form (inline or pointer),
                // but a pointer is good only if it names this very record.
                match current.kind {
                    ValueKind::ValuePointer if current.value == encoded_ptr => {
                        current.record_verified = true;
                        return;
                    }
                    ValueKind::ValuePointer => {}
                    _ => return,
                }
            }
        }
        if !may_win {
            return;
        }
        let (kind, value) = match kind {
            ValueKind::Value if !inline => (ValueKind::ValuePointer, encoded_ptr),
            other => (other, value.to_vec()),
        };
        let entry = Newest {
            sequence,
            kind,
            value,
            record_verified: true,
        };
        self.newest.insert(user_key.to_vec(), entry);
    }
}

/// An inclusive range of user keys; `None` is unbounded on that side.
type KeyRange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Which log records the sound tables already hold (see the module docs).
#[derive(Debug, Default)]
struct Coverage {
    /// The old manifest's replay head: records before it were flushed.
    head: Option<LogPosition>,
    /// Without a head: records up to this sequence number were flushed.
    last_table_sequence: u64,
    /// Inclusive user-key ranges (`None`: unbounded) whose table entries are lost.
    gaps: Vec<KeyRange>,
}

impl Coverage {
    fn covers(&self, user_key: &[u8], sequence: u64, at: LogPosition) -> bool {
        if crate::safety::skipped(crate::safety::SafetyStep::RepairCoverage) {
            return false;
        }
        let flushed = match self.head {
            Some(head) => at < head,
            None => sequence <= self.last_table_sequence,
        };
        flushed
            && !self.gaps.iter().any(|(low, high)| {
                low.as_deref().is_none_or(|low| user_key >= low)
                    && high.as_deref().is_none_or(|high| user_key <= high)
            })
    }

    /// A gap between two internal keys (as `salvage_entries` reports a damaged block).
    fn add_gap(&mut self, low: Option<&[u8]>, high: Option<&[u8]>) {
        let user = |ikey: &[u8]| crate::key::user_key(ikey).to_vec();
        self.gaps.push((low.map(user), high.map(user)));
    }
}

/// What repair found in one old segment.
#[derive(Debug, Default)]
struct SegmentSalvage {
    len: u64,
    /// Bytes of the records taken.
    record_bytes: u64,
    /// Ranges stepped over (start -> end), recorded as punched in the new manifest.
    skipped: BTreeMap<u64, u64>,
}

/// The directory's entries, by what they are.
#[derive(Debug, Default)]
struct Inventory {
    tables: Vec<u64>,
    segments: Vec<u64>,
    manifests: Vec<u64>,
    temps: Vec<u64>,
    current: bool,
    /// A checkpoint's copy in progress (or cut short) marks its directory.
    checkpoint_incomplete: bool,
}

impl Inventory {
    fn take(fs: &dyn FileSystem, dir: &Path) -> Result<Inventory> {
        let mut inv = Inventory::default();
        for name in fs.list(dir)? {
            match parse_file_name(&name) {
                Some(FileKind::Table(n)) => inv.tables.push(n),
                Some(FileKind::ValueLog(n)) => inv.segments.push(n),
                Some(FileKind::Manifest(n)) => inv.manifests.push(n),
                Some(FileKind::Temp(n)) => inv.temps.push(n),
                Some(FileKind::Current) => inv.current = true,
                Some(FileKind::CheckpointIncomplete) => inv.checkpoint_incomplete = true,
                Some(FileKind::Lock | FileKind::Reserve) | None => {}
            }
        }
        inv.tables.sort_unstable();
        inv.segments.sort_unstable();
        Ok(inv)
    }

    /// Above every numbered file present.
    fn next_file_number(&self) -> u64 {
        let numbers = self.tables.iter().chain(&self.manifests).chain(&self.temps);
        numbers.max().map_or(1, |n| n + 1)
    }
}

pub(crate) fn repair(dir: &Path, options: Options) -> Result<RepairReport> {
    options.validate()?;
    super::recovery::refuse_an_empty_path(dir)?;
    let fs = Arc::clone(&options.fs);
    if !fs.exists(dir)? {
        return Err(Error::InvalidArgument(format!(
            "{} does not exist: there is nothing to repair",
            dir.display()
        )));
    }
    // Before anything is written (the LOCK file included): repair rebuilds only what
    // wisckey wrote, and moves every table, manifest and CURRENT aside, so another
    // engine's database (LevelDB's `LOG`, RocksDB's `OPTIONS-*`, a WAL) is refused.
    // Dot-files and `lost+found` are passed over: an NFS mount leaves `.nfsXXXX` files
    // behind in a database directory as a matter of course.
    let names = fs.list(dir)?;
    if let Some(name) = super::first_foreign_name(&names, true) {
        return Err(Error::NotADatabase(format!(
            "{} holds '{name}', which wisckey did not write: repair rebuilds only wisckey \
             databases and changed nothing (move the file away if it does not belong there)",
            dir.display()
        )));
    }
    let nothing_to_repair_from = || {
        Error::NotADatabase(format!(
            "{} holds no value-log segment and no table: nothing to repair from",
            dir.display()
        ))
    };
    let data_file_or_marker = |name: &String| {
        use crate::filename::FileKind;
        matches!(
            crate::filename::parse_file_name(name),
            Some(FileKind::Table(_) | FileKind::ValueLog(_) | FileKind::CheckpointIncomplete)
        )
    };
    // Also before the LOCK file is created: a repair of an empty folder leaves it empty.
    // (A checkpoint cut short is refused below, as such.)
    if !names.iter().any(data_file_or_marker) {
        return Err(nothing_to_repair_from());
    }
    let _lock = fs.lock(&dir.join(LOCK))?;
    let inventory = Inventory::take(&*fs, dir)?;
    if inventory.checkpoint_incomplete && !inventory.current {
        // What it holds is a part of another database's files: a repair would make a
        // database of the part. Its source still has the whole.
        return Err(Error::NotADatabase(format!(
            "{} is a checkpoint that stopped before it was complete: nothing to repair. \
             Delete it and run the checkpoint again",
            dir.display()
        )));
    }
    if inventory.segments.is_empty() && inventory.tables.is_empty() {
        return Err(nothing_to_repair_from());
    }
    let vlog_options = options.vlog_options();
    let mut report = RepairReport::default();
    // The old manifest, where one still loads: which tables are live, where replay would
    // start, and numbers not to reuse.
    let old_state = load_old_manifest(&*fs, dir, &inventory, &mut report)?;
    let listed = old_state.as_ref().map(|state| state.tables());
    let is_listed = |number: u64| listed.as_ref().is_some_and(|l| l.contains_key(&number));
    // Tables whose writer finished them (the footer, written last, ends in the magic). One
    // that was never finished was never installed either (a table is synced whole before an
    // edit lists it): it holds nothing that is not elsewhere, and says nothing of the
    // manifest's age.
    let finished = finished_tables(&*fs, dir, &inventory.tables)?;
    // A manifest that lists a table the directory lacks is stale (its newest edit was lost)
    // or the table is: its head and its table set are not trusted then, only the key
    // ranges of the missing tables are taken from it. So is one older than a finished
    // table (numbered at or past its next file number): its last edits are lost, and with
    // them tables it would set aside unread as leftovers.
    let missing: Vec<Arc<FileMeta>> = (listed.iter().flat_map(|listed| listed.values()))
        .filter(|meta| !inventory.tables.contains(&meta.number))
        .cloned()
        .collect();
    let older_than_a_table = old_state
        .as_ref()
        .is_some_and(|state| finished.iter().any(|&n| n >= state.recorded_next_file_number()));
    let trusted = old_state
        .as_ref()
        .filter(|_| missing.is_empty() && !older_than_a_table);
    if let (Some(state), true) = (&old_state, older_than_a_table) {
        report.problem(
            &dir.display().to_string(),
            None,
            format!(
                "the manifest gone by is older than tables present (numbered at or past its \
                 next file number {}): its last edits are lost; every table is read",
                state.recorded_next_file_number()
            ),
        );
    }

    let mut index = KeyIndex::default();
    let mut coverage = Coverage {
        head: trusted.and_then(|state| state.vlog_head()),
        ..Coverage::default()
    };
    for &number in &inventory.tables {
        let meta = listed.as_ref().and_then(|listed| listed.get(&number));
        if trusted.is_some() && meta.is_none() {
            continue; // An obsolete leftover: set aside unread.
        }
        // A stale manifest still tells leftovers apart: a table it does not list that was
        // numbered before its last edit was deleted by one of its edits (a compaction's
        // input the sweep had not removed yet, whose purged deletes it would bring back)
        // or was a flush's output never installed (whose records the log still holds above
        // the tables' sequence numbers). Either way not a source.
        let before_its_last_edit =
            |state: &LoadedState| number < state.recorded_next_file_number();
        if meta.is_none() && old_state.as_ref().is_some_and(before_its_last_edit) {
            continue;
        }
        if meta.is_none() && !finished.contains(&number) {
            // Never finished, so never installed: a flush or compaction (or a repair) cut
            // short. Its range is no gap: a gap there, unbounded without a manifest's entry,
            // would let the log's old records outrank purged deletes everywhere.
            report.tables_read += 1;
            report.problem(
                &table_file_name(dir, number).display().to_string(),
                None,
                "never finished (no table footer) and listed by no manifest: not a source"
                    .into(),
            );
            continue;
        }
        let meta = meta.map(Arc::as_ref);
        read_table(
            &*fs,
            dir,
            number,
            meta,
            &mut index,
            &mut coverage,
            &mut report,
        )?;
    }
    for meta in &missing {
        let name = table_file_name(dir, meta.number).display().to_string();
        // Tables are deleted only once the edit that replaced them is durable; a finished
        // table written after this one that the manifest does not list is that edit's
        // output (or a later one's): the missing table's entries went there, or were
        // dropped on purpose. A gap would let the log outrank what was dropped.
        let replaced = finished.iter().any(|&n| n > meta.number && !is_listed(n));
        if replaced {
            report.problem(
                &name,
                None,
                "listed in the manifest but missing; tables written after it that the \
                 manifest does not list say a lost edit replaced it"
                    .into(),
            );
        } else {
            report.problem(&name, None, "listed in the manifest but missing".into());
            coverage.add_gap(Some(&meta.smallest), Some(&meta.largest));
        }
    }
    coverage.last_table_sequence = index.last_table_sequence;
    let mut salvaged = BTreeMap::new();
    let mut bad_segments = Vec::new();
    let old_segments = old_state.as_ref().map(LoadedState::vlog_segment_metas);
    for (i, &number) in inventory.segments.iter().enumerate() {
        let next = inventory.segments.get(i + 1).copied();
        let context = SegmentContext {
            number,
            next,
            listed: old_segments.and_then(|segments| segments.get(&number)),
            head: old_state.as_ref().and_then(LoadedState::vlog_head),
            vlog_options: &vlog_options,
            value_threshold: options.value_threshold,
            coverage: &coverage,
        };
        match salvage_segment(&*fs, dir, &context, &mut index, &mut report)? {
            Some(segment) => {
                salvaged.insert(number, segment);
            }
            None => bad_segments.push(number),
        }
    }
    report.segments_scanned = salvaged.len() as u64;
    report.last_sequence = index.last_sequence;
    let mut reverted = std::collections::BTreeSet::new();
    for &number in &bad_segments {
        count_reverted_keys(
            &*fs,
            dir,
            number,
            &vlog_options,
            &coverage,
            &index,
            &mut reverted,
            &mut report,
        )?;
    }

    // 1. The rebuilt tables and a fresh segment, synced, before anything else changes.
    let mut next_file = inventory.next_file_number();
    if let Some(old) = &old_state {
        next_file = next_file.max(old.next_file_number());
    }
    let (tables, live_bytes) =
        write_tables(&*fs, dir, &options, index, &mut next_file, &mut report)?;
    let mut new_segment = inventory.segments.last().map_or(1, |n| n + 1);
    if let Some(old) = &old_state {
        new_segment = new_segment.max(old.next_vlog_segment());
    }
    let mut writer = VlogWriter::create(
        Arc::clone(&fs),
        dir.to_path_buf(),
        new_segment,
        vlog_options,
    )?;
    writer.sync()?;
    drop(writer);
    report.new_segment = new_segment;

    // 2. The manifest that lists the rebuilt tables and every old segment, synced; CURRENT
    // still names the old one.
    let mut segments = BTreeMap::new();
    for (number, segment) in salvaged {
        let live = live_bytes.get(&number).copied().unwrap_or(0);
        let meta = SegmentMeta {
            sealed_size: Some(segment.len),
            dead_bytes: segment.record_bytes.saturating_sub(live),
            punched: Arc::new(segment.skipped),
        };
        segments.insert(number, meta);
    }
    segments.insert(new_segment, SegmentMeta::default());
    let counters = RebuiltCounters {
        next_file_number: next_file,
        last_sequence: report.last_sequence,
        vlog_head: LogPosition::new(new_segment, SEGMENT_HEADER_LEN),
    };
    let rebuilt = VersionSet::write_rebuilt_manifest(&*fs, dir, tables, segments, counters)?;

    // 3. Move what the rebuilt index replaces out of the way (nothing is deleted), CURRENT
    // first and durably: a repair cut short after that finds no CURRENT when run again and
    // goes by the newest manifest, the rebuilt one, whose tables are all there. Going by
    // the old one, with some of its tables moved, it trusted the log over the tables in
    // their ranges and brought back keys whose deletes compaction had purged.
    let mut replaced: Vec<PathBuf> = Vec::new();
    if inventory.current {
        replaced.push(dir.join(CURRENT));
    }
    replaced.extend(inventory.tables.iter().map(|&n| table_file_name(dir, n)));
    replaced.extend(bad_segments.iter().map(|&n| vlog_file_name(dir, n)));
    replaced
        .extend((inventory.manifests.iter()).map(|&n| crate::filename::manifest_file_name(dir, n)));
    replaced.extend((inventory.temps.iter()).map(|&n| crate::filename::temp_file_name(dir, n)));
    move_aside(&*fs, dir, &replaced, &mut report)?;

    // 4. CURRENT names the rebuilt manifest.
    VersionSet::point_current_at(&*fs, dir, rebuilt)?;
    log::warn!(
        "wisckey: repaired {}: {} keys, {} lost values, {} problems; replaced files are in {}",
        dir.display(),
        report.keys,
        report.lost_values,
        report.problems_total,
        if report.moved_to.is_empty() {
            "(none)"
        } else {
            &report.moved_to
        }
    );
    Ok(report)
}

/// The old manifest, where one still loads: the one CURRENT names, else the newest that
/// loads. Damage (`Corruption`, `NotADatabase`: a missing or garbled CURRENT, a manifest
/// without its magic) only means there is none to go by; anything else — a manifest of a
/// newer format (`UnsupportedVersion`: a newer build's database, which this one must not
/// rewrite in its own format), a failing device — stops the repair before it writes.
/// The damage passed over is reported: the repair's report says which manifest it could
/// not go by.
fn load_old_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    inventory: &Inventory,
    report: &mut RepairReport,
) -> Result<Option<LoadedState>> {
    let tolerated = |e: &Error| matches!(e, Error::Corruption { .. } | Error::NotADatabase(_));
    let current = dir.join(CURRENT).display().to_string();
    match VersionSet::load(fs, dir) {
        Ok(state) => return Ok(Some(state)),
        // A database without CURRENT is reported so by the inventory's absence of it.
        Err(e) if tolerated(&e) => {
            if inventory.current {
                report.error(&current, e);
            }
        }
        Err(e) => return Err(e),
    }
    let mut manifests = inventory.manifests.clone();
    manifests.sort_unstable();
    for &number in manifests.iter().rev() {
        match VersionSet::load_manifest(fs, dir, number) {
            Ok(state) => return Ok(Some(state)),
            Err(e) if tolerated(&e) => {
                let name = crate::filename::manifest_file_name(dir, number);
                report.error(&name.display().to_string(), e);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Which of `tables` their writer finished: at least a footer long, ending in the table
/// magic (the footer is written last).
fn finished_tables(
    fs: &dyn FileSystem,
    dir: &Path,
    tables: &[u64],
) -> Result<std::collections::BTreeSet<u64>> {
    use crate::sstable::format::{FOOTER_LEN, TABLE_MAGIC};
    let mut finished = std::collections::BTreeSet::new();
    for &number in tables {
        let path = table_file_name(dir, number);
        let file = fs.open_read(&path)?;
        let size = file.len()?;
        if size < FOOTER_LEN as u64 {
            continue;
        }
        let mut magic = [0u8; 8];
        file.read_exact_at(size - 8, &mut magic, &path.display().to_string())?;
        if u64::from_le_bytes(magic) == TABLE_MAGIC {
            finished.insert(number);
        }
    }
    Ok(finished)
}

/// Offers every entry of table `number` that reads to `index`; damage is reported and its
/// key range (from the index, or `listed`, the manifest's entry for the table) becomes a
/// gap in `coverage`. Only an I/O error (the device, not the data) stops the repair.
fn read_table(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    listed: Option<&FileMeta>,
    index: &mut KeyIndex,
    coverage: &mut Coverage,
    report: &mut RepairReport,
) -> Result<()> {
    let path = table_file_name(dir, number);
    let name = path.display().to_string();
    report.tables_read += 1;
    let file = fs.open_read(&path)?;
    let size = file.len()?;
    // A damaged filter is reported but loses nothing: the entries are read without it.
    let table = match Table::open_ignoring_a_damaged_filter(file, number, name.clone(), size) {
        Ok((table, filter_damage)) => {
            if let Some(e) = filter_damage {
                report.error(&name, e);
            }
            table
        }
        // A newer format is not damage: rebuilding it in this build's format would lose
        // what this build cannot read.
        Err(e @ (Error::Io { .. } | Error::NoSpace { .. } | Error::UnsupportedVersion { .. })) => {
            return Err(e)
        }
        Err(e) => {
            report.error(&name, e);
            let range = listed.map(|meta| (meta.smallest.as_slice(), meta.largest.as_slice()));
            coverage.add_gap(range.map(|r| r.0), range.map(|r| r.1));
            return Ok(());
        }
    };
    let mut malformed = 0u64;
    let mut damage = Vec::new();
    table.salvage_entries(
        &mut |ikey, value| match parse_internal_key(ikey) {
            Some(parsed) => {
                report.table_entries += 1;
                index.offer_table_entry(parsed.user_key, parsed.sequence, parsed.kind, value);
            }
            None => malformed += 1,
        },
        &mut |e, low, high| {
            coverage.add_gap(low, high);
            damage.push(e);
        },
    );
    for e in damage {
        if matches!(e, Error::Io { .. }) {
            return Err(e);
        }
        report.error(&name, e);
    }
    if malformed > 0 {
        report.problem(
            &name,
            None,
            format!("{malformed} entries with a malformed internal key"),
        );
    }
    Ok(())
}

/// What [`salvage_segment`] needs to know besides the file.
struct SegmentContext<'a> {
    number: u64,
    /// The next segment present, if any.
    next: Option<u64>,
    /// What the old manifest, where one loads, records of this segment.
    listed: Option<&'a SegmentMeta>,
    /// The old manifest's replay head, where one loads (trusted or not: the log was synced
    /// up to it either way).
    head: Option<LogPosition>,
    vlog_options: &'a VlogOptions,
    value_threshold: usize,
    coverage: &'a Coverage,
}

/// One stretch of an old segment, as the first pass of [`salvage_segment`] found it.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// A record that verifies.
    Record {
        at: u64,
        len: usize,
        sequence: u64,
        last_in_batch: bool,
    },
    /// Bytes that hold no record that verifies.
    Gap { start: u64, end: u64 },
    /// A range the old manifest records as punched: stepped over unread, as every reader
    /// of the segment does (its records were dead; its blocks may be deallocated).
    Punched { start: u64, end: u64 },
}

/// Scans old segment `number` for every record that verifies, stepping over bytes that do
/// not and over the ranges the old manifest records as punched, and offers the records of
/// complete batches to `index`. `None`: the segment's header does not verify (it is moved
/// aside; a crash while creating it leaves that too).
///
/// Which batches are taken (see the module docs): a batch whose last record is read; a
/// batch cut by a recorded punched range; a batch cut by a gap or by the segment's end
/// that starts in bytes known to have been synced. Elsewhere — the unsynced end of the
/// newest segment — a gap ends the log as it does for open (a torn tail): nothing from
/// the batch it cuts on is taken.
fn salvage_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    context: &SegmentContext<'_>,
    index: &mut KeyIndex,
    report: &mut RepairReport,
) -> Result<Option<SegmentSalvage>> {
    let SegmentContext {
        number,
        next,
        listed,
        head,
        vlog_options,
        value_threshold,
        coverage,
    } = *context;
    let path = vlog_file_name(dir, number);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let len = file.len()?;
    let mut bytes = vec![
        0u8;
        usize::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!("{name} is too large to repair on this machine"))
        })?
    ];
    file.read_exact_at(0, &mut bytes, &name)?;
    let header = match SegmentHeader::decode(&bytes, &name) {
        Ok(h) if h.segment == number => h,
        Ok(h) => {
            report.problem(
                &name,
                Some(0),
                format!("header names segment {}", h.segment),
            );
            return Ok(None);
        }
        Err(e @ Error::UnsupportedVersion { .. }) => return Err(e),
        Err(e) => {
            report.error(&name, e);
            return Ok(None);
        }
    };
    debug_assert_eq!(header.segment, number);
    // Bytes past the length the next segment's header names were left by a failed write;
    // the writer synced this segment up to that length before it wrote that header.
    let declared_end = match next.filter(|&n| n == number + 1) {
        Some(next) => prev_segment_end(fs, dir, next)?,
        None => None,
    };
    let limit = declared_end
        .filter(|end| (SEGMENT_HEADER_LEN..=len).contains(end))
        .unwrap_or(len);
    // Every byte below `limit` was synced: the engine sealed the segment (open cuts a torn
    // tail before the writer moves on; repair records one as punched), the writer synced it
    // before it started the next segment, or the replay head lies past it (a flush syncs
    // the log up to the head it records). A later segment whose header does not say where
    // this one ended (repair's own fresh segment, say) proves nothing: the newest
    // segment's tail may be torn.
    let synced_whole = declared_end.is_some()
        || listed.is_some_and(|m| m.sealed_size.is_some())
        || head.is_some_and(|h| h.segment > number);
    // Ranges outside `[SEGMENT_HEADER_LEN, len)` cannot be records of this file.
    let punched: BTreeMap<u64, u64> = (listed.iter().flat_map(|m| m.punched.iter()))
        .map(|(&start, &end)| (start.max(SEGMENT_HEADER_LEN), end.min(len)))
        .filter(|&(start, end)| start < end)
        .collect();

    let (pieces, last_synced_before) = find_pieces(&bytes, limit, &punched, vlog_options);
    let taker = BatchTaker {
        bytes: &bytes,
        number,
        vlog_options,
        value_threshold,
        coverage,
    };
    // Every byte below `synced_to` was synced, so a gap there is damage, not a torn tail,
    // and a batch that starts below it was acknowledged whole: before a record carrying
    // `FLAG_SYNCED_BEFORE` (it starts a batch), before the replay head (a batch boundary;
    // a flush syncs the log up to it), up to the end of a record a table names (a flush
    // syncs the log up to the end of the batches it holds).
    let synced_to = if synced_whole {
        limit
    } else {
        let head_offset = head.filter(|h| h.segment == number).map_or(0, |h| h.offset);
        let named_end = (pieces.iter())
            .filter_map(|piece| match *piece {
                Piece::Record { at, len, .. } if taker.named_by_table(at, len, index) => {
                    Some(at + len as u64)
                }
                _ => None,
            })
            .max();
        (last_synced_before.unwrap_or(0))
            .max(head_offset)
            .max(named_end.unwrap_or(0))
            .min(limit)
    };

    let mut salvage = SegmentSalvage {
        len,
        ..SegmentSalvage::default()
    };
    // Every recorded punched range stays punched: its blocks may be gone.
    for (&start, &end) in &punched {
        add_range(&mut salvage.skipped, start, end);
    }
    let mut batch: Vec<(u64, usize)> = Vec::new();
    // Where the log ends in this segment (a torn tail): nothing from here on is taken.
    let mut torn_from: Option<u64> = None;
    for piece in pieces {
        if torn_from.is_some() {
            if let Piece::Record { .. } = piece {
                report.incomplete_batch_records += 1;
            }
            continue;
        }
        match piece {
            Piece::Record {
                at,
                len,
                sequence,
                last_in_batch,
            } => {
                let follows = batch.last().is_none_or(|&(prev_at, _)| {
                    let prev = crate::coding::decode_fixed64(&bytes[prev_at as usize + 12..]);
                    prev.map(|p| p.wrapping_add(1)) == Some(sequence)
                });
                if !follows {
                    taker.take(&mut batch, &mut salvage, index, report);
                }
                batch.push((at, len));
                if last_in_batch {
                    taker.take(&mut batch, &mut salvage, index, report);
                }
            }
            Piece::Punched { start, end } => {
                // GC punches only sealed segments, whose batches were all acknowledged: a
                // batch around a punched record is handed over without it, as GC's scan
                // does.
                taker.take(&mut batch, &mut salvage, index, report);
                report.punched_log_bytes += end - start;
            }
            Piece::Gap { start, end } => {
                // The batch the gap cuts was acknowledged whole if it starts in synced
                // bytes (a batch never spans segments).
                if batch.first().is_some_and(|&(first, _)| first < synced_to) {
                    taker.take(&mut batch, &mut salvage, index, report);
                }
                // Synced bytes that do not verify: damage, stepped over.
                let damaged_end = end.min(synced_to);
                if start < damaged_end {
                    let damaged = &bytes[start as usize..damaged_end as usize];
                    note_gap(damaged, &name, start, report);
                    add_range(&mut salvage.skipped, start, damaged_end);
                }
                if end > synced_to {
                    // A hole in bytes nothing says were synced: the log ends here, as open
                    // would end it (a torn tail), with the batch the hole cuts.
                    report.incomplete_batch_records += batch.len() as u64;
                    let from = batch.first().map_or(start.max(synced_to), |&(at, _)| at);
                    torn_from = Some(from);
                    batch.clear();
                }
            }
        }
    }
    if torn_from.is_none() && !batch.is_empty() {
        let first = batch[0].0;
        if first < synced_to {
            // Synced, yet its last records are gone (the file was cut short): the batch
            // was acknowledged whole.
            report.problem(
                &name,
                Some(first),
                format!(
                    "the segment's records end inside a batch of which {} records remain; \
                     they are taken (the segment was synced there, so the batch was complete)",
                    batch.len()
                ),
            );
            taker.take(&mut batch, &mut salvage, index, report);
        } else {
            // The newest write was cut short: never acknowledged (a batch never spans
            // segments), left out as open would.
            report.incomplete_batch_records += batch.len() as u64;
            torn_from = Some(first);
        }
    }
    if let Some(from) = torn_from {
        report.torn_log_bytes += limit - from;
        add_range(&mut salvage.skipped, from, limit);
    }
    if limit < len {
        add_range(&mut salvage.skipped, limit, len);
    }
    Ok(Some(salvage))
}

/// The first pass over a segment's bytes below `limit`: its records that verify, the gaps
/// between them, and the recorded `punched` ranges, in order; and the offset of the last
/// record that carries `FLAG_SYNCED_BEFORE` (every byte before it had been synced).
fn find_pieces(
    bytes: &[u8],
    limit: u64,
    punched: &BTreeMap<u64, u64>,
    vlog_options: &VlogOptions,
) -> (Vec<Piece>, Option<u64>) {
    let known_flags = FLAG_LAST_IN_BATCH | FLAG_SYNCED_BEFORE;
    let mut pieces = Vec::new();
    let mut last_synced_before = None;
    let mut gap_start: Option<u64> = None;
    let mut offset = SEGMENT_HEADER_LEN;
    while offset < limit {
        let inside_punched = (punched.range(..=offset).next_back())
            .filter(|&(_, &end)| end > offset)
            .map(|(_, &end)| end.min(limit));
        if let Some(end) = inside_punched {
            if let Some(start) = gap_start.take() {
                pieces.push(Piece::Gap { start, end: offset });
            }
            pieces.push(Piece::Punched { start: offset, end });
            offset = end;
            continue;
        }
        // A record must end before the next punched range: GC punches whole records.
        let next_punched = punched.range(offset..).next().map(|(&start, _)| start);
        let region_end = next_punched.map_or(limit, |start| start.min(limit));
        let at = offset as usize;
        let available = region_end - offset;
        let record = (available >= RECORD_HEADER_LEN as u64)
            .then(|| record_len_from_header(&bytes[at..], available, vlog_options).ok())
            .flatten()
            .filter(|_| {
                bytes[at + 20] <= ValueKind::Value as u8 && bytes[at + 21] & !known_flags == 0
            })
            .and_then(|record_len| {
                let (record, _) = decode_record(&bytes[at..at + record_len], vlog_options).ok()?;
                Some((record.sequence, record.last_in_batch, record_len))
            });
        let Some((sequence, last_in_batch, record_len)) = record else {
            gap_start.get_or_insert(offset);
            // A record's 22-byte header holds a non-zero byte, so none starts more than 21
            // bytes before the next non-zero byte: runs of zeros are crossed quickly.
            let next_nonzero = bytes[at..region_end as usize].iter().position(|&b| b != 0);
            let skip = next_nonzero.map_or(available, |p| {
                p.saturating_sub(RECORD_HEADER_LEN - 1) as u64
            });
            offset += skip.max(1);
            continue;
        };
        if let Some(start) = gap_start.take() {
            pieces.push(Piece::Gap { start, end: offset });
        }
        if bytes[at + 21] & FLAG_SYNCED_BEFORE != 0 {
            last_synced_before = Some(offset);
        }
        pieces.push(Piece::Record {
            at: offset,
            len: record_len,
            sequence,
            last_in_batch,
        });
        offset += record_len as u64;
    }
    if let Some(start) = gap_start {
        pieces.push(Piece::Gap { start, end: limit });
    }
    (pieces, last_synced_before)
}

/// Offers the records of one segment to the index.
struct BatchTaker<'a> {
    bytes: &'a [u8],
    number: u64,
    vlog_options: &'a VlogOptions,
    value_threshold: usize,
    coverage: &'a Coverage,
}

impl BatchTaker<'_> {
    /// Takes the records of `batch` (emptied): each may win for its key.
    fn take(
        &self,
        batch: &mut Vec<(u64, usize)>,
        salvage: &mut SegmentSalvage,
        index: &mut KeyIndex,
        report: &mut RepairReport,
    ) {
        for (at, record_len) in batch.drain(..) {
            if self.offer(at, record_len, index) {
                salvage.record_bytes += record_len as u64;
                report.log_records += 1;
            }
        }
    }

    /// Whether a table entry read names record `at` (its key's newest entry is a pointer
    /// to it): the write was flushed, and a flush syncs the log first.
    fn named_by_table(&self, at: u64, record_len: usize, index: &KeyIndex) -> bool {
        let start = at as usize;
        let bytes = &self.bytes[start..start + record_len];
        let Ok((record, _)) = decode_record(bytes, self.vlog_options) else {
            return false;
        };
        let Some(newest) = index.newest.get(record.key) else {
            return false;
        };
        let mut encoded = Vec::new();
        self.pointer(at, record_len).encode(&mut encoded);
        newest.sequence == record.sequence
            && newest.kind == ValueKind::ValuePointer
            && newest.value == encoded
    }

    fn pointer(&self, at: u64, record_len: usize) -> ValuePointer {
        ValuePointer {
            segment: self.number,
            offset: at,
            len: record_len as u32,
        }
    }

    /// Offers one record; whether it decoded (it was verified when it was found; cannot
    /// fail now).
    fn offer(&self, at: u64, record_len: usize, index: &mut KeyIndex) -> bool {
        let start = at as usize;
        let bytes = &self.bytes[start..start + record_len];
        let Ok((record, _)) = decode_record(bytes, self.vlog_options) else {
            return false;
        };
        let ptr = self.pointer(at, record_len);
        let inline = record.value.len() < self.value_threshold;
        let at = LogPosition::new(self.number, at);
        let may_win = !self.coverage.covers(record.key, record.sequence, at);
        index.offer_record(
            record.key,
            record.sequence,
            record.kind,
            record.value,
            ptr,
            inline,
            may_win,
        );
        true
    }
}

/// Counts (and lists as a problem) the keys whose newest write found lies in segment
/// `number`, set aside because its header does not verify (or names another segment):
/// every record in it that verifies, in a batch whose last record verifies too (the rest
/// was never acknowledged whole), that the tables do not cover, and whose sequence number
/// is above the entry the rebuilt index holds for its key — unless that entry is a pointer
/// whose record is gone (`lost_values` counts those; they read as `Corruption`). Repair
/// does not take such records (a pointer into the segment would need its file in place),
/// so those keys read as an older entry or as missing; `counted` keeps a key that several
/// set-aside segments hold from being counted twice.
#[allow(clippy::too_many_arguments)]
fn count_reverted_keys(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    vlog_options: &VlogOptions,
    coverage: &Coverage,
    index: &KeyIndex,
    counted: &mut std::collections::BTreeSet<Vec<u8>>,
    report: &mut RepairReport,
) -> Result<()> {
    let path = vlog_file_name(dir, number);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let Ok(len) = usize::try_from(file.len()?) else {
        return Ok(()); // too large to read on this machine; salvage said so already
    };
    let mut bytes = vec![0u8; len];
    file.read_exact_at(0, &mut bytes, &name)?;
    let (pieces, _) = find_pieces(&bytes, len as u64, &BTreeMap::new(), vlog_options);
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut here = 0u64;
    for piece in pieces {
        let Piece::Record {
            at,
            len,
            last_in_batch,
            ..
        } = piece
        else {
            batch.clear(); // a gap cuts the batch it falls in
            continue;
        };
        let start = at as usize;
        let Ok((record, _)) = decode_record(&bytes[start..start + len], vlog_options) else {
            batch.clear();
            continue;
        };
        let position = LogPosition::new(number, at);
        let reverts = match index.newest.get(record.key) {
            None => true,
            Some(newest) => {
                let lost = newest.kind == ValueKind::ValuePointer && !newest.record_verified;
                newest.sequence < record.sequence && !lost
            }
        };
        if reverts && !coverage.covers(record.key, record.sequence, position) {
            batch.push(record.key.to_vec());
        }
        if last_in_batch {
            for key in batch.drain(..) {
                if counted.insert(key) {
                    here += 1;
                }
            }
        }
    }
    if here > 0 {
        report.keys_reverted += here;
        report.problem(
            &name,
            None,
            format!(
                "set aside unread (its header does not verify or names another segment): \
                 {here} keys whose newest write found is here read as an older entry or as \
                 missing"
            ),
        );
    }
    Ok(())
}

/// Counts a stepped-over range of synced bytes: zeros are counted (a hole GC punched where
/// no loadable manifest records it looks like that); anything else is damage and listed.
fn note_gap(gap: &[u8], file: &str, start: u64, report: &mut RepairReport) {
    if gap.iter().all(|&b| b == 0) {
        report.zeroed_log_bytes += gap.len() as u64;
    } else {
        report.damaged_log_bytes += gap.len() as u64;
        report.problem(
            file,
            Some(start),
            format!(
                "{} bytes hold no record that verifies; stepped over",
                gap.len()
            ),
        );
    }
}

/// `prev_segment_end` from segment `n`'s header, if that header verifies and records it.
fn prev_segment_end(fs: &dyn FileSystem, dir: &Path, n: u64) -> Result<Option<u64>> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let mut buf = [0u8; SEGMENT_HEADER_LEN as usize];
    if file.read_exact_at(0, &mut buf, &name).is_err() {
        return Ok(None);
    }
    Ok(SegmentHeader::decode(&buf, &name)
        .ok()
        .filter(|h| h.segment == n && h.prev_segment_end != 0)
        .map(|h| h.prev_segment_end))
}

/// The tables repair wrote (with their level), and the bytes of each segment's records
/// they point at.
type RebuiltTables = (Vec<(usize, FileMeta)>, HashMap<u64, u64>);

/// Writes the newest entry of every key, in key order, into tables of about
/// `target_file_size` (numbers from `next_file` on). Returns them and the bytes of each
/// segment's records that the rebuilt index points at.
fn write_tables(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
    index: KeyIndex,
    next_file: &mut u64,
    report: &mut RepairReport,
) -> Result<RebuiltTables> {
    let mut entries: Vec<(Vec<u8>, Newest)> = index.newest.into_iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let table_options = TableOptions {
        block_size: options.block_size,
        restart_interval: options.block_restart_interval,
        bloom_bits_per_key: options.bloom_bits_per_key,
    };
    let mut live_bytes: HashMap<u64, u64> = HashMap::new();
    let mut tables = Vec::new();
    let mut open: Option<(TableBuilder, FileMeta)> = None;
    for (key, entry) in entries {
        match entry.kind {
            ValueKind::Deletion => report.deleted_keys += 1,
            ValueKind::Value => report.keys += 1,
            ValueKind::ValuePointer => {
                report.keys += 1;
                let ptr = ValuePointer::decode(&entry.value);
                match ptr.filter(|_| entry.record_verified) {
                    Some(ptr) => *live_bytes.entry(ptr.segment).or_default() += u64::from(ptr.len),
                    None => {
                        report.lost_values += 1;
                        let at = ptr.map_or_else(String::new, |p| {
                            format!(" (segment {} offset {})", p.segment, p.offset)
                        });
                        report.problem(
                            "",
                            None,
                            format!(
                                "the newest value of key {} is not in the log{at}: reads of it \
                                 report corruption",
                                crate::key::printable_key(&key)
                            ),
                        );
                    }
                }
            }
        }
        let ikey = make_internal_key(&key, entry.sequence, entry.kind);
        let (builder, meta) = match &mut open {
            Some(open) => open,
            None => {
                let number = *next_file;
                *next_file += 1;
                let path = table_file_name(dir, number);
                let file = fs.create(&path)?;
                let builder = TableBuilder::new(file, path.display().to_string(), table_options);
                let meta = FileMeta {
                    number,
                    file_size: 0,
                    smallest: ikey.clone(),
                    largest: Vec::new(),
                };
                open.insert((builder, meta))
            }
        };
        builder.add(&ikey, &entry.value)?;
        meta.largest = ikey;
        if builder.estimated_size() >= options.target_file_size {
            tables.push(finish_table(open.take())?);
        }
    }
    if open.is_some() {
        tables.push(finish_table(open.take())?);
    }
    fs.sync_dir(dir)?;
    report.tables_written = tables.len() as u64;
    let tables = tables.into_iter().map(|t| (OUTPUT_LEVEL, t)).collect();
    Ok((tables, live_bytes))
}

fn finish_table(open: Option<(TableBuilder, FileMeta)>) -> Result<FileMeta> {
    let (builder, mut meta) =
        open.ok_or_else(|| Error::Internal("repair finished a table it never started".into()))?;
    meta.file_size = builder.finish()?;
    Ok(meta)
}

/// Moves `paths` into a new `lost/repair-N/` and makes the moves durable.
fn move_aside(
    fs: &dyn FileSystem,
    dir: &Path,
    paths: &[PathBuf],
    report: &mut RepairReport,
) -> Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    report.moved_to = set_aside(fs, dir, "repair", paths, &[])?;
    report.moved.extend(
        (paths.iter())
            .filter_map(|path| path.file_name())
            .map(|name| name.to_string_lossy().into_owned()),
    );
    Ok(())
}

/// Copies `copies` and moves `moves` into a new `lost/<label>-N/` (N the first number not
/// taken) and makes it all durable; returns that folder relative to `dir`. What the engine
/// drops on request (repair, salvage) is kept there, never read again, for the operator.
pub(crate) fn set_aside(
    fs: &dyn FileSystem,
    dir: &Path,
    label: &str,
    moves: &[PathBuf],
    copies: &[PathBuf],
) -> Result<String> {
    let lost = dir.join(LOST_DIR);
    let mut n = 1u64;
    let target = loop {
        let candidate = lost.join(format!("{label}-{n}"));
        if !fs.exists(&candidate)? {
            break candidate;
        }
        n += 1;
    };
    crate::fs::create_dir_all_durably(fs, &target)?;
    for path in copies {
        if let Some(name) = path.file_name() {
            super::checkpoint::copy_file(fs, fs, path, &target.join(name), fs.file_size(path)?)?;
        }
    }
    for path in moves {
        if let Some(name) = path.file_name() {
            fs.rename(path, &target.join(name))?;
            // Repair moves CURRENT first: the moves after it must not become durable
            // without it (see step 3 of `repair`).
            if name == CURRENT {
                fs.sync_dir(dir)?;
            }
        }
    }
    fs.sync_dir(&target)?;
    fs.sync_dir(dir)?;
    Ok(format!("{LOST_DIR}/{label}-{n}"))
}
