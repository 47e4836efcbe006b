//! `wisckey.Snapshot`: the read methods of `DB` at one moment.
//!
//! The object holds an engine snapshot until `close()`; its reads then raise
//! `ClosedError`, as they do once the database is closed. Iterators made from it hold the
//! engine snapshot themselves and outlive its `close()`.
//!
//! The class is frozen (its methods take `&self`): the engine snapshot sits in a mutex
//! held only to clone it or take it out, never across an engine call or a call into
//! Python. A read clones it first, so a `close()` from another thread (or from the keys
//! iterable of a `multi_get`) never waits for a read in flight, nor fails because of one:
//! the read finishes at the snapshot it started with, and the next one raises
//! `ClosedError`.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::convert::{
    bytes_of, check_open, closed, is_closed, multi_get, optional_bytes, to_bytes, with_db, Shared,
};
use crate::iterator::{Iterator, Span};

/// A consistent view of the database, made by `DB.snapshot()`: `get`, `snap[key]`,
/// `key in snap`, `multi_get`, `iterator` and `for key, value in snap` read the database
/// as it was then. A context manager; `close()` (or leaving the `with` block) releases it.
#[pyclass(module = "wisckey", frozen)]
pub(crate) struct Snapshot {
    shared: Shared,
    /// `None` once released.
    snapshot: Mutex<Option<engine::Snapshot>>,
}

impl Snapshot {
    pub(crate) fn new(shared: Shared, snapshot: engine::Snapshot) -> Snapshot {
        Snapshot {
            shared,
            snapshot: Mutex::new(Some(snapshot)),
        }
    }

    /// The engine snapshot (a clone: a read in flight keeps its own); `ClosedError` once
    /// released.
    /// The database the snapshot was taken from.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    pub(crate) fn held(&self) -> PyResult<engine::Snapshot> {
        let held = self.snapshot.lock().clone();
        held.ok_or_else(|| closed("snapshot"))
    }

    /// The value of `key` at the snapshot.
    fn read(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let key = bytes_of(key, "key")?;
        let opts = engine::ReadOptions {
            snapshot: Some(self.held()?),
            ..engine::ReadOptions::default()
        };
        with_db(py, &self.shared, |db| db.get_opt(&key, &opts))
    }
}

#[pymethods]
impl Snapshot {
    /// The value of `key` at the snapshot, or `default` if it had none.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        match self.read(py, key)? {
            Some(value) => Ok(to_bytes(py, &value)),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// `snap[key]`: the value of `key` at the snapshot; KeyError if it had none.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match self.read(py, key)? {
            Some(value) => Ok(to_bytes(py, &value)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// `key in snap`: whether `key` had a value at the snapshot (reads no value).
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_of(key, "key")?;
        let opts = engine::ReadOptions {
            snapshot: Some(self.held()?),
            keys_only: true,
            ..engine::ReadOptions::default()
        };
        // The engine's `contains_key` reads only the current state; a key-only range of
        // the one key reads the snapshot's.
        with_db(py, &self.shared, |db| {
            let key: &[u8] = &key;
            let mut found = db.range_opt(key..=key, &opts)?.keys();
            found.next().transpose().map(|k| k.is_some())
        })
    }

    /// Values of `keys` at the snapshot (None where a key had none).
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        let snapshot = self.held()?;
        multi_get(py, &self.shared, keys, Some(&snapshot))
    }

    /// `DB.iterator` at this snapshot. The iterator keeps its own hold on the snapshot:
    /// it goes on after `close()`. ClosedError once the snapshot or its database is closed.
    #[pyo3(signature = (start = None, stop = None, prefix = None, reverse = false, include_key = true, include_value = true))]
    #[allow(clippy::too_many_arguments)]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
    ) -> PyResult<Iterator> {
        let span = Span {
            start: optional_bytes(start, "start")?,
            stop: optional_bytes(stop, "stop")?,
            prefix: optional_bytes(prefix, "prefix")?,
            reverse,
            include_key,
            include_value,
        };
        let snapshot = self.held()?;
        check_open(py, &self.shared)?;
        Iterator::new(Arc::clone(&self.shared), snapshot, span)
    }

    /// `(key, value)` pairs at the snapshot in key order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.iterator(py, None, None, None, false, true, true)
    }

    /// Whether the snapshot was released (`close()`) or its database closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        let released = self.snapshot.lock().is_none();
        released || is_closed(py, &self.shared)
    }

    /// Releases the snapshot (GC may then free what only it could read); reads through it
    /// then raise ClosedError. Iterators made from it keep their own hold, and so does a
    /// read in flight (in another thread) until it returns. Idempotent.
    fn close(&self) {
        let released = self.snapshot.lock().take();
        self.shared.release(released);
    }

    /// Returns the snapshot itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Releases the snapshot.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let snapshot = self.snapshot.get_mut().take();
        self.shared.release(snapshot);
    }
}
