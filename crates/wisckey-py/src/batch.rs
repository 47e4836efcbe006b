//! `wisckey.WriteBatch`: puts and deletes collected in Python, written in one engine call.
//!
//! The class is frozen (its methods take `&self`): the batch sits in a mutex held only
//! briefly, never across an engine call or a call into Python. `writing` is held (without
//! the GIL) by a `write()` in flight; a put, delete or clear from another thread waits for
//! it (without the GIL) and then finds the batch written.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::convert::{bytes_of, Shared};
use crate::errors::{Failure, InvalidArgumentError};

/// Puts and deletes written at once, all or nothing; made by `DB.write_batch()`. As a
/// context manager it is written on exit; with `transaction=True`, not if the block raised.
/// `len(batch)` counts the writes added.
#[pyclass(module = "wisckey", frozen)]
pub(crate) struct WriteBatch {
    shared: Shared,
    /// `None` once written (a batch is written at most once) or dropped by a transaction
    /// block that raised (`abandoned`).
    batch: Mutex<Option<engine::WriteBatch>>,
    /// Set when a transaction block raised and its batch was dropped unwritten.
    abandoned: std::sync::atomic::AtomicBool,
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
            abandoned: std::sync::atomic::AtomicBool::new(false),
            writing: Mutex::new(()),
            sync,
            transaction,
        }
    }

    /// An error in a forked child, checked before `writing` is taken: a thread of the
    /// parent may have held it at the fork, never to release the child's copy.
    fn in_this_process(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.check_process().map_err(|e| e.into_py(py))
    }

    /// Runs `f` on the batch once no write is in flight (waiting for one without the GIL).
    fn with_batch<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Option<engine::WriteBatch>) -> T + Send,
    ) -> PyResult<T> {
        self.in_this_process(py)?;
        if let Some(_no_write) = self.writing.try_lock() {
            return Ok(f(&mut self.batch.lock()));
        }
        Ok(py.detach(|| {
            let _no_write = self.writing.lock();
            let mut batch = self.batch.lock();
            f(&mut batch)
        }))
    }

    /// Runs `f` on the batch unless it was written (InvalidArgumentError).
    fn edit(&self, py: Python<'_>, f: impl FnOnce(&mut engine::WriteBatch) + Send) -> PyResult<()> {
        self.with_batch(py, |batch| batch.as_mut().map(f))?
            .ok_or_else(|| self.already_written())
    }

    /// Why the batch is gone: written, or dropped by a transaction block that raised.
    fn already_written(&self) -> PyErr {
        if self.abandoned.load(std::sync::atomic::Ordering::Acquire) {
            InvalidArgumentError::new_err(
                "this batch was dropped unwritten: its transaction block raised",
            )
        } else {
            InvalidArgumentError::new_err("this batch was already written")
        }
    }

    /// Adds one put or delete with `add` (the engine's `try_put`/`try_delete`), which
    /// refuses a key or value over the engine's limits at once, in the engine's words, and
    /// leaves the batch as it was: the engine's plain `put` would take it silently, keep
    /// none of it nor of what follows, and fail only when written.
    fn add(
        &self,
        py: Python<'_>,
        add: impl FnOnce(&mut engine::WriteBatch) -> engine::Result<()> + Send,
    ) -> PyResult<()> {
        match self.with_batch(py, |batch| batch.as_mut().map(add))? {
            None => Err(self.already_written()),
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(crate::errors::to_py_err(py, e)),
        }
    }

    /// Writes the batch; if it was written already, InvalidArgumentError where `again` is
    /// an error, else nothing.
    fn write_once(&self, py: Python<'_>, again: bool) -> PyResult<()> {
        self.in_this_process(py)?;
        let sync = self.sync;
        let written = py.detach(|| {
            let _one_write = self.writing.lock();
            // The engine consumes the batch it is given, failed or not: it gets a copy, so
            // a failed write loses nothing here.
            let Some(batch) = self.batch.lock().clone() else {
                return Ok(false);
            };
            self.shared
                .on_db(|db| db.write_opt(batch, &engine::WriteOptions { sync }))?;
            *self.batch.lock() = None;
            Ok::<_, Failure>(true)
        });
        match written {
            Ok(true) => Ok(()),
            Ok(false) if again => Err(self.already_written()),
            Ok(false) => Ok(()),
            Err(e) => Err(e.into_py(py)),
        }
    }
}

#[pymethods]
impl WriteBatch {
    /// Adds a put of `value` under `key` (bytes-like; copied now). InvalidArgumentError for
    /// a key or value over the engine's maximum size; the batch is left as it was.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (bytes_of(key, "key")?, bytes_of(value, "value")?);
        self.add(py, |batch| batch.try_put(key, value).map(|_| ()))
    }

    /// Adds a delete of `key`. InvalidArgumentError for a key over the maximum size.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_of(key, "key")?;
        self.add(py, |batch| batch.try_delete(key).map(|_| ()))
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
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        // Not through `with_batch`: a length does not wait for a write in flight.
        self.in_this_process(py)?;
        Ok(self.batch.lock().as_ref().map_or(0, |b| b.len()))
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
            self.with_batch(py, |batch| {
                if batch.take().is_some() {
                    self.abandoned
                        .store(true, std::sync::atomic::Ordering::Release);
                }
            })?;
            return Ok(false);
        }
        self.write_once(py, false)?;
        Ok(false)
    }
}
