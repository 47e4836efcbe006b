//! Python objects in and out: bytes-like arguments, `bytes` results, JSON-shaped reports,
//! and the shared handle every call reaches the engine through.
//!
//! A `bytes` argument is borrowed, not copied: `bytes` is immutable and the caller's
//! reference keeps it alive, so its buffer may be read with the GIL released. Anything
//! else bytes-like (bytearray, memoryview) can change under another thread and is copied.

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};

use crate::errors::{to_py_err, ClosedError, Error};

/// The open database, shared by the `DB` object and everything made from it. Every call
/// holds the read lock for its duration; `DB.close()` takes the write lock (waiting for
/// calls in flight), takes the `Db` out and closes it under the lock.
pub(crate) type Shared = Arc<RwLock<Option<engine::Db>>>;

/// Runs `f` on the open database with the GIL released: one read lock for the whole call.
pub(crate) fn with_db<T: Send>(
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

/// Whether the shared database was closed (waiting, without the GIL, for a `close()` in
/// progress).
pub(crate) fn is_closed(py: Python<'_>, shared: &Shared) -> bool {
    py.allow_threads(|| shared.read().is_none())
}

/// `ClosedError` for an object whose database or own hold is gone.
pub(crate) fn closed(what: &str) -> PyErr {
    ClosedError::new_err(format!("the {what} was closed"))
}

/// The bytes of `bytes` (borrowed), `bytearray` or `memoryview` (copied); anything else is
/// a TypeError naming its type, a `str` with a hint to encode it.
pub(crate) fn bytes_of<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.downcast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes-like, not str: encode it first (e.g. {what}.encode())"
        )));
    }
    if let Ok(array) = obj.downcast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    if let Ok(view) = obj.downcast::<PyMemoryView>() {
        // `tobytes()`: the buffer protocol is not in the stable ABI before Python 3.11.
        let copied = view.call_method0("tobytes")?;
        return Ok(Cow::Owned(
            copied.downcast::<PyBytes>()?.as_bytes().to_vec(),
        ));
    }
    // Anything else, even with a buffer or a `tobytes()` (array.array, numpy values), is
    // refused: how its items become bytes is the caller's choice to make explicit.
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes-like (bytes, bytearray, memoryview), not {}",
        obj.get_type().name()?
    )))
}

/// `bytes_of` for an optional argument (None: absent), owned (it outlives the call).
pub(crate) fn optional_bytes(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Vec<u8>>> {
    obj.filter(|o| !o.is_none())
        .map(|o| bytes_of(o, what).map(Cow::into_owned))
        .transpose()
}

/// A `bytes` object holding `value` (the one copy a result takes).
pub(crate) fn to_bytes(py: Python<'_>, value: &[u8]) -> PyObject {
    PyBytes::new_bound(py, value).into_any().unbind()
}

/// A list of `bytes` or None, one per value.
pub(crate) fn to_list(py: Python<'_>, values: Vec<Option<Vec<u8>>>) -> Py<PyList> {
    let items = values.into_iter().map(|v| match v {
        Some(v) => to_bytes(py, &v),
        None => py.None(),
    });
    PyList::new_bound(py, items).unbind()
}

/// JSON text of a serde value, as Python objects (through `json.loads`).
pub(crate) fn json_to_py(py: Python<'_>, value: &impl serde::Serialize) -> PyResult<PyObject> {
    let text = serde_json::to_string(value).map_err(|e| Error::new_err(e.to_string()))?;
    let loads = py.import_bound("json")?.getattr("loads")?;
    Ok(loads.call1((text,))?.unbind())
}

/// Values of `keys` (an iterable of bytes-like), all read at one moment (at `snapshot` if
/// given), the value-log reads in parallel.
pub(crate) fn multi_get(
    py: Python<'_>,
    shared: &Shared,
    keys: &Bound<'_, PyAny>,
    snapshot: Option<&engine::Snapshot>,
) -> PyResult<Py<PyList>> {
    let keys: Vec<Bound<'_, PyAny>> = keys.iter()?.collect::<PyResult<_>>()?;
    let keys: Vec<Cow<'_, [u8]>> = keys
        .iter()
        .map(|k| bytes_of(k, "key"))
        .collect::<PyResult<_>>()?;
    let opts = engine::ReadOptions {
        snapshot: snapshot.cloned(),
        ..engine::ReadOptions::default()
    };
    let values = with_db(py, shared, |db| db.multi_get_opt(&keys, &opts))?;
    Ok(to_list(py, values))
}
