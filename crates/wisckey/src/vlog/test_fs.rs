//! Test double: a `Vec<u8>`-per-file in-memory `FileSystem` that can fail the N-th append
//! with ENOSPC after writing half the bytes, fail `set_len`, and records the order of
//! creations and syncs. Everything is behind mutexes, so it is `Send + Sync`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, ReadableFile, WritableFile};

type Data = Arc<Mutex<Vec<u8>>>;

#[derive(Debug, Default)]
pub(crate) struct Faults {
    appends: u64,
    /// 1-based index of the append (counted across all files) that fails half way.
    pub fail_append_nth: Option<u64>,
    pub fail_set_len: bool,
    pub fail_sync: bool,
    /// "create NAME", "sync NAME", "sync_dir" in call order.
    pub events: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct VecFs {
    files: Mutex<HashMap<PathBuf, Data>>,
    faults: Arc<Mutex<Faults>>,
}

impl VecFs {
    pub fn faults(&self) -> parking_lot::MutexGuard<'_, Faults> {
        self.faults.lock()
    }

    /// Number of appends made so far (to aim `fail_append_nth`).
    pub fn appends(&self) -> u64 {
        self.faults.lock().appends
    }

    pub fn file_bytes(&self, path: &Path) -> Vec<u8> {
        self.files
            .lock()
            .get(path)
            .map(|d| d.lock().clone())
            .unwrap_or_default()
    }

    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let mut files = self.files.lock();
        match files.get(path) {
            Some(d) => *d.lock() = bytes,
            None => {
                files.insert(path.to_path_buf(), Arc::new(Mutex::new(bytes)));
            }
        }
    }

    fn data(&self, path: &Path) -> Result<Data> {
        self.files.lock().get(path).cloned().ok_or_else(|| {
            Error::io(
                path.display().to_string(),
                std::io::ErrorKind::NotFound.into(),
            )
        })
    }
}

fn short_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl FileSystem for VecFs {
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data: Data = Arc::default();
        self.files.lock().insert(path.to_path_buf(), data.clone());
        self.faults
            .lock()
            .events
            .push(format!("create {}", short_name(path)));
        Ok(Box::new(VecWritable {
            name: short_name(path),
            data,
            faults: self.faults.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(VecWritable {
            name: short_name(path),
            data: self.data(path)?,
            faults: self.faults.clone(),
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        Ok(Arc::new(VecReadable(self.data(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let data = self.data(from)?;
        let mut files = self.files.lock();
        files.remove(from);
        files.insert(to.to_path_buf(), data);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.data(path)?;
        self.files.lock().remove(path);
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        Ok(self
            .files
            .lock()
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| short_name(p))
            .collect())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        Ok(self.files.lock().contains_key(path))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(self.data(path)?.lock().len() as u64)
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        self.faults.lock().events.push("sync_dir".into());
        Ok(())
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        let data = self.data(path)?;
        let mut bytes = data.lock();
        let end = (offset.saturating_add(len) as usize).min(bytes.len());
        let start = (offset as usize).min(end);
        bytes[start..end].fill(0);
        Ok(())
    }

    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        Ok(Box::new(NoLock))
    }
}

#[derive(Debug)]
struct NoLock;
impl FileLock for NoLock {}

#[derive(Debug)]
struct VecReadable(Data);

impl ReadableFile for VecReadable {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let data = self.0.lock();
        let start = (offset as usize).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.0.lock().len() as u64)
    }
}

#[derive(Debug)]
struct VecWritable {
    name: String,
    data: Data,
    faults: Arc<Mutex<Faults>>,
}

impl WritableFile for VecWritable {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        let mut faults = self.faults.lock();
        faults.appends += 1;
        if faults.fail_append_nth == Some(faults.appends) {
            self.data
                .lock()
                .extend_from_slice(&bytes[..bytes.len() / 2]);
            return Err(Error::io(
                format!("append {}", self.name),
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        self.data.lock().extend_from_slice(bytes);
        Ok(())
    }

    fn sync_data(&mut self) -> Result<()> {
        let mut faults = self.faults.lock();
        if faults.fail_sync {
            return Err(Error::io(
                format!("sync {}", self.name),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        faults.events.push(format!("sync {}", self.name));
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        if self.faults.lock().fail_set_len {
            return Err(Error::io(
                format!("set_len {}", self.name),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        self.data.lock().resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }
}
