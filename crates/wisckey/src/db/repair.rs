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
//!   entries are what compaction dropped; it is set aside with the rest. A manifest that
//!   lists a missing table is not trusted for this, nor for its head (it may be stale: its
//!   last edit torn off);
//! - a batch is taken from the log when its last record is read, or when a gap (a punched
//!   or damaged range) cuts it inside a segment (it was acknowledged whole; the gap is
//!   reported); a batch still incomplete at the end of its segment was never acknowledged
//!   (a batch never spans segments) and is left out, as open would;
//! - every byte of an old segment that is not a record taken (gaps, an incomplete tail,
//!   leftovers past the length the next segment's header names) is recorded as a punched
//!   range, so readers, GC and `check` step over it; the bytes themselves stay;
//! - crash-safe at every step: the new tables and a fresh segment for new writes are
//!   written and synced first, the replaced files moved aside next, CURRENT written last. A
//!   crash before that leaves a directory that open refuses and repair redoes: the new
//!   tables (tombstones included) are sources like any other;
//! - holds the LOCK throughout, so it never runs beside an open database.
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
use crate::version::{FileMeta, RebuiltCounters, SegmentMeta, VersionSet, NUM_LEVELS};
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
pub struct RepairReport {
    /// Table files found, and the entries read from their blocks that verify.
    pub tables_read: u64,
    /// Entries read from the tables.
    pub table_entries: u64,
    /// Value-log segments scanned, and the records taken from them.
    pub segments_scanned: u64,
    /// Records taken from the log.
    pub log_records: u64,
    /// Bytes of old segments stepped over: all-zero ranges (punched holes, torn tails) and
    /// damaged ones (listed in `problems`).
    pub zeroed_log_bytes: u64,
    /// Bytes of damaged ranges stepped over.
    pub damaged_log_bytes: u64,
    /// Records of batches that were incomplete at the end of their segment (never
    /// acknowledged), left out.
    pub incomplete_batch_records: u64,
    /// Keys in the rebuilt index with a value, and keys whose newest entry is a delete.
    pub keys: u64,
    /// Keys whose newest entry is a delete (kept as deletes).
    pub deleted_keys: u64,
    /// Keys whose newest entry (from a table) points at a log record that is gone or does
    /// not verify: reads of them report `Corruption`, as before the repair.
    pub lost_values: u64,
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
    let fs = Arc::clone(&options.fs);
    if dir.as_os_str().is_empty() || !fs.exists(dir)? {
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
    if let Some(name) = super::first_foreign_name(&fs.list(dir)?, true) {
        return Err(Error::NotADatabase(format!(
            "{} holds '{name}', which wisckey did not write: repair rebuilds only wisckey \
             databases and changed nothing (move the file away if it does not belong there)",
            dir.display()
        )));
    }
    let _lock = fs.lock(&dir.join(LOCK))?;
    let inventory = Inventory::take(&*fs, dir)?;
    if inventory.segments.is_empty() && inventory.tables.is_empty() {
        return Err(Error::NotADatabase(format!(
            "{} holds no value-log segment and no table: nothing to repair from",
            dir.display()
        )));
    }
    let vlog_options = options.vlog_options();
    // The old manifest, where one still loads: which tables are live, where replay would
    // start, and numbers not to reuse.
    let old_state = VersionSet::load(&*fs, dir).ok().or_else(|| {
        let mut manifests = inventory.manifests.clone();
        manifests.sort_unstable();
        (manifests.iter().rev()).find_map(|&n| VersionSet::load_manifest(&*fs, dir, n).ok())
    });
    let listed = old_state.as_ref().map(|state| state.tables());
    // A manifest that lists a table the directory lacks is stale (its newest edit was lost)
    // or the table is: its head and its table set are not trusted then, only the key
    // ranges of the missing tables are taken from it.
    let missing: Vec<Arc<FileMeta>> = (listed.iter().flat_map(|listed| listed.values()))
        .filter(|meta| !inventory.tables.contains(&meta.number))
        .cloned()
        .collect();
    let trusted = old_state.as_ref().filter(|_| missing.is_empty());

    let mut report = RepairReport::default();
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
        report.problem(&name, None, "listed in the manifest but missing".into());
        coverage.add_gap(Some(&meta.smallest), Some(&meta.largest));
    }
    coverage.last_table_sequence = index.last_table_sequence;
    let mut salvaged = BTreeMap::new();
    let mut bad_segments = Vec::new();
    for (i, &number) in inventory.segments.iter().enumerate() {
        let next = inventory.segments.get(i + 1).copied();
        let context = SegmentContext {
            number,
            next,
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

    // 2. Move what the rebuilt index replaces out of the way (nothing is deleted).
    let mut replaced: Vec<PathBuf> = Vec::new();
    replaced.extend(inventory.tables.iter().map(|&n| table_file_name(dir, n)));
    replaced.extend(bad_segments.iter().map(|&n| vlog_file_name(dir, n)));
    replaced
        .extend((inventory.manifests.iter()).map(|&n| crate::filename::manifest_file_name(dir, n)));
    replaced.extend((inventory.temps.iter()).map(|&n| crate::filename::temp_file_name(dir, n)));
    if inventory.current {
        replaced.push(dir.join(CURRENT));
    }
    move_aside(&*fs, dir, &replaced, &mut report)?;

    // 3. The manifest that lists the rebuilt tables and every old segment, then CURRENT.
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
    VersionSet::write_rebuilt(&*fs, dir, tables, segments, counters)?;
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
    let table = match Table::open(file, number, name.clone(), size, None) {
        Ok(table) => table,
        Err(e @ (Error::Io { .. } | Error::NoSpace { .. })) => return Err(e),
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
    vlog_options: &'a VlogOptions,
    value_threshold: usize,
    coverage: &'a Coverage,
}

/// Scans old segment `number` for every record that verifies, stepping over bytes that do
/// not, and offers the records of complete batches to `index`. `None`: the segment's header
/// does not verify (it is moved aside; a crash while creating it leaves that too).
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
    // Bytes past the length the next segment's header names were left by a failed write.
    let mut limit = len;
    if let Some(next) = next.filter(|&n| n == number + 1) {
        if let Some(prev_end) = prev_segment_end(fs, dir, next)? {
            if (SEGMENT_HEADER_LEN..=len).contains(&prev_end) {
                limit = prev_end;
            }
        }
    }

    let mut salvage = SegmentSalvage {
        len,
        ..SegmentSalvage::default()
    };
    let mut batch: Vec<(u64, usize)> = Vec::new();
    let mut gap_start: Option<u64> = None;
    let mut offset = SEGMENT_HEADER_LEN;
    let known_flags = FLAG_LAST_IN_BATCH | FLAG_SYNCED_BEFORE;
    let take = |batch: &mut Vec<(u64, usize)>,
                salvage: &mut SegmentSalvage,
                index: &mut KeyIndex,
                report: &mut RepairReport| {
        for (at, record_len) in batch.drain(..) {
            let start = at as usize;
            let Ok((record, _)) = decode_record(&bytes[start..start + record_len], vlog_options)
            else {
                continue; // Verified when it was found; cannot fail now.
            };
            let ptr = ValuePointer {
                segment: number,
                offset: at,
                len: record_len as u32,
            };
            let inline = record.value.len() < value_threshold;
            let may_win =
                !coverage.covers(record.key, record.sequence, LogPosition::new(number, at));
            let (key, value) = (record.key, record.value);
            index.offer_record(
                key,
                record.sequence,
                record.kind,
                value,
                ptr,
                inline,
                may_win,
            );
            salvage.record_bytes += record_len as u64;
            report.log_records += 1;
        }
    };
    while limit.saturating_sub(offset) >= RECORD_HEADER_LEN as u64 {
        let at = offset as usize;
        let available = limit - offset;
        let record = record_len_from_header(&bytes[at..], available, vlog_options)
            .ok()
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
            let next_nonzero = bytes[at..limit as usize].iter().position(|&b| b != 0);
            let skip = next_nonzero.map_or(limit - offset, |p| {
                p.saturating_sub(RECORD_HEADER_LEN - 1) as u64
            });
            offset += skip.max(1);
            continue;
        };
        if let Some(start) = gap_start.take() {
            // A gap inside the segment: the batch it cut was acknowledged whole.
            take(&mut batch, &mut salvage, index, report);
            note_gap(&bytes[start as usize..at], &name, start, report);
            salvage.skipped.insert(start, offset);
        }
        let follows = batch.last().is_none_or(|&(prev_at, _)| {
            let prev = crate::coding::decode_fixed64(&bytes[prev_at as usize + 12..]);
            prev.map(|p| p.wrapping_add(1)) == Some(sequence)
        });
        if !follows {
            take(&mut batch, &mut salvage, index, report);
        }
        batch.push((offset, record_len));
        offset += record_len as u64;
        if last_in_batch {
            take(&mut batch, &mut salvage, index, report);
        }
    }
    // Whatever follows the last batch taken: a gap running to the end (a torn tail or
    // damage), a batch without its last record, bytes past `limit`.
    let tail_start = match (batch.first(), gap_start) {
        (Some(&(first, _)), _) => first,
        (None, Some(start)) => start,
        (None, None) => offset,
    };
    report.incomplete_batch_records += batch.len() as u64;
    if let Some(start) = gap_start {
        note_gap(&bytes[start as usize..limit as usize], &name, start, report);
    }
    if tail_start < len {
        salvage.skipped.insert(tail_start, len);
    }
    Ok(Some(salvage))
}

/// Counts a stepped-over range: zeros (a punched hole, a torn tail) are expected; anything
/// else is damage and listed.
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
        }
    }
    fs.sync_dir(&target)?;
    fs.sync_dir(dir)?;
    Ok(format!("{LOST_DIR}/{label}-{n}"))
}
