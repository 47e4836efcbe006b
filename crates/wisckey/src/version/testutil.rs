//! Test doubles for the version and compaction modules: a BTreeMap-backed [`TableSource`]
//! and a minimal Vec-backed [`FileSystem`] that can be told to fail syncs, appends or
//! renames. Neither models durability; they exist so this module can be tested without the
//! real table reader and file systems.
//!
//! Thread-safety: internally locked with `parking_lot::Mutex`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, ReadableFile, WritableFile};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, user_key, ValueKind, MAX_SEQUENCE};

use super::levels::FileMeta;
use super::TableSource;

/// A file covering user keys `[lo, hi]` at every sequence, 100 bytes long.
pub(crate) fn meta(number: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
    FileMeta {
        number,
        file_size: 100,
        smallest: make_internal_key(lo, MAX_SEQUENCE, ValueKind::ValuePointer),
        largest: make_internal_key(hi, 0, ValueKind::Deletion),
    }
}

type Entries = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

/// Tables held in memory, keyed by file number.
#[derive(Debug, Default)]
pub(crate) struct MockTables {
    tables: Mutex<HashMap<u64, Entries>>,
    failing: Mutex<HashSet<u64>>,
}

impl MockTables {
    /// Stores table `number` holding `(user key, sequence, value)` entries of kind Value.
    pub(crate) fn put(&self, number: u64, entries: &[(&[u8], u64, &[u8])]) {
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .map(|(k, s, v)| (make_internal_key(k, *s, ValueKind::Value), v.to_vec()))
            .collect();
        rows.sort_by(|a, b| compare_internal(&a.0, &b.0));
        self.tables.lock().insert(number, Arc::new(rows));
    }

    /// Makes every later access to table `number` fail with an I/O error.
    pub(crate) fn fail(&self, number: u64) {
        self.failing.lock().insert(number);
    }

    fn table(&self, number: u64) -> Result<Entries> {
        if self.failing.lock().contains(&number) {
            return Err(Error::io(
                format!("open table {number}"),
                std::io::Error::other("injected"),
            ));
        }
        self.tables.lock().get(&number).cloned().ok_or_else(|| {
            Error::io(
                format!("open table {number}"),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
        })
    }
}

impl TableSource for MockTables {
    fn get(&self, number: u64, _size: u64, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let rows = self.table(number)?;
        let idx = rows.partition_point(|(k, _)| compare_internal(k, ikey).is_lt());
        Ok(rows
            .get(idx)
            .filter(|(k, _)| user_key(k) == user_key(ikey))
            .cloned())
    }

    fn iter(&self, number: u64, _size: u64) -> Result<Box<dyn InternalIterator>> {
        Ok(Box::new(VecIterator {
            rows: self.table(number)?,
            pos: None,
        }))
    }
}

/// Iterator over a sorted vector; `pos == None` means invalid.
struct VecIterator {
    rows: Entries,
    pos: Option<usize>,
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.rows.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.rows.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let idx = self
            .rows
            .partition_point(|(k, _)| compare_internal(k, target).is_lt());
        self.pos = (idx < self.rows.len()).then_some(idx);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.rows.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.rows[p].0)
    }
    fn value(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.rows[p].1)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

type FileData = Arc<Mutex<Vec<u8>>>;

/// Vec-backed file system double with switchable failures.
#[derive(Debug, Default)]
pub(crate) struct TestFs {
    files: Mutex<BTreeMap<PathBuf, FileData>>,
    pub(crate) faults: Arc<Faults>,
}

/// Failure switches, shared with every open handle so a test can flip them at any time.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub(crate) sync: AtomicBool,
    pub(crate) append: AtomicBool,
    pub(crate) rename: AtomicBool,
}

fn injected(what: &str, path: &Path) -> Error {
    Error::io(
        format!("{what} {}", path.display()),
        std::io::Error::other("injected failure"),
    )
}

fn not_found(path: &Path) -> Error {
    Error::io(
        path.display().to_string(),
        std::io::Error::from(std::io::ErrorKind::NotFound),
    )
}

impl TestFs {
    pub(crate) fn set(flag: &AtomicBool, on: bool) {
        flag.store(on, Ordering::SeqCst);
    }

    /// Names of the files in `dir`, sorted.
    pub(crate) fn names(&self, dir: &Path) -> Vec<String> {
        let mut names = self.list(dir).unwrap_or_default();
        names.sort();
        names
    }

    /// A copy of the file's bytes.
    pub(crate) fn read(&self, path: &Path) -> Option<Vec<u8>> {
        self.files.lock().get(path).map(|d| d.lock().clone())
    }

    /// Replaces the file's bytes (creating it).
    pub(crate) fn write(&self, path: &Path, bytes: &[u8]) {
        self.files
            .lock()
            .insert(path.to_path_buf(), Arc::new(Mutex::new(bytes.to_vec())));
    }

    fn data(&self, path: &Path) -> Result<FileData> {
        self.files
            .lock()
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path))
    }
}

#[derive(Debug)]
struct TestWritable {
    path: PathBuf,
    data: FileData,
    faults: Arc<Faults>,
}

#[derive(Debug)]
struct TestReadable(FileData);

#[derive(Debug)]
struct TestLock;

impl FileLock for TestLock {}

impl WritableFile for TestWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.faults.append.load(Ordering::SeqCst) {
            // Models a short write: half the bytes land before the failure.
            self.data.lock().extend_from_slice(&data[..data.len() / 2]);
            return Err(injected("append", &self.path));
        }
        self.data.lock().extend_from_slice(data);
        Ok(())
    }
    fn sync_data(&mut self) -> Result<()> {
        if self.faults.sync.load(Ordering::SeqCst) {
            return Err(injected("sync", &self.path));
        }
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        let len = usize::try_from(len).map_err(|_| injected("set_len", &self.path))?;
        self.data.lock().resize(len, 0);
        Ok(())
    }
    fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }
}

impl ReadableFile for TestReadable {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let data = self.0.lock();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }
    fn len(&self) -> Result<u64> {
        Ok(self.0.lock().len() as u64)
    }
}

impl FileSystem for TestFs {
    fn create_dir_all(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data: FileData = Arc::default();
        self.files
            .lock()
            .insert(path.to_path_buf(), Arc::clone(&data));
        self.writable(path, data)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data = self.data(path)?;
        self.writable(path, data)
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        Ok(Arc::new(TestReadable(self.data(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        if self.faults.rename.load(Ordering::SeqCst) {
            return Err(injected("rename", from));
        }
        let mut files = self.files.lock();
        let data = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_path_buf(), data);
        Ok(())
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.files
            .lock()
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        Ok(self
            .files
            .lock()
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        Ok(self.files.lock().contains_key(path))
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(self.data(path)?.lock().len() as u64)
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    fn punch_hole(&self, path: &Path, _offset: u64, _len: u64) -> Result<()> {
        Err(injected(
            "punch_hole (unsupported by the test double)",
            path,
        ))
    }
    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        Ok(Box::new(TestLock))
    }
}

impl TestFs {
    fn writable(&self, path: &Path, data: FileData) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(TestWritable {
            path: path.to_path_buf(),
            data,
            faults: Arc::clone(&self.faults),
        }))
    }
}
