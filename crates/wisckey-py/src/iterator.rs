//! `wisckey.Iterator`: entries of a key range at one snapshot, fetched in chunks.
//!
//! No Python object borrows the engine across calls: each chunk is a fresh engine range
//! from just past the last key returned (or before it, in reverse) at the same snapshot,
//! so the database can be closed between chunks (the next chunk raises `ClosedError`).
//! A chunk keeps the engine's errors in their places among the entries: a value that
//! cannot be read is raised at its entry, and the iteration goes on past it.

use std::collections::VecDeque;
use std::ops::Bound as KeyBound;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::convert::{to_bytes, with_db, Shared};
use crate::errors::to_py_err;

/// Entries an iterator fetches from the engine per chunk, at most.
const ITER_CHUNK: usize = 256;

/// Key and value bytes after which a chunk ends (it still holds at least one entry):
/// values may be up to 256 MiB, and one `next()` must not load a chunk of them.
const ITER_CHUNK_BYTES: usize = 4 << 20;

/// One entry as the engine yields it: an error takes the place of the entry it is about.
type Entry = engine::Result<(Vec<u8>, Vec<u8>)>;

/// What an iterator walks and what it yields, as `DB.iterator` takes them.
pub(crate) struct Span {
    pub(crate) start: Option<Vec<u8>>,
    pub(crate) stop: Option<Vec<u8>>,
    pub(crate) prefix: Option<Vec<u8>>,
    pub(crate) reverse: bool,
    pub(crate) include_key: bool,
    pub(crate) include_value: bool,
}

/// Entries in key order at one snapshot, made by `DB.iterator()` (or `iter(db)`,
/// `Snapshot.iterator()`): `(key, value)` tuples, or keys, or values. A context manager;
/// `close()` ends it early.
#[pyclass(module = "wisckey")]
pub(crate) struct Iterator {
    shared: Shared,
    /// `None` once nothing is left to fetch (the end was fetched, or `close()`): a held
    /// snapshot keeps compaction and GC from dropping old versions.
    snapshot: Option<engine::Snapshot>,
    /// Lower bound (inclusive) and upper bound (exclusive) of what is still ahead.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    reverse: bool,
    include_key: bool,
    include_value: bool,
    buffered: VecDeque<Entry>,
}

impl Iterator {
    pub(crate) fn new(shared: Shared, snapshot: engine::Snapshot, span: Span) -> PyResult<Self> {
        if !span.include_key && !span.include_value {
            return Err(PyValueError::new_err(
                "include_key and include_value cannot both be False",
            ));
        }
        let (mut lower, mut upper) = (span.start, span.stop);
        if let Some(prefix) = span.prefix {
            lower = lower.max(Some(prefix.clone()));
            let end = prefix_successor(&prefix);
            upper = match (upper, end) {
                (Some(u), Some(e)) => Some(u.min(e)),
                (u, e) => u.or(e),
            };
        }
        let empty = matches!((&lower, &upper), (Some(l), Some(u)) if l >= u);
        Ok(Iterator {
            shared,
            snapshot: (!empty).then_some(snapshot),
            lower,
            upper,
            reverse: span.reverse,
            include_key: span.include_key,
            include_value: span.include_value,
            buffered: VecDeque::new(),
        })
    }

    /// Fetches the next chunk of entries (at the snapshot) and narrows the bounds past it;
    /// releases the snapshot once the chunk reaches the end.
    fn refill(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(snapshot) = &self.snapshot else {
            return Ok(());
        };
        let lower = match &self.lower {
            Some(l) => KeyBound::Included(l.as_slice()),
            None => KeyBound::Unbounded,
        };
        let upper = match &self.upper {
            Some(u) => KeyBound::Excluded(u.as_slice()),
            None => KeyBound::Unbounded,
        };
        let opts = engine::ReadOptions {
            snapshot: Some(snapshot.clone()),
            keys_only: !self.include_value,
            ..engine::ReadOptions::default()
        };
        let (reverse, with_values) = (self.reverse, self.include_value);
        let (chunk, ended) = with_db(py, &self.shared, |db| {
            let range = db.range_opt::<&[u8], _>((lower, upper), &opts)?;
            let key_only = |k: engine::Result<Vec<u8>>| k.map(|k| (k, Vec::new()));
            Ok(match (with_values, reverse) {
                (true, false) => take_chunk(range),
                (true, true) => take_chunk(range.rev()),
                (false, false) => take_chunk(range.keys().map(key_only)),
                (false, true) => take_chunk(range.keys().rev().map(key_only)),
            })
        })?;
        if ended {
            self.snapshot = None;
        } else if let Some((last, _)) = chunk.iter().rev().find_map(|e| e.as_ref().ok()) {
            if reverse {
                self.upper = Some(last.clone());
            } else {
                let mut after = last.clone();
                after.push(0);
                self.lower = Some(after);
            }
        }
        self.buffered.extend(chunk);
        Ok(())
    }
}

/// The next chunk of `entries`, and whether they ended within it. A chunk ends after an
/// entry, never after an error: the next chunk starts past the chunk's last key, so it
/// never meets an error already reported. (The engine moves past a value it could not
/// read; an error that stops it ends `entries`.)
fn take_chunk(entries: impl std::iter::Iterator<Item = Entry>) -> (Vec<Entry>, bool) {
    let mut chunk = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    for entry in entries {
        let full = match &entry {
            Ok((key, value)) => {
                count += 1;
                bytes += key.len() + value.len();
                count >= ITER_CHUNK || bytes >= ITER_CHUNK_BYTES
            }
            Err(_) => false,
        };
        chunk.push(entry);
        if full {
            return (chunk, false);
        }
    }
    (chunk, true)
}

/// The smallest key above every key starting with `prefix` (None: there is none).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[pymethods]
impl Iterator {
    /// Returns the iterator itself.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next entry: `(key, value)`, or the key or the value alone as `include_key` and
    /// `include_value` chose. StopIteration at the end; ClosedError when the database was
    /// closed before the entry was fetched. CorruptionError (or IOError) for an entry whose
    /// value cannot be read; the next `next()` goes on with the entry after it. An error
    /// in the key index itself ends the iteration.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.buffered.is_empty() {
            self.refill(py)?;
        }
        let Some(entry) = self.buffered.pop_front() else {
            return Ok(None);
        };
        let (key, value) = entry.map_err(to_py_err)?;
        let item = match (self.include_key, self.include_value) {
            (true, true) => {
                let pair = [PyBytes::new_bound(py, &key), PyBytes::new_bound(py, &value)];
                PyTuple::new_bound(py, pair).into_any().unbind()
            }
            (true, false) => to_bytes(py, &key),
            _ => to_bytes(py, &value),
        };
        Ok(Some(item))
    }

    /// Stops the iteration and releases what it holds (its snapshot too); later `next()`
    /// raises StopIteration.
    fn close(&mut self) {
        self.snapshot = None;
        self.buffered.clear();
    }

    /// Returns the iterator itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the iterator.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}
