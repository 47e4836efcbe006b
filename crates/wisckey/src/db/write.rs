//! The write path: group commit into the value log, then memtable inserts.
//!
//! Writers queue up; the writer at the front becomes the leader, takes the batches of the
//! writers behind it (up to a size limit, and never a sync writer into a non-sync group),
//! appends them all to the value log under one lock, syncs once if any of them asked for
//! it, inserts them into the memtable, publishes the new visible sequence and wakes the
//! followers with the shared result. Only the leader assigns sequence numbers, so they are
//! consecutive in log order.
//!
//! Before appending, the leader makes room: it switches a full memtable to the immutable
//! list, stalls while too many immutable memtables or L0 files wait for the background
//! thread, and delays each write by ~1 ms while L0 is over its slowdown trigger. Then it
//! reserves the group's log space: on a full disk the group fails with `Error::NoSpace`
//! before any of it is buffered, nothing is latched, and later writes succeed once space is
//! back. A group of deletes only may spend the disk reserve (deletes free space).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::{latch_error, DbInner, ImmutableMemtable};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::vlog::{BatchEntry, ValuePointer, VlogWriter, RECORD_HEADER_LEN};

/// Largest group a leader assembles, in payload bytes.
const MAX_GROUP_BYTES: usize = 1 << 20;

#[derive(Debug)]
struct Writer {
    batch: Mutex<Option<WriteBatch>>,
    sync: bool,
    force_switch: bool,
    /// Set by the leader (under the queue lock) when this writer's batch is done.
    result: Mutex<Option<Result<()>>>,
    /// Signalled when this writer is done or has become the front of the queue; one per
    /// writer so that a finished group wakes only whom it concerns.
    cv: Condvar,
}

/// The group-commit queue.
#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    queue: Mutex<VecDeque<Arc<Writer>>>,
}

pub(crate) fn write(inner: &DbInner, batch: WriteBatch, sync: bool) -> Result<()> {
    submit(inner, Some(batch), sync, false)
}

/// Makes every acknowledged write durable.
pub(crate) fn sync_log(inner: &DbInner) -> Result<()> {
    submit(inner, None, true, false)
}

/// Switches the current memtable to immutable (if it holds anything) so it gets flushed.
pub(crate) fn force_memtable_switch(inner: &DbInner) -> Result<()> {
    submit(inner, None, false, true)
}

fn submit(
    inner: &DbInner,
    batch: Option<WriteBatch>,
    sync: bool,
    force_switch: bool,
) -> Result<()> {
    if inner.shutting_down.load(Ordering::Acquire) {
        return Err(Error::Closed);
    }
    let me = Arc::new(Writer {
        batch: Mutex::new(batch),
        sync,
        force_switch,
        result: Mutex::new(None),
        cv: Condvar::new(),
    });
    let mut queue = inner.writers.queue.lock();
    queue.push_back(Arc::clone(&me));
    loop {
        if let Some(result) = me.result.lock().take() {
            return result;
        }
        if queue.front().is_some_and(|w| Arc::ptr_eq(w, &me)) {
            break;
        }
        me.cv.wait(&mut queue);
    }
    let group = collect_group(&queue);
    drop(queue);

    let result = lead(inner, &group);

    let mut queue = inner.writers.queue.lock();
    for writer in &group {
        let done = queue.pop_front();
        debug_assert!(done.is_some_and(|w| Arc::ptr_eq(&w, writer)));
        *writer.result.lock() = Some(result.clone());
        writer.cv.notify_one();
    }
    if let Some(next_leader) = queue.front() {
        next_leader.cv.notify_one();
    }
    drop(queue);
    let own = me.result.lock().take();
    own.unwrap_or(result)
}

/// The leader plus the writers it may take along.
fn collect_group(queue: &VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
    let leader = &queue[0];
    let mut group = vec![Arc::clone(leader)];
    if leader.force_switch {
        return group;
    }
    let first_bytes = leader
        .batch
        .lock()
        .as_ref()
        .map_or(0, |b| b.payload_bytes());
    // A small leader does not wait behind a large group (LevelDB's rule).
    let limit = if first_bytes <= 128 << 10 {
        first_bytes + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    let mut bytes = first_bytes;
    for writer in queue.iter().skip(1) {
        if writer.force_switch || (writer.sync && !leader.sync) {
            break;
        }
        let size = writer
            .batch
            .lock()
            .as_ref()
            .map_or(0, |b| b.payload_bytes());
        if bytes + size > limit {
            break;
        }
        bytes += size;
        group.push(Arc::clone(writer));
    }
    group
}

fn lead(inner: &DbInner, group: &[Arc<Writer>]) -> Result<()> {
    let leader = &group[0];
    let mem = make_room(inner, leader.force_switch)?;
    if leader.force_switch {
        return Ok(());
    }
    let batches: Vec<WriteBatch> = group.iter().filter_map(|w| w.batch.lock().take()).collect();
    let sync = group.iter().any(|w| w.sync);
    let first_seq = inner.visible_seq.load(Ordering::Acquire) + 1;

    // The log lock is released before a failure is latched (lock order: state before vlog).
    // A failure after the group's space was reserved is latched: buffered records of
    // acknowledged writes may be gone. A failure to reserve fails only this group.
    let pointers = match append_group(inner, &batches, first_seq, sync) {
        Ok(p) => p,
        Err(GroupFailure::Clean(e)) => return Err(e),
        Err(GroupFailure::Poisoned(e)) => return Err(latch_error(inner, e)),
    };

    let threshold = inner.options.value_threshold;
    let mut seq = first_seq;
    let mut encoded = Vec::new();
    for (batch, ptrs) in batches.iter().zip(&pointers) {
        for (op, ptr) in batch.ops.iter().zip(ptrs) {
            match op.kind {
                ValueKind::Value if op.value.len() >= threshold => {
                    encoded.clear();
                    ptr.encode(&mut encoded);
                    mem.add(seq, ValueKind::ValuePointer, &op.key, &encoded);
                }
                kind => mem.add(seq, kind, &op.key, &op.value),
            }
            seq += 1;
        }
    }
    inner.visible_seq.store(seq - 1, Ordering::Release);
    Ok(())
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
/// writer before the lock is released (as `with_vlog` does).
fn append_group(
    inner: &DbInner,
    batches: &[WriteBatch],
    first_seq: u64,
    sync: bool,
) -> Result<Vec<Vec<ValuePointer>>, GroupFailure> {
    let mut vlog = inner.vlog.lock();
    reserve_log_space(inner, &mut vlog, batches)?;
    let result = append_reserved(inner, &mut vlog, batches, first_seq, sync);
    result.map_err(|e| {
        vlog.poison(e.clone());
        GroupFailure::Poisoned(e)
    })
}

/// Reserves log space for the whole group before any of it is appended. A group of deletes
/// only may spend the disk reserve: deletes are how a user frees space.
fn reserve_log_space(
    inner: &DbInner,
    vlog: &mut VlogWriter,
    batches: &[WriteBatch],
) -> Result<(), GroupFailure> {
    let ops = || batches.iter().flat_map(|b| &b.ops);
    let group_len: u64 = ops()
        .map(|op| (RECORD_HEADER_LEN + op.key.len() + op.value.len()) as u64)
        .sum();
    let mut result = vlog.reserve(group_len);
    if let Err(e) = &result {
        let deletes_only = ops().all(|op| op.kind == ValueKind::Deletion);
        if e.is_no_space()
            && !vlog.is_poisoned()
            && deletes_only
            && super::space::release_reserve(inner)
        {
            result = vlog.reserve(group_len);
        }
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
        || inner.last_log_flush.lock().elapsed() >= inner.options.vlog_flush_interval;
    if sync {
        vlog.sync()?;
    } else if flush_now {
        vlog.flush()?;
    }
    if sync || flush_now {
        *inner.last_log_flush.lock() = std::time::Instant::now();
    }
    *inner.vlog_flushed_end.lock() = vlog.flushed_end();
    *inner.vlog_end.lock() = vlog.end();
    inner
        .log_bytes_in_mem
        .fetch_add(log_bytes, Ordering::Relaxed);
    Ok(pointers)
}

/// Returns the memtable to insert into, switching and stalling as needed.
fn make_room(inner: &DbInner, mut force: bool) -> Result<Arc<MemTable>> {
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
        if force && state.mem.is_empty() {
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
            inner.bg_cv.wait(&mut state);
            continue;
        }
        // Only the leader (this thread) appends, so the published end is exact here.
        let log_end = *inner.vlog_end.lock();
        let full = std::mem::replace(&mut state.mem, Arc::new(MemTable::new()));
        state.imms.push_back(ImmutableMemtable {
            table: full,
            log_end,
        });
        inner.log_bytes_in_mem.store(0, Ordering::Relaxed);
        inner.bg_cv.notify_all();
        force = false;
    }
}
