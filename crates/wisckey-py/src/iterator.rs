//! `wisckey.Iterator`: entries of a key range at one snapshot, fetched in chunks.
//!
//! No Python object borrows the engine across calls: each chunk is a fresh engine range
//! from just past the last key returned (or before it, in reverse) at the same snapshot,
//! so the database can be closed between chunks (the next chunk raises `ClosedError`).

use std::collections::VecDeque;
use std::ops::Bound as KeyBound;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::convert::{to_bytes, with_db, Shared};

/// Entries an iterator fetches from the engine per chunk.
const ITER_CHUNK: usize = 256;

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
    snapshot: engine::Snapshot,
    /// Lower bound (inclusive) and upper bound (exclusive) of what is still ahead.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    reverse: bool,
    include_key: bool,
    include_value: bool,
    buffered: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Nothing is left (or `close()` was called).
    exhausted: bool,
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
            snapshot,
            lower,
            upper,
            reverse: span.reverse,
            include_key: span.include_key,
            include_value: span.include_value,
            buffered: VecDeque::new(),
            exhausted: empty,
        })
    }

    /// Fetches the next chunk of entries (at the snapshot) and narrows the bounds past it.
    fn refill(&mut self, py: Python<'_>) -> PyResult<()> {
        let lower = match &self.lower {
            Some(l) => KeyBound::Included(l.as_slice()),
            None => KeyBound::Unbounded,
        };
        let upper = match &self.upper {
            Some(u) => KeyBound::Excluded(u.as_slice()),
            None => KeyBound::Unbounded,
        };
        let opts = engine::ReadOptions {
            snapshot: Some(self.snapshot.clone()),
            keys_only: !self.include_value,
            ..engine::ReadOptions::default()
        };
        let (reverse, with_values) = (self.reverse, self.include_value);
        let chunk: Vec<(Vec<u8>, Vec<u8>)> = with_db(py, &self.shared, |db| {
            let range = db.range_opt::<&[u8], _>((lower, upper), &opts)?;
            if !with_values {
                let keys = range.keys();
                let keys: Box<dyn std::iter::Iterator<Item = engine::Result<Vec<u8>>>> = if reverse
                {
                    Box::new(keys.rev())
                } else {
                    Box::new(keys)
                };
                return keys
                    .take(ITER_CHUNK)
                    .map(|k| k.map(|k| (k, Vec::new())))
                    .collect();
            }
            if reverse {
                range.rev().take(ITER_CHUNK).collect()
            } else {
                range.take(ITER_CHUNK).collect()
            }
        })?;
        if chunk.len() < ITER_CHUNK {
            self.exhausted = true;
        }
        if let Some((last, _)) = chunk.last() {
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
    /// closed before the entry was fetched.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.buffered.is_empty() && !self.exhausted {
            self.refill(py)?;
        }
        let Some((key, value)) = self.buffered.pop_front() else {
            return Ok(None);
        };
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

    /// Stops the iteration and releases what it holds; later `next()` raises StopIteration.
    fn close(&mut self) {
        self.exhausted = true;
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
