//! The exception hierarchy: `wisckey.Error` and one subclass per engine error a caller
//! may want to catch apart. `to_py_err` is the only place engine errors become Python ones.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

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
    "The database (or this object's database or snapshot) is closed."
);

/// The Python exception for an engine error: its class by kind, the engine's message.
pub(crate) fn to_py_err(e: engine::Error) -> PyErr {
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

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    m.add("IOError", py.get_type::<IOError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("NotADatabaseError", py.get_type::<NotADatabaseError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    Ok(())
}
