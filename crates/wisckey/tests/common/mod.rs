//! Shared by the integration tests: [`HookFs`], a `MemFs` wrapper that runs test-chosen
//! [`Hooks`] around writable-file calls, positional reads, `create` and `file_size` (to
//! count them, slow them down, fail them or panic in them) and delegates everything else
//! unchanged.
//!
//! Thread-safety: `HookFs` is `Clone`; clones share the `MemFs` and the hooks, which must be
//! `Send + Sync` because the engine calls them from its own threads.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use wisckey::fs::{FileLock, FileSystem, MemFs, ReadableFile, WritableFile};
use wisckey::Result;

/// The error a hook returns to fail `op` on `path` as the OS would with `errno_name` (the
/// name is only for the message: an `Io` error of kind `Other`).
#[allow(dead_code)] // not every test binary injects errors
pub fn injected(op: &str, path: &Path, errno_name: &str) -> wisckey::Error {
    wisckey::Error::io(
        format!("{op} {} (injected)", path.display()),
        std::io::Error::other(errno_name.to_string()),
    )
}

/// What runs before a writable-file call. An error is returned in place of the call, which
/// then does not reach the `MemFs`. Defaults do nothing.
pub trait Hooks: Send + Sync + std::fmt::Debug + 'static {
    fn before_append(&self, _path: &Path, _data: &[u8]) -> Result<()> {
        Ok(())
    }
    fn before_sync_data(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    /// After a `sync_data` that reached the `MemFs` (its bytes are durable): an error here is
    /// what the caller sees, as from an fsync that wrote the data but reported a failure.
    fn after_sync_data(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    /// Before `read_at` on a file opened for reading.
    fn before_read(&self, _path: &Path, _offset: u64, _len: usize) -> Result<()> {
        Ok(())
    }
    /// After a `read_at` that `before_read` let through (whatever its outcome).
    fn after_read(&self, _path: &Path) {}
    /// After an `append` that reached the `MemFs` (the bytes are in the file).
    fn after_append(&self, _path: &Path, _data: &[u8]) {}
    /// Before `FileSystem::create`.
    fn before_create(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    /// Before `FileSystem::file_size`.
    fn before_file_size(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    /// Before `FileSystem::list`.
    fn before_list(&self, _dir: &Path) {}
    /// Before `FileSystem::punch_hole`.
    fn before_punch_hole(&self, _path: &Path) -> Result<()> {
        Ok(())
    }
    /// Before `FileSystem::sync_dir`.
    fn before_sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}

/// Hooks that count value-log reads (`reads`).
// Each test crate compiles this module; not all of them count reads.
#[allow(dead_code)]
#[derive(Debug, Default)]
pub struct LogReads {
    pub reads: AtomicUsize,
}

impl Hooks for LogReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> Result<()> {
        if path.extension().is_some_and(|e| e == "vlog") {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Hooks that fail the next append to a manifest with ENOSPC, once `armed` is set (a disk
/// that fills up under one manifest edit); `fired` counts the appends failed.
// Each test crate compiles this module; not all of them fill the disk.
#[allow(dead_code)]
#[derive(Debug, Default)]
pub struct ManifestAppendNoSpace {
    pub armed: AtomicBool,
    pub fired: AtomicUsize,
}

impl Hooks for ManifestAppendNoSpace {
    fn before_append(&self, path: &Path, _data: &[u8]) -> Result<()> {
        let is_manifest =
            (path.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"));
        if is_manifest && self.armed.swap(false, Ordering::SeqCst) {
            self.fired.fetch_add(1, Ordering::SeqCst);
            return Err(wisckey::Error::io(
                format!("append {} (injected)", path.display()),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        Ok(())
    }
}

/// The call a [`FailWhileArmed`] fails.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Create,
    Append,
    Read,
}

/// Hooks that fail one kind of call on the files whose name ends with `suffix` with the OS
/// error `errno` while `armed` is set: a full disk (ENOSPC) or a process out of file handles
/// (EMFILE) for a moment.
#[allow(dead_code)]
#[derive(Debug)]
pub struct FailWhileArmed {
    pub armed: AtomicBool,
    call: Call,
    suffix: &'static str,
    errno: i32,
}

#[allow(dead_code)]
impl FailWhileArmed {
    pub fn new(call: Call, suffix: &'static str, errno: i32) -> FailWhileArmed {
        FailWhileArmed {
            armed: AtomicBool::new(false),
            call,
            suffix,
            errno,
        }
    }

    fn fail(&self, call: Call, path: &Path) -> Result<()> {
        let named = path.to_string_lossy().ends_with(self.suffix);
        if call == self.call && named && self.armed.load(Ordering::SeqCst) {
            return Err(wisckey::Error::io(
                format!("{call:?} {} (injected)", path.display()),
                std::io::Error::from_raw_os_error(self.errno),
            ));
        }
        Ok(())
    }
}

impl Hooks for FailWhileArmed {
    fn before_create(&self, path: &Path) -> Result<()> {
        self.fail(Call::Create, path)
    }
    fn before_append(&self, path: &Path, _data: &[u8]) -> Result<()> {
        self.fail(Call::Append, path)
    }
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> Result<()> {
        self.fail(Call::Read, path)
    }
}

/// A `MemFs` whose writable files run `hooks` first.
#[derive(Debug)]
pub struct HookFs<H> {
    pub mem: MemFs,
    pub hooks: Arc<H>,
}

// Derived `Clone` would require `H: Clone`; only the `Arc` is cloned.
impl<H> Clone for HookFs<H> {
    fn clone(&self) -> Self {
        HookFs {
            mem: self.mem.clone(),
            hooks: Arc::clone(&self.hooks),
        }
    }
}

impl<H: Hooks> HookFs<H> {
    /// A fresh, empty `MemFs` with `hooks`.
    pub fn new(hooks: H) -> HookFs<H> {
        HookFs {
            mem: MemFs::new(),
            hooks: Arc::new(hooks),
        }
    }

    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(HookFile {
            path: path.to_path_buf(),
            inner,
            hooks: Arc::clone(&self.hooks),
        })
    }
}

#[derive(Debug)]
struct HookFile<H> {
    path: PathBuf,
    inner: Box<dyn WritableFile>,
    hooks: Arc<H>,
}

impl<H: Hooks> WritableFile for HookFile<H> {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.hooks.before_append(&self.path, data)?;
        self.inner.append(data)?;
        self.hooks.after_append(&self.path, data);
        Ok(())
    }
    fn sync_data(&mut self) -> Result<()> {
        self.hooks.before_sync_data(&self.path)?;
        self.inner.sync_data()?;
        self.hooks.after_sync_data(&self.path)
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn preallocate(&mut self, up_to: u64) -> Result<()> {
        self.inner.preallocate(up_to)
    }
    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        self.inner.zero_fill(from, to)
    }
}

#[derive(Debug)]
struct HookReadFile<H> {
    path: PathBuf,
    inner: Arc<dyn ReadableFile>,
    hooks: Arc<H>,
}

impl<H: Hooks> ReadableFile for HookReadFile<H> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.hooks.before_read(&self.path, offset, buf.len())?;
        let result = self.inner.read_at(offset, buf);
        self.hooks.after_read(&self.path);
        result
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
}

impl<H: Hooks> FileSystem for HookFs<H> {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.hooks.before_create(path)?;
        Ok(self.wrap(path, self.mem.create(path)?))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.mem.open_append(path)?))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        Ok(Arc::new(HookReadFile {
            path: path.to_path_buf(),
            inner: self.mem.open_read(path)?,
            hooks: Arc::clone(&self.hooks),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.mem.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.hooks.before_list(dir);
        self.mem.list(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        self.mem.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.hooks.before_file_size(path)?;
        self.mem.file_size(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.hooks.before_sync_dir(dir)?;
        self.mem.sync_dir(dir)
    }
    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        self.hooks.before_punch_hole(path)?;
        self.mem.punch_hole(path, offset, len)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.mem.lock(path)
    }
}
