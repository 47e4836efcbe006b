//! Sequential reading of the value log: replay for recovery (hands every complete batch to
//! a callback, in log order, and finds where the valid log ends), and the scans of one
//! sealed segment that GC (`gc::cycle`), its sampling and `Db::check` make.
//!
//! The end rule (see `docs/FORMAT.md`, "End of the log"):
//! - segment `k` is read up to its end, or up to `prev_segment_end` recorded in the header of
//!   segment `k + 1` when that header is valid and the value lies inside segment `k`'s data
//!   (bytes after it are left over from a failed write and were never acknowledged);
//! - the scan moves to segment `k + 1` only if segment `k` ended cleanly exactly there;
//! - otherwise the log ends at the end of the last complete batch: the first record that is
//!   torn, zero-filled, fails its checksum, or a batch without its `LAST_IN_BATCH` record.
//!   That is a torn tail only if nothing after it was ever synced. It is *damage* when
//!   (among others: the full list is FORMAT.md's — a search for valid records that gives
//!   up after 256 MiB of checksumming, records ending before the end of a segment that has
//!   a successor, a later segment with a successor holding data or an unreadable header)
//!   - a later segment holds a complete batch (the writer syncs a segment before starting
//!     the next, so a crash cannot leave a hole),
//!   - a valid record carrying `FLAG_SYNCED_BEFORE` follows in the same segment (that flag
//!     says every byte before it was durable, so the bad bytes were synced data), or
//!   - the next segment's valid header records a `prev_segment_end` past where the records
//!     end (the writer synced this segment that far before it wrote that header).
//!
//! [`scan_log`] reports damage with where it is and what lies after it; [`scan`] turns it
//! into `Corruption`. Recovery refuses damage unless the user asked for salvage.
//!
//! Lengths read from disk are checked against the configured maxima and the bytes left in
//! the segment before anything is allocated. Stateless; thread-safe.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::format::{
    decode_record, header_fields_valid, record_len_from_header, SegmentHeader, FLAG_SYNCED_BEFORE,
    SEGMENT_HEADER_LEN,
};
use super::{list_segments, ValuePointer, VlogOptions, RECORD_HEADER_LEN};
use crate::error::{Error, Result};
use crate::filename::vlog_file_name;
use crate::fs::{FileSystem, ReadableFile};
use crate::key::ValueKind;
use crate::position::LogPosition;

/// Bytes read per `read_at` while scanning (more when a single record is larger).
const READ_CHUNK: usize = 256 << 10;
/// What a segment without punched ranges has.
static NO_PUNCHED_RANGES: BTreeMap<u64, u64> = BTreeMap::new();

/// One record of a replayed batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedRecord {
    pub ptr: ValuePointer,
    pub sequence: u64,
    pub kind: ValueKind,
    pub key: Vec<u8>,
    /// The value, or empty when it was not copied (see [`scan_segments`]'s
    /// `copy_values_below`); `value_len` is its length either way.
    pub value: Vec<u8>,
    pub value_len: usize,
}

/// Where a scanned log stopped being valid although valid data follows (see module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDamage {
    /// The segment and offset of the first bad byte (the end of the last good batch).
    pub at: LogPosition,
    /// What follows the bad bytes.
    pub reason: String,
    /// Bytes after `at` that salvage would drop (the rest of the segment and every later
    /// segment's records).
    pub bytes_after: u64,
    /// Valid records found after `at` (they would be dropped by salvage).
    pub records_after: u64,
}

impl LogDamage {
    /// The damage as a `Corruption` error that says how to proceed.
    pub fn to_error(&self, dir: &Path) -> Error {
        let name = vlog_file_name(dir, self.at.segment).display().to_string();
        Error::corruption(
            name,
            self.at.offset,
            format!(
                "{}; {} valid records ({} bytes) follow the damage. Nothing was changed. \
                 Open with RecoveryMode::SalvagePrefix to keep the log before it and drop them",
                self.reason, self.records_after, self.bytes_after
            ),
        )
    }
}

/// What [`scan_log`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Just past the last complete batch handed to the callback.
    pub end: LogPosition,
    /// Set when the log ends at damage rather than at a torn tail.
    pub damage: Option<LogDamage>,
}

/// Like [`scan_log`], but damage in the middle of the log is a `Corruption` error.
pub fn scan(
    fs: &dyn FileSystem,
    dir: &Path,
    start: LogPosition,
    opts: &VlogOptions,
    f: &mut dyn FnMut(&[ScannedRecord]) -> Result<()>,
) -> Result<LogPosition> {
    let outcome = scan_log(fs, dir, start, opts, f)?;
    match outcome.damage {
        Some(damage) => Err(damage.to_error(dir)),
        None => Ok(outcome.end),
    }
}

/// Calls `f` for each complete batch from `start` on, across segments `start.segment..=`
/// the last one present, and returns the position just past the last complete batch (where
/// the writer continues; the caller truncates that segment there and deletes later ones),
/// and whether valid data follows it (damage, not a torn tail).
/// `start.offset` below the header size means "from the first record". Reads only.
pub fn scan_log(
    fs: &dyn FileSystem,
    dir: &Path,
    start: LogPosition,
    opts: &VlogOptions,
    f: &mut dyn FnMut(&[ScannedRecord]) -> Result<()>,
) -> Result<ScanOutcome> {
    let segments: Vec<u64> = list_segments(fs, dir)?
        .into_iter()
        .filter(|&n| n >= start.segment)
        .collect();
    scan_segments(fs, dir, &segments, false, start, opts, usize::MAX, f)
}

/// [`scan_log`] over the given segments (ascending, the first being `start.segment`)
/// instead of every segment present. Values of `copy_values_below` bytes or more are
/// checked but not copied into the records handed to `f`, so replaying a batch holds its
/// keys and small values, not its large values (recovery needs only their pointers).
///
/// `newer_segment_exists`: a segment newer than the last of `segments` exists (a torn one
/// the caller leaves out): the last one was then synced whole too.
#[allow(clippy::too_many_arguments)]
pub fn scan_segments(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[u64],
    newer_segment_exists: bool,
    start: LogPosition,
    opts: &VlogOptions,
    copy_values_below: usize,
    f: &mut dyn FnMut(&[ScannedRecord]) -> Result<()>,
) -> Result<ScanOutcome> {
    if segments.first() != Some(&start.segment) {
        let name = vlog_file_name(dir, start.segment).display().to_string();
        return Err(Error::corruption(
            name,
            0,
            "value-log segment to replay from is missing",
        ));
    }
    let mut from = start.offset.max(SEGMENT_HEADER_LEN);
    // The highest sequence number handed to `f` so far, over every segment.
    let mut newest_sequence = 0u64;
    for (i, &segment) in segments.iter().enumerate() {
        let path = vlog_file_name(dir, segment);
        let name = path.display().to_string();
        let file = fs.open_read(&path)?;
        let file_len = file.len()?;
        let header = read_header(file.as_ref(), &name)?;
        if header.segment != segment {
            return Err(Error::corruption(
                &name,
                0,
                format!("header names segment {}", header.segment),
            ));
        }
        if from > file_len {
            return Err(Error::corruption(
                &name,
                from,
                "replay starts past the end of the segment",
            ));
        }
        let next = segments.get(i + 1).copied();
        let has_successor = next.is_some() || newer_segment_exists;
        let next_header = match next {
            Some(n) if n == segment + 1 => Some(header_of_segment(fs, dir, n)?),
            _ => None,
        };
        // The writer numbers segments one after another and writes in each new header where
        // the one before it ended; only an open, starting a segment after one it cut, leaves
        // that out. A next segment that says so, with the one before it gone, follows a hole.
        let missing_before_next = match next {
            Some(n) if n != segment + 1 => {
                let says = header_of_segment(fs, dir, n)?;
                matches!(says, SegmentHeaderSays::Declares(_)).then_some(n)
            }
            _ => None,
        };
        let declared = match next_header {
            Some(SegmentHeaderSays::Declares(end)) => Some(end),
            _ => None,
        };
        let declared_end = declared.filter(|&end| end >= from && end <= file_len);
        let limit = declared_end.unwrap_or(file_len);
        let mut segment_scan = SegmentScan::new(file, &name, segment, limit, opts);
        segment_scan.copy_values_below = copy_values_below;
        segment_scan.stop_at_sequence_gap = true;
        let end = segment_scan.run(from, &mut |batch| {
            let newest_here = batch.iter().map(|record| record.sequence).max();
            newest_sequence = newest_sequence.max(newest_here.unwrap_or(0));
            f(batch).map(|()| true)
        })?;
        let sequence_gap = segment_scan.sequence_gap.take();
        // A successor whose header does not say where this segment ended was made by an
        // open that cut this segment to its records and synced it first: the log goes on
        // there when the records reach the file's end.
        let undeclared_successor = next_header == Some(SegmentHeaderSays::DoesNotSay) && end == file_len;
        if sequence_gap.is_none() && (declared_end == Some(end) || undeclared_successor) {
            from = SEGMENT_HEADER_LEN;
            continue;
        }
        let at = LogPosition::new(segment, end);
        segment_scan.probe_newer_than = newest_sequence;
        let (records_here, synced_after, gave_up) = segment_scan.probe_after(end)?;
        let mut bytes_after = limit - end;
        let mut records_after = records_here;
        // Records that verify one by one but break their batch's sequence are no tear.
        let mut reason = sequence_gap
            .map(|(offset, why)| format!("at offset {offset}: {why}"))
            .or_else(|| {
                synced_after.map(|offset| {
                    format!(
                        "a record that fails its checks is followed by synced records (at \
                         offset {offset})"
                    )
                })
            });
        if let Some(n) = missing_before_next {
            reason.get_or_insert_with(|| {
                format!(
                    "segment {} is missing: segment {n}'s header says the log went on into it \
                     from segment {}",
                    n - 1,
                    n - 1
                )
            });
        }
        if gave_up {
            reason.get_or_insert_with(|| {
                format!(
                    "the search for valid records after offset {end} gave up after checksumming \
                     {PROBE_CHECKSUM_BUDGET} bytes of record-like bytes that do not verify: no \
                     torn tail looks like that"
                )
            });
        }
        if let Some(synced_to) = declared.filter(|&declared| declared > end) {
            // The writer synced this segment to `synced_to` before it wrote the next
            // segment's header, so the bytes that fail (or are missing: a file shorter than
            // that) were durable: damage, not a torn tail, even with no valid record after.
            reason.get_or_insert_with(|| {
                format!(
                    "the records end at offset {end} of {file_len} bytes, but segment {}'s \
                     header says this segment was synced up to offset {synced_to}",
                    segment + 1
                )
            });
        }
        if has_successor && end < limit {
            // The writer syncs a segment whole, cut to its last record, before it creates
            // the next one: bytes that fail here were durable.
            reason.get_or_insert_with(|| {
                format!(
                    "the records end at offset {end} of {limit} bytes, but a later segment \
                     exists, so this segment was synced whole before it was created"
                )
            });
        }
        for (j, &later) in segments[i + 1..].iter().enumerate() {
            let later_len = fs.file_size(&vlog_file_name(dir, later))?;
            bytes_after += later_len.saturating_sub(SEGMENT_HEADER_LEN);
            let batches = count_records(fs, dir, later, opts)?;
            if batches > 0 && reason.is_none() {
                reason = Some(format!(
                    "hole in the value log: the log ends here but segment {later} holds valid batches"
                ));
            }
            let later_has_successor = i + 2 + j < segments.len() || newer_segment_exists;
            if later_has_successor && reason.is_none() {
                // Synced whole before its successor was created, so neither an unreadable
                // header nor bytes past it can be a torn tail.
                if later_len > SEGMENT_HEADER_LEN {
                    reason = Some(format!(
                        "the log ends here, but segment {later} holds {later_len} bytes that \
                         were synced before a later segment was created"
                    ));
                } else if header_of_segment(fs, dir, later)? == SegmentHeaderSays::Unreadable {
                    reason = Some(format!(
                        "the header of segment {later} does not verify, but a later segment \
                         exists, so it was synced before that one was created"
                    ));
                }
            }
            records_after += batches;
        }
        let damage = reason.map(|reason| LogDamage {
            at,
            reason,
            bytes_after,
            records_after,
        });
        return Ok(ScanOutcome { end: at, damage });
    }
    // Unreachable in practice: the last segment has no successor, so its iteration returns.
    let last = *segments
        .last()
        .expect("segments holds at least start.segment");
    Ok(ScanOutcome {
        end: LogPosition::new(last, from),
        damage: None,
    })
}

/// Whether a [`sample_segment_records`] read every record of the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleCoverage {
    /// The records were read from the first to the end of the file: a count over them is
    /// exact, not an estimate.
    pub complete: bool,
}

/// Hands records of sealed segment `n` to `f` one at a time (GC's sampling; values are not
/// copied). A segment with up to twice `windows * window_bytes` of records is read whole. A
/// larger one is cut into `windows` equal strata and about `window_bytes` of records are read from
/// the middle of each, so a sample sees the whole segment's mix rather than its oldest
/// part. A window starts at the first record found at or after its offset (every byte
/// offset is tried, as [`probe_segment_body`] does, within the stratum and until 16 times
/// `window_bytes` of candidates have failed their checksums; a false find inside a value is possible but
/// has another record's offset, so it never reads as live, though it counts as dead), steps
/// over `punched` ranges, and ends early at a record that fails its checks. Reads only.
#[allow(clippy::too_many_arguments)]
pub fn sample_segment_records(
    fs: &dyn FileSystem,
    dir: &Path,
    n: u64,
    punched: &BTreeMap<u64, u64>,
    windows: u64,
    window_bytes: u64,
    opts: &VlogOptions,
    f: &mut dyn FnMut(&ScannedRecord) -> Result<()>,
) -> Result<SampleCoverage> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = open_segment(fs, &path, &name, n)?;
    let len = file.len()?;
    let mut scan = SegmentScan::new(file, &name, n, len, opts);
    scan.punched = punched;
    let body = len.saturating_sub(SEGMENT_HEADER_LEN);
    let windows = windows.max(1);
    // Up to twice the windows' bytes, reading everything costs about as much as windows
    // would, and the count is exact.
    if body <= windows.saturating_mul(window_bytes).saturating_mul(2) {
        let end = scan.read_records(SEGMENT_HEADER_LEN, u64::MAX, f)?;
        return Ok(SampleCoverage {
            complete: end == len,
        });
    }
    // Reads sized to a window, not to a replay's long runs.
    scan.read_chunk = usize::try_from(window_bytes.max(4096)).unwrap_or(READ_CHUNK);
    let stratum = body / windows;
    let mut read_to = SEGMENT_HEADER_LEN;
    for i in 0..windows {
        let stratum_start = SEGMENT_HEADER_LEN + i * stratum;
        let stratum_end = stratum_start + stratum;
        let wanted = (stratum_start + stratum / 2).saturating_sub(window_bytes / 2);
        let from = wanted.max(read_to).max(SEGMENT_HEADER_LEN);
        if from >= stratum_end {
            continue;
        }
        if let Some(start) = scan.record_boundary_in(from, stratum_end)? {
            read_to = scan.read_records(start, window_bytes, f)?;
        }
    }
    Ok(SampleCoverage { complete: false })
}

/// Hands every record of sealed segment `n` to `f` (GC's collection), stepping over the
/// `punched` ranges (their records are handed over in pieces: the records of a batch that
/// surround a punched record arrive as two calls). Fails with `Corruption` unless the
/// records read cleanly to the end of the file.
pub fn scan_sealed_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    n: u64,
    punched: &BTreeMap<u64, u64>,
    opts: &VlogOptions,
    copy_values_below: usize,
    f: &mut dyn FnMut(&[ScannedRecord]) -> Result<()>,
) -> Result<u64> {
    let (end, len) = scan_from_start(fs, dir, n, punched, opts, copy_values_below, &mut |batch| {
        f(batch).map(|()| true)
    })?;
    if end != len {
        return Err(Error::corruption(
            vlog_file_name(dir, n).display().to_string(),
            end,
            format!("value-log segment does not read cleanly to its end ({len} bytes)"),
        ));
    }
    Ok(len)
}

/// Hands the complete batches of segment `n` in `range` to `f`, stepping over `punched`
/// ranges; returns where they end (`range.end` when every record there verifies). The end
/// is a batch boundary that had reached the OS (the writer may be appending past it
/// meanwhile: nothing at or after it is read). A start below the header size means from
/// the first record. `Db::check` reads the log from the replay head on with it.
pub fn scan_segment_range(
    fs: &dyn FileSystem,
    dir: &Path,
    n: u64,
    range: std::ops::Range<u64>,
    punched: &BTreeMap<u64, u64>,
    opts: &VlogOptions,
    f: &mut dyn FnMut(&[ScannedRecord]) -> Result<()>,
) -> Result<u64> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = open_segment(fs, &path, &name, n)?;
    let (from, until) = (range.start.max(SEGMENT_HEADER_LEN), range.end);
    if until < from {
        return Ok(from);
    }
    let mut scan = SegmentScan::new(file, &name, n, until, opts);
    scan.copy_values_below = 0;
    scan.punched = punched;
    scan.run(from, &mut |batch| f(batch).map(|()| true))
}

/// Hands the complete batches of segment `n`, from its first record on, to `on_batch`
/// (which returns whether to go on), stepping over `punched` ranges. Returns where the
/// valid batches ended and the file's length.
fn scan_from_start(
    fs: &dyn FileSystem,
    dir: &Path,
    n: u64,
    punched: &BTreeMap<u64, u64>,
    opts: &VlogOptions,
    copy_values_below: usize,
    on_batch: &mut dyn FnMut(&[ScannedRecord]) -> Result<bool>,
) -> Result<(u64, u64)> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = open_segment(fs, &path, &name, n)?;
    let len = file.len()?;
    let mut scan = SegmentScan::new(file, &name, n, len, opts);
    scan.copy_values_below = copy_values_below;
    scan.punched = punched;
    let end = scan.run(SEGMENT_HEADER_LEN, on_batch)?;
    Ok((end, len))
}

/// Opens segment `n` for reading and checks that its header names it.
fn open_segment(
    fs: &dyn FileSystem,
    path: &Path,
    name: &str,
    n: u64,
) -> Result<Arc<dyn ReadableFile>> {
    let file = fs.open_read(path)?;
    let header = read_header(file.as_ref(), name)?;
    if header.segment != n {
        return Err(Error::corruption(
            name,
            0,
            format!("header names segment {}", header.segment),
        ));
    }
    Ok(file)
}

fn read_header(file: &dyn ReadableFile, name: &str) -> Result<SegmentHeader> {
    let mut buf = [0u8; SEGMENT_HEADER_LEN as usize];
    file.read_exact_at(0, &mut buf, name)?;
    SegmentHeader::decode(&buf, name)
}

/// How far segment `n - 1` was written, as segment `n`'s header records it (`None`: the
/// header does not say, or does not verify).
pub fn declared_end_of_previous(fs: &dyn FileSystem, dir: &Path, n: u64) -> Result<Option<u64>> {
    Ok(match header_of_segment(fs, dir, n)? {
        SegmentHeaderSays::Declares(end) => Some(end),
        SegmentHeaderSays::DoesNotSay | SegmentHeaderSays::Unreadable => None,
    })
}

/// What segment `n`'s header says of the segment before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SegmentHeaderSays {
    /// Its `prev_segment_end`: how far the previous segment was synced.
    Declares(u64),
    /// A valid header that does not know it (written by an open that started a new
    /// segment after cutting the log, or by a version before the field).
    DoesNotSay,
    /// The header does not verify (a crash while creating the segment, or damage).
    Unreadable,
}

fn header_of_segment(fs: &dyn FileSystem, dir: &Path, n: u64) -> Result<SegmentHeaderSays> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    match read_header(file.as_ref(), &name) {
        Ok(h) if h.segment == n && h.prev_segment_end != 0 => {
            Ok(SegmentHeaderSays::Declares(h.prev_segment_end))
        }
        Ok(h) if h.segment == n => Ok(SegmentHeaderSays::DoesNotSay),
        Ok(_) => Ok(SegmentHeaderSays::Unreadable),
        Err(e @ (Error::Io { .. } | Error::NoSpace { .. } | Error::UnsupportedVersion { .. })) => {
            Err(e)
        }
        Err(_) => Ok(SegmentHeaderSays::Unreadable),
    }
}

/// Valid records anywhere after segment `n`'s header slot (whatever the header holds), and
/// the offset of the first that carries `FLAG_SYNCED_BEFORE`: such a record proves that the
/// header was synced before it (a sync covers the whole active segment). Looks at every
/// byte offset, so it is meant for the rare segment whose header does not verify.
pub fn probe_segment_body(
    fs: &dyn FileSystem,
    dir: &Path,
    n: u64,
    opts: &VlogOptions,
) -> Result<(u64, Option<u64>)> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let len = file.len()?;
    if len < SEGMENT_HEADER_LEN {
        return Ok((0, None));
    }
    // `probe_after` looks from one byte past where a scan stopped.
    let (records, synced_at, _gave_up) =
        SegmentScan::new(file, &name, n, len, opts).probe_after(SEGMENT_HEADER_LEN - 1)?;
    Ok((records, synced_at))
}

/// Records in the complete batches at the start of segment `n`, right after its header slot
/// (whatever the header itself looks like).
fn count_records(fs: &dyn FileSystem, dir: &Path, n: u64, opts: &VlogOptions) -> Result<u64> {
    let path = vlog_file_name(dir, n);
    let name = path.display().to_string();
    let file = fs.open_read(&path)?;
    let len = file.len()?;
    if len < SEGMENT_HEADER_LEN {
        return Ok(0);
    }
    let mut records = 0u64;
    let mut scan = SegmentScan::new(file, &name, n, len, opts);
    // Counting stops at a sequence gap as at any record that fails.
    scan.stop_at_sequence_gap = true;
    scan.run(SEGMENT_HEADER_LEN, &mut |batch| {
        records += batch.len() as u64;
        Ok(true)
    })?;
    Ok(records)
}

/// Bytes of candidates carrying `FLAG_SYNCED_BEFORE` that pass a record header's checks but
/// fail their checksum after which the search past the log's end gives up (a quarter of a
/// second of checksumming; with [`PROBE_UNFLAGGED_BUDGET`], at most 512 MiB in all).
const PROBE_CHECKSUM_BUDGET: u64 = 256 << 20;
/// The same for candidates without the flag, after which the search goes on looking for
/// flagged ones only (an unflagged record says nothing about syncing, so not finding one is
/// no reason to call the end damage).
const PROBE_UNFLAGGED_BUDGET: u64 = 256 << 20;

/// What a search for a record start may spend checksumming candidates whose header passes
/// but whose checksum fails.
#[derive(Debug, Clone, Copy)]
struct SearchBudget {
    /// Bytes left for every candidate, or, with `flagged`, for those without
    /// `FLAG_SYNCED_BEFORE`; once spent, those are stepped over unchecked.
    unflagged: u64,
    /// Bytes left for candidates with `FLAG_SYNCED_BEFORE`; `None`: they share `unflagged`.
    /// The search ends when the budget its candidate draws on is spent (and, with this set,
    /// only when this one is).
    flagged: Option<u64>,
}

impl SearchBudget {
    fn shared(bytes: u64) -> Self {
        SearchBudget {
            unflagged: bytes,
            flagged: None,
        }
    }
}

/// Reads one segment's records through a read-ahead window.
struct SegmentScan<'a> {
    file: Arc<dyn ReadableFile>,
    name: &'a str,
    segment: u64,
    /// Bytes at or after this offset are not looked at.
    limit: u64,
    opts: &'a VlogOptions,
    /// Values this long or longer are not copied into scanned records.
    copy_values_below: usize,
    /// Record ranges punched out of the segment (start -> end): stepped over, never read.
    punched: &'a BTreeMap<u64, u64>,
    /// Bytes read at a time (more when a single record is larger).
    read_chunk: usize,
    /// Bytes of candidates checksummed by searches for a record start (what bounds them).
    searched_bytes: u64,
    window_start: u64,
    window: Vec<u8>,
    /// A record whose sequence does not follow the one before it in its batch ends the run
    /// like a record that fails its checks, and why is kept in `sequence_gap` (recovery
    /// judges it damage, which salvage steps over); otherwise it is a `Corruption` error.
    stop_at_sequence_gap: bool,
    /// The gap that ended the run, with its offset: `(offset, why)`.
    sequence_gap: Option<(u64, String)>,
    /// [`SegmentScan::probe_after`] takes a record with `FLAG_SYNCED_BEFORE` for proof of
    /// a sync only if its sequence number is above this (the highest replayed): a record
    /// written after the replayed ones has a higher one, while a copy of an older record
    /// (inside a torn value that embeds one, or in a stale block a file system handed the
    /// unsynced end after a power cut) does not.
    probe_newer_than: u64,
}

impl<'a> SegmentScan<'a> {
    fn new(
        file: Arc<dyn ReadableFile>,
        name: &'a str,
        segment: u64,
        limit: u64,
        opts: &'a VlogOptions,
    ) -> Self {
        SegmentScan {
            file,
            name,
            segment,
            limit,
            opts,
            copy_values_below: usize::MAX,
            punched: &NO_PUNCHED_RANGES,
            read_chunk: READ_CHUNK,
            searched_bytes: 0,
            window_start: 0,
            window: Vec::new(),
            stop_at_sequence_gap: false,
            sequence_gap: None,
            probe_newer_than: 0,
        }
    }

    /// Bytes `[offset, offset + len)`; the caller has checked they lie below `limit`.
    fn bytes(&mut self, offset: u64, len: usize) -> Result<&[u8]> {
        let cached = offset >= self.window_start
            && offset + len as u64 <= self.window_start + self.window.len() as u64;
        if !cached {
            let want = (len.max(self.read_chunk) as u64).min(self.limit - offset) as usize;
            self.window.resize(want, 0);
            self.file
                .read_exact_at(offset, &mut self.window, self.name)?;
            self.window_start = offset;
        }
        let start = (offset - self.window_start) as usize;
        Ok(&self.window[start..start + len])
    }

    /// The first record boundary in `[from, until)`: the end of a punched range `from` lies
    /// in, else the first offset where a record passes its checks, else the start of the
    /// first punched range in the span (a range starts where a record did). `None` if there
    /// is none.
    fn record_boundary_in(&mut self, from: u64, until: u64) -> Result<Option<u64>> {
        let inside = (self.punched.range(..=from).next_back())
            .filter(|&(_, &end)| end > from)
            .map(|(_, &end)| end);
        if let Some(end) = inside {
            return Ok((end < until).then_some(end));
        }
        let next_range = (self.punched.range(from..).next())
            .map(|(&start, _)| start)
            .filter(|&start| start < until);
        let search_until = next_range.unwrap_or(until);
        let mut checksum_budget = SearchBudget::shared(16 * self.read_chunk as u64);
        match self.next_valid_record(from, search_until, &mut checksum_budget)? {
            Some((at, ..)) => Ok(Some(at)),
            None => Ok(next_range),
        }
    }

    /// Hands records one at a time from record boundary `from` until `max_bytes` of records
    /// were handed over or a record fails its checks (batches are not assembled: a sample
    /// wants records), stepping over punched ranges. Returns the offset after the last
    /// record or range stepped over.
    fn read_records(
        &mut self,
        from: u64,
        max_bytes: u64,
        f: &mut dyn FnMut(&ScannedRecord) -> Result<()>,
    ) -> Result<u64> {
        let (segment, opts) = (self.segment, self.opts);
        let mut offset = from;
        let mut handed = 0u64;
        while handed < max_bytes && self.limit.saturating_sub(offset) >= RECORD_HEADER_LEN as u64 {
            let next_punched = self.punched.range(offset..).next().map(|(&s, &e)| (s, e));
            if let Some((_, end)) = next_punched.filter(|&(start, _)| start == offset) {
                if end > self.limit {
                    break;
                }
                offset = end;
                continue;
            }
            let available = self.limit - offset;
            let header = self.bytes(offset, RECORD_HEADER_LEN)?;
            let Ok(len) = record_len_from_header(header, available, opts) else {
                break;
            };
            if next_punched.is_some_and(|(start, _)| start < offset + len as u64) {
                break;
            }
            let bytes = self.bytes(offset, len)?;
            let Ok((record, _)) = decode_record(bytes, opts) else {
                break;
            };
            f(&ScannedRecord {
                ptr: ValuePointer {
                    segment,
                    offset,
                    len: len as u32,
                },
                sequence: record.sequence,
                kind: record.kind,
                key: record.key.to_vec(),
                value: Vec::new(),
                value_len: record.value.len(),
            })?;
            offset += len as u64;
            handed += len as u64;
        }
        Ok(offset)
    }

    /// Looks at every byte offset after `end` (where replay stopped) for records that pass
    /// their checks. Returns how many it found (stepping over each one found) and the offset
    /// of the first that carries `FLAG_SYNCED_BEFORE`, if any. Reads only what is below
    /// `limit`; a torn tail is usually short, and damage is usually followed by a valid
    /// record right after the damaged one, so this rarely reads much.
    ///
    /// Candidates whose headers pass but whose checksums fail are bounded (values built to
    /// look like record headers would otherwise make it checksum for hours): once those
    /// without `FLAG_SYNCED_BEFORE` cost [`PROBE_UNFLAGGED_BUDGET`] bytes, only flagged ones
    /// are still checked (the count of records found is then a lower bound); once flagged
    /// ones cost [`PROBE_CHECKSUM_BUDGET`], the search gives up, and the third value says so.
    /// Only the flag, on a record newer than those replayed (`probe_newer_than`), decides
    /// between a torn tail and damage, so user data that merely looks like unflagged
    /// headers — a torn record's own value, walked byte by byte, say, sparse data with one
    /// non-zero byte in a header's key length — never makes a torn tail damage, nor does a
    /// torn value that holds a copy of one of this log's records.
    fn probe_after(&mut self, end: u64) -> Result<(u64, Option<u64>, bool)> {
        let mut found = 0u64;
        let mut synced = None;
        let mut offset = end + 1;
        let mut budget = SearchBudget {
            unflagged: PROBE_UNFLAGGED_BUDGET,
            flagged: Some(PROBE_CHECKSUM_BUDGET),
        };
        while let Some((at, len, flags, sequence)) =
            self.next_valid_record(offset, self.limit, &mut budget)?
        {
            found += 1;
            let newer = sequence > self.probe_newer_than;
            if flags & FLAG_SYNCED_BEFORE != 0 && newer && synced.is_none() {
                synced = Some(at);
            }
            offset = at + len as u64;
        }
        Ok((found, synced, budget.flagged == Some(0)))
    }

    /// The first byte offset in `[offset, search_until)` where a record that passes its
    /// checks starts (the record may end past `search_until`, not past `limit`), with its
    /// length, flags and sequence number. `None` also once candidates whose headers pass but whose checksums
    /// fail have used up the budget they draw on ([`SearchBudget`]: a search through values
    /// full of header-like bytes stops there, after at most the budget and one record more).
    fn next_valid_record(
        &mut self,
        mut offset: u64,
        search_until: u64,
        budget: &mut SearchBudget,
    ) -> Result<Option<(u64, usize, u8, u64)>> {
        let opts = self.opts;
        let search_until = search_until.min(self.limit);
        while offset < search_until && self.limit.saturating_sub(offset) >= RECORD_HEADER_LEN as u64
        {
            let available = self.limit - offset;
            let header = self.bytes(offset, RECORD_HEADER_LEN)?;
            if header.iter().all(|&b| b == 0) {
                // Zeros (the unwritten end of a segment, zeros written ahead of sync writes,
                // direct writes' padding): an all-zero header never passes its checksum
                // (`format` tests), so no record starts where its header would lie wholly
                // inside the run. Step to the first offset whose header reaches past it.
                let past_zeros =
                    self.next_nonzero(offset, search_until + RECORD_HEADER_LEN as u64)?;
                offset = (past_zeros + 1)
                    .saturating_sub(RECORD_HEADER_LEN as u64)
                    .max(offset + 1);
                continue;
            }
            let Ok(len) = record_len_from_header(header, available, opts) else {
                offset += 1;
                continue;
            };
            if !header_fields_valid(header) {
                offset += 1;
                continue;
            }
            let flags = header[RECORD_HEADER_LEN - 1];
            let flagged = flags & FLAG_SYNCED_BEFORE != 0;
            let checksum_budget = match (flagged, budget.flagged.as_mut()) {
                (true, Some(bytes)) => bytes,
                _ => &mut budget.unflagged,
            };
            if *checksum_budget == 0 {
                if budget.flagged.is_some() && !flagged {
                    offset += 1;
                    continue;
                }
                return Ok(None);
            }
            self.searched_bytes += len as u64;
            let bytes = self.bytes(offset, len)?;
            let Ok((record, _)) = decode_record(bytes, opts) else {
                // Only candidates that fail count: the record sought may be larger than
                // the whole budget.
                *checksum_budget = checksum_budget.saturating_sub(len as u64);
                offset += 1;
                continue;
            };
            return Ok(Some((offset, len, flags, record.sequence)));
        }
        Ok(None)
    }

    /// The first offset at or after `offset` whose byte is not zero, or `until` (at most
    /// `limit`) if there is none before it.
    fn next_nonzero(&mut self, mut offset: u64, until: u64) -> Result<u64> {
        let until = until.min(self.limit);
        while offset < until {
            let n = (until - offset).min(self.read_chunk as u64) as usize;
            let bytes = self.bytes(offset, n)?;
            if let Some(i) = bytes.iter().position(|&b| b != 0) {
                return Ok(offset + i as u64);
            }
            offset += n as u64;
        }
        Ok(until)
    }

    /// Replays complete batches from `from`; `on_batch` returns whether to go on. Returns the
    /// offset just past the last complete batch handed over.
    fn run(
        &mut self,
        from: u64,
        on_batch: &mut dyn FnMut(&[ScannedRecord]) -> Result<bool>,
    ) -> Result<u64> {
        let mut offset = from;
        let mut batch_end = from;
        let mut batch: Vec<ScannedRecord> = Vec::new();
        let (name, segment, opts) = (self.name, self.segment, self.opts);
        let copy_values_below = self.copy_values_below;
        while self.limit - offset >= RECORD_HEADER_LEN as u64 {
            let next_punched = self.punched.range(offset..).next().map(|(&s, &e)| (s, e));
            if let Some((_, end)) = next_punched.filter(|&(start, _)| start == offset) {
                if end > self.limit {
                    return Err(Error::corruption(
                        name,
                        offset,
                        format!("punched range ends at {end}, past the segment's end"),
                    ));
                }
                // The records of a batch around the range are handed over without the
                // punched (dead) ones; a punched segment's batches are not replayed.
                if !batch.is_empty() {
                    let go_on = on_batch(&batch)?;
                    batch.clear();
                    if !go_on {
                        break;
                    }
                }
                offset = end;
                batch_end = end;
                continue;
            }
            let available = self.limit - offset;
            let header = self.bytes(offset, RECORD_HEADER_LEN)?;
            let Ok(len) = record_len_from_header(header, available, opts) else {
                break;
            };
            if let Some((start, _)) = next_punched.filter(|&(start, _)| start < offset + len as u64)
            {
                return Err(Error::corruption(
                    name,
                    offset,
                    format!("record of {len} bytes overlaps the punched range at {start}"),
                ));
            }
            let bytes = self.bytes(offset, len)?;
            let Ok((record, _)) = decode_record(bytes, opts) else {
                break;
            };
            if let Some(prev) = batch.last() {
                if record.sequence != prev.sequence.wrapping_add(1) {
                    let why = format!(
                        "sequence {} does not follow {} within a batch",
                        record.sequence, prev.sequence
                    );
                    if self.stop_at_sequence_gap {
                        self.sequence_gap = Some((offset, why));
                        break;
                    }
                    return Err(Error::corruption(name, offset, why));
                }
            }
            batch.push(ScannedRecord {
                ptr: ValuePointer {
                    segment,
                    offset,
                    len: len as u32,
                },
                sequence: record.sequence,
                kind: record.kind,
                key: record.key.to_vec(),
                value: if record.value.len() < copy_values_below {
                    record.value.to_vec()
                } else {
                    Vec::new()
                },
                value_len: record.value.len(),
            });
            offset += len as u64;
            if record.last_in_batch {
                batch_end = offset;
                let go_on = on_batch(&batch)?;
                batch.clear();
                if !go_on {
                    break;
                }
            }
        }
        Ok(batch_end)
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
