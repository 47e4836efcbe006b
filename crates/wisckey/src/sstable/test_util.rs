//! Test doubles for the sstable tests: an in-memory file (`VecFile`) and a tiny
//! `FileSystem` over a map of them. Only what the table code uses is implemented; every
//! other operation returns `InvalidArgument`. Thread-safe through `parking_lot::Mutex`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, ReadableFile, WritableFile};

/// A file whose bytes live in a shared vector.
#[derive(Debug, Clone, Default)]
pub struct VecFile {
    pub bytes: Arc<Mutex<Vec<u8>>>,
}

impl VecFile {
    pub fn from_bytes(bytes: Vec<u8>) -> VecFile {
        VecFile {
            bytes: Arc::new(Mutex::new(bytes)),
        }
    }

    pub fn contents(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

impl WritableFile for VecFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.bytes.lock().extend_from_slice(data);
        Ok(())
    }
    fn sync_data(&mut self) -> Result<()> {
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        self.bytes.lock().resize(len as usize, 0);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.bytes.lock().len() as u64
    }
}

impl ReadableFile for VecFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let bytes = self.bytes.lock();
        let start = (offset as usize).min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }
    fn len(&self) -> Result<u64> {
        Ok(self.bytes.lock().len() as u64)
    }
}

/// A map of path -> `VecFile`, counting `open_read` calls.
#[derive(Debug, Default)]
pub struct TinyFs {
    files: Mutex<HashMap<PathBuf, VecFile>>,
    pub opens: AtomicUsize,
}

impl TinyFs {
    pub fn open_count(&self) -> usize {
        self.opens.load(Ordering::SeqCst)
    }
}

fn unsupported(what: &str) -> Error {
    Error::InvalidArgument(format!("TinyFs does not support {what}"))
}

impl FileSystem for TinyFs {
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = VecFile::default();
        self.files.lock().insert(path.to_path_buf(), file.clone());
        Ok(Box::new(file))
    }
    fn open_append(&self, _path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(unsupported("open_append"))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.opens.fetch_add(1, Ordering::SeqCst);
        match self.files.lock().get(path) {
            Some(f) => Ok(Arc::new(f.clone())),
            None => Err(Error::io(
                format!("open {}", path.display()),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )),
        }
    }
    fn rename(&self, _from: &Path, _to: &Path) -> Result<()> {
        Err(unsupported("rename"))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.files.lock().remove(path);
        Ok(())
    }
    fn list(&self, _dir: &Path) -> Result<Vec<String>> {
        Err(unsupported("list"))
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        Ok(self.files.lock().contains_key(path))
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.files
            .lock()
            .get(path)
            .map(|f| f.bytes.lock().len() as u64)
            .ok_or_else(|| unsupported("file_size of a missing file"))
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn punch_hole(&self, _path: &Path, _offset: u64, _len: u64) -> Result<()> {
        Err(unsupported("punch_hole"))
    }
    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        Err(unsupported("lock"))
    }
}
