//! The `wisckey` Python module: a plyvel-shaped API over `engine::Db` with dict
//! conveniences (`db[key]`, `key in db`, `del db[key]`).
//!
//! Invariants:
//! - keys and values are bytes-like in and `bytes` out; a `str` is a `TypeError`;
//! - the GIL is released around every call into the engine (it may do I/O), so Python
//!   threads run in parallel;
//! - the database lives in a shared `RwLock<Option<Db>>`: every call holds the read lock
//!   for its duration, `close()` takes the write lock (waiting for calls in flight) and takes
//!   the `Db` out; an iterator, snapshot or batch used after that raises `ClosedError`,
//!   never touches freed memory;
//! - an iterator reads one snapshot, fetching entries in chunks (a fresh range from just
//!   after the last key each time), so no Python object borrows the engine across calls.

// pyo3 0.22's `#[pymethods]` expansion converts each `PyResult` error into itself, which
// this clippy flags at every method signature.
#![allow(clippy::useless_conversion)]

use std::collections::VecDeque;
use std::ops::Bound as KeyBound;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};

create_exception!(wisckey, Error, PyException, "Any error raised by wisckey.");
create_exception!(
    wisckey,
    CorruptionError,
    Error,
    "Stored bytes failed validation (with the file and offset)."
);
create_exception!(
    wisckey,
    LockedError,
    Error,
    "Another process (or DB object) has the database open."
);
create_exception!(
    wisckey,
    NoSpaceError,
    Error,
    "The device is full; nothing acknowledged was lost."
);
create_exception!(
    wisckey,
    IOError,
    Error,
    "An operating-system I/O call failed."
);
create_exception!(
    wisckey,
    InvalidArgumentError,
    Error,
    "An argument or option wisckey does not accept."
);
create_exception!(
    wisckey,
    NotADatabaseError,
    Error,
    "The directory holds files that are not a wisckey database."
);
create_exception!(
    wisckey,
    ClosedError,
    Error,
    "The database (or this object's database) is closed."
);

/// Entries an iterator fetches from the engine per chunk.
const ITER_CHUNK: usize = 256;

fn to_py_err(e: engine::Error) -> PyErr {
    let message = e.to_string();
    match e {
        engine::Error::Corruption { .. } => CorruptionError::new_err(message),
        engine::Error::Locked(_) => LockedError::new_err(message),
        engine::Error::NoSpace { .. } => NoSpaceError::new_err(message),
        engine::Error::Io { .. } => IOError::new_err(message),
        engine::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        engine::Error::NotADatabase(_) => NotADatabaseError::new_err(message),
        engine::Error::Closed => ClosedError::new_err(message),
        _ => Error::new_err(message),
    }
}

/// The bytes of a bytes-like object; a `str` is refused.
fn bytes_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = obj.downcast::<PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes-like, not str: encode it first (e.g. {what}.encode())"
        )));
    }
    if let Ok(array) = obj.downcast::<PyByteArray>() {
        return Ok(array.to_vec());
    }
    // A memoryview (the buffer protocol is not in the stable ABI before Python 3.11).
    let copied = obj
        .call_method0("tobytes")
        .ok()
        .and_then(|b| b.downcast::<PyBytes>().ok().map(|b| b.as_bytes().to_vec()));
    copied.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{what} must be bytes-like (bytes, bytearray, memoryview), not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

fn optional_bytes(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none())
        .map(|o| bytes_of(o, what))
        .transpose()
}

/// The open database, shared by the `DB` object and everything made from it.
type Shared = Arc<RwLock<Option<engine::Db>>>;

/// Runs `f` on the open database with the GIL released.
fn with_db<T: Send>(
    py: Python<'_>,
    shared: &Shared,
    f: impl FnOnce(&engine::Db) -> engine::Result<T> + Send,
) -> PyResult<T> {
    py.allow_threads(|| {
        let guard = shared.read();
        let db = guard.as_ref().ok_or(engine::Error::Closed)?;
        f(db)
    })
    .map_err(to_py_err)
}

/// JSON text of a serde value, as Python objects (through `json.loads`).
fn json_to_py(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<PyObject> {
    let text = serde_json::to_string(value).map_err(|e| Error::new_err(e.to_string()))?;
    let loads = py.import_bound("json")?.getattr("loads")?;
    Ok(loads.call1((text,))?.unbind())
}

/// A wisckey database. `wisckey.DB(path, create_if_missing=True, error_if_exists=False,
/// **options)`; options are `engine::Options` fields (value_threshold, memtable_size,
/// vlog_segment_size, block_cache_size, gc_space_amp_target, write_through_to_os, ...).
#[pyclass(module = "wisckey", name = "DB")]
struct Db {
    shared: Shared,
    path: String,
}

fn apply_option(
    options: &mut engine::Options,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    match name {
        "value_threshold" => options.value_threshold = value.extract()?,
        "vlog_segment_size" => options.vlog_segment_size = value.extract()?,
        "vlog_buffer_size" => options.vlog_buffer_size = value.extract()?,
        "write_through_to_os" => options.write_through_to_os = value.extract()?,
        "memtable_size" => options.memtable_size = value.extract()?,
        "block_size" => options.block_size = value.extract()?,
        "block_cache_size" => options.block_cache_size = value.extract()?,
        "bloom_bits_per_key" => options.bloom_bits_per_key = value.extract()?,
        "max_open_tables" => options.max_open_tables = value.extract()?,
        "target_file_size" => options.target_file_size = value.extract()?,
        "scan_readahead_entries" => options.scan_readahead_entries = value.extract()?,
        "scan_readahead_threads" => options.scan_readahead_threads = value.extract()?,
        "gc_space_amp_target" => options.gc_space_amp_target = value.extract()?,
        "disk_reserve_size" => options.disk_reserve_size = value.extract()?,
        other => {
            return Err(InvalidArgumentError::new_err(format!(
                "unknown option '{other}'"
            )))
        }
    }
    Ok(())
}

#[pymethods]
impl Db {
    #[new]
    #[pyo3(signature = (path, create_if_missing = true, error_if_exists = false, **options))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        create_if_missing: bool,
        error_if_exists: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Db> {
        let mut opts = engine::Options {
            create_if_missing,
            error_if_exists,
            ..engine::Options::default()
        };
        for (name, value) in options.iter().flat_map(|d| d.iter()) {
            apply_option(&mut opts, &name.extract::<String>()?, &value)?;
        }
        let shown = path.display().to_string();
        let db = py
            .allow_threads(|| engine::Db::open(&path, opts))
            .map_err(to_py_err)?;
        Ok(Db {
            shared: Arc::new(RwLock::new(Some(db))),
            path: shown,
        })
    }

    /// Closes the database: waits for calls in flight, flushes and syncs. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let db = py.allow_threads(|| self.shared.write().take());
        match db {
            Some(db) => py.allow_threads(|| db.close()).map_err(to_py_err),
            None => Ok(()),
        }
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.read().is_none()
    }

    /// The directory the database lives in.
    #[getter]
    fn name(&self) -> &str {
        &self.path
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("<wisckey.DB {:?} ({state})>", self.path)
    }

    /// The value of `key`, or `default` if it has none.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let key = bytes_of(key, "key")?;
        match with_db(py, &self.shared, |db| db.get(&key))? {
            Some(value) => Ok(PyBytes::new_bound(py, &value).into_any().unbind()),
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

    /// Deletes `key` (nothing happens if it has no value).
    #[pyo3(signature = (key, sync = false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        with_db(py, &self.shared, |db| {
            db.delete_opt(&key, &engine::WriteOptions { sync })
        })
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyBytes>> {
        let bytes = bytes_of(key, "key")?;
        match with_db(py, &self.shared, |db| db.get(&bytes))? {
            Some(value) => Ok(PyBytes::new_bound(py, &value).unbind()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = bytes_of(key, "key")?;
        let present = with_db(py, &self.shared, |db| db.contains_key(&bytes))?;
        if !present {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        with_db(py, &self.shared, |db| db.delete(&bytes))
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_of(key, "key")?;
        with_db(py, &self.shared, |db| db.contains_key(&key))
    }

    /// `(key, value)` pairs of the whole database in key order, as plyvel iterates.
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
    fn write_batch(&self, sync: bool, transaction: bool) -> WriteBatch {
        WriteBatch {
            shared: Arc::clone(&self.shared),
            batch: Some(engine::WriteBatch::new()),
            sync,
            transaction,
        }
    }

    /// Entries in key order, as `(key, value)` tuples (or keys, or values): between `start`
    /// (inclusive) and `stop` (exclusive), or under `prefix`; `reverse=True` from the end.
    /// Reads one snapshot, taken now. `include_value=False` reads no value at all.
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
            Some(s) => s.held()?.clone(),
            None => with_db(py, &self.shared, |db| Ok(db.snapshot()))?,
        };
        Iterator::new(
            Arc::clone(&self.shared),
            snapshot,
            optional_bytes(start, "start")?,
            optional_bytes(stop, "stop")?,
            optional_bytes(prefix, "prefix")?,
            reverse,
            include_key,
            include_value,
        )
    }

    /// A consistent view of the database as it is now; the same read methods as `DB`.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let snapshot = with_db(py, &self.shared, |db| Ok(db.snapshot()))?;
        Ok(Snapshot {
            shared: Arc::clone(&self.shared),
            snapshot: Some(snapshot),
        })
    }

    /// Statistics: tables per level, value-log segments with live and dead bytes, GC totals.
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let stats = with_db(py, &self.shared, |db| db.stats())?;
        json_to_py(py, &stats)
    }

    /// Value-log garbage collection now (compacts the key index first); returns what it did.
    fn gc(&self, py: Python<'_>) -> PyResult<PyObject> {
        let done = with_db(py, &self.shared, |db| db.gc(&engine::GcOptions::default()))?;
        let stats = with_db(py, &self.shared, |db| db.stats())?;
        let dict = PyDict::new_bound(py);
        dict.set_item("segments_collected", done.segments_collected)?;
        dict.set_item("bytes_read", done.bytes_read)?;
        dict.set_item("records_relocated", done.records_relocated)?;
        dict.set_item("bytes_relocated", done.bytes_relocated)?;
        dict.set_item("records_dropped", done.records_dropped)?;
        dict.set_item("space_amp", stats.value_log.space_amp)?;
        Ok(dict.into_any().unbind())
    }

    /// Compacts the key index between `start` and `stop` (None: unbounded).
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

    /// Reads and verifies everything; returns the report (`problems` empty when sound).
    fn check(&self, py: Python<'_>) -> PyResult<PyObject> {
        let report = with_db(py, &self.shared, |db| db.check())?;
        json_to_py(py, &report)
    }
}

fn multi_get(
    py: Python<'_>,
    shared: &Shared,
    keys: &Bound<'_, PyAny>,
    snapshot: Option<&engine::Snapshot>,
) -> PyResult<Py<PyList>> {
    let keys: Vec<Vec<u8>> = keys
        .iter()?
        .map(|k| bytes_of(&k?, "key"))
        .collect::<PyResult<_>>()?;
    let opts = engine::ReadOptions {
        snapshot: snapshot.cloned(),
        ..engine::ReadOptions::default()
    };
    let values = with_db(py, shared, |db| db.multi_get_opt(&keys, &opts))?;
    let items: Vec<PyObject> = values
        .into_iter()
        .map(|v| match v {
            Some(v) => PyBytes::new_bound(py, &v).into_any().unbind(),
            None => py.None(),
        })
        .collect();
    Ok(PyList::new_bound(py, items).unbind())
}

/// A batch of writes; see `DB.write_batch`.
#[pyclass(module = "wisckey")]
struct WriteBatch {
    shared: Shared,
    /// `None` once written (a batch is written at most once).
    batch: Option<engine::WriteBatch>,
    sync: bool,
    transaction: bool,
}

impl WriteBatch {
    fn batch(&mut self) -> PyResult<&mut engine::WriteBatch> {
        self.batch
            .as_mut()
            .ok_or_else(|| InvalidArgumentError::new_err("this batch was already written"))
    }
}

#[pymethods]
impl WriteBatch {
    fn put(&mut self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.batch()?.put(key, value);
        Ok(())
    }

    fn delete(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.batch()?.delete(key);
        Ok(())
    }

    /// Forgets the writes added so far.
    fn clear(&mut self) -> PyResult<()> {
        *self.batch()? = engine::WriteBatch::new();
        Ok(())
    }

    /// Writes the batch (all or nothing). A batch is written once.
    fn write(&mut self, py: Python<'_>) -> PyResult<()> {
        let batch = self
            .batch
            .take()
            .ok_or_else(|| InvalidArgumentError::new_err("this batch was already written"))?;
        let sync = self.sync;
        with_db(py, &self.shared, |db| {
            db.write_opt(batch, &engine::WriteOptions { sync })
        })
    }

    fn __len__(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.len())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<PyObject>,
        _exc: Option<PyObject>,
        _tb: Option<PyObject>,
    ) -> PyResult<bool> {
        let raised = exc_type.is_some_and(|t| !t.is_none(py));
        if raised && self.transaction {
            self.batch = None;
            return Ok(false);
        }
        if self.batch.is_some() {
            self.write(py)?;
        }
        Ok(false)
    }
}

/// A consistent view; see `DB.snapshot`. Its reads raise `ClosedError` once the database is
/// closed.
#[pyclass(module = "wisckey")]
struct Snapshot {
    shared: Shared,
    /// `None` once released.
    snapshot: Option<engine::Snapshot>,
}

impl Snapshot {
    fn held(&self) -> PyResult<&engine::Snapshot> {
        self.snapshot
            .as_ref()
            .ok_or_else(|| ClosedError::new_err("the snapshot was released"))
    }

    fn read_options(&self) -> PyResult<engine::ReadOptions> {
        Ok(engine::ReadOptions {
            snapshot: Some(self.held()?.clone()),
            ..engine::ReadOptions::default()
        })
    }
}

#[pymethods]
impl Snapshot {
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let key = bytes_of(key, "key")?;
        let opts = self.read_options()?;
        match with_db(py, &self.shared, |db| db.get_opt(&key, &opts))? {
            Some(value) => Ok(PyBytes::new_bound(py, &value).into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        let value = self.get(py, key, None)?;
        if value.is_none(py) {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        Ok(value)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(!self.get(py, key, None)?.is_none(py))
    }

    fn multi_get(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
        multi_get(py, &self.shared, keys, Some(self.held()?))
    }

    #[pyo3(signature = (start = None, stop = None, prefix = None, reverse = false, include_key = true, include_value = true))]
    #[allow(clippy::too_many_arguments)]
    fn iterator(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
    ) -> PyResult<Iterator> {
        Iterator::new(
            Arc::clone(&self.shared),
            self.held()?.clone(),
            optional_bytes(start, "start")?,
            optional_bytes(stop, "stop")?,
            optional_bytes(prefix, "prefix")?,
            reverse,
            include_key,
            include_value,
        )
    }

    /// Releases the snapshot (GC may then free what only it could read); reads through it
    /// then raise `ClosedError`. Iterators made from it keep their own hold. Idempotent.
    fn close(&mut self) {
        self.snapshot = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// Entries of a key range at one snapshot; see `DB.iterator`.
#[pyclass(module = "wisckey")]
struct Iterator {
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
    #[allow(clippy::too_many_arguments)]
    fn new(
        shared: Shared,
        snapshot: engine::Snapshot,
        start: Option<Vec<u8>>,
        stop: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
    ) -> PyResult<Iterator> {
        if !include_key && !include_value {
            return Err(PyValueError::new_err(
                "include_key and include_value cannot both be False",
            ));
        }
        let (mut lower, mut upper) = (start, stop);
        if let Some(prefix) = prefix {
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
            reverse,
            include_key,
            include_value,
            buffered: VecDeque::new(),
            exhausted: empty,
        })
    }

    /// Fetches the next chunk of entries (at the snapshot) and narrows the bounds past it.
    fn refill(&mut self, py: Python<'_>) -> PyResult<()> {
        let lower = match &self.lower {
            Some(l) => KeyBound::Included(l.clone()),
            None => KeyBound::Unbounded,
        };
        let upper = match &self.upper {
            Some(u) => KeyBound::Excluded(u.clone()),
            None => KeyBound::Unbounded,
        };
        let opts = engine::ReadOptions {
            snapshot: Some(self.snapshot.clone()),
            keys_only: !self.include_value,
            ..engine::ReadOptions::default()
        };
        let (reverse, with_values) = (self.reverse, self.include_value);
        let chunk: Vec<(Vec<u8>, Vec<u8>)> = with_db(py, &self.shared, |db| {
            let range = db.range_opt((lower, upper), &opts)?;
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
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if self.buffered.is_empty() && !self.exhausted {
            self.refill(py)?;
        }
        let Some((key, value)) = self.buffered.pop_front() else {
            return Ok(None);
        };
        let item = match (self.include_key, self.include_value) {
            (true, true) => {
                (PyBytes::new_bound(py, &key), PyBytes::new_bound(py, &value)).into_py(py)
            }
            (true, false) => PyBytes::new_bound(py, &key).into_any().unbind(),
            _ => PyBytes::new_bound(py, &value).into_any().unbind(),
        };
        Ok(Some(item))
    }

    /// Stops the iteration and releases what it holds.
    fn close(&mut self) {
        self.exhausted = true;
        self.buffered.clear();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// The `wisckey` module.
#[pymodule]
fn wisckey(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Db>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Iterator>()?;
    m.add("Error", py.get_type_bound::<Error>())?;
    m.add("CorruptionError", py.get_type_bound::<CorruptionError>())?;
    m.add("LockedError", py.get_type_bound::<LockedError>())?;
    m.add("NoSpaceError", py.get_type_bound::<NoSpaceError>())?;
    m.add("IOError", py.get_type_bound::<IOError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type_bound::<InvalidArgumentError>(),
    )?;
    m.add(
        "NotADatabaseError",
        py.get_type_bound::<NotADatabaseError>(),
    )?;
    m.add("ClosedError", py.get_type_bound::<ClosedError>())?;
    Ok(())
}
