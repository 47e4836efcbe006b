//! The server's error type. Command-level failures (a wrong argument, a non-integer value)
//! are replies, not errors; this type is for what stops a command from running at all or
//! the server from starting.

use std::fmt;

/// What can go wrong in the server.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed.
    Db(wisckey::Error),
    /// A socket or the runtime failed.
    Io(std::io::Error),
    /// A stored value or the keyspace does not decode (damaged, or a newer format).
    Format(String),
    /// The configuration is unusable.
    Config(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Db(e) => write!(f, "engine: {e}"),
            Error::Io(e) => write!(f, "I/O: {e}"),
            Error::Format(s) => write!(f, "keyspace format: {s}"),
            Error::Config(s) => write!(f, "configuration: {s}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Db(e) => Some(e),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<wisckey::Error> for Error {
    fn from(e: wisckey::Error) -> Error {
        Error::Db(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}
