//! `wisckey.WriteBatch`: puts and deletes collected in Python, written in one engine call.

use pyo3::prelude::*;

use crate::convert::{bytes_of, with_db, Shared};
use crate::errors::InvalidArgumentError;

/// Puts and deletes written at once, all or nothing; made by `DB.write_batch()`. As a
/// context manager it is written on exit; with `transaction=True`, not if the block raised.
/// `len(batch)` counts the writes added.
#[pyclass(module = "wisckey")]
pub(crate) struct WriteBatch {
    shared: Shared,
    /// `None` once written (a batch is written at most once).
    batch: Option<engine::WriteBatch>,
    sync: bool,
    transaction: bool,
}

impl WriteBatch {
    pub(crate) fn new(shared: Shared, sync: bool, transaction: bool) -> WriteBatch {
        WriteBatch {
            shared,
            batch: Some(engine::WriteBatch::new()),
            sync,
            transaction,
        }
    }

    fn batch(&mut self) -> PyResult<&mut engine::WriteBatch> {
        self.batch.as_mut().ok_or_else(already_written)
    }
}

fn already_written() -> PyErr {
    InvalidArgumentError::new_err("this batch was already written")
}

#[pymethods]
impl WriteBatch {
    /// Adds a put of `value` under `key` (bytes-like; copied now).
    fn put(&mut self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.batch()?.put(key, value);
        Ok(())
    }

    /// Adds a delete of `key`.
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

    /// Writes the batch (all or nothing). A batch is written once; a second `write()`
    /// raises InvalidArgumentError. A write that fails keeps the batch's writes, to retry
    /// or `clear()`.
    fn write(&mut self, py: Python<'_>) -> PyResult<()> {
        let sync = self.sync;
        let batch = self.batch.as_ref().ok_or_else(already_written)?;
        // The engine consumes the batch it is given, failed or not: it gets a copy, so a
        // failed write loses nothing here.
        with_db(py, &self.shared, |db| {
            db.write_opt(batch.clone(), &engine::WriteOptions { sync })
        })?;
        self.batch = None;
        Ok(())
    }

    /// `len(batch)`: the number of puts and deletes added (0 once written).
    fn __len__(&self) -> usize {
        self.batch.as_ref().map_or(0, |b| b.len())
    }

    /// Returns the batch itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Writes the batch, unless the block raised and the batch is a transaction.
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
