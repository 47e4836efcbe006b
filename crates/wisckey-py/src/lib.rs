//! The `wisckey` Python module: a plyvel-shaped API over `engine::Db` with dict
//! conveniences (`db[key]`, `key in db`, `del db[key]`).
//!
//! One file per Python class (`db`, `batch`, `snapshot`, `iterator`), with `options`
//! (keyword options onto `engine::Options`), `handle` (the shared open database, fork
//! safety and the exit hook), `convert` (bytes in and out, calls through the handle, the
//! engine's reports as dicts) and `errors` (the exception hierarchy). The Python package
//! around this module is `python/wisckey` (with the stubs).
//!
//! Invariants:
//! - keys and values are bytes-like in and `bytes` out; a `str` is a `TypeError`;
//! - the GIL is released around every call into the engine (it may do I/O), so Python
//!   threads run in parallel; a `bytes` argument is read in place meanwhile (immutable,
//!   kept alive by the caller), a `bytearray` or `memoryview` is copied first;
//! - the database lives in a shared `handle::Handle` (a `RwLock<Option<Db>>` and the
//!   process that opened it): every call holds the read lock for its duration (one lock per
//!   call), `close()` takes the write lock (waiting for calls in flight), takes the `Db` out
//!   and closes it before letting go; an iterator, snapshot or batch used after that raises
//!   `ClosedError`, never touches freed memory; a call from a forked child raises before
//!   it reaches the engine, and the last reference's drop closes the engine without the
//!   GIL (in a forked child: leaks it); an `atexit` hook syncs what is still open;
//! - an iterator reads one snapshot, fetching entries in chunks (a fresh cursor from just
//!   after the last key each time, at most 256 entries or about 4 MiB, ending at an entry
//!   whose value cannot be read), so no Python object borrows the engine across calls; it
//!   lets go of the snapshot at its end;
//! - `Snapshot`, `Iterator` and `WriteBatch` are frozen (methods take `&self`, as `DB`'s
//!   do): what changes (the snapshot held, an iterator's position, a batch) sits in a
//!   mutex held only briefly, never across an engine call or a call into Python, so a
//!   call from another thread (or re-entrant) never fails with pyo3's "Already borrowed".

mod batch;
mod convert;
mod db;
mod errors;
mod handle;
mod iterator;
mod options;
mod snapshot;

use pyo3::prelude::*;

/// wisckey: an embeddable key-value store that keeps keys in an LSM-tree and values in a
/// value log (WiscKey, FAST '16).
///
/// `wisckey.DB(path, create_if_missing=True, **options)` opens a database; it follows
/// plyvel (`get`, `put`, `delete`, `write_batch`, `iterator`, `snapshot`) with dict
/// conveniences (`db[key]`, `db[key] = value`, `del db[key]`, `key in db`, iteration), and
/// adds `multi_get`, `stats`, `gc`, `compact_range` and `check`. Keys and values are
/// bytes-like in (bytes, bytearray, memoryview) and `bytes` out; a `str` is a TypeError.
/// Every call that may do I/O releases the GIL, so threads sharing one DB run in parallel.
/// Errors are `wisckey.Error` and its subclasses: CorruptionError, LockedError,
/// NoSpaceError, IOError (also an OSError), InvalidArgumentError, NotADatabaseError,
/// ClosedError, UnsupportedVersionError, InternalError, AbortedError, ReadOnlyError.
/// A DB belongs to the process that opened it (a forked child must open the database
/// again); one still open at interpreter exit is synced by an atexit hook.
#[pymodule]
fn wisckey(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::Db>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<iterator::Iterator>()?;
    errors::register(m)?;
    let at_exit = wrap_pyfunction!(handle::close_open_databases_at_exit, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (at_exit,))?;
    Ok(())
}
