//! Background work: memtable flushes, compactions, obsolete-file removal, and the timed
//! write-out of the value-log buffer.
//!
//! Three threads: `wisckey-bg` flushes immutable memtables (always first: writers may be
//! stalled on them) and runs compactions; `wisckey-log` writes the value-log buffer out every
//! `vlog_flush_interval` so a non-sync write reaches the OS within that bound even while a
//! long compaction runs; `wisckey-gc` runs background value-log GC (`db::gc`). A full disk,
//! or a moment without file handles (EMFILE, ENFILE), is not latched: it is kept in
//! `State::no_space` and the work is retried every 100 ms (nothing was lost). Any other error of a flush or compaction is latched in
//! `State::bg_error`; `wisckey-bg` then stops doing work (reads still work, writes return
//! the error); a failure to remove an obsolete file is only logged. `wisckey-log` goes on
//! writing the buffer out unless the log's writer failed itself (it is poisoned then): the
//! acknowledged writes in it must not wait for `close` to reach the OS.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{latch_error, DbInner, ImmutableMemtable};
use crate::compaction::{self, CompactionPolicy, ShadowTracker};
use crate::error::{catch_panic, Error, Result};
use crate::filename::{parse_file_name, table_file_name, vlog_file_name, FileKind};
use crate::gc::DeadBytes;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, seek_key, ValueKind, MAX_SEQUENCE};
use crate::memtable::{MemTable, MemTableIterator};
use crate::safety::SafetyStep;
use crate::sstable::{TableBuilder, TableOptions};
use crate::version::{AscendingGets, FileMeta, Version, VersionEdit, NUM_LEVELS};

/// Starts the background, log-flusher and GC threads. If one cannot be started, those
/// already running are stopped and joined before the error is returned: left running, they
/// held the database (its LOCK among its files) open for the rest of the process.
pub(crate) fn spawn(inner: Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    type Body = fn(&Arc<DbInner>);
    let threads: [(&str, &str, Body); 3] = [
        ("wisckey-bg", "spawn background thread", |inner| run_background(inner)),
        ("wisckey-log", "spawn log flusher thread", |inner| run_log_flusher(inner)),
        ("wisckey-gc", "spawn GC thread", super::gc::run_background),
    ];
    let mut handles = Vec::with_capacity(threads.len());
    for (name, context, body) in threads {
        let worker = Arc::clone(&inner);
        match std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(&worker))
        {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                inner.shutting_down.store(true, Ordering::Release);
                {
                    let _state = inner.state.lock();
                    inner.bg_cv.notify_all();
                    inner.gc_cv.notify_all();
                }
                for handle in handles {
                    let _ = handle.join();
                }
                return Err(Error::io(context, e));
            }
        }
    }
    Ok(handles)
}

enum Work {
    Flush(ImmutableMemtable),
    Compact,
}

fn run_background(inner: &DbInner) {
    // This thread released the reserve on a full disk (deletes or GC may have spent it
    // before: then it comes back at the next open, not here).
    let mut released_reserve = false;
    loop {
        let work = {
            let mut state = inner.state.lock();
            loop {
                if inner.shutting_down.load(Ordering::Acquire) {
                    return;
                }
                if state.bg_error.is_none() {
                    if let Some(imm) = state.imms.front() {
                        break Work::Flush(imm.clone());
                    }
                    let version = state.versions.current();
                    let manual_running = inner.manual_compaction.load(Ordering::Acquire) > 0;
                    // A panic in the pick is latched like one in the work: uncaught, it ended
                    // this thread with nothing latched, and writers and `close` waited on it.
                    let due = if manual_running {
                        Ok(false)
                    } else {
                        catch_panic("picking a compaction", || {
                            Ok(compaction::pick_compaction(
                                &version,
                                &policy(inner),
                                state.versions.compact_pointers(),
                            )
                            .is_some())
                        })
                    };
                    match due {
                        Ok(true) => break Work::Compact,
                        Ok(false) => {}
                        Err(e) => {
                            state.bg_error.get_or_insert(e);
                            inner.bg_cv.notify_all();
                            continue;
                        }
                    }
                }
                inner.bg_cv.wait(&mut state);
            }
        };
        // A panic is latched like any other failure (it is not a full disk): writers
        // stalled on this flush get the error instead of waiting for a thread that is gone.
        let result = match work {
            Work::Flush(imm) => catch_panic("a memtable flush", || {
                flush_memtable(inner, imm).map(|()| true)
            }),
            Work::Compact => catch_panic("a compaction", || compact_once(inner)),
        };
        match result {
            Ok(wrote) => {
                // This thread met the full disk, released the reserve, and has now found
                // space for a table: take the reserve back. One that deletes or GC spent
                // comes back at the next open: taking it back after a flush while they go
                // on (the disk still full) left them without space
                // (`hardening::gc_gives_space_back_on_a_full_disk`). A compaction that found
                // nothing to do proves no space.
                let had_no_space = wrote && inner.state.lock().no_space.take().is_some();
                if had_no_space {
                    let released = std::mem::take(&mut released_reserve);
                    super::space::background_work_succeeded(inner, released);
                }
                if wrote {
                    // One that could not be made (at open, say) comes back with the space.
                    super::space::retry_missing_reserve(inner);
                }
                // Dead bytes may have been counted: GC decides whether that is enough.
                inner.gc_cv.notify_all();
            }
            // A full disk is not latched: nothing was lost (the memtable stays queued, the
            // log holds its records), so the work is retried and resumes once space is back.
            // Nor is a moment without file handles (a server with many clients): the call
            // that failed opened nothing, and latching it refused every write until a
            // reopen. Unless the log's writer failed (its sync before the flush, say): its
            // buffered records are gone, which no retry brings back.
            Err(e) if e.is_shortage() && !inner.vlog.lock_writer().is_poisoned() => {
                let released = e.is_no_space() && super::space::release_reserve(inner, true);
                released_reserve |= released;
                let mut state = inner.state.lock();
                state.no_space = Some(e);
                inner.bg_cv.notify_all();
                // The full pause, not until the next notification: a caller waiting in
                // `wait_for_flushes` notifies on every wake-up, and retrying at each one
                // made a tight loop of failing table writes for as long as it waited.
                let retry_at = std::time::Instant::now() + NO_SPACE_RETRY;
                while !released
                    && !inner.shutting_down.load(Ordering::Acquire)
                    && std::time::Instant::now() < retry_at
                {
                    inner.bg_cv.wait_until(&mut state, retry_at);
                }
            }
            Err(e) => {
                latch_error(inner, e);
            }
        }
        inner.bg_cv.notify_all();
    }
}

/// How long background work waits before retrying after the disk was full.
const NO_SPACE_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

fn run_log_flusher(inner: &DbInner) {
    let interval = inner.options.vlog_flush_interval;
    let mut state = inner.state.lock();
    // `bg_cv` wakes this thread for other work's sake too (every flush, compaction and
    // memtable switch): a wake before the interval is up waits only for the rest of it, so
    // a buffered record waits at most the interval, not up to twice it.
    let mut wait = interval;
    while !inner.shutting_down.load(Ordering::Acquire) {
        inner.bg_cv.wait_for(&mut state, wait);
        if inner.shutting_down.load(Ordering::Acquire) {
            continue;
        }
        let latched = state.bg_error.is_some();
        drop(state);
        let since = inner.vlog.since_write_out();
        wait = interval.saturating_sub(since);
        if wait.is_zero() {
            wait = interval;
            // A latched error that is not the log's own (a table write failed, say) leaves
            // the buffer intact: its acknowledged writes still go out within the interval.
            // A writer that failed itself refuses (poisoned): what it held may be lost.
            let written = catch_panic("the value log's timed write-out", || {
                inner.vlog.with_writer(|vlog| {
                    if latched && vlog.is_poisoned() {
                        return Ok(false);
                    }
                    vlog.flush().map(|()| true)
                })
            });
            match written {
                Ok(true) => inner.vlog.wrote_out(),
                Ok(false) => {}
                // A broken invariant (a panic, say) ends this thread: retrying would meet it
                // again every interval. `close` still writes the buffer out and syncs it.
                Err(e @ Error::Internal(_)) => {
                    latch_error(inner, e);
                    return;
                }
                Err(e) => {
                    latch_error(inner, e);
                }
            }
        }
        state = inner.state.lock();
    }
}

pub(crate) fn policy(inner: &DbInner) -> CompactionPolicy {
    let o = &inner.options;
    CompactionPolicy {
        l0_compaction_trigger: o.l0_compaction_trigger,
        level1_max_bytes: o.level1_max_bytes,
        level_size_multiplier: 10,
        target_file_size: o.target_file_size,
        max_grandparent_overlap_bytes: o.target_file_size.saturating_mul(10),
    }
}

pub(crate) fn table_options(inner: &DbInner) -> TableOptions {
    TableOptions {
        block_size: inner.options.block_size,
        restart_interval: inner.options.block_restart_interval,
        bloom_bits_per_key: inner.options.bloom_bits_per_key,
    }
}

/// Allocates a table number and protects it from obsolete-file removal until released.
pub(crate) fn allocate_table_number(inner: &DbInner) -> u64 {
    let mut state = inner.state.lock();
    let number = state.versions.new_file_number();
    state.pending_outputs.insert(number);
    number
}

/// Writes the oldest immutable memtable to an L0 table and moves the replay head past it.
fn flush_memtable(inner: &DbInner, imm: ImmutableMemtable) -> Result<()> {
    let mut edit = VersionEdit::default();
    let mut number = None;
    let mut dead = DeadBytes::default();
    // Flushes run one at a time, oldest memtable first: this version holds every older
    // entry of the memtable's keys.
    let version = inner.state.lock().versions.current();
    if !imm.table.is_empty() {
        let n = allocate_table_number(inner);
        number = Some(n);
        match write_memtable_table(inner, &imm, n, &version, &mut dead) {
            Ok(meta) => edit.new_files.push((0, meta)),
            Err(e) => {
                discard_failed_output(inner, n);
                return Err(e);
            }
        }
    }
    // Until the install is tried, no manifest can name the table: a failure removes it
    // (else, on a full disk retried every 100 ms with a new number each time, every try
    // would leave a table holding space until the next open).
    let discard_table = |e: Error| {
        if let Some(n) = number {
            discard_failed_output(inner, n);
        }
        e
    };
    // The head may only pass records whose bytes are durable in the log. A failed write-out
    // discards buffered records, so check the synced position, not just the call's result.
    let sync_step = !crate::safety::skipped(SafetyStep::SyncBeforeHeadPersistence);
    inner.vlog.with_writer(|vlog| {
        if vlog.synced_end() < imm.log_end && sync_step {
            vlog.sync()?;
        }
        if vlog.synced_end() < imm.log_end && sync_step {
            return Err(Error::Internal(format!(
                "records of a memtable being flushed are missing from the log (before {:?})",
                imm.log_end
            )));
        }
        Ok(())
    })
    .map_err(discard_table)?;
    edit.vlog_head = Some(imm.log_end);
    // Records of inline values and tombstones are never read once the head passes them.
    for (segment, bytes) in imm.table.unreferenced_log_bytes() {
        dead.add(segment, bytes);
    }
    // The writers' share: relocations' new copies are live, and their old copies' death is
    // GC's (or clustering's) doing.
    let relocated = imm.table.relocated();
    let made_dead_by_writes = dead.total().saturating_sub(relocated.old_bytes);
    let written = imm.log_bytes.saturating_sub(relocated.log_bytes);
    dead.record(&mut edit);
    // Held from here: the segment list below depends on the last install.
    let one_install = inner.manifest_lock.lock();
    let to_seal: Vec<u64> = {
        let mut state = inner.state.lock();
        if let Some(e) = &state.bg_error {
            let e = e.clone();
            drop(state);
            return Err(discard_table(e));
        }
        // The head passes into segments the writer created since the last flush: list them,
        // so that open refuses if one goes missing, and their numbers are never used again.
        let segments = state.versions.vlog_segments();
        let listed_up_to = segments.last_key_value().map_or(0, |(&s, _)| s);
        edit.vlog_segments_added = (listed_up_to + 1..=imm.log_end.segment).collect();
        edit.next_vlog_segment = Some(imm.log_end.segment + 1);
        // Segments the head has left behind will never be appended to: their size is final.
        let unsealed_listed = (segments.iter())
            .filter(|(_, m)| m.sealed_size.is_none())
            .map(|(&s, _)| s);
        let to_seal = unsealed_listed
            .chain(edit.vlog_segments_added.iter().copied())
            .filter(|&s| s < imm.log_end.segment)
            .collect::<Vec<u64>>();
        let visible = inner.visible_seq.load(Ordering::Acquire);
        if visible > state.versions.last_sequence() {
            state.versions.set_last_sequence(visible);
        }
        to_seal
    };
    for segment in to_seal {
        let size = (inner.fs.file_size(&vlog_file_name(&inner.dir, segment))).map_err(discard_table)?;
        edit.vlog_segments_sealed.push((segment, size));
    }
    // On failure the edit may still have reached the manifest: the table stays pending (not
    // swept) until a later install succeeds, and the error is latched (or, for a full disk,
    // retried) by the caller. Readers
    // see the memtable until the table is installed, in the same critical section.
    let dead_records = dead.take_records();
    drop(version);
    let installed = super::install_edit_holding(inner, &one_install, edit, |state| {
        if let Some(n) = number {
            state.pending_outputs.remove(&n);
        }
        let front = state.imms.pop_front();
        state.imms_flushed += 1;
        // Durable: the space a released reserve gave back is no longer this flush's, and a
        // writer woken by it may make the reserve again at once (this thread does too, after).
        (inner.reserve_held_for_background).store(false, Ordering::Release);
        debug_assert!(front.is_some_and(|f| Arc::ptr_eq(&f.table, &imm.table)));
        // A reader that captured its view before this install may still follow a pointer
        // to a record found dead here; one that captures after it sees the shadowing entry
        // (unless it reads at an older snapshot).
        if state.punch_supported != Some(false) && inner.options.gc_space_amp_target.is_finite() {
            let visible = inner.visible_seq.load(Ordering::Acquire);
            (inner.punches.lock()).push(dead_records, state.versions.older_versions(), visible);
        }
    });
    if let Err(e) = installed {
        // Released once a later install succeeds (see `State::outputs_of_failed_installs`).
        (inner.state.lock().outputs_of_failed_installs).extend(number);
        return Err(e);
    }
    drop(one_install);
    (inner.uncounted_garbage.lock()).add_flush(made_dead_by_writes, written);
    inner.bg_cv.notify_all();
    sweep_obsolete_files(inner);
    Ok(())
}

/// Removes the partial table `number` whose write failed, then releases its number. No
/// manifest refers to it; left in place it would hold disk space until the sweep after the
/// next success (on a full disk, work is retried every 100 ms, each retry with a new
/// number). Best effort: a table that cannot be removed now is the sweep's.
pub(crate) fn discard_failed_output(inner: &DbInner, number: u64) {
    let path = table_file_name(&inner.dir, number);
    match inner.fs.remove(&path) {
        Ok(()) => {}
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!(
            "wisckey: could not remove the partial table {}: {e}",
            path.display()
        ),
    }
    inner.state.lock().pending_outputs.remove(&number);
}

/// [`delete_obsolete_files`] where its failure must not fail the caller (after a flush or
/// compaction was installed): it is only logged. The work is done, a leftover file harms
/// nothing (it holds space until the next sweep removes it), and latching the error would
/// refuse every write until a reopen.
pub(crate) fn sweep_obsolete_files(inner: &DbInner) {
    if let Err(e) = delete_obsolete_files(inner) {
        log::warn!("wisckey: obsolete files stay until the next sweep: {e}");
    }
}

/// Writes `imm` to table `number`. Every entry shadowed by a newer entry of its key is
/// counted in `dead`: within the memtable, and the tables' newest entry of each key the
/// memtable holds (looked up in `version`). Shadowed entries that every reader sees past
/// are left out (as compaction would drop them).
fn write_memtable_table(
    inner: &DbInner,
    imm: &ImmutableMemtable,
    number: u64,
    version: &Version,
    dead: &mut DeadBytes,
) -> Result<FileMeta> {
    let path = table_file_name(&inner.dir, number);
    let file = inner.fs.create(&path)?;
    let mut builder = TableBuilder::new(file, path.display().to_string(), table_options(inner));
    let oldest_snapshot = inner.snapshots.oldest_or_current(&inner.visible_seq);
    let mut it = MemTableIterator::new(Arc::clone(&imm.table));
    it.seek_to_first();
    let mut smallest = Vec::new();
    let mut largest = Vec::new();
    let mut shadows = ShadowTracker::new(oldest_snapshot);
    let mut shadowed_in_tables = Some(TablesLookup::new(inner, version, &imm.table));
    while it.valid() {
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| Error::Internal("memtable holds a malformed internal key".into()))?;
        let (newest_of_key, shadowed) = shadows.next(parsed.user_key, parsed.sequence);
        if !newest_of_key {
            // A newer entry of the key is in this memtable. (A snapshot may still read this
            // one: the count is what GC will free once it is gone.)
            dead.shadowed(parsed.kind, it.value());
        } else if let Some(lookup) = &mut shadowed_in_tables {
            match lookup.newest(parsed.user_key) {
                // The memtable's newest entry of the key shadows the tables' newest one.
                Ok(Some((kind, stored))) => dead.shadowed(kind, &stored),
                Ok(None) => {}
                Err(e) => {
                    // Only the dead-byte count needed this lookup: a damaged table must not
                    // fail the flush (and with it every write). Readers of the damaged
                    // block get the error; the count misses what it cannot read.
                    log::warn!("wisckey: flush counts no more dead values: {e}");
                    shadowed_in_tables = None;
                }
            }
        }
        if shadowed {
            it.next();
            continue;
        }
        builder.add(it.key(), it.value())?;
        if smallest.is_empty() {
            smallest = it.key().to_vec();
        }
        largest.clear();
        largest.extend_from_slice(it.key());
        it.next();
    }
    let file_size = builder.finish()?;
    inner.fs.sync_dir(&inner.dir)?;
    Ok(FileMeta {
        number,
        file_size,
        smallest,
        largest,
    })
}

/// The tables' newest entry of each key a flush writes, asked in ascending key order.
///
/// Where the memtable's keys are dense in the tree (an overwrite-heavy load: about as many
/// table entries as memtable keys), a forward cursor per source (each level-0 table, each
/// deeper level) steps through the tables, reading them about sequentially; the newest of
/// the entries the sources hold for a key is the answer. One merging cursor over all
/// sources did the same with a heap step (a key comparison per source) for every table
/// entry passed: under 1 KiB overwrites with GC, 46% of the background thread
/// (docs/BENCHMARKS.md, "A forward cursor per table source for a flush's dead bytes").
/// Where they are sparse (new keys into a big tree, or the small memtable GC flushes before
/// a victim leaves the log), a point lookup per key lets the bloom filters answer most of
/// them, through table cursors that keep each table's last data block for the next key
/// (`Version::get_ascending`).
enum TablesLookup<'a> {
    Cursors(Vec<SourceCursor>),
    Point {
        inner: &'a DbInner,
        version: &'a Version,
        gets: Box<AscendingGets>,
    },
}

/// One table source's forward cursor ([`TablesLookup::Cursors`]).
struct SourceCursor {
    it: Box<dyn InternalIterator>,
    positioned: bool,
}

impl SourceCursor {
    /// Moves to the source's first entry of a user key at or after `user_key` (stepping
    /// when that is near, else seeking to `target`, `user_key`'s first possible entry).
    fn reach(&mut self, user_key: &[u8], target: &[u8]) -> Result<()> {
        let mut steps = 0;
        let mut seek = !self.positioned;
        while !seek && self.it.valid() && crate::key::user_key(self.it.key()) < user_key {
            if steps == CURSOR_NEXTS_BEFORE_SEEK {
                seek = true;
            } else {
                self.it.next();
                steps += 1;
            }
        }
        if seek {
            self.it.seek(target);
            self.positioned = true;
        }
        self.it.status()
    }
}

/// Table entries per memtable key up to which the cursors are used.
const CURSOR_MAX_DENSITY: u64 = 8;
/// `next` calls a cursor spends to reach a key before it seeks instead.
const CURSOR_NEXTS_BEFORE_SEEK: usize = 16;

impl<'a> TablesLookup<'a> {
    fn new(inner: &'a DbInner, version: &'a Version, mem: &MemTable) -> TablesLookup<'a> {
        let table_bytes: u64 = (0..NUM_LEVELS).map(|l| version.level_bytes(l)).sum();
        // Table entries are about as long as the memtable's (key, sequence, pointer).
        let entry_bytes = (mem.approximate_bytes() / mem.len().max(1)).max(16) as u64;
        let table_entries = table_bytes / entry_bytes;
        if table_entries <= CURSOR_MAX_DENSITY * mem.len() as u64 {
            let sources = (version.iterators(&inner.tables).into_iter())
                .map(|it| SourceCursor {
                    it,
                    positioned: false,
                })
                .collect();
            TablesLookup::Cursors(sources)
        } else {
            TablesLookup::Point {
                inner,
                version,
                gets: Box::default(),
            }
        }
    }

    /// The kind and stored value of the tables' newest entry of `user_key`; keys must be
    /// asked in ascending order.
    fn newest(&mut self, user_key: &[u8]) -> Result<Option<(ValueKind, Vec<u8>)>> {
        let malformed = || Error::corruption("sstable", 0, "table holds a malformed internal key");
        let target = seek_key(user_key, MAX_SEQUENCE);
        match self {
            TablesLookup::Point {
                inner,
                version,
                gets,
            } => match version.get_ascending(&*inner.tables, gets, &target)? {
                Some((found, stored)) => {
                    let kind = parse_internal_key(&found).ok_or_else(malformed)?.kind;
                    Ok(Some((kind, stored)))
                }
                None => Ok(None),
            },
            TablesLookup::Cursors(sources) => {
                // (source, sequence, kind) of the newest entry found so far.
                let mut newest: Option<(usize, u64, ValueKind)> = None;
                for (i, source) in sources.iter_mut().enumerate() {
                    source.reach(user_key, &target)?;
                    if !source.it.valid() {
                        continue;
                    }
                    // Within a key, a source's entries run newest first.
                    let found = parse_internal_key(source.it.key()).ok_or_else(malformed)?;
                    if found.user_key == user_key
                        && newest.is_none_or(|(_, seq, _)| found.sequence > seq)
                    {
                        newest = Some((i, found.sequence, found.kind));
                    }
                }
                Ok(newest.map(|(i, _, kind)| (kind, sources[i].it.value().to_vec())))
            }
        }
    }
}

/// Runs one compaction if the policy wants one. Never waits for a manual compaction: this
/// thread also flushes memtables, which writers may be stalled on.
/// Runs the compaction due, if any; returns whether one ran.
fn compact_once(inner: &DbInner) -> Result<bool> {
    let Some(_only_one) = inner.compaction_lock.try_lock() else {
        inner.compaction_lock_misses.fetch_add(1, Ordering::Relaxed);
        return Ok(false);
    };
    let task = {
        let state = inner.state.lock();
        compaction::pick_compaction(
            &state.versions.current(),
            &policy(inner),
            state.versions.compact_pointers(),
        )
    };
    match task {
        Some(task) => compaction::run(inner, &task).map(|()| true),
        None => Ok(false),
    }
}

/// Blocks until every immutable memtable that exists at the call is flushed (or a
/// background error is latched, or flushes keep failing for lack of disk space for a while:
/// that error is returned). Memtables switched after the call are not waited for: writers
/// that keep switching them would otherwise hold the caller for as long as they write.
pub(crate) fn wait_for_flushes(inner: &DbInner) -> Result<()> {
    let mut state = inner.state.lock();
    let target = state.imms_flushed + state.imms.len() as u64;
    let mut no_space_since: Option<std::time::Instant> = None;
    loop {
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        if state.imms_flushed >= target {
            return Ok(());
        }
        if inner.shutting_down.load(Ordering::Acquire) {
            // The background thread is gone or going: nothing will flush these.
            return Err(Error::Closed);
        }
        match (&state.no_space, no_space_since) {
            (Some(e), Some(since)) if since.elapsed() >= NO_SPACE_RETRY * 5 => {
                return Err(e.clone());
            }
            (Some(_), None) => no_space_since = Some(std::time::Instant::now()),
            (None, _) => no_space_since = None,
            _ => {}
        }
        inner.bg_cv.notify_all();
        inner.bg_cv.wait_for(&mut state, NO_SPACE_RETRY);
    }
}

/// Manual compaction of `[begin, end]` down to the deepest level holding such data.
pub(crate) fn compact_range(
    inner: &DbInner,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    // While a manual compaction waits for or holds the compaction lock, the background
    // thread must not pick compactions: it would fail to get the lock and pick again at once,
    // spinning (and waking stalled writers) for as long as this runs. It keeps flushing.
    // The flag is set before the lock is taken and cleared after it is released (guards drop
    // in reverse order), so no moment has the lock held without the flag.
    struct ClearOnDrop<'a>(&'a DbInner);
    impl Drop for ClearOnDrop<'_> {
        fn drop(&mut self) {
            self.0.manual_compaction.fetch_sub(1, Ordering::AcqRel);
            let _state = self.0.state.lock();
            self.0.bg_cv.notify_all();
        }
    }
    inner.manual_compaction.fetch_add(1, Ordering::AcqRel);
    let _clear = ClearOnDrop(inner);
    let _only_one = inner.compaction_lock.lock();
    let deepest = {
        let version = inner.state.lock().versions.current();
        (1..NUM_LEVELS)
            .rev()
            .find(|&l| !version.overlapping_files(l, begin, end).is_empty())
            .unwrap_or(1)
    };
    for level in 0..deepest {
        let task = {
            let state = inner.state.lock();
            if let Some(e) = &state.bg_error {
                return Err(e.clone());
            }
            compaction::pick_range_compaction(&state.versions.current(), level, begin, end)
        };
        if let Some(task) = task {
            if let Err(e) = compaction::run(inner, &task) {
                // As for a background compaction: a failed write or fsync is never retried
                // and trusted, so the database takes no more writes; a full disk or a
                // moment without file handles is retried (space or handles may come back).
                return Err(if e.is_shortage() {
                    e
                } else {
                    latch_error(inner, e)
                });
            }
        }
    }
    inner.bg_cv.notify_all();
    Ok(())
}

/// Removes table files no live version references, old manifests and temporary files.
///
/// The directory is listed *before* the live and pending sets are read: a table created
/// after the listing is not seen, and one seen in the listing was registered as pending
/// before it was created, so it is in one of the two sets unless it is truly obsolete.
///
/// A file that cannot be removed does not stop the sweep (one that never can would
/// otherwise keep every file after it in the listing); the first such error is returned
/// once the others were tried.
pub(crate) fn delete_obsolete_files(inner: &DbInner) -> Result<()> {
    let _one_sweeper = inner.deletion_lock.lock();
    let names = inner.fs.list(&inner.dir)?;
    let (live, pending, manifest, being_written) = {
        let state = inner.state.lock();
        (
            state.versions.live_table_files(),
            state.pending_outputs.clone(),
            state.versions.manifest_file_number(),
            state.versions.files_being_written(),
        )
    };
    let removed_segments = segments_to_delete(inner, &names);
    let mut first_error = None;
    for name in names {
        let obsolete = match parse_file_name(&name) {
            Some(FileKind::Table(n)) => !live.contains(&n) && !pending.contains(&n),
            // A roll-over in flight writes its manifest and CURRENT's temp file without the
            // state lock; GC's hole-punching probe uses a pending number.
            Some(FileKind::Temp(n)) => !being_written.contains(&n) && !pending.contains(&n),
            Some(FileKind::Manifest(n)) => n < manifest && !being_written.contains(&n),
            Some(FileKind::ValueLog(n)) => removed_segments.contains(&n),
            // A checkpoint's copy that opens has its CURRENT: it was complete (a crash came
            // between CURRENT and the marker's removal).
            Some(FileKind::CheckpointIncomplete) => true,
            _ => false,
        };
        if obsolete {
            if let Some(FileKind::Table(n)) = parse_file_name(&name) {
                inner.table_cache.evict(n);
            }
            // The version set removes old manifests itself (best effort) and renames its
            // temporary file into CURRENT, so a listed file may already be gone.
            match inner.fs.remove(&inner.dir.join(&name)) {
                Ok(()) => {}
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            }
            // After the deletion: a read that opened the segment just before it then has
            // either cached its handle already (dropped here) or caches none.
            if let Some(FileKind::ValueLog(n)) = parse_file_name(&name) {
                inner.vlog.reader().forget_segment(n);
            }
            if let Some(FileKind::ValueLog(n)) = parse_file_name(&name) {
                let mut state = inner.state.lock();
                if let Some(removal) = state.gc_removed.remove(&n) {
                    state.gc_freed_bytes += removal.size;
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Value-log segments among `names` that are no longer part of the log and that nothing
/// can read any more: below the newest listed segment (newer ones are being written), not
/// readable through any live `Version` (one that lists it, or lists only older segments:
/// the memtables read with it may point there), and not
/// removed by a GC whose relocations an open snapshot cannot see.
fn segments_to_delete(inner: &DbInner, names: &[String]) -> std::collections::BTreeSet<u64> {
    let state = inner.state.lock();
    // Read under the state lock, after every removal this sweep can see was installed: a
    // snapshot registered later has a sequence at least the removal's `relocated_through`
    // (read before the install). Read before the lock, a snapshot registered in between
    // with an older sequence was missed and its segment deleted under it.
    let oldest_snapshot = inner.snapshots.oldest();
    let Some((&newest_listed, _)) = state.versions.vlog_segments().last_key_value() else {
        return Default::default();
    };
    names
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::ValueLog(n)) => Some(n),
            _ => None,
        })
        .filter(|&n| n < newest_listed && !state.versions.vlog_segment_in_use(n))
        .filter(|n| {
            state.gc_removed.get(n).is_none_or(|removal| {
                oldest_snapshot.is_none_or(|oldest| oldest >= removal.relocated_through)
            })
        })
        .collect()
}
