//! `wisckey.WriteBatch`: puts and deletes collected in Python, written in one engine call.
//!
//! The class is frozen (its methods take `&self`): the batch sits in a mutex held only
//! briefly, never across an engine call or a call into Python. `writing` is held (without
//! the GIL) by a `write()` in flight; a put, delete or clear from another thread waits for
//! it (without the GIL) and then finds the batch written.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert::{bytes_of, on_db, Shared};
use crate::errors::{to_py_err, InvalidArgumentError};

/// Puts and deletes written at once, all or nothing; made by `DB.write_batch()`. As a
/// context manager it is written on exit; with `transaction=True`, not if the block raised.
/// `len(batch)` counts the writes added.
#[pyclass(module = "wisckey", frozen)]
pub(crate) struct WriteBatch {
    shared: Shared,
    /// `None` once written (a batch is written at most once).
    batch: Mutex<Option<engine::WriteBatch>>,
    /// Held by the one `write()` in flight.
    writing: Mutex<()>,
    sync: bool,
    transaction: bool,
}

impl WriteBatch {
    pub(crate) fn new(shared: Shared, sync: bool, transaction: bool) -> WriteBatch {
        WriteBatch {
            shared,
            batch: Mutex::new(Some(engine::WriteBatch::new())),
            writing: Mutex::new(()),
            sync,
            transaction,
        }
    }

    /// Runs `f` on the batch once no write is in flight (waiting for one without the GIL).
    fn with_batch<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Option<engine::WriteBatch>) -> T + Send,
    ) -> T {
        if let Some(_no_write) = self.writing.try_lock() {
            return f(&mut self.batch.lock());
        }
        py.detach(|| {
            let _no_write = self.writing.lock();
            let mut batch = self.batch.lock();
            f(&mut batch)
        })
    }

    /// Runs `f` on the batch unless it was written (InvalidArgumentError).
    fn edit(&self, py: Python<'_>, f: impl FnOnce(&mut engine::WriteBatch) + Send) -> PyResult<()> {
        self.with_batch(py, |batch| batch.as_mut().map(f))
            .ok_or_else(already_written)
    }

    /// Writes the batch; if it was written already, InvalidArgumentError where `again` is
    /// an error, else nothing.
    fn write_once(&self, py: Python<'_>, again: bool) -> PyResult<()> {
        let sync = self.sync;
        py.detach(|| {
            let _one_write = self.writing.lock();
            // The engine consumes the batch it is given, failed or not: it gets a copy, so
            // a failed write loses nothing here.
            let Some(batch) = self.batch.lock().clone() else {
                return if again {
                    Err(already_written())
                } else {
                    Ok(())
                };
            };
            on_db(&self.shared, |db| {
                db.write_opt(batch, &engine::WriteOptions { sync })
            })
            .map_err(to_py_err)?;
            *self.batch.lock() = None;
            Ok(())
        })
    }
}

fn already_written() -> PyErr {
    InvalidArgumentError::new_err("this batch was already written")
}

#[pymethods]
impl WriteBatch {
    /// Adds a put of `value` under `key` (bytes-like; copied now).
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.edit(py, |batch| {
            batch.put(key, value);
        })
    }

    /// Adds a delete of `key`.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.edit(py, |batch| {
            batch.delete(key);
        })
    }

    /// Forgets the writes added so far.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.edit(py, |batch| *batch = engine::WriteBatch::new())
    }

    /// Writes the batch (all or nothing). A batch is written once; a second `write()`
    /// raises InvalidArgumentError. A write that fails keeps the batch's writes, to retry
    /// or `clear()`. Other threads' calls on the batch wait for a write in flight.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        self.write_once(py, true)
    }

    /// `len(batch)`: the number of puts and deletes added (0 once written).
    fn __len__(&self) -> usize {
        self.batch.lock().as_ref().map_or(0, |b| b.len())
    }

    /// Returns the batch itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Writes the batch (unless it was written already), or drops it if the block raised
    /// and the batch is a transaction.
    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Py<PyAny>>,
        _exc: Option<Py<PyAny>>,
        _tb: Option<Py<PyAny>>,
    ) -> PyResult<bool> {
        let raised = exc_type.is_some_and(|t| !t.is_none(py));
        if raised && self.transaction {
            self.with_batch(py, |batch| *batch = None);
            return Ok(false);
        }
        self.write_once(py, false)?;
        Ok(false)
    }
}
