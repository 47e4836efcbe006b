//! [`ReadOnlyFs`]: the file system a read-only database sees. It passes reads through to
//! the real file system and refuses every call that would change the directory or a file
//! (`Error::ReadOnly`), so a read-only open cannot write, whatever code path it takes.
//!
//! `open_append` succeeds (the value-log writer and the manifest writer are built on open
//! even when they will never write) and returns a handle that knows the file's length and
//! refuses `append`, `set_len` and `preallocate`. `sync_data` and `sync_dir` succeed and do
//! nothing: nothing was written through this file system, so there is nothing to make
//! durable. `lock` is refused; a read-only open takes `lock_shared` on the real file system.

use std::path::Path;
use std::sync::Arc;

use super::{FileLock, FileSystem, ReadableFile, WritableFile};
use crate::error::{Error, Result};

/// Reads through to `inner`; refuses every change.
#[derive(Debug)]
pub(crate) struct ReadOnlyFs {
    inner: Arc<dyn FileSystem>,
}

impl ReadOnlyFs {
    pub(crate) fn new(inner: Arc<dyn FileSystem>) -> ReadOnlyFs {
        ReadOnlyFs { inner }
    }
}

fn refused(what: &str, path: &Path) -> Error {
    Error::ReadOnly(format!("{what} {}", path.display()))
}

impl FileSystem for ReadOnlyFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        Err(refused("creating directory", dir))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(refused("creating", path))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let len = self.inner.file_size(path)?;
        Ok(Box::new(RefusingFile {
            path: path.display().to_string(),
            len,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.inner.open_read(path)
    }

    // Reads are the inner file system's own (open_read hands out its handles).
    fn read_batch(&self, reads: &mut [super::BatchRead<'_>]) -> Vec<Result<usize>> {
        self.inner.read_batch(reads)
    }

    fn batches_reads(&self) -> bool {
        self.inner.batches_reads()
    }

    fn reads_if_cached(&self) -> bool {
        self.inner.reads_if_cached()
    }

    fn rename(&self, from: &Path, _to: &Path) -> Result<()> {
        Err(refused("renaming", from))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        Err(refused("removing", path))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }

    fn canonicalize(&self, path: &Path) -> Result<std::path::PathBuf> {
        self.inner.canonicalize(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn punch_hole(&self, path: &Path, _offset: u64, _len: u64) -> Result<()> {
        Err(refused("punching a hole in", path))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        Err(refused("taking the exclusive lock", path))
    }

    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_shared(path)
    }
}

/// A "writable" handle that writes nothing.
#[derive(Debug)]
struct RefusingFile {
    path: String,
    len: u64,
}

impl WritableFile for RefusingFile {
    fn append(&mut self, _data: &[u8]) -> Result<()> {
        Err(Error::ReadOnly(format!("appending to {}", self.path)))
    }

    fn sync_data(&mut self) -> Result<()> {
        Ok(())
    }

    fn set_len(&mut self, _len: u64) -> Result<()> {
        Err(Error::ReadOnly(format!("truncating {}", self.path)))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, _up_to: u64) -> Result<()> {
        Err(Error::ReadOnly(format!("preallocating {}", self.path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    #[test]
    fn reads_pass_through_and_every_change_is_refused() {
        let mem = MemFs::new();
        let dir = Path::new("/db");
        mem.create_dir_all(dir).expect("mkdir");
        let mut file = mem.create(&dir.join("f")).expect("create");
        file.append(b"hello").expect("append");
        drop(file);
        let fs = ReadOnlyFs::new(Arc::new(mem));
        assert_eq!(fs.file_size(&dir.join("f")).expect("size"), 5);
        assert_eq!(fs.list(dir).expect("list"), vec!["f".to_string()]);
        let mut handle = fs.open_append(&dir.join("f")).expect("open_append");
        assert_eq!(handle.len(), 5);
        assert!(handle.append(b"x").is_err_and(|e| e.is_read_only()));
        assert!(handle.set_len(0).is_err_and(|e| e.is_read_only()));
        handle.sync_data().expect("nothing to sync");
        assert!(fs.create(&dir.join("g")).is_err_and(|e| e.is_read_only()));
        assert!(fs.remove(&dir.join("f")).is_err_and(|e| e.is_read_only()));
        assert!(fs
            .rename(&dir.join("f"), &dir.join("g"))
            .is_err_and(|e| e.is_read_only()));
        assert!(fs
            .punch_hole(&dir.join("f"), 0, 1)
            .is_err_and(|e| e.is_read_only()));
        assert!(fs.lock(&dir.join("LOCK")).is_err_and(|e| e.is_read_only()));
        assert_eq!(fs.file_size(&dir.join("f")).expect("size"), 5);
    }
}
