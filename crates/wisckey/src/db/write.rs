//! The write path: group commit into the value log, then memtable inserts.
//!
//! Writers queue up; the writer at the front becomes the leader, takes the batches of the
//! writers behind it (up to a size limit, and never a sync writer into a non-sync group),
//! appends them all to the value log under one lock, syncs once if any of them asked for
//! it, inserts them into the memtable, publishes the new visible sequence and wakes the
//! followers with the shared result. Only the leader assigns sequence numbers, so they are
//! consecutive in log order.
//!
//! A waiting writer sleeps on its own handoff slot, not on the queue lock: the leader takes
//! its group off the queue, releases the queue, hands the new front writer its turn to lead
//! and only then each follower its result. (Waking followers under the queue lock made each
//! of them queue up for it in turn: with 16 writer threads on 16 cores, puts ran at a
//! third of one thread's rate.) A writer spins, then yields, for up to ~100 µs before it
//! sleeps, because a group of small writes is done in a few microseconds, less than a sleep
//! and a wake-up.
//!
//! Before appending, the leader makes room: it switches a full memtable to the immutable
//! list, stalls while too many immutable memtables or L0 files wait for the background
//! thread, and delays each write by ~1 ms while L0 is over its slowdown trigger. Then it
//! reserves the group's log space: on a full disk the group fails with `Error::NoSpace`
//! before any of it is buffered, nothing is latched, and later writes succeed once space is
//! back. A group of deletes only may spend the disk reserve (deletes free space); a group
//! that mixed puts and deletes and met a full disk refuses its puts and appends its deletes
//! on their own, so a delete never fails for a put's lack of log space.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::read::entry_points_at;
use super::{latch_error, DbInner, ImmutableMemtable};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::gc::Relocation;
use crate::key::ValueKind;
use crate::memtable::{MemTable, Relocated};
use crate::version::AscendingGets;
use crate::vlog::{BatchEntry, ValuePointer, VlogWriter, RECORD_HEADER_LEN};

/// Largest group a leader assembles, in payload bytes.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// Checks of its handoff flag, a CPU pause each, that a waiting writer makes before it
/// starts yielding (a few microseconds).
const SPINS_BEFORE_YIELD: u32 = 256;
/// Longest a waiting writer keeps yielding its core before it sleeps.
const MAX_YIELDING: Duration = Duration::from_micros(100);
/// A yield that took longer than this gave the core to another thread: after three such
/// the machine is busy, and the writer sleeps rather than take CPU from the leader.
const SLOW_YIELD: Duration = Duration::from_micros(3);

#[derive(Debug)]
struct Writer {
    batch: Mutex<Option<WriteBatch>>,
    sync: bool,
    force_switch: bool,
    /// With `force_switch`: switch even an empty memtable (its flush still moves the
    /// replay head to the log's end, which GC needs to collect the segment it was in).
    switch_even_if_empty: bool,
    /// GC's relocations: this writer leads a group of its own and appends only those whose
    /// key still points at the old record; `relocated` receives (records, bytes).
    relocations: Mutex<Option<Vec<Relocation>>>,
    /// The number of a memtable (`ReadSources::mem_number`) such that each of `relocations`
    /// was judged live in a view whose newest memtable was this one or a later one, if
    /// known: while it is still in memory, every write since those judgements is in the
    /// memtables, and the leader checks only those.
    relocations_judged_in: Option<u64>,
    relocated: Mutex<(u64, u64)>,
    /// The relocations free space (GC): on a full disk they may spend the reserve.
    /// Clustering's do not: they free nothing until GC collects the old copies.
    relocation_frees_space: bool,
    /// What a leader hands this writer: its batch's result, or the turn to lead.
    handoff: Mutex<Handoff>,
    /// Signalled after `handoff` changed; one per writer so that a finished group wakes
    /// only whom it concerns.
    cv: Condvar,
    /// Set after `handoff` changed, for the brief spin before sleeping on `cv`.
    handed: AtomicBool,
}

#[derive(Debug, Default)]
struct Handoff {
    /// This writer's batch is done (as part of a leader's group).
    result: Option<Result<()>>,
    /// This writer is now the front of the queue and leads the next group.
    lead: bool,
}

impl Writer {
    /// Waits until a leader hands over this writer's result (`Some`) or the lead (`None`).
    fn wait_for_handoff(&self) -> Option<Result<()>> {
        self.spin_until_handed();
        let mut handoff = self.handoff.lock();
        loop {
            if let Some(result) = handoff.result.take() {
                return Some(result);
            }
            if handoff.lead {
                return None;
            }
            self.cv.wait(&mut handoff);
        }
    }

    /// Spins, then yields, while the handoff is likely to come sooner than a sleep and a
    /// wake-up would take (RocksDB's write thread does the same); gives up early when
    /// yields show other threads waiting for the CPU.
    fn spin_until_handed(&self) {
        for _ in 0..SPINS_BEFORE_YIELD {
            if self.handed.load(Ordering::Acquire) {
                return;
            }
            std::hint::spin_loop();
        }
        let start = Instant::now();
        let mut before = start;
        let mut slow_yields = 0;
        while !self.handed.load(Ordering::Acquire) {
            std::thread::yield_now();
            let now = Instant::now();
            if now - before > SLOW_YIELD {
                slow_yields += 1;
            }
            if slow_yields >= 3 || now - start > MAX_YIELDING {
                return;
            }
            before = now;
        }
    }

    fn hand_over(&self, change: impl FnOnce(&mut Handoff)) {
        let mut handoff = self.handoff.lock();
        change(&mut handoff);
        self.handed.store(true, Ordering::Release);
        self.cv.notify_one();
    }
}

/// The group-commit queue.
#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    queue: Mutex<VecDeque<Arc<Writer>>>,
}

pub(crate) fn write(inner: &DbInner, batch: WriteBatch, sync: bool) -> Result<()> {
    pace_for_gc(inner, &batch);
    submit(inner, new_writer(Some(batch), sync, false)).map(drop)
}

/// Makes every acknowledged write durable. After a latched error the log is synced all the
/// same (see [`sync_despite_latched_error`]).
pub(crate) fn sync_log(inner: &DbInner) -> Result<()> {
    match submit(inner, new_writer(None, true, false)) {
        Ok(_) => Ok(()),
        Err(Error::Closed) => Err(Error::Closed),
        Err(e) if inner.state.lock().bg_error.is_some() => sync_despite_latched_error(inner, e),
        Err(e) => Err(e),
    }
}

/// A latched error that is not the log's own (a table or manifest write failed, say)
/// leaves every acknowledged write intact in the log: `Db::sync` still makes them durable,
/// as `close` would, and succeeds. (New writes stay refused.) Where the log's writer
/// failed itself it is poisoned: what it buffered may be lost, so it refuses, and `latched`
/// is returned. No write leadership is needed: nothing is appended, and the writer's lock
/// orders this with the log thread and any other sync.
fn sync_despite_latched_error(inner: &DbInner, latched: Error) -> Result<()> {
    inner.vlog.with_writer(|vlog| {
        if vlog.is_poisoned() {
            return Err(latched);
        }
        vlog.sync()
    })?;
    inner.vlog.wrote_out();
    Ok(())
}

/// Switches the current memtable to immutable (if it holds anything) so it gets flushed.
pub(crate) fn force_memtable_switch(inner: &DbInner) -> Result<()> {
    submit(inner, new_writer(None, false, true)).map(drop)
}

/// Switches the current memtable to immutable even if it is empty: its flush moves the
/// replay head to where the log ends now.
pub(crate) fn force_head_forward(inner: &DbInner) -> Result<()> {
    let writer = new_writer(None, false, true);
    let writer = Writer {
        switch_even_if_empty: true,
        ..writer
    };
    submit(inner, writer).map(drop)
}

/// GC's and clustering's relocation (see `gc::GcIndex::relocate_if_unchanged`): under
/// write leadership, appends each relocation whose key's newest entry is still the pointer
/// to `old`, as a new version with a fresh sequence number. `judged_in`: see
/// `Writer::relocations_judged_in`. Returns (records, log bytes).
///
/// Not synced: nothing depends on a relocation being durable before the log's next sync.
/// Until then the old copy is still the one the key index points to after a crash, and it
/// stays: GC syncs the log and flushes before it removes a victim, and a dead copy is
/// punched only once the memtable that shadows it is flushed, which syncs the log first.
/// (Syncing each batch made writes wait behind it: ~10 ms per 4 MiB batch on the 2-core VM.)
pub(crate) fn relocate(
    inner: &DbInner,
    relocations: Vec<Relocation>,
    judged_in: Option<u64>,
    frees_space: bool,
) -> Result<(u64, u64)> {
    let mut writer = new_writer(None, false, false);
    writer.relocation_frees_space = frees_space;
    writer.relocations_judged_in = judged_in;
    *writer.relocations.lock() = Some(relocations);
    submit(inner, writer)
}

fn new_writer(batch: Option<WriteBatch>, sync: bool, force_switch: bool) -> Writer {
    Writer {
        batch: Mutex::new(batch),
        sync,
        force_switch,
        switch_even_if_empty: false,
        relocations: Mutex::new(None),
        relocations_judged_in: None,
        relocated: Mutex::new((0, 0)),
        relocation_frees_space: false,
        handoff: Mutex::new(Handoff::default()),
        cv: Condvar::new(),
        handed: AtomicBool::new(false),
    }
}

fn submit(inner: &DbInner, writer: Writer) -> Result<(u64, u64)> {
    if inner.shutting_down.load(Ordering::Acquire) {
        return Err(Error::Closed);
    }
    let me = Arc::new(writer);
    let leads_now = {
        let mut queue = inner.writers.queue.lock();
        queue.push_back(Arc::clone(&me));
        queue.len() == 1
    };
    // Not at the front: a leader either takes this writer into its group (and hands over
    // the result) or, when it is done, finds it at the front and hands over the lead.
    if !leads_now {
        if let Some(result) = me.wait_for_handoff() {
            return result.map(|()| *me.relocated.lock());
        }
    }
    let deletes_apart = inner.log_space_short.load(Ordering::Relaxed);
    let group = collect_group(&inner.writers.queue.lock(), deletes_apart);
    debug_assert!(Arc::ptr_eq(&group[0], &me));

    // A panic while leading must not strand the followers and the next leader: they get
    // the error, and it is latched (what the group left half done is not trusted again).
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lead(inner, &group)))
        .unwrap_or_else(|payload| {
            let panicked = Error::from_panic("a write (leading its group)", payload.as_ref());
            Err(super::latch_error(inner, panicked))
        });
    let (result, refused) = match outcome {
        Ok(refused) => (Ok(()), refused),
        Err(e) => (Err(e), None),
    };
    let result_of = |member: usize| match &refused {
        Some(refused) if refused.writers[member] => Err(refused.error.clone()),
        _ => result.clone(),
    };

    let next_leader = {
        let mut queue = inner.writers.queue.lock();
        for writer in &group {
            let done = queue.pop_front();
            debug_assert!(done.is_some_and(|w| Arc::ptr_eq(&w, writer)));
        }
        queue.front().cloned()
    };
    // The next group first: waking each follower may cost a system call, and the next
    // leader need not wait for those.
    if let Some(next_leader) = next_leader {
        next_leader.hand_over(|h| h.lead = true);
    }
    for (member, follower) in group.iter().enumerate().skip(1) {
        let result = result_of(member);
        follower.hand_over(|h| h.result = Some(result));
    }
    result_of(0).map(|()| *me.relocated.lock())
}

/// Members of a group whose batches were refused while the others' went in: a group that
/// mixed puts and deletes met a full disk, and its deletes were appended on their own.
struct Refused {
    error: Error,
    /// Per group member, whether its batch was refused.
    writers: Vec<bool>,
}

/// The leader plus the writers it may take along.
fn collect_group(queue: &VecDeque<Arc<Writer>>, deletes_apart: bool) -> Vec<Arc<Writer>> {
    let leader = &queue[0];
    let mut group = vec![Arc::clone(leader)];
    if leader.force_switch || leader.relocations.lock().is_some() {
        return group;
    }
    // A `Db::sync` (no batch) needs no memtable room and no log space, so it still works on
    // a full disk; in a group with batches it shared their `NoSpace` (DESIGN, contract 8).
    // On a disk short of log space, a group of deletes only may spend the reserve (`lead`):
    // then deletes are not grouped with puts either, whose `NoSpace` the group would share.
    // `None`: a sync only; else the batch's bytes, and whether it is kept apart as deletes.
    let payload = |writer: &Writer| {
        (writer.batch.lock().as_ref())
            .map(|b| (b.payload_bytes(), deletes_apart && b.deletes_only()))
    };
    let leader_payload = payload(leader);
    let first_bytes = leader_payload.map_or(0, |(bytes, _)| bytes);
    // A small leader does not wait behind a large group (LevelDB's rule).
    let limit = if first_bytes <= 128 << 10 {
        first_bytes + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    let mut bytes = first_bytes;
    for writer in queue.iter().skip(1) {
        if writer.force_switch
            || (writer.sync && !leader.sync)
            || writer.relocations.lock().is_some()
        {
            break;
        }
        let writer_payload = payload(writer);
        if writer_payload.map(|(_, apart)| apart) != leader_payload.map(|(_, apart)| apart) {
            break;
        }
        let size = writer_payload.map_or(0, |(bytes, _)| bytes);
        if bytes + size > limit {
            break;
        }
        bytes += size;
        group.push(Arc::clone(writer));
    }
    group
}

/// Leads `group` into the log and the memtable. `Ok(Some)`: the group went in but for the
/// members it names (see [`Refused`]).
fn lead(inner: &DbInner, group: &[Arc<Writer>]) -> Result<Option<Refused>> {
    let leader = &group[0];
    // Checked when the group is led, not when it was queued: a relocation queued behind
    // `close`'s last flush would otherwise land after it.
    if inner.closing.load(Ordering::Acquire) && leader.relocations.lock().is_some() {
        return Err(Error::Closed);
    }
    let inserts_nothing = !leader.force_switch
        && leader.relocations.lock().is_none()
        && group.iter().all(|w| w.batch.lock().is_none());
    let mem = if inserts_nothing {
        memtable_as_it_is(inner)?
    } else {
        make_room(inner, leader.force_switch, leader.switch_even_if_empty)?
    };
    if leader.force_switch {
        return Ok(None);
    }
    let relocations = leader.relocations.lock().take();
    let mut relocated = None;
    // The group member each batch came from.
    let mut members = Vec::new();
    let (mut batches, may_spend_reserve) = match relocations {
        Some(relocations) => {
            let judged_in = leader.relocations_judged_in;
            let (batch, kept) = still_pointed_at(inner, &mem, relocations, judged_in)?;
            if batch.is_empty() {
                return Ok(None);
            }
            *leader.relocated.lock() = (batch.ops.len() as u64, kept.log_bytes);
            relocated = Some(kept);
            // GC writes to free space: on a full disk it may spend the reserve. A clustering
            // pass frees nothing, so it may not.
            (vec![batch], leader.relocation_frees_space)
        }
        None => {
            let mut batches = Vec::with_capacity(group.len());
            for (member, writer) in group.iter().enumerate() {
                if let Some(batch) = writer.batch.lock().take() {
                    batches.push(batch);
                    members.push(member);
                }
            }
            // Deletes are how a user frees space: a group of deletes only may spend it too.
            let deletes_only = batches.iter().all(WriteBatch::deletes_only);
            (batches, deletes_only)
        }
    };
    let sync = group.iter().any(|w| w.sync);
    let first_seq = inner.visible_seq.load(Ordering::Acquire) + 1;

    // The log lock is released before a failure is latched (lock order: state before vlog).
    // A failure after the group's space was reserved is latched: buffered records of
    // acknowledged writes may be gone. A failure to reserve fails only this group — but
    // for its deletes, when it mixed them with puts: they go in on their own, spending the
    // reserve if they must (the group was formed while the log did not look short of
    // space; a delete must not fail for a put's lack of room).
    let mut refused = None;
    let pointers = match append_group(inner, &batches, first_seq, sync, may_spend_reserve) {
        Ok(p) => p,
        Err(GroupFailure::Clean(e))
            if e.is_no_space()
                && !may_spend_reserve
                && relocated.is_none()
                && batches.iter().any(|b| !b.is_empty() && b.deletes_only()) =>
        {
            let mut writers = vec![false; group.len()];
            let mut deletes = Vec::new();
            for (batch, &member) in batches.into_iter().zip(&members) {
                if batch.deletes_only() {
                    deletes.push(batch);
                } else {
                    writers[member] = true;
                }
            }
            batches = deletes;
            refused = Some(Refused { error: e, writers });
            match append_group(inner, &batches, first_seq, sync, true) {
                Ok(p) => p,
                Err(GroupFailure::Clean(e)) => return Err(e),
                Err(GroupFailure::Poisoned(e)) => return Err(latch_error(inner, e)),
            }
        }
        Err(GroupFailure::Clean(e)) => return Err(e),
        Err(GroupFailure::Poisoned(e)) => return Err(latch_error(inner, e)),
    };

    let threshold = inner.options.value_threshold;
    let mut seq = first_seq;
    let mut encoded = Vec::new();
    // Log bytes no entry points to (inline values, tombstones): garbage once this memtable
    // is flushed. Counted per run of one segment, not per record (pointers are in log order).
    let mut unreferenced: Option<(u64, u64)> = None;
    for (batch, ptrs) in batches.iter().zip(&pointers) {
        for (op, ptr) in batch.ops.iter().zip(ptrs) {
            match op.kind {
                ValueKind::Value if op.value.len() >= threshold => {
                    encoded.clear();
                    ptr.encode(&mut encoded);
                    mem.add(seq, ValueKind::ValuePointer, &op.key, &encoded);
                }
                kind => {
                    mem.add(seq, kind, &op.key, &op.value);
                    match &mut unreferenced {
                        Some((segment, bytes)) if *segment == ptr.segment => {
                            *bytes += u64::from(ptr.len);
                        }
                        run => {
                            if let Some((segment, bytes)) = run.take() {
                                mem.add_unreferenced_log_bytes(segment, bytes);
                            }
                            *run = Some((ptr.segment, u64::from(ptr.len)));
                        }
                    }
                }
            }
            seq += 1;
        }
    }
    if let Some((segment, bytes)) = unreferenced {
        mem.add_unreferenced_log_bytes(segment, bytes);
    }
    if let Some(kept) = relocated {
        mem.add_relocated(kept.log_bytes, kept.old_bytes);
    }
    inner.visible_seq.store(seq - 1, Ordering::Release);
    Ok(refused)
}

/// The relocations whose key's newest entry is still the pointer GC read, as one batch of
/// puts, and the log bytes of their new and old copies. Called by the write leader, so no
/// write can land between this check and the append: a key deleted or overwritten before
/// it is dropped here, one written after it gets a higher sequence number than the
/// relocation.
///
/// If each relocation was judged live in a view whose newest memtable was `judged_in` or a
/// later one, and `judged_in` is still in memory, only the memtables are looked at: a write
/// since the judgement is in one of them, and an entry of theirs the judgement already saw
/// is the pointer itself (the view found nothing newer for the key). So a key with no
/// memtable entry is unchanged, and the leader does no table reads (which took ~12 ms per
/// 4 MiB batch of 1 KiB values while writers queued behind it).
fn still_pointed_at(
    inner: &DbInner,
    mem: &Arc<MemTable>,
    relocations: Vec<Relocation>,
    judged_in: Option<u64>,
) -> Result<(WriteBatch, Relocated)> {
    // As the leader, every acknowledged write is in this view.
    let view = super::read::capture(inner, &crate::options::ReadOptions::default())?;
    debug_assert!(view.reads_memtable(mem));
    let memtables_hold_every_later_write = view.memtables_hold_writes_since(judged_in);
    let mut batch = WriteBatch::new();
    let mut kept = Relocated::default();
    // Relocations come in key order (GC's and clustering's batches alike).
    let mut gets = AscendingGets::default();
    for relocation in relocations {
        let unchanged = if memtables_hold_every_later_write {
            match view.newest_in_memtables(&relocation.key) {
                None => true,
                Some(newest) => entry_points_at(&newest, relocation.old),
            }
        } else {
            let newest =
                super::read::newest_in_view_ascending(inner, &view, &relocation.key, &mut gets)?;
            newest.is_some_and(|newest| entry_points_at(&newest, relocation.old))
        } || crate::safety::skipped(crate::safety::SafetyStep::LivenessCheckUnderLeadership);
        if unchanged {
            let len = RECORD_HEADER_LEN + relocation.key.len() + relocation.value.len();
            kept.log_bytes += len as u64;
            kept.old_bytes += u64::from(relocation.old.len);
            batch.put(&relocation.key, &relocation.value);
        }
    }
    Ok((batch, kept))
}

/// Why a group failed to reach the log.
enum GroupFailure {
    /// Nothing of the group was buffered and the log is intact (e.g. the disk is full):
    /// fail just this group.
    Clean(Error),
    /// The log writer is poisoned: the error must be latched.
    Poisoned(Error),
}

/// Reserves the group's log space (see `VlogWriter::reserve`), appends its batches, then
/// syncs or writes the buffer out as the group and the options require. Returns each batch's
/// record pointers. One hold of the log lock; a failure after the reservation poisons the
/// writer before the lock is released (as `ValueLog::with_writer` does).
fn append_group(
    inner: &DbInner,
    batches: &[WriteBatch],
    first_seq: u64,
    sync: bool,
    may_spend_reserve: bool,
) -> Result<Vec<Vec<ValuePointer>>, GroupFailure> {
    let mut vlog = inner.vlog.lock_writer();
    // A group that appends nothing (`Db::sync`, empty batches) reserves nothing: a
    // reservation could roll to a new segment, or spend the disk reserve on a full disk, for
    // no record.
    if batches.iter().any(|batch| !batch.is_empty()) {
        if let Err(failure) = reserve_log_space(inner, &mut vlog, batches, may_spend_reserve) {
            // A reservation may have rolled to a new segment before it failed: readers of
            // the published end must see where the log is (`lock_writer`'s rule).
            inner.vlog.publish(&vlog);
            return Err(failure);
        }
    }
    let group_start = vlog.end();
    // A panic while appending poisons the writer and discards the group, as a failure
    // does: its records, half buffered or half written, must not become durable later.
    let result = crate::error::catch_panic("appending a write group to the value log", || {
        append_reserved(inner, &mut vlog, batches, first_seq, sync)
    });
    result.map_err(|e| {
        vlog.poison(e.clone());
        // The group failed: its records must not come back after a restart.
        vlog.discard_failed_group(group_start);
        inner.vlog.publish(&vlog);
        GroupFailure::Poisoned(e)
    })
}

/// Reserves log space for the whole group before any of it is appended. Work that frees
/// space (deletes, GC) may spend the disk reserve.
fn reserve_log_space(
    inner: &DbInner,
    vlog: &mut VlogWriter,
    batches: &[WriteBatch],
    may_spend_reserve: bool,
) -> Result<(), GroupFailure> {
    let ops = || batches.iter().flat_map(|b| &b.ops);
    let group_len: u64 = ops()
        .map(|op| (RECORD_HEADER_LEN + op.key.len() + op.value.len()) as u64)
        .sum();
    let puts = !batches.iter().all(WriteBatch::deletes_only);
    if puts && !may_spend_reserve {
        match super::space::puts_may_take_space(inner) {
            Ok(true) => {}
            Ok(false) => {
                // Deletes, grouped apart from now on, may still go.
                inner.log_space_short.store(true, Ordering::Relaxed);
                let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
                return Err(GroupFailure::Clean(Error::io(
                    "append to the value log: the disk reserve was spent on work that must \
                     finish, and that work is still retrying or there is no room to make the \
                     reserve again",
                    full,
                )));
            }
            // Not a full disk (no file handle, EIO): said as it is.
            Err(e) => return Err(GroupFailure::Clean(e)),
        }
    }
    let mut result = vlog.reserve(group_len);
    if result.is_ok() && puts && !may_spend_reserve {
        // Puts found room without the reserve: the disk is no longer short.
        inner.log_space_short.store(false, Ordering::Relaxed);
    }
    if let Err(e) = &result {
        if e.is_no_space()
            && !vlog.is_poisoned()
            && may_spend_reserve
            && super::space::release_reserve(inner, false)
        {
            result = vlog.reserve(group_len);
        }
    }
    if result.as_ref().is_err_and(Error::is_no_space) {
        inner.log_space_short.store(true, Ordering::Relaxed);
    }
    result.map_err(|e| {
        if vlog.is_poisoned() {
            GroupFailure::Poisoned(e)
        } else {
            GroupFailure::Clean(e)
        }
    })
}

fn append_reserved(
    inner: &DbInner,
    vlog: &mut VlogWriter,
    batches: &[WriteBatch],
    first_seq: u64,
    sync: bool,
) -> Result<Vec<Vec<ValuePointer>>> {
    let mut pointers = Vec::with_capacity(batches.len());
    let mut seq = first_seq;
    let mut log_bytes = 0u64;
    for batch in batches {
        if batch.is_empty() {
            pointers.push(Vec::new());
            continue;
        }
        let entries: Vec<BatchEntry<'_>> = batch
            .ops
            .iter()
            .map(|op| BatchEntry {
                kind: op.kind,
                key: &op.key,
                value: &op.value,
            })
            .collect();
        let ptrs = vlog.append_batch(seq, &entries)?;
        log_bytes += ptrs.iter().map(|p| u64::from(p.len)).sum::<u64>();
        seq += batch.ops.len() as u64;
        pointers.push(ptrs);
    }
    let flush_now = inner.options.write_through_to_os
        || inner.vlog.since_write_out() >= inner.options.vlog_flush_interval;
    if sync {
        vlog.sync_write()?;
    } else if flush_now {
        vlog.flush()?;
    }
    if sync || flush_now {
        inner.vlog.wrote_out();
    }
    inner.vlog.publish(vlog);
    inner
        .log_bytes_in_mem
        .fetch_add(log_bytes, Ordering::Relaxed);
    Ok(pointers)
}

/// The memtable, for a group that inserts nothing (`Db::sync` alone). It needs no room, so
/// it neither waits for a flush nor fails with `NoSpace` while flushes meet a full disk: then
/// most of all, acknowledged writes must still be made durable.
fn memtable_as_it_is(inner: &DbInner) -> Result<Arc<MemTable>> {
    let state = inner.state.lock();
    match &state.bg_error {
        Some(e) => Err(e.clone()),
        None => Ok(Arc::clone(&state.mem)),
    }
}

/// While background GC is far behind its target, makes a writer wait, before it joins the
/// write queue, until the log bytes written so far are paid for at the rate GC frees
/// (`gc::pace`). Before the queue, not as a group's leader: a sleeping leader would hold up
/// GC's relocations (which are never charged) and every writer behind it.
fn pace_for_gc(inner: &DbInner, batch: &WriteBatch) {
    if inner.gc_pacer.is_on() {
        // In log bytes, as the headroom and GC's rate are: each record has a header.
        let log_bytes = batch.payload_bytes() + RECORD_HEADER_LEN * batch.ops.len();
        (inner.gc_pacer).pay(log_bytes as u64, || {
            inner.shutting_down.load(Ordering::Acquire)
        });
    }
}

/// Returns the memtable to insert into, switching and stalling as needed.
fn make_room(inner: &DbInner, mut force: bool, even_if_empty: bool) -> Result<Arc<MemTable>> {
    let options = &inner.options;
    let mut allow_delay = !force;
    let mut state = inner.state.lock();
    loop {
        if let Some(e) = &state.bg_error {
            return Err(e.clone());
        }
        let l0_files = state.versions.current().num_files(0);
        let mem_full = state.mem.approximate_bytes() >= options.memtable_size
            || inner.log_bytes_in_mem.load(Ordering::Relaxed) >= options.memtable_max_log_bytes;
        if allow_delay && l0_files >= options.l0_slowdown_trigger {
            // Give compaction some of the CPU instead of stalling one write for seconds later.
            drop(state);
            std::thread::sleep(Duration::from_millis(1));
            allow_delay = false;
            state = inner.state.lock();
            continue;
        }
        if !force && !mem_full {
            return Ok(Arc::clone(&state.mem));
        }
        if force && state.mem.is_empty() && !even_if_empty {
            return Ok(Arc::clone(&state.mem));
        }
        if state.imms.len() >= options.max_immutable_memtables
            || l0_files >= options.l0_stop_trigger
        {
            // Waiting for background work that fails for lack of space could last forever:
            // fail this write cleanly instead (nothing of it has been appended).
            if let Some(e) = &state.no_space {
                return Err(e.clone());
            }
            // Closing stops the flush thread: nothing will drain these. (`shutdown` sets the
            // flag, then notifies under the state lock, so this check cannot miss it.) GC's
            // own writes land here while the database closes (found by the long oracle run:
            // `close` waited forever for a GC thread waiting here).
            if inner.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            inner.bg_cv.wait(&mut state);
            continue;
        }
        // Only the leader (this thread) appends records, so every record of the full
        // memtable lies before this end. GC's `seal_active` may roll the log meanwhile
        // (the end is then the next segment's first record slot): still after them, and
        // the roll syncs and cuts the sealed segment first.
        let log_end = inner.vlog.end();
        let full = std::mem::replace(&mut state.mem, Arc::new(MemTable::new()));
        state.imms.push_back(ImmutableMemtable {
            table: full,
            log_end,
            log_bytes: inner.log_bytes_in_mem.swap(0, Ordering::Relaxed),
        });
        super::publish_read_sources(inner, &state);
        inner.bg_cv.notify_all();
        force = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_of(writers: Vec<Writer>) -> VecDeque<Arc<Writer>> {
        writers.into_iter().map(Arc::new).collect()
    }

    fn put() -> WriteBatch {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v");
        batch
    }

    fn delete() -> WriteBatch {
        let mut batch = WriteBatch::new();
        batch.delete(b"k");
        batch
    }

    /// A database on a `MemFs` (also returned, and its options) holding `key0`..`key3`,
    /// whose disk is then full: no preallocation succeeds (4 KiB chunks, so a 16 KiB put
    /// soon needs one; small deletes fit in what is left).
    fn full_disk_db() -> (crate::fs::MemFs, crate::Db, crate::Options) {
        use crate::fs::{FaultFs, FaultKind, FaultOps, FsOp, MemFs};

        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let options = crate::Options {
            vlog_preallocate_size: 4 << 10,
            gc_space_amp_target: f64::INFINITY,
            ..crate::Options::small_for_tests(Arc::new(fault.clone()))
        };
        let db = crate::Db::open("/db", options.clone()).expect("open");
        for i in 0..4u32 {
            db.put(format!("key{i}"), [b'v'; 100]).expect("put");
        }
        fault.fail_at(
            1,
            FaultKind::NoSpace,
            FaultOps::Only(&[FsOp::Preallocate]),
            true,
        );
        (mem, db, options)
    }

    fn put_of(key: &str, len: usize) -> WriteBatch {
        let mut batch = WriteBatch::new();
        batch.put(key, vec![b'p'; len]);
        batch
    }

    fn delete_of(key: &str) -> WriteBatch {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        batch
    }

    /// A `Db::sync` is never grouped with writers that carry batches, in either role: the
    /// group's outcome is every member's, and a batch's `NoSpace` (no memtable room, no log
    /// space) failed a sync that needed neither.
    #[test]
    fn a_sync_without_a_batch_is_grouped_only_with_its_kind() {
        let sync_first = queue_of(vec![
            new_writer(None, true, false),
            new_writer(None, true, false),
            new_writer(Some(put()), true, false),
            new_writer(None, true, false),
        ]);
        assert_eq!(collect_group(&sync_first, false).len(), 2);
        let batch_first = queue_of(vec![
            new_writer(Some(put()), true, false),
            new_writer(Some(put()), false, false),
            new_writer(None, true, false),
            new_writer(Some(put()), true, false),
        ]);
        assert_eq!(collect_group(&batch_first, false).len(), 2);
    }

    /// While the log is short of space, a batch of deletes only is grouped only with its
    /// kind, in either role: such a group may spend the disk reserve, one with puts may not,
    /// and the group's `NoSpace` would be every member's.
    #[test]
    fn deletes_are_grouped_apart_from_puts_only_while_log_space_is_short() {
        let put_first = || {
            queue_of(vec![
                new_writer(Some(put()), false, false),
                new_writer(Some(delete()), false, false),
                new_writer(Some(put()), false, false),
            ])
        };
        assert_eq!(collect_group(&put_first(), true).len(), 1);
        assert_eq!(collect_group(&put_first(), false).len(), 3);
        let delete_first = || {
            queue_of(vec![
                new_writer(Some(delete()), false, false),
                new_writer(Some(delete()), false, false),
                new_writer(Some(put()), false, false),
                new_writer(Some(delete()), false, false),
            ])
        };
        assert_eq!(collect_group(&delete_first(), true).len(), 2);
        assert_eq!(collect_group(&delete_first(), false).len(), 4);
    }

    /// Defect: a group formed while the log did not look short of space mixes puts and
    /// deletes; on a full disk it failed whole, so its deletes — the writes that free
    /// space — got the puts' `NoSpace`. The leader now refuses the puts only and appends the
    /// deletes on their own.
    #[test]
    fn a_mixed_group_on_a_full_disk_refuses_its_puts_and_takes_its_deletes() {
        use crate::Db;

        let (mem, db, options) = full_disk_db();
        let group: Vec<Arc<Writer>> = [
            put_of("new0", 16 << 10),
            delete_of("key0"),
            put_of("new1", 16 << 10),
            delete_of("key1"),
        ]
        .into_iter()
        .map(|batch| Arc::new(new_writer(Some(batch), false, false)))
        .collect();
        assert!(!db.inner.log_space_short.load(Ordering::Relaxed));
        // Nothing else writes (GC is off), so this thread may lead without the queue.
        let refused = lead(&db.inner, &group)
            .expect("the deletes went in")
            .expect("the puts were refused");
        assert!(refused.error.is_no_space(), "{:?}", refused.error);
        assert_eq!(refused.writers, vec![true, false, true, false]);
        let get = |db: &Db, key: &str| db.get(key).expect("get");
        assert_eq!(get(&db, "key0"), None);
        assert_eq!(get(&db, "key1"), None);
        assert_eq!(get(&db, "new0"), None);
        assert_eq!(get(&db, "key2"), Some(vec![b'v'; 100]));
        db.close().expect("close");
        // The disk works again (the reopen does not go through the full-disk `FaultFs`).
        let db = Db::open("/db", crate::Options { fs: Arc::new(mem), ..options }).expect("reopen");
        assert_eq!(get(&db, "key0"), None, "the delete is durable");
        assert_eq!(get(&db, "key1"), None);
        assert_eq!(get(&db, "new1"), None, "the refused put left nothing");
        assert_eq!(get(&db, "key3"), Some(vec![b'v'; 100]));
    }

    /// The same through the queue: writers on their own threads form one mixed group
    /// behind a blocker; when it meets the full disk each gets its own result, the puts
    /// `NoSpace` and the deletes `Ok`, the leader's (a put) included.
    #[test]
    fn each_member_of_a_split_group_gets_its_own_result() {
        let (_mem, db, _options) = full_disk_db();
        let inner = &*db.inner;
        let queue_len = || inner.writers.queue.lock().len();
        // Holds the front of the queue until every writer is queued behind it.
        inner
            .writers
            .queue
            .lock()
            .push_back(Arc::new(new_writer(None, false, false)));
        let mut put1 = put_of("new0", 16 << 10);
        put1.put(b"new1", b"x");
        let batches = [
            put_of("new0", 16 << 10),
            delete_of("key0"),
            put1,
            delete_of("key1"),
        ];
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let mut threads = Vec::new();
            for batch in batches {
                let queued = queue_len();
                threads.push(scope.spawn(move || {
                    submit(inner, new_writer(Some(batch), false, false)).map(drop)
                }));
                while queue_len() == queued {
                    std::thread::yield_now();
                }
            }
            let first = {
                let mut queue = inner.writers.queue.lock();
                queue.pop_front();
                queue.front().cloned().expect("the first writer")
            };
            first.hand_over(|h| h.lead = true);
            (threads.into_iter())
                .map(|t| t.join().expect("writer thread"))
                .collect()
        });
        let no_space = |r: &Result<()>| r.as_ref().is_err_and(Error::is_no_space);
        assert!(no_space(&results[0]), "{results:?}");
        assert!(results[1].is_ok(), "{results:?}");
        assert!(no_space(&results[2]), "{results:?}");
        assert!(results[3].is_ok(), "{results:?}");
        assert_eq!(db.get("key0").expect("get"), None);
        assert_eq!(db.get("key1").expect("get"), None);
        assert_eq!(db.get("new0").expect("get"), None);
        assert_eq!(db.get("key2").expect("get"), Some(vec![b'v'; 100]));
    }
}
