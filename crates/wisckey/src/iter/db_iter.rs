//! The user-facing iterator: turns the merged stream of internal entries into the user keys
//! visible at one sequence number, newest version only, deletions hidden, within bounds.
//!
//! Positioning follows LevelDB's DBIter. Moving forward, the inner iterator sits on the
//! entry being shown. Moving backward, it sits just before all entries of the shown key,
//! whose value is kept in `saved_*`. Values behind pointers are read only when asked for,
//! except during a forward scan: from the first `next` after a positioning call the iterator
//! reads entries ahead of the user into `ahead` (a window that doubles per refill up to
//! `Options::scan_readahead_entries` entries and `SCAN_READAHEAD_BYTES` of keys and values)
//! and queues
//! their value-log reads on the database's reader pool (`readahead`), so they proceed in
//! parallel (WiscKey §3.3.2). While `ahead` is non-empty its front is the current entry and
//! the inner iterator sits on its back entry (or past the end); an error met while reading
//! ahead is held back until the entries before it have been shown. With
//! `ReadOptions::scan_length_hint` the read-ahead starts at the positioning call itself, with
//! a first window of the hinted length (the caller said how far it will read), and stops at
//! that length. The first refill after a positioning call, which the user waits for, is
//! read on this thread instead when the page cache holds all of it
//! (`VlogReader::read_runs_if_cached`): a hand-over and a wake-up cost more than the copy.
//! The iterator pins the version it reads, so no table it needs is deleted
//! under it. Value reads it queues out of log order (not back to back with the previous
//! one) are counted and reported, with the keys they lie between, to the database's scan
//! heat (`gc::heat`), which decides when a range has earned a clustering pass.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

use super::readahead::PendingRead;
use super::{InternalIterator, MergingIterator};
use crate::db::DbInner;
use crate::db::PointerRead;
use crate::vlog::{LiveRange, ValuePointer};
use crate::error::{Error, Result};
use crate::gc::cluster::CLUSTER_KEEP_RUN_BYTES;
use crate::key::{parse_internal_key, seek_key, user_key, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::options::{ReadOptions, MAX_SCAN_LENGTH_HINT};
use crate::version::Version;

/// Most bytes (keys, inline values, values read behind pointers) a scan holds ahead of the
/// user: bounds its memory for large keys and values, inline ones too.
pub const SCAN_READAHEAD_BYTES: u64 = 8 << 20;
/// Entries read ahead by the first refill after a positioning call; doubles per refill.
const FIRST_READAHEAD_WINDOW: usize = 4;

/// Value reads per batch job when the file system batches reads: a long refill (a hinted
/// scan of 100) becomes several jobs, in flight side by side on reader threads, and the
/// first values are there when their job completes rather than the whole refill.
const READS_PER_BATCH: usize = 32;

/// Scattered reads an iterator counts before it reports them to the scan heat (and when
/// it is repositioned or dropped): one lock per this many random reads.
const HEAT_REPORT_READS: u64 = 256;

/// Most value bytes the first refill after a positioning call reads on the iterator's own
/// thread when the page cache holds them (about 100 µs of copying and checksums); the
/// rest of a longer refill goes to the reader pool, which overlaps it with the user.
const CACHED_READ_BUDGET: u64 = 1 << 20;

/// Most bytes one coalesced read of back-to-back records covers.
const MAX_RUN_BYTES: u64 = 1 << 20;

/// Value-log reads of back-to-back records gathered during one refill, issued as one job
/// and one `pread` (see `VlogReader::read_run`).
#[derive(Default)]
struct ReadRun {
    reads: Vec<QueuedRead>,
    live: Option<LiveRange>,
    bytes: u64,
    /// The pointer read last (issued or not), and whether it followed the one before.
    last: Option<ValuePointer>,
    last_followed: bool,
}

/// One value read gathered into a [`ReadRun`].
struct QueuedRead {
    ptr: ValuePointer,
    key: Vec<u8>,
    slot: Arc<PendingRead>,
    /// The value is read into this (allocated on the scanning thread, where the user frees
    /// it: see `VlogReader::read_run`).
    buffer: Vec<u8>,
}

/// An entry read ahead of the user during a forward scan.
struct AheadEntry {
    user_key: Vec<u8>,
    kind: ValueKind,
    stored: Vec<u8>,
    /// The value-log read queued for a pointer entry.
    read: Option<Arc<PendingRead>>,
    /// What the entry holds or will hold: its key, what the tree stores for it (an inline
    /// value or a pointer) and the value read behind a pointer (the record's length).
    held_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Iterates over user keys and values; see [`crate::Db::iter`].
pub struct DbIterator<'a> {
    db: Arc<DbInner>,
    /// Borrows the `Db`: it cannot be closed or dropped while an iterator is alive (an
    /// iterator keeps the database's files, and its LOCK, in use).
    _db: std::marker::PhantomData<&'a crate::Db>,
    iter: MergingIterator,
    sequence: SequenceNumber,
    version: Arc<Version>,
    /// The snapshot the iterator reads at, held for as long as it lives: `version` pins the
    /// files the current state uses, but values visible at an older snapshot may lie in
    /// segments GC collected since, which only a live snapshot keeps on disk (and unpunched).
    _snapshot: Option<crate::snapshot::Snapshot>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// A positioning call (`seek`, `seek_to_first`, `seek_to_last`) was made: an iterator
    /// that is not valid then ran off an end (or into an error), not never started.
    positioned: bool,
    /// Forward: scratch for the key being skipped. Reverse: the current user key.
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    saved_kind: ValueKind,
    error: Option<Error>,
    /// Forward scan read-ahead; see the module docs.
    ahead: VecDeque<AheadEntry>,
    /// The `held_bytes` of `ahead`'s entries.
    ahead_bytes: u64,
    /// Entries the next refill may hold (grows per refill).
    window: usize,
    /// The inner iterator's error met while reading ahead, shown once `ahead` drains.
    ahead_error: Option<Error>,
    /// `ReadOptions::keys_only`: never read values ahead.
    keys_only: bool,
    /// Reads gathered but not yet issued (issued at the end of each refill).
    run: ReadRun,
    /// `ReadOptions::scan_length_hint`, clamped: read ahead from the seek with this window.
    scan_length_hint: Option<usize>,
    /// During a hinted scan, entries the hint still lets the read-ahead take: the reads stop
    /// at the hinted length (a scan that stops there wastes none), and once the user moves
    /// past them the scan goes on with ordinary read-ahead. `None`: no hinted scan.
    hint_left: Option<usize>,
    /// The file system keeps many reads in flight from one thread
    /// (`FileSystem::batches_reads`): a refill's runs go out as one job and one batch.
    batch_reads: bool,
    /// Runs of the current refill gathered for that one job.
    batched_runs: Vec<IssuedRun>,
    /// The file system can read what its page cache holds without waiting
    /// (`FileSystem::reads_if_cached`): the first refill's batch is tried on this thread.
    reads_if_cached: bool,
    /// Bytes of value reads this iterator may still do on its own thread from the page
    /// cache (`read_batch_if_cached`): `CACHED_READ_BUDGET` after a positioning call (or
    /// after a hinted scan ran past its hint), 0 once a refill is done. Later refills come
    /// while the user still has entries to consume, and a reader thread overlaps their
    /// reads with that; the first one the user waits for, but a long one (a large hint)
    /// would keep the first value back until all of it was copied.
    cached_read_budget: u64,
    /// Out-of-order value reads not yet added to the database's scan heat.
    heat: HeatChunk,
}

/// Value reads a forward scan made out of log order (each a random read that clustering
/// would turn into part of a run), between two user keys, not yet reported.
#[derive(Default)]
struct HeatChunk {
    /// Whether this iterator reports at all (`Options::auto_cluster_ratio` on, writable
    /// database, not a clustering pass's own iterator).
    reports: bool,
    first: Vec<u8>,
    last: Vec<u8>,
    scattered: u64,
}

/// A run handed over for reading: its reads, the live range, the slots to complete.
struct IssuedRun {
    reads: Vec<(ValuePointer, Vec<u8>)>,
    live: LiveRange,
    slots: Vec<Arc<PendingRead>>,
    buffers: Vec<Vec<u8>>,
}

impl std::fmt::Debug for DbIterator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("sequence", &self.sequence)
            .field("valid", &self.valid)
            .finish()
    }
}

impl Drop for DbIterator<'_> {
    /// Reads queued ahead for entries the user will now never see are skipped.
    fn drop(&mut self) {
        self.drop_readahead();
    }
}

impl DbIterator<'_> {
    pub(crate) fn new(
        db: Arc<DbInner>,
        iter: MergingIterator,
        sequence: SequenceNumber,
        version: Arc<Version>,
        opts: &ReadOptions,
    ) -> Self {
        let scan_length_hint = opts.scan_length_hint.map(|h| h.clamp(1, MAX_SCAN_LENGTH_HINT));
        DbIterator {
            _db: std::marker::PhantomData,
            iter,
            sequence,
            version,
            _snapshot: opts.snapshot.clone(),
            lower: opts.lower_bound.clone(),
            upper: opts.upper_bound.clone(),
            direction: Direction::Forward,
            valid: false,
            positioned: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Deletion,
            error: None,
            ahead: VecDeque::new(),
            ahead_bytes: 0,
            window: FIRST_READAHEAD_WINDOW,
            ahead_error: None,
            keys_only: opts.keys_only,
            run: ReadRun::default(),
            scan_length_hint,
            hint_left: None,
            batch_reads: db.fs.batches_reads(),
            reads_if_cached: db.fs.reads_if_cached(),
            cached_read_budget: CACHED_READ_BUDGET,
            batched_runs: Vec::new(),
            heat: HeatChunk {
                reports: db.options.auto_cluster_ratio > 0.0
                    && db.options.gc_space_amp_target.is_finite()
                    && !db.read_only,
                ..HeatChunk::default()
            },
            db,
        }
    }

    /// True when positioned on a key. False at either end or after an error (see `status`).
    pub fn valid(&self) -> bool {
        !self.ahead.is_empty() || self.valid
    }

    /// The current user key, or an empty slice when the iterator is not positioned on an
    /// entry (`valid()` is false).
    pub fn key(&self) -> &[u8] {
        if !self.valid() {
            return &[];
        }
        if let Some(front) = self.ahead.front() {
            return &front.user_key;
        }
        match self.direction {
            Direction::Forward => user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value, read from the value log if it is stored there. When the iterator
    /// is not positioned on an entry (`valid()` is false) this is `InvalidArgument`, never
    /// `Corruption`: nothing is damaged.
    pub fn value(&self) -> Result<Vec<u8>> {
        if !self.valid() {
            return Err(Error::InvalidArgument(
                "the iterator is not positioned on an entry: seek first, and check valid()".into(),
            ));
        }
        if let Some(front) = self.ahead.front() {
            if let Some(result) = front.read.as_ref().and_then(|read| read.take()) {
                return result;
            }
            // Inline value, or the read-ahead result was already handed out: read it here.
            return self.read_stored(&front.user_key, front.kind, front.stored.clone());
        }
        let (kind, stored) = match self.direction {
            Direction::Forward => {
                let parsed = parse_internal_key(self.iter.key())
                    .ok_or_else(|| Error::corruption("iterator", 0, "malformed internal key"))?;
                (parsed.kind, self.iter.value().to_vec())
            }
            Direction::Reverse => (self.saved_kind, self.saved_value.clone()),
        };
        self.read_stored(self.key(), kind, stored)
    }

    /// The user's value of an entry: inline, or read from the log past the value cache
    /// (a scan must not flush point reads' hot values out; `Db::check` must see the disk).
    fn read_stored(&self, key: &[u8], kind: ValueKind, stored: Vec<u8>) -> Result<Vec<u8>> {
        match kind {
            ValueKind::Value => Ok(stored),
            ValueKind::ValuePointer => {
                match crate::db::plan_pointer_read(&self.db, &self.version, key, &stored)? {
                    PointerRead::Buffered(value) => Ok(value),
                    PointerRead::File { ptr, live } => {
                        self.db.vlog.reader().read_value_uncached(&ptr, key, live)
                    }
                }
            }
            ValueKind::Deletion => Err(Error::Internal("iterator positioned on a deletion".into())),
        }
    }

    /// Whether the current value is stored in the value log (`Db::check` counts them).
    pub(crate) fn value_in_log(&self) -> bool {
        self.current_kind_and_stored()
            .is_some_and(|(kind, _)| kind == Some(ValueKind::ValuePointer))
    }

    /// The value-log pointer stored for the current entry, if its value is in the log
    /// (`Db::cluster_values` relocates by it).
    pub(crate) fn stored_pointer(&self) -> Option<ValuePointer> {
        match self.current_kind_and_stored()? {
            (Some(ValueKind::ValuePointer), stored) => ValuePointer::decode(stored),
            _ => None,
        }
    }

    /// The current entry's kind (None: an internal key that does not parse) and stored
    /// bytes, without reading the value log; None when not positioned.
    fn current_kind_and_stored(&self) -> Option<(Option<ValueKind>, &[u8])> {
        if !self.valid() {
            return None;
        }
        Some(match (self.ahead.front(), self.direction) {
            (Some(front), _) => (Some(front.kind), &front.stored),
            (None, Direction::Forward) => (
                parse_internal_key(self.iter.key()).map(|k| k.kind),
                self.iter.value(),
            ),
            (None, Direction::Reverse) => (Some(self.saved_kind), &self.saved_value),
        })
    }

    /// Whether a positioning call was made: if the iterator is not valid, it ran off an end
    /// or into an error rather than never started.
    pub(crate) fn positioned(&self) -> bool {
        self.positioned
    }

    /// The first error met since the last positioning call (`seek`, `seek_to_first`,
    /// `seek_to_last`); an iterator that hit one is not valid. An error a positioning call
    /// or a change of direction itself met stays for the iterator's life (the merge keeps
    /// it, see `iter::merge`): after one, make a new iterator.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Positions on the first key (in bounds).
    pub fn seek_to_first(&mut self) {
        self.drop_readahead();
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => {
                self.positioned = true;
                self.direction = Direction::Forward;
                self.iter.seek_to_first();
                self.find_next_user_entry(false);
                self.read_ahead_from_seek();
            }
        }
    }

    /// Positions on the last key (in bounds).
    pub fn seek_to_last(&mut self) {
        self.drop_readahead();
        self.positioned = true;
        self.direction = Direction::Reverse;
        self.saved_value.clear();
        match &self.upper {
            Some(upper) => {
                self.iter.seek(&seek_key(upper, MAX_SEQUENCE));
                if self.iter.valid() {
                    self.iter.prev();
                } else {
                    self.iter.seek_to_last();
                }
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first key `>= target` (and within bounds).
    pub fn seek(&mut self, target: &[u8]) {
        self.drop_readahead();
        let target = match &self.lower {
            Some(lower) if lower.as_slice() > target => lower.clone(),
            _ => target.to_vec(),
        };
        self.positioned = true;
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.iter.seek(&seek_key(&target, self.sequence));
        self.find_next_user_entry(false);
        self.read_ahead_from_seek();
    }

    /// Whether values are read ahead at all: the options allow it (a hint never turns on
    /// what `scan_readahead_entries` turned off) and this is not a keys-only iterator.
    fn reads_ahead(&self) -> bool {
        let options = &self.db.options;
        options.scan_readahead_entries > 1 && options.scan_readahead_threads > 0 && !self.keys_only
    }

    /// With a scan-length hint, starts the read-ahead at the entry just positioned on, with
    /// the hinted window: a short scan's value reads are all in flight before its first
    /// `value()`.
    fn read_ahead_from_seek(&mut self) {
        let Some(hint) = self.scan_length_hint else {
            return;
        };
        if self.valid && self.direction == Direction::Forward && self.reads_ahead() {
            self.window = hint;
            self.hint_left = Some(hint - 1);
            let current = self.current_ahead_entry();
            self.ahead.push_back(current);
            self.refill_readahead();
        }
    }

    /// Moves to the next key; reads values ahead from the second call in a row.
    pub fn next(&mut self) {
        if !self.ahead.is_empty() {
            self.ahead.pop_front();
            if self.hint_left == Some(0) {
                if self.ahead.is_empty() {
                    // Past the hinted length: the inner iterator is on the entry just shown
                    // (or exhausted). Step to the next one without reading ahead; a further
                    // `next` starts ordinary read-ahead, as after any positioning call.
                    self.hint_left = None;
                    self.window = self.first_window();
                    self.cached_read_budget = CACHED_READ_BUDGET;
                    self.step_forward();
                }
            } else if self.ahead.len() <= self.window / 2 {
                self.refill_readahead();
            }
            if self.ahead.is_empty() {
                // The inner iterator ran out (or failed) while reading ahead.
                if let Some(e) = self.ahead_error.take() {
                    self.fail(e);
                }
            }
            return;
        }
        let was_forward = self.direction == Direction::Forward;
        self.step_forward();
        if was_forward && self.valid && self.reads_ahead() {
            // A second entry in a row: this is a scan; read ahead from here on.
            let current = self.current_ahead_entry();
            self.ahead.push_back(current);
            self.refill_readahead();
        }
    }

    /// `next` without read-ahead: moves the inner iterator to the next visible entry.
    fn step_forward(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is just before the current key's entries: step into them and
            // let the skipping below pass over them.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.check_status();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) {
        if let Some(front) = self.ahead.front() {
            // Put the inner iterator back on the current entry (it exists and is visible at
            // this iterator's sequence, which never changes), then step back as usual.
            let current = front.user_key.clone();
            self.drop_readahead();
            self.direction = Direction::Forward;
            self.iter.seek(&seek_key(&current, self.sequence));
            self.find_next_user_entry(false);
        }
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Step back until the inner iterator is before every entry of the current key.
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    self.check_status();
                    return;
                }
                if user_key(self.iter.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// Forward: advance to the newest visible, non-deleted entry; with `skipping`, entries
    /// of `saved_key` are hidden (already shown or deleted).
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.iter.valid() {
            match parse_internal_key(self.iter.key()) {
                None => {
                    self.fail(Error::corruption("iterator", 0, "malformed internal key"));
                    return;
                }
                // Everything from here on is past the bound: stop instead of skipping a long
                // run of deleted or hidden entries.
                Some(p) if self.beyond_upper(p.user_key) => break,
                Some(p) if p.sequence <= self.sequence => {
                    let hidden = skipping && p.user_key <= self.saved_key.as_slice();
                    if !hidden {
                        if p.kind == ValueKind::Deletion {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            skipping = true;
                        } else {
                            self.saved_key.clear();
                            self.valid = true;
                            self.check_status();
                            return;
                        }
                    }
                }
                Some(_) => {}
            }
            self.iter.next();
        }
        self.saved_key.clear();
        self.valid = false;
        self.check_status();
    }

    /// Reverse: collect the newest visible entry of the key before the inner iterator.
    fn find_prev_user_entry(&mut self) {
        let mut kind = ValueKind::Deletion;
        while self.iter.valid() {
            let Some(p) = parse_internal_key(self.iter.key()) else {
                self.fail(Error::corruption("iterator", 0, "malformed internal key"));
                return;
            };
            if self.below_lower(p.user_key) {
                break;
            }
            if p.sequence <= self.sequence {
                if kind != ValueKind::Deletion
                    && p.user_key.cmp(self.saved_key.as_slice()) == Ordering::Less
                {
                    break;
                }
                kind = p.kind;
                if kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.iter.value());
                    self.saved_kind = kind;
                }
            }
            self.iter.prev();
        }
        if kind == ValueKind::Deletion {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
        self.check_status();
    }

    /// The entry the inner iterator is on (forward, valid), with its value read queued.
    fn current_ahead_entry(&mut self) -> AheadEntry {
        let (kind, user) = match parse_internal_key(self.iter.key()) {
            Some(p) => (p.kind, p.user_key.to_vec()),
            // find_next_user_entry stops only on keys that parse.
            None => (ValueKind::Value, Vec::new()),
        };
        let stored = self.iter.value().to_vec();
        let mut entry = AheadEntry {
            held_bytes: (user.len() + stored.len()) as u64,
            user_key: user,
            kind,
            stored,
            read: None,
        };
        if kind == ValueKind::ValuePointer {
            let read = PendingRead::new();
            match crate::db::plan_pointer_read(
                &self.db,
                &self.version,
                &entry.user_key,
                &entry.stored,
            ) {
                Ok(PointerRead::File { ptr, live }) => {
                    entry.held_bytes += u64::from(ptr.len);
                    let follows = self.run.last.is_some_and(|last| {
                        last.segment == ptr.segment && last.end() == ptr.offset
                    });
                    if !follows && u64::from(ptr.len) < CLUSTER_KEEP_RUN_BYTES {
                        self.note_scattered_read(&entry.user_key);
                    }
                    if !follows || self.run.bytes + u64::from(ptr.len) > MAX_RUN_BYTES {
                        self.issue_run();
                    }
                    // The log only grows, so the newest limit holds for every read of the
                    // run; the first pointer's may end before a later one, written out since.
                    match &mut self.run.live {
                        Some(run_live) if run_live.end >= live.end => {}
                        run_live => *run_live = Some(live),
                    }
                    self.run.bytes += u64::from(ptr.len);
                    let key = entry.user_key.clone();
                    self.run.reads.push(QueuedRead {
                        ptr,
                        key,
                        slot: Arc::clone(&read),
                        buffer: Vec::with_capacity(ptr.len as usize),
                    });
                    // Values in random log order: read each at once rather than wait to see
                    // whether the next one is its neighbour.
                    if !follows && !self.run.last_followed {
                        self.issue_run();
                    }
                    self.run.last = Some(ptr);
                    self.run.last_followed = follows;
                }
                Ok(PointerRead::Buffered(value)) => {
                    entry.held_bytes += value.len() as u64;
                    read.complete_with(|| Ok(value));
                }
                Err(e) => read.complete_with(|| Err(e)),
            }
            entry.read = Some(read);
        }
        self.ahead_bytes += entry.held_bytes;
        entry
    }

    /// Hands the gathered run of reads over: as its own job on the reader pool, or, when
    /// the file system batches reads, to the refill's one batch.
    fn issue_run(&mut self) {
        let run = ReadRun {
            last: self.run.last,
            last_followed: self.run.last_followed,
            ..ReadRun::default()
        };
        let run = std::mem::replace(&mut self.run, run);
        let Some(live) = run.live else {
            return;
        };
        let count = run.reads.len();
        let mut issued = IssuedRun {
            reads: Vec::with_capacity(count),
            live,
            slots: Vec::with_capacity(count),
            buffers: Vec::with_capacity(count),
        };
        for read in run.reads {
            issued.reads.push((read.ptr, read.key));
            issued.slots.push(read.slot);
            issued.buffers.push(read.buffer);
        }
        self.batched_runs.push(issued);
        let batched: usize = self.batched_runs.iter().map(|run| run.slots.len()).sum();
        if !self.batch_reads || batched >= READS_PER_BATCH {
            self.issue_batch();
        }
    }

    /// Queues the runs handed over so far as one job on the reader pool.
    fn issue_batch(&mut self) {
        if self.batched_runs.is_empty() {
            return;
        }
        let mut runs = std::mem::take(&mut self.batched_runs);
        let mut buffers: Vec<Vec<Vec<u8>>> = (runs.iter_mut())
            .map(|run| std::mem::take(&mut run.buffers))
            .collect();
        let batch_bytes: u64 = (runs.iter())
            .flat_map(|run| &run.reads)
            .map(|(ptr, _)| u64::from(ptr.len))
            .sum();
        if self.reads_if_cached
            && batch_bytes <= self.cached_read_budget
            && self.read_batch_if_cached(&runs, &mut buffers)
        {
            self.cached_read_budget -= batch_bytes;
            return;
        }
        // The job holds the log reader, not the database: dropping the iterator and
        // closing the database need not wait for reads it abandoned.
        let reader = Arc::clone(self.db.vlog.reader());
        self.db.readers().submit(Box::new(move || {
            let all_slots = || runs.iter().flat_map(|run| &run.slots);
            if all_slots().all(|slot| slot.is_abandoned()) {
                for slot in all_slots() {
                    slot.complete_with(|| Err(Error::Aborted("read-ahead abandoned".into())));
                }
                return;
            }
            // A panic must still complete every slot, or the iterator would wait forever.
            let values = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if let [run] = runs.as_slice() {
                    let buffers = buffers.into_iter().next().unwrap_or_default();
                    vec![reader.read_run(&run.reads, run.live, buffers)]
                } else {
                    let inputs: Vec<_> = (runs.iter())
                        .map(|run| (run.reads.as_slice(), run.live))
                        .collect();
                    reader.read_runs(&inputs, buffers)
                }
            }));
            match values {
                Ok(values) => {
                    for (run, values) in runs.iter().zip(values) {
                        for (slot, value) in run.slots.iter().zip(values) {
                            slot.complete_with(|| value);
                        }
                    }
                }
                Err(_) => {
                    for slot in all_slots() {
                        slot.complete_with(|| {
                            Err(Error::Internal("a value read panicked in a reader thread".into()))
                        });
                    }
                }
            }
        }));
    }

    /// Reads the batch here if the page cache holds all of it, and completes its slots:
    /// for the first refill after a positioning call, which the user waits for, handing
    /// it to a reader thread and being woken for its first value cost more than the copy
    /// (warm seeks of 100 clustered values ran ~1.4× faster without read-ahead than with
    /// it, 1.3–2.4× faster with this). Returns whether it did; if not, `buffers` are as
    /// they were.
    fn read_batch_if_cached(&self, runs: &[IssuedRun], buffers: &mut Vec<Vec<Vec<u8>>>) -> bool {
        let inputs: Vec<_> = (runs.iter())
            .map(|run| (run.reads.as_slice(), run.live))
            .collect();
        let reader = self.db.vlog.reader();
        // As on a reader thread, a panic completes every slot (with an error) rather than
        // reaching the user.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            reader.read_runs_if_cached(&inputs, buffers)
        }));
        let values = match read {
            Ok(Some(values)) => values,
            Ok(None) => return false,
            Err(_) => {
                for slot in runs.iter().flat_map(|run| &run.slots) {
                    slot.complete_with(|| {
                        Err(Error::Internal("a value read panicked in a scan".into()))
                    });
                }
                return true;
            }
        };
        for (run, values) in runs.iter().zip(values) {
            for (slot, value) in run.slots.iter().zip(values) {
                slot.complete_with(|| value);
            }
        }
        (self.db.scan_batches_read_cached).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// Reads entries ahead until the window or the byte budget is full, or the inner
    /// iterator ends; the window doubles for the next refill.
    fn refill_readahead(&mut self) {
        self.ahead_bytes = self.ahead.iter().map(|e| e.held_bytes).sum();
        while self.ahead.len() < self.window
            && self.ahead_bytes < SCAN_READAHEAD_BYTES
            && self.valid
            && self.hint_left != Some(0)
        {
            self.step_forward();
            if self.valid {
                let entry = self.current_ahead_entry();
                self.ahead.push_back(entry);
                if let Some(left) = &mut self.hint_left {
                    *left -= 1;
                }
            } else if let Some(e) = self.error.take() {
                self.ahead_error = Some(e);
            }
        }
        self.issue_run();
        self.issue_batch();
        self.cached_read_budget = 0;
        let most = self.scan_length_hint.unwrap_or(0).max(self.db.options.scan_readahead_entries);
        // Saturating: `scan_readahead_entries` may be "unlimited" (usize::MAX), and a window
        // that wrapped to 0 stopped refilling and showed each entry twice.
        self.window = self.window.saturating_mul(2).min(most);
    }

    /// Counts a value read out of log order at `key`; reports every `HEAT_REPORT_READS`.
    fn note_scattered_read(&mut self, key: &[u8]) {
        let heat = &mut self.heat;
        if !heat.reports {
            return;
        }
        if heat.scattered == 0 {
            heat.first.clear();
            heat.first.extend_from_slice(key);
        }
        heat.last.clear();
        heat.last.extend_from_slice(key);
        heat.scattered += 1;
        if heat.scattered >= HEAT_REPORT_READS {
            self.report_scan_heat();
        }
    }

    /// Adds the scattered reads counted so far to the database's scan heat; wakes the GC
    /// thread if a range became due for clustering.
    fn report_scan_heat(&mut self) {
        let heat = &mut self.heat;
        if heat.scattered == 0 {
            return;
        }
        let due = (self.db.scan_heat.lock()).record(
            &self.version,
            &heat.first,
            &heat.last,
            heat.scattered,
            self.db.options.auto_cluster_ratio,
        );
        heat.scattered = 0;
        if due {
            self.db.gc_cv.notify_all();
        }
    }

    /// This iterator's reads are not a user's scan (a clustering pass reads with one).
    pub(crate) fn without_scan_heat(&mut self) {
        self.heat.reports = false;
    }

    /// Forgets the read-ahead (before any repositioning); queued reads not yet started are
    /// skipped.
    fn drop_readahead(&mut self) {
        self.report_scan_heat();
        for entry in self.ahead.drain(..) {
            if let Some(read) = entry.read {
                read.abandon();
            }
        }
        self.ahead_bytes = 0;
        self.run = ReadRun::default();
        // Never issued, and their entries are gone: nobody waits on these slots.
        self.batched_runs.clear();
        self.hint_left = None;
        self.window = self.first_window();
        self.cached_read_budget = CACHED_READ_BUDGET;
        // An error the user never reached is not theirs: without read-ahead it would not
        // have been met either.
        self.ahead_error = None;
        // One the user did reach belongs to the old position: a positioning call starts
        // over (the inner iterators forget it too) and meets it again if it lies on the
        // new path, so the iterator is never valid with an error in `status()`.
        self.error = None;
    }

    /// The window of the first refill after a positioning call (without a hint).
    fn first_window(&self) -> usize {
        FIRST_READAHEAD_WINDOW.min(self.db.options.scan_readahead_entries.max(1))
    }

    fn beyond_upper(&self, key: &[u8]) -> bool {
        self.upper.as_deref().is_some_and(|u| key >= u)
    }

    fn below_lower(&self, key: &[u8]) -> bool {
        self.lower.as_deref().is_some_and(|l| key < l)
    }

    fn check_status(&mut self) {
        if let Err(e) = self.iter.status() {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
        self.valid = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::{Db, Options};

    /// The read-ahead byte budget counts what the queue holds, inline values and keys too:
    /// it counted only the records behind pointers, so with every value inline a scan
    /// queued up to `scan_readahead_entries` whole values (here 64 of 256 KiB: 16 MiB).
    #[test]
    fn read_ahead_of_inline_values_stays_within_the_byte_budget() {
        const VALUE_LEN: usize = 256 << 10;
        let mut options = Options::small_for_tests(Arc::new(MemFs::new()));
        options.value_threshold = usize::MAX;
        options.gc_space_amp_target = f64::INFINITY;
        let db = Db::open("/db", options).expect("open");
        for i in 0..80u32 {
            db.put(format!("key{i:03}"), vec![i as u8; VALUE_LEN])
                .expect("put");
        }
        db.flush().expect("flush");
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        let mut shown = 0u32;
        let mut most_held = 0u64;
        while it.valid() {
            assert_eq!(it.key(), format!("key{shown:03}").as_bytes());
            assert_eq!(it.value().expect("value"), vec![shown as u8; VALUE_LEN]);
            let held: u64 = (it.ahead.iter())
                .map(|e| (e.user_key.len() + e.stored.len()) as u64)
                .sum();
            most_held = most_held.max(held);
            shown += 1;
            it.next();
        }
        it.status().expect("no error");
        assert_eq!(shown, 80);
        // One entry may cross the budget (the refill checks before each entry).
        let bound = SCAN_READAHEAD_BYTES + VALUE_LEN as u64 + 64;
        assert!(most_held <= bound, "held {most_held} bytes ahead, bound {bound}");
        assert!(most_held > 0, "read ahead at all");
    }
}
