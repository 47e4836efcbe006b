//! `wisckey.DB`: open, close, reads, writes, dict conveniences and maintenance calls.
//!
//! Every engine call goes through `with_db` (GIL released, read lock held for the call);
//! `close()` takes the write lock and closes the engine under it, so it waits for calls in
//! flight, later calls raise `ClosedError`, and a racing `close()` waits for it.
//! `del db[key]` holds `delete_lock` across its check and its delete, so two of them never
//! both report deleting one value.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::batch::WriteBatch;
use crate::convert::{
    bytes_of, check_open, is_closed, multi_get, optional_bytes, to_bytes, with_db, Shared,
};
use crate::errors::{to_py_err, InvalidArgumentError};
use crate::handle::Handle;
use crate::iterator::{Iterator, Span};
use crate::options;
use crate::snapshot::Snapshot;

/// A wisckey database: `DB(path, create_if_missing=True, error_if_exists=False,
/// **options)`; options are `wisckey::Options` fields (value_threshold, memtable_size,
/// vlog_segment_size, block_cache_size, value_cache_size, gc_space_amp_target, ...; a
/// duration in seconds, an enum by its snake_case name: recovery_mode="salvage_prefix"). A
/// context manager (closed on exit). Dict conveniences: `db[key]`, `db[key] = value`,
/// `del db[key]` (KeyError when absent), `key in db`, `for key, value in db`. It belongs to
/// the process that opened it: a forked child must open the database again.
#[pyclass(module = "wisckey", name = "DB")]
pub(crate) struct Db {
    shared: Shared,
    /// As given: a name that is not UTF-8 goes back to Python the way `os.fsdecode` makes it.
    path: std::ffi::OsString,
    /// Serializes `del db[key]` (check, then delete) against itself.
    delete_lock: Mutex<()>,
}

#[pymethods]
impl Db {
    #[new]
    #[pyo3(signature = (
        path, create_if_missing = true, error_if_exists = false, read_only = false, **options
    ))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        create_if_missing: bool,
        error_if_exists: bool,
        read_only: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Db> {
        let opts = options::from_kwargs(create_if_missing, error_if_exists, options)?;
        // Read-only: the engine's shared open (any number of readers, no writer; every
        // write raises ReadOnlyError; a missing database is refused, never created).
        let open = if read_only {
            engine::Db::open_read_only
        } else {
            engine::Db::open
        };
        let db = py
            .detach(|| open(&path, opts))
            .map_err(|e| to_py_err(py, e))?;
        Ok(Db {
            shared: Handle::new(db),
            path: path.into_os_string(),
            delete_lock: Mutex::new(()),
        })
    }

    /// Closes the database: waits for calls in flight, flushes and syncs. Later calls that
    /// read or write it raise ClosedError: the DB's own, a snapshot's reads, an iterator's
    /// next fetch (entries it already fetched are still returned) and a batch's `write()`;
    /// adding to a batch touches no database and still works. Idempotent. In a forked
    /// child it does nothing (the database is the parent's).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // The engine closes under the write lock, so a racing `close()` (or `closed`)
        // returns only once the database is released. Every taker of the lock releases
        // the GIL first, so none of them waits for this one while holding the GIL.
        py.detach(|| self.shared.close()).map_err(|e| e.into_py(py))
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        is_closed(py, &self.shared)
    }

    /// The directory the database lives in, as given to `DB()`.
    #[getter]
    fn name(&self) -> &std::ffi::OsStr {
        &self.path
    }

    /// Returns the database itself (`with wisckey.DB(path) as db:`).
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database; an exception in the block propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// `<wisckey.DB '/path' (open)>` or `(closed)`.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let state = if self.closed(py) { "closed" } else { "open" };
        let name = self.path.as_os_str().into_pyobject(py)?.repr()?;
        Ok(format!("<wisckey.DB {name} ({state})>"))
    }

    /// The value of `key` (bytes), or `default` if it has none.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let key = bytes_of(key, "key")?;
        match with_db(py, &self.shared, |db| db.get(&key))? {
            Some(value) => Ok(to_bytes(py, &value)),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Stores `value` under `key`; `sync=True` makes it durable before returning.
    #[pyo3(signature = (key, value, sync = false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        with_db(py, &self.shared, |db| {
            db.put_opt(&key, &value, &engine::WriteOptions { sync })
        })
    }

    /// Deletes `key` (nothing happens if it has no value); `sync=True` as for `put`.
    #[pyo3(signature = (key, sync = false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        with_db(py, &self.shared, |db| {
            db.delete_opt(&key, &engine::WriteOptions { sync })
        })
    }

    /// `db[key]`: the value of `key`; KeyError if it has none.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let bytes = bytes_of(key, "key")?;
        match with_db(py, &self.shared, |db| db.get(&bytes))? {
            Some(value) => Ok(to_bytes(py, &value)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// `db[key] = value`: `put(key, value)`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    /// `del db[key]`: deletes `key`; KeyError if it has no value. The check and the delete
    /// are one step for every `del` on this DB (at most one of two racing `del`s of a key
    /// succeeds); a `put` racing it is ordered before or after it as a whole.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = bytes_of(key, "key")?;
        let serial = &self.delete_lock;
        let deleted = with_db(py, &self.shared, |db| {
            let _one_at_a_time = serial.lock();
            if !db.contains_key(&bytes)? {
                return Ok(false);
            }
            db.delete(&bytes).map(|()| true)
        })?;
        if deleted {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    /// `key in db`: whether `key` has a value (reads no value).
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_of(key, "key")?;
        with_db(py, &self.shared, |db| db.contains_key(&key))
    }

    /// `(key, value)` pairs of the whole database in key order (at a snapshot taken now).
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.iterator(py, None, None, None, false, true, true, None)
    }

    /// Values of `keys` (None where a key has none), all read at one moment, the value-log
    /// reads in parallel.
    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        multi_get(py, &self.shared, keys, None)
    }

    /// A batch of puts and deletes written at once (all or nothing). As a context manager
    /// it is written on exit; with `transaction=True`, not if the block raised.
    #[pyo3(signature = (sync = false, transaction = false))]
    fn write_batch(&self, py: Python<'_>, sync: bool, transaction: bool) -> PyResult<WriteBatch> {
        // In a forked child every call raises, this one too.
        self.shared.check_process().map_err(|e| e.into_py(py))?;
        Ok(WriteBatch::new(Arc::clone(&self.shared), sync, transaction))
    }

    /// Entries in key order, as `(key, value)` tuples (or keys, or values): between `start`
    /// (inclusive) and `stop` (exclusive), or under `prefix`; `reverse=True` from the end.
    /// Reads one snapshot (`snapshot`, or one taken now). `include_value=False` reads no
    /// value at all. ClosedError if the database or `snapshot` is closed;
    /// InvalidArgumentError if `snapshot` is another database's.
    #[pyo3(signature = (start = None, stop = None, prefix = None, reverse = false, include_key = true, include_value = true, snapshot = None))]
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
        snapshot: Option<&Snapshot>,
    ) -> PyResult<Iterator> {
        let snapshot = match snapshot {
            Some(s) => {
                // Refused now, not at the first `next()`: the engine would refuse another
                // database's snapshot there, as an error of the iteration.
                if !Arc::ptr_eq(s.shared(), &self.shared) {
                    return Err(InvalidArgumentError::new_err(
                        "the snapshot was taken from another database",
                    ));
                }
                let held = s.held()?;
                check_open(py, &self.shared)?;
                held
            }
            None => with_db(py, &self.shared, |db| Ok(db.snapshot()))?,
        };
        let span = Span {
            start: optional_bytes(start, "start")?,
            stop: optional_bytes(stop, "stop")?,
            prefix: optional_bytes(prefix, "prefix")?,
            reverse,
            include_key,
            include_value,
        };
        Iterator::new(Arc::clone(&self.shared), snapshot, span)
    }

    /// A consistent view of the database as it is now, with the same read methods as `DB`;
    /// a context manager (released on exit).
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let snapshot = with_db(py, &self.shared, |db| Ok(db.snapshot()))?;
        Ok(Snapshot::new(Arc::clone(&self.shared), snapshot))
    }

    /// Statistics (a dict): tables per level, value-log segments with live and dead bytes,
    /// GC totals.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = with_db(py, &self.shared, |db| db.stats())?;
        crate::convert::report_to_py(py, &stats)
    }

    /// Value-log garbage collection now (compacts the key index first); returns what it did
    /// (segments_collected, bytes_read, records_relocated, bytes_relocated, records_dropped)
    /// and the value log's space_amp after it.
    fn gc(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (done, stats) = with_db(py, &self.shared, |db| {
            let done = db.gc(&engine::GcOptions::default())?;
            Ok((done, db.stats()?))
        })?;
        let dict = PyDict::new(py);
        dict.set_item("segments_collected", done.segments_collected)?;
        dict.set_item("bytes_read", done.bytes_read)?;
        dict.set_item("records_relocated", done.records_relocated)?;
        dict.set_item("bytes_relocated", done.bytes_relocated)?;
        dict.set_item("records_dropped", done.records_dropped)?;
        dict.set_item("space_amp", stats.value_log.space_amp)?;
        Ok(dict.into_any().unbind())
    }

    /// Flushes, then compacts the key index between `start` and `stop`, both inclusive
    /// (None: unbounded).
    #[pyo3(signature = (start = None, stop = None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (start, stop) = (
            optional_bytes(start, "start")?,
            optional_bytes(stop, "stop")?,
        );
        with_db(py, &self.shared, |db| {
            db.compact_range(start.as_deref(), stop.as_deref())
        })
    }

    /// Rewrites the values between `start` (inclusive) and `stop` (exclusive; None:
    /// unbounded) in key order, so scans of the range read neighbours' values together;
    /// the old copies are left to GC. Returns what it did (a dict: keys_examined,
    /// values_in_log, values_kept, values_relocated, bytes_relocated, values_changed).
    #[pyo3(signature = (start = None, stop = None))]
    fn cluster_values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let range = start_stop_range(start, stop)?;
        let done = with_db(py, &self.shared, |db| db.cluster_values(range))?;
        crate::convert::report_to_py(py, &done)
    }

    /// What `cluster_values(start, stop)` would move now, without moving anything (reads
    /// keys and pointers only): the same dict, `values_relocated` counting what would move.
    #[pyo3(signature = (start = None, stop = None))]
    fn cluster_values_estimate(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let range = start_stop_range(start, stop)?;
        let estimate = with_db(py, &self.shared, |db| db.cluster_values_estimate(range))?;
        crate::convert::report_to_py(py, &estimate)
    }

    /// Reads and verifies everything; returns the report (a dict; `problems` is empty when
    /// the database is sound).
    fn check(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let report = with_db(py, &self.shared, |db| db.check())?;
        crate::convert::report_to_py(py, &report)
    }

    /// Copies the database, as it is now, into the new directory `path` (outside this
    /// one), while it stays open for reads and writes: a backup that opens on its own.
    /// Returns what was copied (a dict: tables, table_bytes, segments, segment_bytes,
    /// last_sequence). InvalidArgumentError if `path` exists or lies inside the database.
    fn checkpoint(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<Py<PyAny>> {
        let report = with_db(py, &self.shared, |db| db.checkpoint(&path))?;
        crate::convert::report_to_py(py, &report)
    }
}

/// A key range as the engine's range methods take it: (start, end) bounds.
type KeyRange = (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>);

/// `start` (inclusive) to `stop` (exclusive) as a range of keys; None: unbounded.
fn start_stop_range(
    start: Option<&Bound<'_, PyAny>>,
    stop: Option<&Bound<'_, PyAny>>,
) -> PyResult<KeyRange> {
    use std::ops::Bound as Edge;
    Ok((
        optional_bytes(start, "start")?.map_or(Edge::Unbounded, Edge::Included),
        optional_bytes(stop, "stop")?.map_or(Edge::Unbounded, Edge::Excluded),
    ))
}
