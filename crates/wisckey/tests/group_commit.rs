//! Group commit: concurrent sync writers share fdatasync calls (a leader syncs once for the
//! whole group), and every one of them is durable when acknowledged.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use wisckey::fs::{FileLock, FileSystem, MemFs, PowerLoss, ReadableFile, WritableFile};
use wisckey::{Db, Options, Result, WriteOptions};

/// Delegates to MemFs; counts `sync_data` calls and makes each take 2 ms like a real device.
#[derive(Debug, Clone)]
struct SlowSyncFs {
    inner: MemFs,
    syncs: Arc<AtomicU64>,
}

#[derive(Debug)]
struct SlowSyncFile {
    inner: Box<dyn WritableFile>,
    syncs: Arc<AtomicU64>,
}

impl WritableFile for SlowSyncFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)
    }
    fn sync_data(&mut self) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        self.inner.sync_data()
    }
    fn set_len(&mut self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for SlowSyncFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(SlowSyncFile {
            inner: self.inner.create(path)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(SlowSyncFile {
            inner: self.inner.open_append(path)?,
            syncs: Arc::clone(&self.syncs),
        }))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.inner.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        self.inner.punch_hole(path, offset, len)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[test]
fn concurrent_sync_writes_share_fdatasyncs_and_are_durable() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    let mem = MemFs::new();
    let fs = SlowSyncFs {
        inner: mem.clone(),
        syncs: Arc::new(AtomicU64::new(0)),
    };
    let options = Options {
        memtable_size: 64 << 20,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    let before = fs.syncs.load(Ordering::SeqCst);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    db.put_opt(
                        format!("t{t}-{i:03}"),
                        vec![t as u8; 100],
                        &WriteOptions { sync: true },
                    )
                    .expect("sync put");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let syncs = fs.syncs.load(Ordering::SeqCst) - before;
    let writes = (THREADS * PER_THREAD) as u64;
    eprintln!("{writes} sync writes used {syncs} fdatasync calls");
    assert!(syncs >= 1);
    assert!(
        syncs * 2 <= writes,
        "group commit should share syncs: {syncs} syncs for {writes} writes"
    );
    // Every acknowledged sync write survives a power loss.
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    let db = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            assert_eq!(
                db.get(format!("t{t}-{i:03}")).expect("get"),
                Some(vec![t as u8; 100])
            );
        }
    }
}
