//! The read path: point lookups and iterator construction over one consistent view
//! (memtable, immutable memtables, current version) at one sequence number.
//!
//! Value pointers are resolved here: a record still in the value log's write buffer is
//! read from the buffer (§3.4.1), anything else with one verified positional read.

use std::sync::Arc;

use arc_swap::Guard;

use super::{read_sequence, DbInner, ReadSources};
use crate::error::{Error, Result};
use crate::iter::{DbIterator, InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, seek_key, SequenceNumber, ValueKind};
use crate::memtable::{MemTable, MemTableIterator, StoredValue};
use crate::options::ReadOptions;
use crate::version::{AscendingGets, Version};
use crate::vlog::{PointerRead, ValuePointer};

/// The sources a read consults and the sequence to read them at, as one pair the state lock
/// would have given at one instant: a compaction installed later decided what to drop using
/// a sequence no larger than this one, so it cannot remove a version this read needs.
pub(crate) struct View {
    sequence: SequenceNumber,
    sources: Guard<Arc<ReadSources>>,
}

impl View {
    /// Whether `mem` is the memtable this view reads first.
    pub(crate) fn reads_memtable(&self, mem: &Arc<MemTable>) -> bool {
        Arc::ptr_eq(&self.sources.mem, mem)
    }

    fn version(&self) -> &Version {
        &self.sources.version
    }

    /// The number of the memtable this view reads first (`ReadSources::mem_number`).
    pub(crate) fn mem_number(&self) -> u64 {
        self.sources.mem_number
    }

    /// Whether this view's memtables hold every write since a view whose newest memtable
    /// was `number` (`ReadSources::hold_writes_since`).
    pub(crate) fn memtables_hold_writes_since(&self, number: Option<u64>) -> bool {
        self.sources.hold_writes_since(number)
    }

    /// Reads and verifies the value-log record `encoded` (a pointer this view found for
    /// `key`) points at.
    pub(crate) fn read_pointer(
        &self,
        inner: &DbInner,
        key: &[u8],
        encoded: &[u8],
    ) -> Result<Vec<u8>> {
        read_pointer(inner, self.version(), key, encoded)
    }

    /// `key`'s newest entry in this view's memtables only (none if they do not hold it).
    pub(crate) fn newest_in_memtables(&self, key: &[u8]) -> Option<(ValueKind, StoredValue)> {
        newest_in_memtables(&self.sources.mem, &self.sources.imms, key, self.sequence)
    }
}

/// Takes no lock: loads the published sources, reads the sequence, and keeps the pair only
/// if the sources are still the published ones. Every publication is a new `Arc` and this
/// one is held, so an unchanged pointer means no publication came between the two loads:
/// the sources were current when the sequence was read, and everything at or below it is
/// in them (a writer publishes a new memtable before any write into it becomes visible).
pub(crate) fn capture(inner: &DbInner, opts: &ReadOptions) -> Result<View> {
    loop {
        let sources = inner.read_sources.load();
        let sequence = read_sequence(inner, opts)?;
        if Arc::ptr_eq(&sources, &inner.read_sources.load()) {
            return Ok(View { sequence, sources });
        }
    }
}

pub(crate) fn get(inner: &DbInner, key: &[u8], opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
    let view = capture(inner, opts)?;
    match newest_in_view(inner, &view, key)? {
        Some((kind, stored)) => resolve_value(inner, view.version(), key, kind, stored),
        None => Ok(None),
    }
}

/// [`get`] into the caller's buffer: `buf` is cleared, then holds the value if there is
/// one (its capacity is reused; it grows only if the value does not fit).
pub(crate) fn get_into(
    inner: &DbInner,
    key: &[u8],
    opts: &ReadOptions,
    buf: &mut Vec<u8>,
) -> Result<bool> {
    buf.clear();
    let view = capture(inner, opts)?;
    match newest_in_view(inner, &view, key)? {
        None | Some((ValueKind::Deletion, _)) => return Ok(false),
        Some((ValueKind::Value, stored)) => buf.extend_from_slice(&stored),
        Some((ValueKind::ValuePointer, stored)) => {
            read_pointer_into(inner, view.version(), key, &stored, buf)?
        }
    }
    Ok(true)
}

/// [`get`] lending the value to `use_value` where it lies: the memtable's entry, the
/// value-log write buffer's copy, the value cache, or `scratch` (a read from the file).
pub(crate) fn get_with<R>(
    inner: &DbInner,
    key: &[u8],
    opts: &ReadOptions,
    scratch: &mut Vec<u8>,
    use_value: impl FnOnce(&[u8]) -> R,
) -> Result<Option<R>> {
    let view = capture(inner, opts)?;
    let stored = match newest_in_view(inner, &view, key)? {
        None | Some((ValueKind::Deletion, _)) => return Ok(None),
        Some((ValueKind::Value, stored)) => return Ok(Some(use_value(&stored))),
        Some((ValueKind::ValuePointer, stored)) => stored,
    };
    match plan_pointer_read(inner, view.version(), key, &stored)? {
        PointerRead::Buffered(value) => Ok(Some(use_value(&value))),
        PointerRead::File { ptr, live } => (inner.vlog.reader())
            .read_value_with(&ptr, key, live, scratch, use_value)
            .map(Some),
    }
}

/// `key`'s newest entry at `seq` in the mutable memtable, then the immutable ones (newest
/// first).
fn newest_in_memtables(
    mem: &MemTable,
    imms: &[Arc<MemTable>],
    key: &[u8],
    seq: SequenceNumber,
) -> Option<(ValueKind, StoredValue)> {
    mem.get(key, seq)
        .or_else(|| imms.iter().find_map(|m| m.get(key, seq)))
}

/// The newest entry for `key` at `seq` in the memtable, the immutable memtables (newest
/// first) and the version: its kind and stored value (a tombstone is returned as such).
/// `ascending`: table cursors for one of a run of lookups in ascending key order.
fn newest_entry(
    inner: &DbInner,
    mem: &MemTable,
    imms: &[Arc<MemTable>],
    version: &Version,
    key: &[u8],
    seq: SequenceNumber,
    ascending: Option<&mut AscendingGets>,
) -> Result<Option<(ValueKind, StoredValue)>> {
    if let Some(hit) = newest_in_memtables(mem, imms, key, seq) {
        return Ok(Some(hit));
    }
    let lookup = seek_key(key, seq);
    let found = match ascending {
        Some(gets) => version.get_ascending(&*inner.tables, gets, &lookup)?,
        None => version.get(&*inner.tables, &lookup)?,
    };
    match found {
        Some((ikey, value)) => {
            let parsed = parse_internal_key(&ikey).ok_or_else(|| {
                Error::corruption("sstable", 0, "table returned a malformed internal key")
            })?;
            Ok(Some((parsed.kind, StoredValue::from_vec(value))))
        }
        None => Ok(None),
    }
}

/// Whether a key's entry is the pointer to `old` (a liveness check: GC's, clustering's).
pub(crate) fn entry_points_at(entry: &(ValueKind, StoredValue), old: ValuePointer) -> bool {
    matches!(entry, (ValueKind::ValuePointer, stored) if ValuePointer::decode(stored) == Some(old))
}

/// The newest entry for `key` in `view`, at its sequence.
pub(crate) fn newest_in_view(
    inner: &DbInner,
    view: &View,
    key: &[u8],
) -> Result<Option<(ValueKind, StoredValue)>> {
    newest_in_view_with(inner, view, key, None)
}

/// [`newest_in_view`] for one of a run of lookups in `view` in ascending key order, through
/// `gets`' table cursors (GC's liveness judgements: the same answers, fewer index searches).
pub(crate) fn newest_in_view_ascending(
    inner: &DbInner,
    view: &View,
    key: &[u8],
    gets: &mut AscendingGets,
) -> Result<Option<(ValueKind, StoredValue)>> {
    newest_in_view_with(inner, view, key, Some(gets))
}

fn newest_in_view_with(
    inner: &DbInner,
    view: &View,
    key: &[u8],
    ascending: Option<&mut AscendingGets>,
) -> Result<Option<(ValueKind, StoredValue)>> {
    let sources = &view.sources;
    newest_entry(
        inner,
        &sources.mem,
        &sources.imms,
        &sources.version,
        key,
        view.sequence,
        ascending,
    )
}

/// Turns a stored LSM value into the user's value. `version` is the one the reader holds
/// (it pins the log segments the reader may follow pointers into).
pub(crate) fn resolve_value(
    inner: &DbInner,
    version: &Version,
    key: &[u8],
    kind: ValueKind,
    stored: StoredValue,
) -> Result<Option<Vec<u8>>> {
    match kind {
        ValueKind::Deletion => Ok(None),
        ValueKind::Value => Ok(Some(stored.into_vec())),
        ValueKind::ValuePointer => read_pointer(inner, version, key, &stored).map(Some),
    }
}

/// Reads and verifies the value-log record `encoded` points at; it must hold `key`.
pub(crate) fn read_pointer(
    inner: &DbInner,
    version: &Version,
    key: &[u8],
    encoded: &[u8],
) -> Result<Vec<u8>> {
    let mut value = Vec::new();
    read_pointer_into(inner, version, key, encoded, &mut value)?;
    Ok(value)
}

/// [`read_pointer`], appending the value to `buf`: a value read from the log goes straight
/// into `buf`, not through a buffer of its own.
fn read_pointer_into(
    inner: &DbInner,
    version: &Version,
    key: &[u8],
    encoded: &[u8],
    buf: &mut Vec<u8>,
) -> Result<()> {
    match plan_pointer_read(inner, version, key, encoded)? {
        PointerRead::Buffered(value) => buf.extend_from_slice(&value),
        PointerRead::File { ptr, live } => {
            (inner.vlog.reader()).read_value_into(&ptr, key, live, buf)?
        }
    }
    Ok(())
}

/// The first half of [`read_pointer`]: decodes the pointer and serves it from the write
/// buffer if the record has not reached a file yet. Scan read-ahead does the file read on a
/// reader thread.
pub(crate) fn plan_pointer_read(
    inner: &DbInner,
    version: &Version,
    key: &[u8],
    encoded: &[u8],
) -> Result<PointerRead> {
    let ptr = ValuePointer::decode(encoded).ok_or_else(|| {
        Error::corruption("lsm", 0, "undecodable value pointer stored in the LSM-tree")
    })?;
    // A segment GC removed stays readable while its file is kept for old snapshots (a
    // snapshot read uses the current version, which no longer lists it).
    if !version.vlog_segment_readable(ptr.segment)
        && !inner.state.lock().gc_removed.contains_key(&ptr.segment)
    {
        let name = crate::filename::vlog_file_name(&inner.dir, ptr.segment);
        return Err(Error::corruption(
            name.display().to_string(),
            ptr.offset,
            "value pointer: segment outside the live value log",
        ));
    }
    inner.vlog.locate(&ptr, key)
}

pub(crate) fn iter<'a>(inner: &Arc<DbInner>, opts: &ReadOptions) -> Result<DbIterator<'a>> {
    let view = capture(inner, opts)?;
    let sources = &view.sources;
    let mut children: Vec<Box<dyn InternalIterator>> =
        Vec::with_capacity(2 + sources.imms.len() + sources.version.num_files(0));
    children.push(Box::new(MemTableIterator::new(Arc::clone(&sources.mem))));
    for imm in &sources.imms {
        children.push(Box::new(MemTableIterator::new(Arc::clone(imm))));
    }
    children.extend(sources.version.iterators(&inner.tables));
    Ok(DbIterator::new(
        Arc::clone(inner),
        MergingIterator::new(children),
        view.sequence,
        Arc::clone(&sources.version),
        opts,
    ))
}

/// Brings what the memtables of `sources` hold for `keys` into the CPU caches, so a batch
/// of lookups waits for their cache misses together (`MemTable::touch`).
pub(crate) fn touch_memtables<K: AsRef<[u8]>>(sources: &ReadSources, keys: &[K]) {
    sources.mem.touch(keys);
    for imm in &sources.imms {
        imm.touch(keys);
    }
}

/// The values of `keys` at one sequence number (one captured view). Values in the log are
/// read in parallel on the database's reader pool; inline values and records still in the
/// write buffer are copied here. The first error fails the call.
pub(crate) fn multi_get(
    inner: &DbInner,
    keys: &[&[u8]],
    opts: &ReadOptions,
) -> Result<Vec<Option<Vec<u8>>>> {
    multi_get_within(inner, keys, opts, usize::MAX)?
        .ok_or_else(|| Error::Internal("a multi_get without a bound passed it".into()))
}

/// [`multi_get`], or `None` once the values found add up to more than `max_bytes`: each
/// value's length is known (from its pointer) before it is read, so no more than
/// `max_bytes` plus one value is ever allocated.
pub(crate) fn multi_get_within(
    inner: &DbInner,
    keys: &[&[u8]],
    opts: &ReadOptions,
    max_bytes: usize,
) -> Result<Option<Vec<Option<Vec<u8>>>>> {
    use crate::iter::readahead::PendingRead;
    enum Slot {
        Ready(Option<Vec<u8>>),
        Reading(Arc<PendingRead>),
    }
    /// Every read handed to the pool. Dropped on every way out, it abandons them: after an
    /// early return (budget passed, an error) a job not yet started skips its `pread` and
    /// frees its buffer instead of reading a value nobody will take. On success every read
    /// has been taken and abandoning a finished read changes nothing.
    struct AbandonOnDrop(Vec<Arc<PendingRead>>);
    impl Drop for AbandonOnDrop {
        fn drop(&mut self) {
            self.0.iter().for_each(|read| read.abandon());
        }
    }
    // The view (and so its version, which pins the segments read) lives until every read
    // is taken.
    let view = capture(inner, opts)?;
    touch_memtables(&view.sources, keys);
    // Declared after `view`, so dropped before it: the reads are abandoned while the view
    // still pins what they read.
    let mut issued = AbandonOnDrop(Vec::new());
    let mut slots = Vec::with_capacity(keys.len());
    let mut bytes = 0usize;
    let mut over = |len: usize| {
        bytes = bytes.saturating_add(len);
        bytes > max_bytes
    };
    for &key in keys {
        let slot = match newest_in_view(inner, &view, key)? {
            None | Some((ValueKind::Deletion, _)) => Slot::Ready(None),
            Some((ValueKind::Value, value)) => {
                if over(value.len()) {
                    return Ok(None);
                }
                Slot::Ready(Some(value.into_vec()))
            }
            Some((ValueKind::ValuePointer, stored)) => {
                match plan_pointer_read(inner, view.version(), key, &stored)? {
                    PointerRead::Buffered(value) => {
                        if over(value.len()) {
                            return Ok(None);
                        }
                        Slot::Ready(Some(value))
                    }
                    // The reads already queued are abandoned (`issued`). The pointer spans
                    // the record: its value is that less the header and key.
                    PointerRead::File { ptr, .. }
                        if over(
                            (ptr.len as usize)
                                .saturating_sub(crate::vlog::format::record_len(key.len(), 0)),
                        ) =>
                    {
                        return Ok(None)
                    }
                    PointerRead::File { ptr, live } => {
                        let read = PendingRead::new();
                        issued.0.push(Arc::clone(&read));
                        let job = Arc::clone(&read);
                        let reader = Arc::clone(inner.vlog.reader());
                        let key = key.to_vec();
                        // Allocated here, where the caller frees it: see
                        // `VlogReader::read_run`.
                        let mut value = Vec::with_capacity(ptr.len as usize);
                        inner.readers().submit(Box::new(move || {
                            job.complete_with(|| {
                                reader.read_value_into(&ptr, &key, live, &mut value)?;
                                Ok(value)
                            });
                        }));
                        Slot::Reading(read)
                    }
                }
            }
        };
        slots.push(slot);
    }
    let values = slots.into_iter().map(|slot| match slot {
        Slot::Ready(value) => Ok(value),
        Slot::Reading(read) => match read.take() {
            Some(result) => result.map(Some),
            None => Err(Error::Internal("a multi_get read was taken twice".into())),
        },
    });
    values.collect::<Result<_>>().map(Some)
}

/// Whether `key` has a value at `opts`' sequence. Reads no value.
pub(crate) fn contains(inner: &DbInner, key: &[u8], opts: &ReadOptions) -> Result<bool> {
    let view = capture(inner, opts)?;
    let newest = newest_in_view(inner, &view, key)?;
    Ok(newest.is_some_and(|(kind, _)| kind != ValueKind::Deletion))
}
