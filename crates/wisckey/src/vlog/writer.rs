//! `VlogWriter`: the single appender of the value log (held by the group-commit leader).
//!
//! Invariants:
//! - the active segment file holds exactly `flushed_len` bytes that the writer vouches for;
//!   the buffer holds the bytes that follow, so `end() = (segment, flushed_len + buf.len())`;
//! - a batch is encoded whole into one segment; rollover happens only between batches;
//! - a failed `append` is undone with `set_len(flushed_len)`, synced (a power cut must not
//!   undo the cut and bring back records the failed write put there); if that fails too,
//!   the active segment is never appended to again (the next batch starts a new segment
//!   whose header records `flushed_len` as the previous segment's valid end, so recovery
//!   skips the junk);
//! - `sync` makes older segments durable before newer ones, and a new segment's directory
//!   entry durable before anything in it is reported durable, so the durable part of the log
//!   is always a prefix;
//! - after a failed sync the error is latched and returned by every later call: the kernel
//!   may have dropped the dirty pages, so a retried fsync could report success falsely; the
//!   failed group's own records are cut off the file
//!   ([`VlogWriter::discard_failed_group`]), so a write that returned an error does not
//!   show up after a restart;
//! - [`VlogWriter::reserve`] runs before a group's records are buffered: it rolls over if
//!   the group will not fit and preallocates the segment's space, so a full device is
//!   reported (cleanly, nothing buffered, nothing poisoned) before any write that needs the
//!   space is acknowledged, and buffered bytes never meet ENOSPC when written out;
//! - the first record appended after a sync that covered the whole active segment carries
//!   `FLAG_SYNCED_BEFORE`, which lets recovery tell damage in synced data from a torn tail;
//! - a segment of an older format version is never appended to: the writer rolls over;
//! - the active segment's file may run past its last record only by zeros (direct writes'
//!   block padding, mapped writes' space allocated ahead, zeros written ahead of small sync
//!   writes, `zero_fill_size`); they are cut off before the segment is finished and at a
//!   clean close.
//!
//! Every `write_back_interval` bytes written out, the OS is asked to start writing the active
//! segment to the device (a hint, never relied on): without it the kernel holds the whole
//! segment dirty until the sync at its end, which then waits for all of it while nothing is
//! appended, and a load alternates between filling the page cache and draining it.
//!
//! Pipelined write-outs (with `direct_writes`, whose writes wait for the device): a full
//! buffer is handed, with the segment's file, to a write-out thread, and the next batches
//! are encoded into a second buffer meanwhile. At most one write-out is in flight; its bytes
//! lie between `flushed_len` and the buffer, are read from memory like the buffer's
//! ([`VlogWriter::read_buffered`]), and count as reaching the OS only once written. Every
//! other use of the file (sync, preallocation, truncation, the next write-out) waits for
//! it first, and a failed one is undone like a failed synchronous write-out.
//!
//! Not shared between threads (`&mut self`); `Send`.

use std::path::PathBuf;
use std::sync::{mpsc, Arc};

use super::format::{
    encode_record, record_len, SegmentHeader, FLAG_LAST_IN_BATCH, FLAG_SYNCED_BEFORE,
    FORMAT_VERSION, SEGMENT_HEADER_LEN,
};
use super::{ValuePointer, VlogOptions};
use crate::error::{Error, Result};
use crate::filename::vlog_file_name;
use crate::fs::{FileSystem, WritableFile};
use crate::key::{ValueKind, MAX_SEQUENCE};
use crate::position::LogPosition;

/// Most buffer room kept between write-outs beyond `buffer_size` (see `write_out`).
const RETAINED_BUFFER_MAX: usize = 32 << 20;

/// Most bytes reserved (`vlog_preallocate_size`) or written with zeros
/// (`vlog_zero_fill_size`) ahead of the records at a time, whatever the options say: with a
/// segment of no practical size limit, "up to the segment's end" would ask the file system
/// for more than a file can hold, or write zeros until the disk is full.
pub(crate) const MAX_AHEAD: u64 = 1 << 30;

/// One operation of a write batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// `Value` (a put) or `Deletion` (whose value must be empty).
    pub kind: ValueKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Appends write batches to the value log. See the module docs for the failure rules.
#[derive(Debug)]
pub struct VlogWriter {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    opts: VlogOptions,
    segment: u64,
    file: Box<dyn WritableFile>,
    /// Bytes of the active segment that have reached the OS (header included).
    flushed_len: u64,
    /// A pipelined write-out not yet finished: its bytes start at `flushed_len`, and the
    /// file is lent to the write-out thread meanwhile (`file` is a stand-in).
    in_flight: Option<Arc<Vec<u8>>>,
    /// Encoded records not yet handed to the OS; they start after the in-flight bytes.
    buf: Vec<u8>,
    /// A finished write-out's buffer, kept for the next one.
    spare: Vec<u8>,
    /// The thread that does pipelined write-outs, started by the first.
    write_thread: Option<WriteThread>,
    synced_end: LogPosition,
    /// The active segment was created and its directory entry is not yet durable.
    dir_entry_unsynced: bool,
    /// A failed write left junk at the end of the active segment that could not be cut off,
    /// the segment has an older format version, or a failed start of the next segment may
    /// have left its file behind (a later segment file tells recovery this one was synced
    /// whole, so it must receive no byte more).
    must_roll: bool,
    /// A group was reserved ([`VlogWriter::reserve`]): its batches stay in the segment the
    /// reservation chose, never rolling to another between two of them, so a failed group is
    /// discarded from one segment (a roll would have synced part of it for good) and its
    /// bytes are all preallocated. The segment may pass `segment_size` by part of a group.
    in_reserved_group: bool,
    /// Space of the active segment is preallocated up to this file length.
    reserved_to: u64,
    /// Write-back of the active segment has been started up to this offset.
    write_back_from: u64,
    /// The active segment's file may hold zeros past the records up to this offset
    /// (written by [`VlogWriter::sync_write`]; none while it is at most `flushed_len`). The
    /// segment is cut back to its last record before it is finished.
    zeroed_to: u64,
    sync_failure: Option<Error>,
}

impl VlogWriter {
    /// Opens segment `end.segment` for appending at `end.offset`, the end of the last complete
    /// batch found by recovery. Anything after it is cut off, and the segment and directory
    /// are synced so that `synced_end() == end` is true.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        end: LogPosition,
        opts: VlogOptions,
    ) -> Result<VlogWriter> {
        opts.validate()?;
        let path = vlog_file_name(&dir, end.segment);
        let name = path.display().to_string();
        if end.offset < SEGMENT_HEADER_LEN {
            return Err(Error::InvalidArgument(format!(
                "value-log end offset {} lies inside the header of {name}",
                end.offset
            )));
        }
        let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
        fs.open_read(&path)?.read_exact_at(0, &mut header, &name)?;
        let decoded = SegmentHeader::decode(&header, &name)?;
        if decoded.segment != end.segment {
            return Err(Error::corruption(
                &name,
                0,
                format!("header names segment {}", decoded.segment),
            ));
        }
        let mut file = if opts.direct_writes {
            fs.open_append_direct(&path)?
        } else if opts.mapped_writes {
            fs.open_append_mapped(&path)?
        } else {
            fs.open_append(&path)?
        };
        let len = file.len();
        if len < end.offset {
            return Err(Error::corruption(
                &name,
                len,
                format!("segment ends before the recovered end {}", end.offset),
            ));
        }
        if len > end.offset {
            file.set_len(end.offset)?;
        }
        file.sync_data()?;
        fs.sync_dir(&dir)?;
        Ok(VlogWriter {
            fs,
            dir,
            opts,
            segment: end.segment,
            file,
            flushed_len: end.offset,
            in_flight: None,
            buf: Vec::new(),
            spare: Vec::new(),
            write_thread: None,
            synced_end: end,
            dir_entry_unsynced: false,
            // An old binary must never find records of a newer format in a segment whose
            // header promises the old one.
            must_roll: decoded.version < FORMAT_VERSION,
            in_reserved_group: false,
            reserved_to: end.offset,
            write_back_from: end.offset,
            zeroed_to: end.offset,
            sync_failure: None,
        })
    }

    /// Creates the log's first segment, `first_segment`, which must not exist yet. Nothing is
    /// durable until the first `sync`.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        first_segment: u64,
        opts: VlogOptions,
    ) -> Result<VlogWriter> {
        Self::create_following(fs, dir, first_segment, 0, opts)
    }

    /// [`VlogWriter::create`] for a segment that continues the log after segment
    /// `first_segment - 1`, which the caller has cut to `prev_segment_end` bytes and synced:
    /// its header says so, so replay goes on from that segment into this one (0: the log
    /// does not go on from the segment before).
    pub fn create_following(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        first_segment: u64,
        prev_segment_end: u64,
        opts: VlogOptions,
    ) -> Result<VlogWriter> {
        opts.validate()?;
        let path = vlog_file_name(&dir, first_segment);
        if fs.exists(&path)? {
            return Err(Error::InvalidArgument(format!(
                "value-log segment {} already exists",
                path.display()
            )));
        }
        let file = start_segment(fs.as_ref(), &path, first_segment, prev_segment_end, &opts)
        .map_err(|failed| failed.error)?;
        Ok(VlogWriter {
            fs,
            dir,
            opts,
            segment: first_segment,
            file,
            flushed_len: SEGMENT_HEADER_LEN,
            in_flight: None,
            buf: Vec::new(),
            spare: Vec::new(),
            write_thread: None,
            synced_end: LogPosition::new(first_segment, 0),
            dir_entry_unsynced: true,
            must_roll: false,
            in_reserved_group: false,
            reserved_to: SEGMENT_HEADER_LEN,
            write_back_from: 0,
            zeroed_to: SEGMENT_HEADER_LEN,
            sync_failure: None,
        })
    }

    /// Prepares for a group of batches of `group_len` encoded bytes in total: rolls over to a
    /// new segment if the group would cross `segment_size` (or the active segment must not
    /// be appended to), then preallocates space in the active segment for the group and
    /// what is buffered. Call it before the group's first `append_batch`; the group's batches
    /// then all go into the segment chosen here (no roll between them), until the next
    /// `reserve`.
    ///
    /// A full device (or any failure to create the next segment) returns the error with the
    /// writer unchanged: nothing of the group is buffered and earlier buffered bytes stay
    /// intact, so the caller may fail just this group (where the failed start may have left
    /// the next segment's file, later groups must roll first: see `must_roll`). If the error came from writing out or
    /// syncing earlier bytes, the writer is poisoned ([`VlogWriter::is_poisoned`]).
    pub fn reserve(&mut self, group_len: u64) -> Result<()> {
        self.in_reserved_group = false;
        self.reserve_space(group_len)?;
        self.in_reserved_group = true;
        Ok(())
    }

    fn reserve_space(&mut self, group_len: u64) -> Result<()> {
        self.check_not_failed()?;
        let offset = self.end().offset;
        let crosses = offset > SEGMENT_HEADER_LEN && offset + group_len > self.opts.segment_size;
        if self.must_roll || crosses {
            if let Err(e) = self.write_out() {
                self.poison(e.clone());
                return Err(e);
            }
            self.roll()?;
        }
        if self.opts.preallocate_size == 0 {
            return Ok(());
        }
        let needed = self.end().offset + group_len;
        if needed <= self.reserved_to {
            return Ok(());
        }
        // Reserve in chunks so most groups need no system call, but never far past the
        // segment's target size: reserved, unused space counts as disk use.
        if let Err(e) = self.settle() {
            self.poison(e.clone());
            return Err(e);
        }
        // Options do not bound the chunk: any size means "up to the segment's end", and
        // `MAX_AHEAD` keeps a segment of no practical limit within what a file can hold.
        let chunk = self.opts.preallocate_size.min(MAX_AHEAD);
        let chunk_end = self.reserved_to.saturating_add(chunk);
        let target = needed.max(chunk_end.min(self.opts.segment_size));
        match self.file.preallocate(target) {
            Ok(()) => self.reserved_to = target,
            // Nearly full: the whole chunk does not fit, but the group alone may.
            Err(e) if e.is_no_space() && target > needed => {
                self.file.preallocate(needed)?;
                self.reserved_to = needed;
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Whether a failure made this writer refuse every later call.
    pub fn is_poisoned(&self) -> bool {
        self.sync_failure.is_some()
    }

    /// The failure that poisoned this writer, if one did.
    pub fn failure(&self) -> Option<&Error> {
        self.sync_failure.as_ref()
    }

    /// Encodes a batch whose first record gets sequence `first_seq` into the buffer, starting
    /// a new segment first if the batch would cross `segment_size` and the active segment
    /// already holds records (not within a reserved group: see [`VlogWriter::reserve`]).
    /// Returns one pointer per entry. Writes the buffer out once it reaches `buffer_size`.
    ///
    /// `Ok` does not make the batch acknowledged: only a later successful `flush`/`sync`
    /// (or the write-out inside this call) covering it does. On an error from writing the
    /// buffer out, this batch and every earlier batch still buffered are discarded, and
    /// `end() == flushed_end()` afterwards.
    pub fn append_batch(
        &mut self,
        first_seq: u64,
        entries: &[BatchEntry<'_>],
    ) -> Result<Vec<ValuePointer>> {
        self.check_not_failed()?;
        let batch_len = self.validate_batch(first_seq, entries)?;
        if self.must_roll {
            self.roll()?;
        } else if !self.in_reserved_group {
            let offset = self.end().offset;
            if offset > SEGMENT_HEADER_LEN && offset + batch_len > self.opts.segment_size {
                self.write_out()?;
                self.roll()?;
            }
        }
        let mut pointers = Vec::with_capacity(entries.len());
        let segment_synced = !self.dir_entry_unsynced && self.synced_end == self.end();
        for (i, entry) in entries.iter().enumerate() {
            let offset = self.buf_start() + self.buf.len() as u64;
            let mut flags = 0;
            if i + 1 == entries.len() {
                flags |= FLAG_LAST_IN_BATCH;
            }
            if i == 0 && segment_synced {
                flags |= FLAG_SYNCED_BEFORE;
            }
            encode_record(
                &mut self.buf,
                first_seq + i as u64,
                entry.kind,
                flags,
                entry.key,
                entry.value,
            );
            pointers.push(ValuePointer {
                segment: self.segment,
                offset,
                len: record_len(entry.key.len(), entry.value.len()) as u32,
            });
        }
        if self.buf.len() >= self.opts.buffer_size {
            if self.opts.direct_writes {
                self.write_out_pipelined()?;
            } else {
                self.write_out()?;
            }
        }
        Ok(pointers)
    }

    /// Writes the buffer to the OS with one `append`.
    pub fn flush(&mut self) -> Result<()> {
        self.check_not_failed()?;
        self.write_out()
    }

    /// Flushes, then makes everything appended so far durable: finished segments first (in
    /// order), then the directory if the active segment is new, then the active segment.
    pub fn sync(&mut self) -> Result<()> {
        self.check_not_failed()?;
        self.write_out_to_sync()?;
        if self.synced_end == self.flushed_end() && !self.dir_entry_unsynced {
            return Ok(());
        }
        if let Err(e) = self.sync_all() {
            self.sync_failure = Some(e.clone());
            return Err(e);
        }
        self.synced_end = self.flushed_end();
        Ok(())
    }

    /// [`VlogWriter::sync`] for a sync write: if the sync covers little (under 1/16 of
    /// `zero_fill_size`: latency, not bandwidth, is what it waits for), first tops up the
    /// zeros written ahead of the records, so that this sync, and the next ones, overwrite
    /// written blocks within the file's size and `fdatasync` flushes data only. Large syncs
    /// (`Db::sync` after a load, GC's sync before it removes a victim) write no zeros. A
    /// failure to write the zeros is ignored (the write then syncs as an append would); the
    /// sync's is not.
    pub fn sync_write(&mut self) -> Result<()> {
        self.check_not_failed()?;
        self.write_out_to_sync()?;
        self.zero_fill_ahead();
        self.sync()
    }

    /// Writes zeros past the records once less than half of `zero_fill_size` is left, up
    /// to `zero_fill_size` past them (never past the segment's target size, nor more than
    /// `MAX_AHEAD`).
    fn zero_fill_ahead(&mut self) {
        let size = self.opts.zero_fill_size.min(MAX_AHEAD);
        if size == 0 || self.must_roll {
            return;
        }
        let unsynced = if self.synced_end.segment == self.segment {
            self.flushed_len.saturating_sub(self.synced_end.offset)
        } else {
            self.flushed_len
        };
        if unsynced >= size / 16 {
            return;
        }
        let from = self.zeroed_to.max(self.flushed_len);
        let to = self.flushed_len.saturating_add(size).min(self.opts.segment_size);
        if from >= to || from - self.flushed_len >= size / 2 {
            return;
        }
        // Even a failed fill may have written some zeros: the segment is cut back before it
        // is finished either way.
        self.zeroed_to = to;
        let _ = self.file.zero_fill(from, to);
    }

    /// Whether the active segment's file may run past its last record (direct writes' block
    /// padding, mapped writes' space allocated ahead, zeros written ahead), so it must be cut
    /// back before it is finished.
    fn may_run_past_records(&self) -> bool {
        self.opts.direct_writes || self.opts.mapped_writes || self.zeroed_to > self.flushed_len
    }

    /// [`VlogWriter::sync`], then cuts off the zeros past the active segment's last record
    /// (direct writes' block padding, mapped writes' space allocated ahead, zeros written
    /// ahead of sync writes) and syncs that, so that a cleanly closed log ends exactly at
    /// its last record and the next open finds no torn tail. For close.
    pub fn finish(&mut self) -> Result<()> {
        self.sync()?;
        if self.may_run_past_records() {
            let trimmed = self
                .file
                .set_len(self.flushed_len)
                .and_then(|()| self.file.sync_data());
            if let Err(e) = trimmed {
                self.sync_failure = Some(e.clone());
                return Err(e);
            }
            self.zeroed_to = self.flushed_len;
        }
        Ok(())
    }

    /// Makes every later `append_batch`, `flush` and `sync` fail with `error`. The database
    /// calls this (under its log lock) when a failed write may have discarded buffered
    /// records of writes it already acknowledged: appending after them would leave a hole.
    pub fn poison(&mut self, error: Error) {
        self.sync_failure.get_or_insert(error);
    }

    /// Drops every record appended from `start` on, from the buffer and (best effort) from
    /// the active segment's file, after a failure poisoned the writer: the failed group's
    /// records must not show up after a restart as if the write had succeeded. Records
    /// before `start` (acknowledged writes) are kept. Does nothing when `start` is not in
    /// the active segment or before the synced end.
    pub fn discard_failed_group(&mut self, start: LogPosition) {
        debug_assert!(self.is_poisoned());
        if start.segment != self.segment || start < self.synced_end {
            return;
        }
        // A failed in-flight write-out is undone here already; a finished one is counted.
        let _ = self.settle();
        if start.offset < self.flushed_len {
            if self.cut_failed_bytes(start.offset) {
                self.flushed_len = start.offset;
                self.write_back_from = self.write_back_from.min(start.offset);
                self.zeroed_to = start.offset;
            } else {
                self.must_roll = true;
            }
        }
        let keep = start.offset.saturating_sub(self.flushed_len) as usize;
        self.buf.truncate(keep.min(self.buf.len()));
    }

    /// Cuts the active segment back to `len` after a failed write or sync, and syncs the cut
    /// (best effort): the failed write may have put whole records of its group in the file
    /// (a short write, or an fdatasync that wrote the data and still reported an error), and
    /// a power cut that undid an unsynced cut would bring them back as if written. Once the
    /// writer is poisoned nothing else syncs this file. False if the cut itself failed.
    fn cut_failed_bytes(&mut self, len: u64) -> bool {
        if self.file.set_len(len).is_err() {
            return false;
        }
        if let Err(e) = self.file.sync_data() {
            log::warn!("wisckey: could not sync the cut of a failed value-log write: {e}");
        }
        true
    }

    /// Position just past the last appended record, buffered or not: where the next goes.
    pub fn end(&self) -> LogPosition {
        LogPosition::new(self.segment, self.buf_start() + self.buf.len() as u64)
    }

    /// Everything before this position is durable.
    pub fn synced_end(&self) -> LogPosition {
        self.synced_end
    }

    /// Everything before this position has reached the OS.
    pub fn flushed_end(&self) -> LogPosition {
        LogPosition::new(self.segment, self.flushed_len)
    }

    /// The bytes of the record at `ptr` if it still sits in the unflushed buffer (lookups
    /// must see buffered writes, WiscKey §3.4.1). Verify them with `extract_value`.
    pub fn read_buffered(&self, ptr: &ValuePointer) -> Option<Vec<u8>> {
        if ptr.segment != self.segment || ptr.offset < self.flushed_len {
            return None;
        }
        let (bytes, start) = match &self.in_flight {
            // A record lies wholly in one write-out: batches are never split.
            Some(in_flight) if ptr.offset < self.buf_start() => {
                (in_flight.as_slice(), ptr.offset - self.flushed_len)
            }
            _ => (self.buf.as_slice(), ptr.offset - self.buf_start()),
        };
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(ptr.len as usize)?;
        bytes.get(start..end).map(<[u8]>::to_vec)
    }

    /// Finishes the active segment now if it holds records, so that the next batch starts a
    /// new one: GC can only collect a segment nobody appends to. Returns whether it rolled.
    /// A failed write-out or sync poisons the writer (buffered records may be gone); a
    /// failure to create the next segment (a full disk) leaves the writer as it was, still
    /// appending to the active segment, so the caller may just try again later — unless
    /// that failure may have left the next segment's file behind: then the next batch
    /// tries the roll again and nothing more is appended to the active segment.
    pub fn seal_active(&mut self) -> Result<bool> {
        self.check_not_failed()?;
        if self.end().offset <= SEGMENT_HEADER_LEN {
            return Ok(false);
        }
        if let Err(e) = self.write_out() {
            self.poison(e.clone());
            return Err(e);
        }
        self.roll()?;
        Ok(true)
    }

    pub fn active_segment(&self) -> u64 {
        self.segment
    }

    fn check_not_failed(&self) -> Result<()> {
        match &self.sync_failure {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Checks every entry and returns the batch's encoded length.
    fn validate_batch(&self, first_seq: u64, entries: &[BatchEntry<'_>]) -> Result<u64> {
        if entries.is_empty() {
            return Err(Error::InvalidArgument("empty write batch".into()));
        }
        let last_seq = first_seq.checked_add(entries.len() as u64 - 1);
        if last_seq.is_none_or(|s| s > MAX_SEQUENCE) {
            return Err(Error::InvalidArgument(format!(
                "sequence numbers of a {}-entry batch starting at {first_seq} overflow",
                entries.len()
            )));
        }
        let mut total = 0u64;
        for entry in entries {
            if entry.key.len() > self.opts.max_key_size {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes exceeds max_key_size {}",
                    entry.key.len(),
                    self.opts.max_key_size
                )));
            }
            if entry.value.len() > self.opts.max_value_size {
                return Err(Error::InvalidArgument(format!(
                    "value of {} bytes exceeds max_value_size {}",
                    entry.value.len(),
                    self.opts.max_value_size
                )));
            }
            match entry.kind {
                ValueKind::Value => {}
                ValueKind::Deletion if entry.value.is_empty() => {}
                ValueKind::Deletion => {
                    return Err(Error::InvalidArgument("a deletion carries no value".into()))
                }
                ValueKind::ValuePointer => {
                    return Err(Error::InvalidArgument(
                        "the value log stores values, not pointers".into(),
                    ))
                }
            }
            total += record_len(entry.key.len(), entry.value.len()) as u64;
        }
        Ok(total)
    }

    /// Hands the buffer to the OS. On failure, discards it and cuts the file back to the
    /// length before the write; if that fails, marks the segment as finished.
    fn write_out(&mut self) -> Result<()> {
        self.write_out_by(false)
    }

    /// [`VlogWriter::write_out`] of bytes a sync follows at once
    /// ([`WritableFile::append_to_sync`]).
    fn write_out_to_sync(&mut self) -> Result<()> {
        self.write_out_by(true)
    }

    fn write_out_by(&mut self, sync_next: bool) -> Result<()> {
        self.settle()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        let written = self.buf.len();
        let result = if sync_next {
            self.file.append_to_sync(&self.buf)
        } else {
            self.file.append(&self.buf)
        };
        match &result {
            Ok(()) => {
                self.flushed_len += self.buf.len() as u64;
                self.start_write_back_if_due();
            }
            Err(_) => {
                if self.cut_failed_bytes(self.flushed_len) {
                    self.zeroed_to = self.flushed_len;
                } else {
                    self.must_roll = true;
                }
            }
        }
        self.buf.clear();
        keep_room_for(&mut self.buf, written, self.opts.buffer_size);
        result
    }

    /// Asks the OS to start writing out what was appended since the last request, once that is
    /// at least `write_back_interval` bytes. Its failure is ignored: it is only a hint, and a
    /// device error in the write-back is reported by the next `sync_data`.
    fn start_write_back_if_due(&mut self) {
        let interval = self.opts.write_back_interval;
        let pending = self.flushed_len.saturating_sub(self.write_back_from);
        if interval == 0 || pending < interval {
            return;
        }
        let _ = self.file.start_write_back(self.write_back_from, pending);
        self.write_back_from = self.flushed_len;
    }

    /// Where the buffer starts: after the bytes in the file and those in flight.
    fn buf_start(&self) -> u64 {
        self.flushed_len + self.in_flight.as_ref().map_or(0, |b| b.len() as u64)
    }

    /// Hands the buffer to the write-out thread (after the previous write-out finished) and
    /// goes on with an empty one. Falls back to a synchronous write-out if the thread cannot
    /// be started.
    fn write_out_pipelined(&mut self) -> Result<()> {
        self.settle()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.write_thread.is_none() {
            match WriteThread::start() {
                Ok(thread) => self.write_thread = Some(thread),
                Err(_) => return self.write_out(),
            }
        }
        let mut next = std::mem::take(&mut self.spare);
        next.clear();
        let bytes = Arc::new(std::mem::replace(&mut self.buf, next));
        let file = std::mem::replace(&mut self.file, Box::new(LentFile));
        let job = WriteJob {
            file,
            bytes: Arc::clone(&bytes),
        };
        let sent = match &self.write_thread {
            Some(thread) => thread.jobs.send(job).map_err(|mpsc::SendError(job)| job),
            None => Err(job),
        };
        if let Err(job) = sent {
            // The thread is gone: write this one here.
            self.write_thread = None;
            self.file = job.file;
            drop(job.bytes);
            self.buf = Arc::try_unwrap(bytes).unwrap_or_else(|shared| shared.to_vec());
            return self.write_out();
        }
        self.in_flight = Some(bytes);
        Ok(())
    }

    /// Waits for the write-out in flight, if any, and takes the file back. A failed one is
    /// undone like a failed `write_out`: the file is cut back to where it started and the
    /// buffer (whose records would follow a hole) is discarded.
    fn settle(&mut self) -> Result<()> {
        let Some(in_flight) = self.in_flight.take() else {
            return Ok(());
        };
        let reply = self.write_thread.as_ref().map(|t| t.replies.recv());
        let Some(Ok((file, bytes, result))) = reply else {
            // The thread died (a panic) and the file with it: never append here again.
            self.write_thread = None;
            self.must_roll = true;
            self.buf.clear();
            return Err(Error::io(
                "value-log write-out thread",
                std::io::Error::other("stopped while writing"),
            ));
        };
        self.file = file;
        drop(in_flight);
        match result {
            Ok(()) => {
                let written = bytes.len();
                self.flushed_len += written as u64;
                self.spare = Arc::try_unwrap(bytes).unwrap_or_default();
                self.spare.clear();
                keep_room_for(&mut self.spare, written, self.opts.buffer_size);
                self.start_write_back_if_due();
                Ok(())
            }
            Err(e) => {
                if !self.cut_failed_bytes(self.flushed_len) {
                    self.must_roll = true;
                }
                self.buf.clear();
                Err(e)
            }
        }
    }

    /// Starts segment `segment + 1`. The buffer is empty (written out or discarded).
    fn roll(&mut self) -> Result<()> {
        // A reservation is for the segment it was made in (`reserve` sets it again after
        // its own roll).
        self.in_reserved_group = false;
        self.settle()?;
        debug_assert!(self.buf.is_empty());
        // The finished segment (data and directory entry) is made durable before the next
        // one receives a byte. A later segment holding data then proves every earlier one
        // complete, so recovery can tell a torn tail (the log's end) from a hole (corruption).
        let cut = self.may_run_past_records();
        if cut {
            // Direct writes pad the last block with zeros, mapped writes allocate space
            // ahead, sync writes write zeros ahead: cut them off, so a finished segment
            // ends exactly at its last record (the sync below covers the size).
            if let Err(e) = self.file.set_len(self.flushed_len) {
                self.sync_failure = Some(e.clone());
                return Err(e);
            }
            // The cut freed the blocks preallocated past the records too: if the next
            // segment cannot be created and writes go on here, they must preallocate
            // again (a write-out into space a compaction took meanwhile would poison the
            // writer, where a failed preallocation fails the group cleanly), and the zeros
            // written ahead are gone too.
            self.reserved_to = self.flushed_len;
            self.zeroed_to = self.flushed_len;
        }
        if cut
            || self.synced_end < self.flushed_end()
            || self.dir_entry_unsynced
        {
            if let Err(e) = self.sync_all() {
                self.sync_failure = Some(e.clone());
                return Err(e);
            }
            self.synced_end = self.flushed_end();
        }
        let next = self.segment + 1;
        let path = vlog_file_name(&self.dir, next);
        let file = match start_segment(self.fs.as_ref(), &path, next, self.flushed_len, &self.opts) {
            Ok(file) => file,
            Err(failed) => {
                // Its leftover file would prove this segment complete to recovery, which
                // would then call a torn tail of bytes appended here damage: nothing more is
                // appended here; the next group tries the roll again (`create` truncates).
                self.must_roll |= failed.may_have_left_a_file;
                return Err(failed.error);
            }
        };
        if self.reserved_to > self.flushed_len {
            // Best effort: give back the finished segment's unused preallocation. Failing
            // leaves at most `preallocate_size` allocated past its end.
            let old = vlog_file_name(&self.dir, self.segment);
            let _ = self
                .fs
                .punch_hole(&old, self.flushed_len, self.reserved_to - self.flushed_len);
        }
        self.reserved_to = SEGMENT_HEADER_LEN;
        self.write_back_from = 0;
        self.zeroed_to = SEGMENT_HEADER_LEN;
        self.file = file;
        self.segment = next;
        self.flushed_len = SEGMENT_HEADER_LEN;
        self.dir_entry_unsynced = true;
        self.must_roll = false;
        Ok(())
    }

    fn sync_all(&mut self) -> Result<()> {
        self.settle()?;
        if self.dir_entry_unsynced {
            if !crate::safety::skipped(crate::safety::SafetyStep::DirSyncAfterSegmentCreation) {
                self.fs.sync_dir(&self.dir)?;
            }
            self.dir_entry_unsynced = false;
        }
        self.file.sync_data()
    }
}

impl Drop for VlogWriter {
    fn drop(&mut self) {
        // The write-out in flight finishes before the file is closed; its outcome no longer
        // matters (nothing unsynced was promised).
        let _ = self.settle();
    }
}

/// A write-out for the write-out thread: the segment's file, lent, and the bytes to append.
#[derive(Debug)]
struct WriteJob {
    file: Box<dyn WritableFile>,
    bytes: Arc<Vec<u8>>,
}

/// A finished write-out: the file handed back, the bytes, and how the write went.
type WriteDone = (Box<dyn WritableFile>, Arc<Vec<u8>>, Result<()>);

/// The write-out thread's side of the channels; it ends when `jobs` is dropped.
#[derive(Debug)]
struct WriteThread {
    jobs: mpsc::Sender<WriteJob>,
    replies: mpsc::Receiver<WriteDone>,
}

impl WriteThread {
    fn start() -> std::io::Result<WriteThread> {
        let (jobs, job_queue) = mpsc::channel::<WriteJob>();
        let (reply, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("wisckey-vlog-write".into())
            .spawn(move || {
                for WriteJob { mut file, bytes } in job_queue {
                    let result = file.append(&bytes);
                    if reply.send((file, bytes, result)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(WriteThread { jobs, replies })
    }
}

/// Stands in for the active segment's file while the write-out thread has it. Never used:
/// every use of the file waits for the write-out first (`settle`); a bug that skipped it
/// gets an error, not a write in the wrong place.
#[derive(Debug)]
struct LentFile;

fn lent() -> Error {
    Error::io(
        "value-log segment",
        std::io::Error::other("used while lent to the write-out thread"),
    )
}

impl WritableFile for LentFile {
    fn append(&mut self, _data: &[u8]) -> Result<()> {
        Err(lent())
    }
    fn sync_data(&mut self) -> Result<()> {
        Err(lent())
    }
    fn set_len(&mut self, _len: u64) -> Result<()> {
        Err(lent())
    }
    fn len(&self) -> u64 {
        0
    }
    fn preallocate(&mut self, _up_to: u64) -> Result<()> {
        Err(lent())
    }
}

/// Shrinks an emptied buffer that carried `written` bytes to the room worth keeping. It keeps
/// room for as much as the write-out carried, up to `RETAINED_BUFFER_MAX`: a writer that
/// commits large groups every time (a server's rounds of pipelined 16 KiB SETs: 5-8 MB each)
/// would otherwise give the memory back and fault it in again, zeroed, page by page, for
/// every group (page faults: 18% of such a server's cycles, nearly all from encoding records
/// into this buffer). Room a single large batch needed is given back at the next, smaller,
/// write-out.
fn keep_room_for(buf: &mut Vec<u8>, written: usize, buffer_size: usize) {
    let keep = written.min(RETAINED_BUFFER_MAX).max(buffer_size);
    if buf.capacity() / 2 > keep {
        buf.shrink_to(keep);
    }
}

/// A segment that could not be started.
struct StartFailed {
    error: Error,
    /// Its file may be there, now or after a power cut: its removal failed or was not made
    /// durable.
    may_have_left_a_file: bool,
}

/// Creates a segment file and writes its header; on failure removes, durably, what may have
/// been created.
fn start_segment(
    fs: &dyn FileSystem,
    path: &std::path::Path,
    segment: u64,
    prev_segment_end: u64,
    opts: &VlogOptions,
) -> std::result::Result<Box<dyn WritableFile>, StartFailed> {
    let failed = |error: Error| StartFailed {
        error,
        may_have_left_a_file: !remove_durably(fs, path),
    };
    let created = if opts.direct_writes {
        fs.create_direct(path)
    } else if opts.mapped_writes {
        fs.create_mapped(path)
    } else {
        fs.create(path)
    };
    // A create that failed may still have made the file (`O_CREAT` went through, a later
    // step of the open did not).
    let mut file = created.map_err(failed)?;
    let header = SegmentHeader {
        version: crate::vlog::FORMAT_VERSION,
        segment,
        prev_segment_end,
    };
    if let Err(e) = file.append(&header.encode()) {
        drop(file);
        return Err(failed(e));
    }
    Ok(file)
}

/// Removes the file at `path` if there is one and syncs its directory; whether both are
/// known to have worked (the file is gone and stays gone after a power cut).
fn remove_durably(fs: &dyn FileSystem, path: &std::path::Path) -> bool {
    let gone = match fs.exists(path) {
        Ok(true) => fs.remove(path).is_ok(),
        Ok(false) => true,
        Err(_) => false,
    };
    gone && path.parent().is_some_and(|dir| fs.sync_dir(dir).is_ok())
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
