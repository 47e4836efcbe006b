//! Python objects in and out: bytes-like arguments, `bytes` results, and the shared handle
//! every call reaches the engine through.
//!
//! A `bytes` argument is borrowed, not copied: `bytes` is immutable and the caller's
//! reference keeps it alive, so its buffer may be read with the GIL released. Anything
//! else bytes-like (bytearray, memoryview) can change under another thread and is copied.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};

use crate::errors::ClosedError;
pub(crate) use crate::handle::Shared;

/// Runs `f` on the open database with the GIL released: one read lock for the whole call.
pub(crate) fn with_db<T: Send>(
    py: Python<'_>,
    shared: &Shared,
    f: impl FnOnce(&engine::Db) -> engine::Result<T> + Send,
) -> PyResult<T> {
    py.detach(|| shared.on_db(f)).map_err(|e| e.into_py(py))
}

/// `ClosedError` unless the shared database is open (waiting, without the GIL, for a
/// `close()` in progress).
pub(crate) fn check_open(py: Python<'_>, shared: &Shared) -> PyResult<()> {
    with_db(py, shared, |_| Ok(()))
}

/// Whether the shared database was closed (waiting, without the GIL, for a `close()` in
/// progress).
pub(crate) fn is_closed(py: Python<'_>, shared: &Shared) -> bool {
    py.detach(|| shared.is_closed())
}

/// `ClosedError` for an object whose database or own hold is gone.
pub(crate) fn closed(what: &str) -> PyErr {
    ClosedError::new_err(format!("the {what} was closed"))
}

/// The bytes of `bytes` (borrowed), `bytearray` or `memoryview` (copied); anything else is
/// a TypeError naming its type, a `str` with a hint to encode it.
pub(crate) fn bytes_of<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes-like, not str: encode it first (e.g. {what}.encode())"
        )));
    }
    if let Ok(array) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    if let Ok(view) = obj.cast::<PyMemoryView>() {
        // `tobytes()`: the buffer protocol is not in the stable ABI before Python 3.11.
        let copied = view.call_method0("tobytes")?;
        return Ok(Cow::Owned(copied.cast::<PyBytes>()?.as_bytes().to_vec()));
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
pub(crate) fn to_bytes(py: Python<'_>, value: &[u8]) -> Py<PyAny> {
    PyBytes::new(py, value).into_any().unbind()
}

/// A list of `bytes` or None, one per value.
pub(crate) fn to_list(py: Python<'_>, values: Vec<Option<Vec<u8>>>) -> PyResult<Py<PyList>> {
    let items = values.into_iter().map(|v| match v {
        Some(v) => to_bytes(py, &v),
        None => py.None(),
    });
    Ok(PyList::new(py, items)?.unbind())
}

/// Values of `keys` (an iterable of bytes-like), all read at one moment (at `snapshot` if
/// given), the value-log reads in parallel.
pub(crate) fn multi_get(
    py: Python<'_>,
    shared: &Shared,
    keys: &Bound<'_, PyAny>,
    snapshot: Option<&engine::Snapshot>,
) -> PyResult<Py<PyList>> {
    let keys: Vec<Bound<'_, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
    let keys: Vec<Cow<'_, [u8]>> = keys
        .iter()
        .map(|k| bytes_of(k, "key"))
        .collect::<PyResult<_>>()?;
    let opts = engine::ReadOptions {
        snapshot: snapshot.cloned(),
        ..engine::ReadOptions::default()
    };
    let values = with_db(py, shared, |db| db.multi_get_opt(&keys, &opts))?;
    to_list(py, values)
}

/// One of the engine's reports (stats, check, GC and clustering outcomes) as Python objects:
/// structs become dicts, sequences lists, unit enum variants their names. Floats stay floats,
/// infinity included (`gc_space_amp_target` may be infinite; JSON, which this went through
/// before, has no infinity).
pub(crate) fn report_to_py(py: Python<'_>, report: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    pythonize::pythonize(py, report)
        .map(|obj| obj.unbind())
        .map_err(|e| crate::errors::Error::new_err(e.to_string()))
}
