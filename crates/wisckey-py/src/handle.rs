//! The open database shared by a `DB` and everything made from it, and what its process's
//! life asks of it: a forked child must not use it, dropping it must not hold the GIL, and
//! interpreter exit syncs it.
//!
//! - Fork: the engine's threads and its POSIX record lock on `LOCK` are not inherited, so a
//!   child writing through the parent's engine corrupts the database (nothing keeps the two
//!   processes apart) and one reading waits forever for reader threads that do not exist.
//!   The handle remembers the process that opened it; a call from another one is refused
//!   before it reaches the engine, and dropping the handle there leaks the engine instead of
//!   closing it (closing flushes and joins threads the child does not have).
//! - Drop: dropping an engine `Db` closes it (flush, join, sync), which may take seconds; the
//!   last reference goes away in a Python object's deallocation, with the GIL held, so the
//!   drop lets go of the GIL meanwhile.
//! - Exit: a `DB` kept alive until interpreter shutdown (by a daemon thread, a module global
//!   in a cycle, ...) may never be dropped, and writes still in the value log's buffer would
//!   be lost with the process. An `atexit` hook syncs every handle this process opened that
//!   is still open (waiting a bounded time for a `close()` in progress), and leaves it open:
//!   `atexit` runs hooks newest first, so an application's hook registered before wisckey
//!   was imported runs after this one and may still use the database. It also waits (the
//!   same bounded time) for closes a drop began on another thread: such a handle is gone
//!   from the registry, and the process ending under its close lost what the close was
//!   still writing out.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;

use crate::errors::Failure;

/// The open database, shared by the `DB` object and everything made from it.
pub(crate) type Shared = Arc<Handle>;

/// An engine `Db` and the process that opened it. Every call holds the read lock for its
/// duration; `close()` takes the write lock (waiting for calls in flight), takes the `Db`
/// out and closes it under the lock.
pub(crate) struct Handle {
    db: RwLock<Option<engine::Db>>,
    opened_by: u32,
    /// Its key in `OPEN`.
    id: u64,
}

/// Every handle this process opened and did not close, held weakly (the hook must not keep
/// a database alive): what the exit hook syncs. An entry goes when its handle is closed or
/// dropped.
static OPEN: Mutex<BTreeMap<u64, Weak<Handle>>> = Mutex::new(BTreeMap::new());

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Engine closes begun by dropping a handle and not finished: the exit hook waits for them
/// (`CLOSES_DONE` is notified as each ends).
static CLOSES_IN_PROGRESS: Mutex<usize> = Mutex::new(0);
static CLOSES_DONE: parking_lot::Condvar = parking_lot::Condvar::new();

/// An engine `Db` being closed by a drop, counted in `CLOSES_IN_PROGRESS` from its
/// creation until the close returned (or the `Db` was leaked), however it is dropped.
struct Closing(Option<engine::Db>);

impl Closing {
    fn new(db: engine::Db) -> Closing {
        *CLOSES_IN_PROGRESS.lock() += 1;
        Closing(Some(db))
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        drop(self.0.take());
        *CLOSES_IN_PROGRESS.lock() -= 1;
        CLOSES_DONE.notify_all();
    }
}

/// Waits until no close begun by a drop is in progress, at most `limit`.
fn wait_for_closes(limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    let Some(mut in_progress) = CLOSES_IN_PROGRESS.try_lock_for(limit) else {
        return;
    };
    while *in_progress > 0 {
        if CLOSES_DONE
            .wait_until(&mut in_progress, deadline)
            .timed_out()
        {
            return;
        }
    }
}

/// How long the exit hook waits for a `close()` in progress (which holds the write lock);
/// also how long it waits for the registry (in a forked child, a thread of the parent may have held
/// it at the fork, and nothing will ever release the child's copy).
const EXIT_WAIT: Duration = Duration::from_secs(2);

impl Handle {
    pub(crate) fn new(db: engine::Db) -> Shared {
        let handle = Arc::new(Handle {
            db: RwLock::new(Some(db)),
            opened_by: std::process::id(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        });
        OPEN.lock().insert(handle.id, Arc::downgrade(&handle));
        handle
    }

    /// Whether this process is not the one that opened the database (a forked child).
    pub(crate) fn in_other_process(&self) -> bool {
        std::process::id() != self.opened_by
    }

    /// Gives up an engine object (a snapshot) made from this database: dropped as usual,
    /// or leaked in a forked child, where dropping it would take an engine lock that a
    /// thread of the parent may have held at the fork (never to be released in the child).
    pub(crate) fn release<T>(&self, object: T) {
        if self.in_other_process() {
            std::mem::forget(object);
        } else {
            drop(object);
        }
    }

    /// An error unless this is the process that opened the database. Callers that take a
    /// lock of their own before reaching the database check this first: a thread of the
    /// parent may have held that lock at the fork, never to release the child's copy.
    pub(crate) fn check_process(&self) -> Result<(), Failure> {
        let now = std::process::id();
        if now == self.opened_by {
            Ok(())
        } else {
            Err(Failure::Forked {
                opened_by: self.opened_by,
                now,
            })
        }
    }

    /// Runs `f` on the open database, the read lock held for the call. The caller releases
    /// the GIL first (the lock may wait for a `close()`, which runs without it).
    pub(crate) fn on_db<T>(
        &self,
        f: impl FnOnce(&engine::Db) -> engine::Result<T>,
    ) -> Result<T, Failure> {
        self.check_process()?;
        let open = self.db.read();
        let db = open.as_ref().ok_or(engine::Error::Closed)?;
        // A panic in the engine (a bug) reaches Python as `InternalError`, a
        // `wisckey.Error`, not as pyo3's `PanicException`, which `except Exception` misses.
        // Unwind safety: the engine latches or refuses what a panic left half done on its
        // write and background paths; a read holds nothing it could leave behind.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db))) {
            Ok(result) => Ok(result?),
            Err(payload) => {
                let said = (payload.downcast_ref::<&str>().copied())
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic without a message");
                Err(
                    engine::Error::Internal(format!("a call into the engine panicked: {said}"))
                        .into(),
                )
            }
        }
    }

    /// Closes the database (idempotent); without the GIL. In a process other than the one
    /// that opened it this does nothing: the database is the other process's to close, and
    /// a `with` block or `finally` around a fork must not fail in the child for it.
    pub(crate) fn close(&self) -> Result<(), Failure> {
        if self.check_process().is_err() {
            return Ok(());
        }
        let closed = {
            let mut open = self.db.write();
            open.take().map_or(Ok(()), engine::Db::close)
        };
        self.forget_at_exit();
        Ok(closed?)
    }

    /// Whether the database was closed; without the GIL.
    pub(crate) fn is_closed(&self) -> bool {
        if self.check_process().is_err() {
            // Not `read()`: a thread of the parent may have held the lock at the fork.
            return self.db.try_read().is_some_and(|open| open.is_none());
        }
        self.db.read().is_none()
    }

    /// Syncs the database for the exit hook, leaving it open; without the GIL. A read lock
    /// is shared with calls in flight (a daemon thread in a long call does not hold it up);
    /// only a `close()` in progress is waited for, at most `EXIT_WAIT`.
    fn sync_at_exit(&self) -> Result<(), Failure> {
        match self.db.try_read_for(EXIT_WAIT) {
            // A read-only handle wrote nothing (and its `sync` would refuse).
            Some(open) => Ok(open
                .as_ref()
                .filter(|db| !db.is_read_only())
                .map_or(Ok(()), engine::Db::sync)?),
            None => Ok(()),
        }
    }

    fn forget_at_exit(&self) {
        OPEN.lock().remove(&self.id);
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let Some(db) = self.db.get_mut().take() else {
            return;
        };
        if self.check_process().is_err() {
            // A forked child: dropping the engine would flush into the parent's files
            // without its lock and join background threads that do not exist in this
            // process (a hang). Its memory goes with the process.
            std::mem::forget(db);
            return;
        }
        // Counted before it leaves the registry: the exit hook, which no longer finds it
        // there, waits for the count instead.
        let closing = Closing::new(db);
        self.forget_at_exit();
        // The last reference goes in a Python object's deallocation, with the GIL held
        // (nothing of this crate holds a handle inside `detach`), so `try_attach` only
        // hands over the token; the engine's close then runs without the GIL. Where no
        // attaching is possible (the interpreter gone), the closure is dropped unrun and
        // `closing` with it, here.
        let _ = Python::try_attach(move |py| py.detach(move || drop(closing)));
    }
}

/// The `atexit` hook: syncs every database this process opened and has not closed (see
/// the module comment). Raises the first error met, after trying them all; `atexit`
/// reports it on stderr.
#[pyfunction]
#[pyo3(name = "_close_open_databases_at_exit")]
pub(crate) fn close_open_databases_at_exit(py: Python<'_>) -> PyResult<()> {
    let now = std::process::id();
    // Filtered once the registry is unlocked: dropping a handle may lock it.
    let open: Vec<Shared> = match OPEN.try_lock_for(EXIT_WAIT) {
        Some(registry) => registry.values().filter_map(Weak::upgrade).collect(),
        None => return Ok(()),
    };
    let mut first_error = None;
    for handle in open.iter().filter(|handle| handle.opened_by == now) {
        if let Err(e) = py.detach(|| handle.sync_at_exit()) {
            first_error.get_or_insert(e);
        }
    }
    // `open` is dropped here, with the GIL held: it may hold the last reference to a
    // handle (see `Drop`).
    drop(open);
    // Closes a drop began (here or on another thread, which may be a daemon thread the
    // interpreter will not wait for) write out what the log still buffers: the process must
    // not end under them.
    py.detach(|| wait_for_closes(EXIT_WAIT));
    first_error.map_or(Ok(()), |e| Err(e.into_py(py)))
}
