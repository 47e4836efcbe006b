//! The engine's one error type.
//!
//! Every fallible operation returns [`Result`]. Not-found is `Ok(None)`, never an error.
//! `Error` is `Clone` (I/O errors are shared behind an `Arc`) so that the first background
//! failure can be latched and handed to every later caller.

use std::fmt;
use std::sync::Arc;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong inside wisckey.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed. `context` names the operation and file.
    Io {
        /// The operation and the file.
        context: String,
        /// The operating system's error.
        source: Arc<std::io::Error>,
    },
    /// The device is full (ENOSPC, or a quota). Nothing is corrupt: free space (delete data
    /// and let it be collected, or remove other files) and retry. A write that fails with
    /// this before reaching the log leaves the database usable without a reopen.
    NoSpace {
        /// The operation and the file.
        context: String,
        /// The operating system's error (ENOSPC or EDQUOT).
        source: Arc<std::io::Error>,
    },
    /// Stored bytes failed validation: bad checksum, impossible length, wrong key, pointer
    /// outside the live log, ...
    Corruption {
        /// The file holding the damaged bytes.
        file: String,
        /// Where in it.
        offset: u64,
        /// What does not verify.
        reason: String,
    },
    /// The caller passed something the engine does not accept (a key over the maximum size,
    /// a nonsensical option, ...). The message names the limit.
    InvalidArgument(String),
    /// The directory holds files that are not a wisckey database.
    NotADatabase(String),
    /// The database was written by a newer, unknown format version.
    UnsupportedVersion {
        /// The file.
        file: String,
        /// The version it was written in.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// Another `Db` (in this or another process) holds the directory's lock.
    Locked(String),
    /// The database has been closed.
    Closed,
    /// An internal invariant failed, or the engine panicked (caught and latched): a bug in
    /// wisckey, not damaged data. Please report it.
    Internal(String),
    /// Work was abandoned before it ran (e.g. a scan's read-ahead after the iterator moved on).
    Aborted(String),
    /// The database was opened read-only ([`crate::Db::open_read_only`]) and the call would
    /// write to it. Names the refused operation.
    ReadOnly(String),
}

impl Error {
    /// Wraps an OS error with a description of what was being done. A full device
    /// becomes [`Error::NoSpace`], so callers never mistake it for another failure.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        let no_space = source.raw_os_error() == Some(libc::ENOSPC)
            || source.raw_os_error() == Some(libc::EDQUOT)
            || source.kind() == std::io::ErrorKind::StorageFull
            || source.kind() == std::io::ErrorKind::QuotaExceeded;
        let (context, source) = (context.into(), Arc::new(source));
        if no_space {
            Error::NoSpace { context, source }
        } else {
            Error::Io { context, source }
        }
    }

    /// Builds a `Corruption` error.
    pub fn corruption(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True when the device is full ([`Error::NoSpace`]).
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// True when the process (EMFILE) or the system (ENFILE) had no file handle left: a
    /// call that failed so opened nothing and wrote nothing, and the same call may work
    /// once handles are closed.
    pub fn is_out_of_handles(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
            }
            _ => false,
        }
    }

    /// A shortage the same work may not meet again (no disk space, no file handle): the
    /// engine retries work that met one instead of latching it.
    pub(crate) fn is_shortage(&self) -> bool {
        self.is_no_space() || self.is_out_of_handles()
    }

    /// True for [`Error::ReadOnly`]: a write refused by a read-only database.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::ReadOnly(_))
    }

    /// True for `Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A file whose format version is above `supported`: written by a newer build
    /// (`UnsupportedVersion`, refused as it is), unless no build could have got that far,
    /// more than [`MAX_VERSION_LEAD`] versions ahead: then the version field itself is
    /// damaged (`Corruption`; a flipped high bit reads as version 2^30), which `Db::repair`
    /// rebuilds around instead of refusing.
    pub(crate) fn newer_version(file: &str, offset: u64, found: u32, supported: u32) -> Error {
        if found.saturating_sub(supported) > MAX_VERSION_LEAD {
            Error::corruption(
                file,
                offset,
                format!(
                    "format version {found}, far beyond this build's {supported}: the \
                     version field is damaged"
                ),
            )
        } else {
            Error::UnsupportedVersion {
                file: file.to_string(),
                found,
                supported,
            }
        }
    }

    /// What a caught panic becomes: an [`Error::Internal`] naming where it happened and what
    /// the panic said.
    pub(crate) fn from_panic(what: &str, payload: &(dyn std::any::Any + Send)) -> Error {
        let said = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic without a message");
        Error::Internal(format!("{what} panicked: {said}"))
    }
}

/// How many format versions ahead of this build a file may claim before its version field
/// is taken for damage (see [`Error::newer_version`]); formats gain a version at a time.
pub(crate) const MAX_VERSION_LEAD: u32 = 1000;

/// Runs `work` and turns a panic in it into [`Error::Internal`] (see [`Error::from_panic`]).
/// For the engine's own threads and the write leader: a panic there must reach every caller
/// as an error, not leave writers waiting for a thread that is gone.
pub(crate) fn catch_panic<T>(what: &str, work: impl FnOnce() -> Result<T>) -> Result<T> {
    // Unwind safety: whatever `work` left half-changed is never trusted again: every caller
    // latches the error, which stops background work and refuses writes.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
        .unwrap_or_else(|payload| Err(Error::from_panic(what, payload.as_ref())))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error: {context}: {source}"),
            Error::NoSpace { context, source } => {
                write!(f, "no space left on the device: {context}: {source}")
            }
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(f, "corruption in {file} at offset {offset}: {reason}"),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::NotADatabase(msg) => write!(f, "not a wisckey database: {msg}"),
            Error::UnsupportedVersion {
                file,
                found,
                supported,
            } => write!(
                f,
                "{file} has format version {found}, this build supports up to {supported}"
            ),
            Error::Locked(msg) => write!(
                f,
                "database is locked: {msg} is held by another open of the database (another \
                 process, or another handle in this one)"
            ),
            Error::Closed => write!(f, "database is closed"),
            Error::Internal(msg) => write!(f, "internal error (a bug in wisckey): {msg}"),
            Error::Aborted(msg) => write!(f, "aborted: {msg}"),
            Error::ReadOnly(what) => write!(
                f,
                "the database is open read-only: {what} would write to it (open it with Db::open)"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::NoSpace { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}
