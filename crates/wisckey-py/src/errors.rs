//! The exception hierarchy: `wisckey.Error` and one subclass per engine error kind.
//! `to_py_err` is the only place engine errors become Python ones.
//!
//! `IOError` is also an `OSError` (`except OSError` catches a failed I/O call, as for
//! Python's own files) and is left out of `__all__`: `from wisckey import *` must not
//! shadow the builtin `IOError` (an alias of `OSError`). Its class is made at module init
//! with `type()`: `create_exception!` takes a single base.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(wisckey, Error, PyException, "Any error raised by wisckey.");
create_exception!(
    wisckey,
    CorruptionError,
    Error,
    "Stored bytes failed validation (the message names the file and offset)."
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
    "The device is full; nothing acknowledged was lost. Free space and retry."
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
    "The database (or this object's database or snapshot) is closed."
);
create_exception!(
    wisckey,
    UnsupportedVersionError,
    Error,
    "A file of the database has a newer format version than this build reads (the message \
     names the file and both versions): open it with a newer wisckey."
);
create_exception!(
    wisckey,
    InternalError,
    Error,
    "An internal invariant failed or the engine panicked: a bug in wisckey (please report \
     it), not damaged data. Reopen the database."
);
create_exception!(
    wisckey,
    AbortedError,
    Error,
    "Work was abandoned before it ran (the message says which)."
);
create_exception!(
    wisckey,
    ReadOnlyError,
    Error,
    "The database is open read-only and the call would write to it."
);

const IO_ERROR_DOC: &str =
    "An operating-system I/O call failed (the message names the operation and the file). \
     Also an OSError; not exported by `from wisckey import *`, which would shadow the \
     builtin IOError.";

/// `wisckey.IOError`, made once per process (see the module comment).
static IO_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn io_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let ty = IO_ERROR.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(py, [py.get_type::<Error>(), py.get_type::<PyOSError>()])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "wisckey")?;
        namespace.set_item("__doc__", IO_ERROR_DOC)?;
        let made = py
            .get_type::<PyType>()
            .call1(("IOError", bases, namespace))?;
        Ok(made.cast_into::<PyType>()?.unbind())
    })?;
    Ok(ty.bind(py))
}

/// Why a call failed, kept as a Rust value until the GIL is held again: the engine's error,
/// or a handle used by a process other than the one that opened it (after `fork()`).
#[derive(Debug)]
pub(crate) enum Failure {
    Engine(engine::Error),
    Forked { opened_by: u32, now: u32 },
}

impl From<engine::Error> for Failure {
    fn from(e: engine::Error) -> Failure {
        Failure::Engine(e)
    }
}

impl Failure {
    pub(crate) fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Engine(e) => to_py_err(py, e),
            Failure::Forked { opened_by, now } => Error::new_err(format!(
                "this database was opened by process {opened_by}; process {now} (a fork of \
                 it?) cannot use that handle: open the database again in this process, once \
                 the other has closed it"
            )),
        }
    }
}

/// The Python exception for an engine error: its class by kind, the engine's message (with
/// the option it suggests spelled as `DB()` takes it).
pub(crate) fn to_py_err(py: Python<'_>, e: engine::Error) -> PyErr {
    let message = e.to_string().replace(
        "RecoveryMode::SalvagePrefix",
        "recovery_mode=\"salvage_prefix\"",
    );
    match e {
        engine::Error::Corruption { .. } => CorruptionError::new_err(message),
        engine::Error::Locked(_) => LockedError::new_err(message),
        engine::Error::NoSpace { .. } => NoSpaceError::new_err(message),
        engine::Error::Io { .. } => match io_error_type(py) {
            Ok(ty) => PyErr::from_type(ty.clone(), message),
            Err(made_not) => made_not,
        },
        engine::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        engine::Error::NotADatabase(_) => NotADatabaseError::new_err(message),
        engine::Error::Closed => ClosedError::new_err(message),
        engine::Error::UnsupportedVersion { .. } => UnsupportedVersionError::new_err(message),
        engine::Error::Internal(_) => InternalError::new_err(message),
        engine::Error::Aborted(_) => AbortedError::new_err(message),
        engine::Error::ReadOnly(_) => ReadOnlyError::new_err(message),
        // The engine's error is non-exhaustive: a kind added later is still a wisckey.Error.
        _ => Error::new_err(message),
    }
}

/// Adds the exception classes to the module (all but `IOError` to `__all__` too).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("NotADatabaseError", py.get_type::<NotADatabaseError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add(
        "UnsupportedVersionError",
        py.get_type::<UnsupportedVersionError>(),
    )?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("AbortedError", py.get_type::<AbortedError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    // `setattr`, not `add`: `add` would list it in `__all__`.
    m.setattr("IOError", io_error_type(py)?)
}
