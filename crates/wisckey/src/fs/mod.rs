//! The file-system seam. Every byte the engine reads or writes goes through [`FileSystem`].
//!
//! Implementations:
//! - [`PosixFs`]: the real one (pread, fdatasync, directory fsync, `fallocate(PUNCH_HOLE)`,
//!   a record lock on a LOCK file);
//! - [`MemFs`]: in memory, for fast tests. It tracks what is *durable* (file bytes covered
//!   by `sync_data`, directory entries covered by `sync_dir`) so a power loss can be
//!   simulated;
//! - [`FaultFs`]: a wrapper over any file system that fails the N-th call with ENOSPC or EIO
//!   (once, or forever — "forever" after a point is how a crash at that point is modelled);
//! - [`ReadOnlyFs`]: the wrapper a read-only open sees, refusing every call that would change
//!   a file or the directory.
//!
//! Durability contract every implementation follows (it is what `MemFs` simulates):
//! - bytes appended to a file are durable only after a later `sync_data` on that file;
//! - a created, renamed or removed directory entry is durable only after `sync_dir` on the
//!   directory that holds it; before that a power cut may keep or lose each such operation
//!   independently of the others (a rename is atomic: old name or new, never both; one
//!   across two directories is durable once either directory is synced, as a journalling
//!   file system commits it in one transaction);
//! - `rename` replaces the target atomically;
//! - a punched range may survive a power cut or not; nothing else in the file changes
//!   (`MemFs` keeps it at once, the case that catches a reader of a punched range).

#[cfg(target_os = "linux")]
mod direct;
mod fault;
#[cfg(target_os = "linux")]
mod mapped;
#[cfg(all(test, target_os = "linux"))]
pub(crate) use mapped::mapped_appends_supported;
mod mem;
mod posix;
#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
pub(crate) use posix::page_cache_reads_work;
mod posix_lock;
mod read_only;
#[cfg(target_os = "linux")]
mod uring;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub use fault::{FaultFs, FaultKind, FaultOps, FsOp};
pub use mem::{MemFs, PowerLoss};
pub use posix::PosixFs;
pub(crate) use read_only::ReadOnlyFs;

use crate::error::Result;

/// Creates `dir` and its missing parents, and makes each new directory's entry durable by
/// syncing the directory that holds it: a crash after this returns cannot lose `dir` (on
/// file systems such as XFS and btrfs a directory's entry in its parent is only durable
/// once the parent is synced; [`MemFs`] treats directories as durable at once).
pub fn create_dir_all_durably(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at.filter(|p| !p.as_os_str().is_empty()) {
        // A root always exists (and has no parent to sync).
        if path.parent().is_none() || fs.exists(path)? {
            break;
        }
        missing.push(path);
        at = path.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(dir)?;
    // Deepest first: a parent's entry is synced after its child's, so the chain is complete
    // whenever the outermost one is.
    for created in missing {
        match created.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => fs.sync_dir(parent)?,
            // A relative name in the working directory (which an in-memory file system
            // may not know by this name).
            None if fs.exists(Path::new("."))? => fs.sync_dir(Path::new("."))?,
            None => {}
        }
    }
    Ok(())
}

/// `path` made absolute (from the working directory) with `.` and `..` resolved by the text.
fn lexically_absolute(path: &Path) -> PathBuf {
    let mut out = if path.is_absolute() {
        PathBuf::new()
    } else {
        std::env::current_dir().unwrap_or_default()
    };
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether `path` (which need not exist) is `dir` or would be created inside it, following
/// links: the nearest existing ancestor of `path` is canonicalized, and the rest of `path`
/// below it (which exists nowhere yet, so holds no link) is added by its text. A target
/// named through a link to the database's directory, or to a directory inside it, is seen.
pub fn path_is_within(fs: &dyn FileSystem, path: &Path, dir: &Path) -> Result<bool> {
    let dir = fs.canonicalize(dir)?;
    let mut existing = None;
    for ancestor in path.ancestors() {
        // A relative path's last ancestor is "": the working directory.
        let named = if ancestor.as_os_str().is_empty() {
            Path::new(".")
        } else {
            ancestor
        };
        if fs.exists(named)? {
            existing = Some((ancestor, fs.canonicalize(named)?));
            break;
        }
    }
    let Some((ancestor, mut at)) = existing else {
        return Ok(false);
    };
    let mut within = at.starts_with(&dir);
    let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
    for component in rest.components() {
        match component {
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                at.push(name);
                within |= at.starts_with(&dir);
            }
            _ => {}
        }
    }
    Ok(within)
}

/// Abstract file system used by the engine.
pub trait FileSystem: Send + Sync + std::fmt::Debug {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Creates `path` (truncating any existing file) and opens it for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its current end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Like [`create`](FileSystem::create), for a log whose appends should bypass the page
    /// cache (`O_DIRECT`). Where the file system cannot, the same as `create` (the default).
    /// Such a file's size may exceed `len()` by zeros up to the next 4 KiB boundary.
    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// [`open_append`](FileSystem::open_append) with direct appends, as
    /// [`create_direct`](FileSystem::create_direct). `len()` starts at the file's size.
    fn open_append_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.open_append(path)
    }
    /// Like [`create`](FileSystem::create), for a log whose many small appends must each
    /// reach the OS at once: `PosixFs` copies them into a shared mapping of the file instead
    /// of making a `pwrite` each. Such a file's size may exceed `len()` by zeros (allocated
    /// ahead of the appends) until `set_len` cuts them. Where the file system cannot, the
    /// same as `create` (the default).
    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// [`open_append`](FileSystem::open_append) with mapped appends, as
    /// [`create_mapped`](FileSystem::create_mapped). `len()` starts at the file's size.
    fn open_append_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.open_append(path)
    }
    /// Opens an existing file for positional reads. The handle may be shared across threads
    /// and sees bytes appended later through a writable handle of the same file.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>>;
    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries in `dir`, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> Result<bool>;
    /// The absolute form of `path`, which exists, with `.`, `..` and links resolved: two
    /// names of one directory canonicalize alike. The default resolves `.` and `..` by the
    /// text alone (relative paths from the working directory), right for a file system
    /// without links.
    fn canonicalize(&self, path: &Path) -> Result<PathBuf> {
        Ok(lexically_absolute(path))
    }
    /// Current length of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Deallocates `len` bytes at `offset` of `path`; reads of that range then return zeros.
    /// The file's length does not change.
    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()>;
    /// Takes an exclusive lock on `path` (creating it). Fails with `Error::Locked` if any
    /// holder — in this process or another — has it. Released when the guard drops.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Takes a shared lock on the existing file `path` without creating or writing it: any
    /// number of shared holders coexist, and a shared lock and an exclusive [`lock`] exclude
    /// each other (`Error::Locked`). A read-only open takes it. The default takes the
    /// exclusive lock instead, which is safe but lets only one reader in at a time.
    ///
    /// [`lock`]: FileSystem::lock
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.lock(path)
    }

    /// Fills each request's buffer from its file at its offset; each result is what
    /// [`ReadableFile::read_at`] would return for it. `PosixFs` keeps the whole batch in
    /// flight at once (io_uring) where the kernel allows; the default reads one by one.
    fn read_batch(&self, reads: &mut [BatchRead<'_>]) -> Vec<Result<usize>> {
        reads
            .iter_mut()
            .map(|read| read.file.read_at(read.offset, read.buf))
            .collect()
    }

    /// Whether [`read_batch`](FileSystem::read_batch) keeps many reads in flight from one
    /// thread. A caller that could spread reads over threads batches them only then.
    fn batches_reads(&self) -> bool {
        false
    }

    /// Whether this file system's read handles can answer
    /// [`ReadableFile::read_exact_if_cached`] (a caller need not prepare such reads where
    /// they would always be refused).
    fn reads_if_cached(&self) -> bool {
        false
    }
}

/// One read of a [`FileSystem::read_batch`].
#[derive(Debug)]
pub struct BatchRead<'a> {
    /// A handle this file system opened.
    pub file: &'a dyn ReadableFile,
    /// Where in the file the read starts.
    pub offset: u64,
    /// Filled from `offset`; the read asks for all of it.
    pub buf: &'a mut [u8],
}

// `len` is the file's byte length, not a collection size; `is_empty` would add nothing.
#[allow(clippy::len_without_is_empty)]
/// A file opened for positional reads. `Send + Sync`: concurrent `read_at` calls are fine.
pub trait ReadableFile: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read. Fewer than
    /// requested means end of file was reached.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;
    /// Current length of the file.
    fn len(&self) -> Result<u64>;

    /// Tells the OS that reads of this handle are random (small reads at scattered offsets),
    /// so a page-cache miss reads the bytes asked for and not a read-ahead window around
    /// them. Advisory: the default, and any failure, changes nothing but speed.
    fn advise_random(&self) {}

    /// Asks the OS to start reading `len` bytes at `offset` into its page cache and returns
    /// without waiting for them, so later reads of those bytes are memory copies instead
    /// of one device read each. A hint: the default does nothing, and an error changes
    /// nothing but speed (callers log it and go on).
    fn prefetch(&self, _offset: u64, _len: u64) -> Result<()> {
        Ok(())
    }

    /// Fills `buf` from `offset` only if every byte of it is in the OS's page cache, without
    /// waiting for the device; `false` when some is not, or the file system cannot tell (the
    /// default), and `buf` is then not to be relied on. On a miss the OS may start reading
    /// the missing bytes all the same: ask [`is_cached`](ReadableFile::is_cached) first. A
    /// caller that hands reads to other threads to keep many in flight can do one here at
    /// once when it costs no wait, only a copy (a warm scan's values: the hand-over and
    /// wake-up cost more than the read).
    fn read_exact_if_cached(&self, _offset: u64, _buf: &mut [u8]) -> bool {
        false
    }

    /// Whether every byte of `[offset, offset + len)` is in the OS's page cache now, found
    /// without reading anything (a hint: the pages may leave right after). `false` where
    /// the file system cannot tell (the default).
    fn is_cached(&self, _offset: u64, _len: u64) -> bool {
        false
    }

    /// The concrete handle, for a file system that recognises its own handles in
    /// [`FileSystem::read_batch`]. The default hides it.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Reads exactly `buf.len()` bytes at `offset`, or fails with `Corruption` naming
    /// `file_name` if the file is shorter.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8], file_name: &str) -> Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(offset + done as u64, &mut buf[done..])?;
            if n == 0 {
                return Err(crate::error::Error::corruption(
                    file_name,
                    offset,
                    format!(
                        "short read: wanted {} bytes, file ends after {}",
                        buf.len(),
                        done
                    ),
                ));
            }
            done += n;
        }
        Ok(())
    }
}

#[allow(clippy::len_without_is_empty)]
/// A file opened for appending. Single owner; not shared between threads.
pub trait WritableFile: Send + std::fmt::Debug {
    /// Appends all of `data` at `len()` (the end of the file, unless zeros were allocated
    /// or written past it: `create_direct`, `create_mapped`, `zero_fill`).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// [`append`](WritableFile::append) of bytes the caller makes durable right away
    /// (`sync_data` next). A file whose appends take a path that pays off only without a
    /// sync (`create_mapped`'s copies, whose pages made writable ahead a sync would write
    /// out as zeros) writes these the plain way. Default: `append`.
    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.append(data)
    }
    /// Makes every byte appended so far durable (fdatasync).
    fn sync_data(&mut self) -> Result<()>;
    /// Truncates or extends the file to `len` bytes; later appends go to the new end.
    fn set_len(&mut self, len: u64) -> Result<()>;
    /// Current length (bytes appended, including those not yet durable).
    fn len(&self) -> u64;
    /// Reserves disk space so that appends up to a file length of `up_to` bytes cannot fail
    /// for lack of space; the file's length does not change. A file system that cannot
    /// reserve (no `fallocate`) returns Ok and reserves nothing.
    fn preallocate(&mut self, up_to: u64) -> Result<()>;
    /// Asks the OS to start writing `len` bytes from `offset` to the device without waiting
    /// for it: a hint that keeps a later `sync_data` short, never a durability promise. An
    /// error may be ignored by the caller (a write-back failure is reported by the next
    /// `sync_data` anyway). Default: nothing to do.
    fn start_write_back(&mut self, _offset: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// Writes zeros to `[from, to)`, past the append position (`from >= len()`), leaving
    /// `len()` as it is: later appends overwrite them. So the blocks an append will land on
    /// are allocated and written before it, and the `sync_data` that follows it flushes
    /// only data (an append that grows the file also makes `fdatasync` write the inode).
    /// The file's length as readers see it then includes the zeros; `set_len` cuts them.
    /// Returns `false` where the file cannot do this (the default; nothing written).
    fn zero_fill(&mut self, _from: u64, _to: u64) -> Result<bool> {
        Ok(false)
    }
}

/// An exclusive lock held until dropped.
pub trait FileLock: Send + Sync + std::fmt::Debug {}
