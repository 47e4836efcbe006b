//! [`FaultFs`]: wraps any [`FileSystem`] and makes a chosen call fail with ENOSPC or EIO.
//!
//! Every call — on the file system and on the handles it returns — belongs to a class:
//! *write* calls (`create`, `open_append`, `append`, `sync_data`, `set_len`, `rename`,
//! `remove`, `sync_dir`, `punch_hole`, `create_dir_all`) or *read* calls (`open_read`,
//! `read_at`, readable `len`, `list`, `exists`, `file_size`, `lock`). Two counters run
//! from creation: write calls, and all calls. `WritableFile::len` is infallible and is not
//! counted. `fail_at(n, kind, ops, forever)` makes the n-th call counted under `ops`,
//! counting from the moment of the `fail_at`, fail; with `forever` every later call
//! counted under `ops` fails as well. Calls outside `ops` always pass through.
//!
//! `FaultKind::NoSpacePartial` on an `append` first appends the first half of the data to
//! the inner file, then fails with ENOSPC — what a really full disk does. On any other call
//! it behaves like `NoSpace`.
//!
//! Recipe — a crash at write call N:
//! 1. `let mem = MemFs::new(); let fault = FaultFs::new(Arc::new(mem.clone()));`
//! 2. `fault.fail_at(n, FaultKind::Io, FaultOps::Writes, true);`
//! 3. run the workload on `fault` until it stops (nothing after call N reaches `mem`);
//! 4. `let after = mem.power_loss_image(PowerLoss::DropUnsynced)` (or `TornTail`) and
//!    reopen the database on `after`.
//!
//! Size the loop by running the workload once without faults and reading `calls()`.
//!
//! Thread-safety: `FaultFs` is `Clone`; clones and all wrapped handles share one
//! mutex-protected state, so counting is exact under concurrency (which call is "n-th" is
//! then decided by the interleaving).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, ReadableFile, WritableFile};
use crate::error::{Error, Result};

/// The error an injected fault produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// ENOSPC, nothing written.
    NoSpace,
    /// ENOSPC; an `append` first writes the first half of its data.
    NoSpacePartial,
    /// EIO.
    Io,
}

/// Which calls are counted (and may fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOps {
    /// Calls that change the file system.
    Writes,
    /// Every fallible call, reads included.
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Write,
    Read,
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    kind: FaultKind,
    ops: FaultOps,
    /// Absolute value of the `ops` counter at which the fault fires.
    fire_at: u64,
    forever: bool,
}

#[derive(Debug, Default)]
struct FaultState {
    write_calls: u64,
    all_calls: u64,
    plan: Option<Plan>,
    tripped: bool,
}

impl FaultState {
    fn counter(&self, ops: FaultOps) -> u64 {
        match ops {
            FaultOps::Writes => self.write_calls,
            FaultOps::All => self.all_calls,
        }
    }
}

/// Fault-injecting wrapper. Cheap to clone; clones share counters and the armed fault.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFs {
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultFs {
        FaultFs {
            inner,
            state: Arc::default(),
        }
    }

    /// Arms a fault: the `n`-th call (1-based) counted under `ops` from now fails with
    /// `kind`; with `forever`, so does every later counted call. Replaces any armed fault.
    /// `n == 0` is treated as 1.
    pub fn fail_at(&self, n: u64, kind: FaultKind, ops: FaultOps, forever: bool) {
        let mut state = self.state.lock();
        let fire_at = state.counter(ops).saturating_add(n.max(1));
        state.plan = Some(Plan {
            kind,
            ops,
            fire_at,
            forever,
        });
    }

    /// Disarms any fault and resets `tripped()`. Counters keep running.
    pub fn clear(&self) {
        let mut state = self.state.lock();
        state.plan = None;
        state.tripped = false;
    }

    /// Write calls counted since creation (the unit of `fail_at(.., FaultOps::Writes, ..)`).
    pub fn calls(&self) -> u64 {
        self.state.lock().write_calls
    }

    /// Calls counted under `ops` since creation.
    pub fn calls_of(&self, ops: FaultOps) -> u64 {
        self.state.lock().counter(ops)
    }

    /// Whether an injected fault has fired since creation or the last `clear()`.
    pub fn tripped(&self) -> bool {
        self.state.lock().tripped
    }
}

/// Counts one call and decides whether it fails. Shared by the fs and its handles.
fn before(state: &Mutex<FaultState>, class: Class) -> Option<FaultKind> {
    let mut state = state.lock();
    if class == Class::Write {
        state.write_calls += 1;
    }
    state.all_calls += 1;
    let plan = state.plan?;
    if class == Class::Read && plan.ops == FaultOps::Writes {
        return None;
    }
    let count = state.counter(plan.ops);
    let fires = count == plan.fire_at || (plan.forever && count > plan.fire_at);
    if fires {
        state.tripped = true;
        Some(plan.kind)
    } else {
        None
    }
}

fn injected(kind: FaultKind, op: &str, path: &Path) -> Error {
    let errno = match kind {
        FaultKind::NoSpace | FaultKind::NoSpacePartial => libc::ENOSPC,
        FaultKind::Io => libc::EIO,
    };
    Error::io(
        format!("{op} {} (injected fault)", path.display()),
        io::Error::from_raw_os_error(errno),
    )
}

fn check(state: &Mutex<FaultState>, class: Class, op: &str, path: &Path) -> Result<()> {
    match before(state, class) {
        Some(kind) => Err(injected(kind, op, path)),
        None => Ok(()),
    }
}

impl FaultFs {
    fn check(&self, class: Class, op: &str, path: &Path) -> Result<()> {
        check(&self.state, class, op, path)
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(Class::Write, "create_dir_all", dir)?;
        self.inner.create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(Class::Write, "create", path)?;
        Ok(Box::new(FaultWritable {
            inner: self.inner.create(path)?,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(Class::Write, "open_append", path)?;
        Ok(Box::new(FaultWritable {
            inner: self.inner.open_append(path)?,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.check(Class::Read, "open_read", path)?;
        Ok(Arc::new(FaultReadable {
            inner: self.inner.open_read(path)?,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(Class::Write, "rename", from)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.check(Class::Write, "remove", path)?;
        self.inner.remove(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check(Class::Read, "list", dir)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.check(Class::Read, "exists", path)?;
        self.inner.exists(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.check(Class::Read, "file_size", path)?;
        self.inner.file_size(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(Class::Write, "sync_dir", dir)?;
        self.inner.sync_dir(dir)
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        self.check(Class::Write, "punch_hole", path)?;
        self.inner.punch_hole(path, offset, len)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(Class::Read, "lock", path)?;
        self.inner.lock(path)
    }
}

#[derive(Debug)]
struct FaultReadable {
    inner: Arc<dyn ReadableFile>,
    state: Arc<Mutex<FaultState>>,
    path: PathBuf,
}

impl ReadableFile for FaultReadable {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        check(&self.state, Class::Read, "read_at", &self.path)?;
        self.inner.read_at(offset, buf)
    }

    fn len(&self) -> Result<u64> {
        check(&self.state, Class::Read, "len", &self.path)?;
        self.inner.len()
    }
}

#[derive(Debug)]
struct FaultWritable {
    inner: Box<dyn WritableFile>,
    state: Arc<Mutex<FaultState>>,
    path: PathBuf,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match before(&self.state, Class::Write) {
            None => self.inner.append(data),
            Some(FaultKind::NoSpacePartial) => {
                self.inner.append(&data[..data.len() / 2])?;
                Err(injected(FaultKind::NoSpacePartial, "append", &self.path))
            }
            Some(kind) => Err(injected(kind, "append", &self.path)),
        }
    }

    fn sync_data(&mut self) -> Result<()> {
        check(&self.state, Class::Write, "sync_data", &self.path)?;
        self.inner.sync_data()
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        check(&self.state, Class::Write, "set_len", &self.path)?;
        self.inner.set_len(len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    fn setup() -> (MemFs, FaultFs) {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        (mem, fault)
    }

    #[test]
    fn fails_exactly_nth_write_once() {
        let (mem, fs) = setup();
        let path = Path::new("/d/f");
        let mut w = fs.create(path).expect("create"); // write call 1
        fs.fail_at(2, FaultKind::Io, FaultOps::Writes, false);
        w.append(b"one").expect("first counted call passes"); // +1
        let err = w.append(b"two").expect_err("second counted call fails"); // +2
        match &err {
            Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
            other => panic!("expected Io, got {other:?}"),
        }
        assert!(!err.is_no_space());
        assert!(fs.tripped());
        w.append(b"three").expect("once: later calls pass");
        assert_eq!(mem.file_size(path).expect("size"), 8);
        assert_eq!(fs.calls(), 4);
    }

    #[test]
    fn forever_fails_every_later_counted_call_but_not_reads() {
        let (_mem, fs) = setup();
        let path = Path::new("/f");
        let mut w = fs.create(path).expect("create");
        w.append(b"abc").expect("append");
        fs.fail_at(1, FaultKind::NoSpace, FaultOps::Writes, true);
        for _ in 0..3 {
            assert!(w.sync_data().expect_err("forever").is_no_space());
        }
        assert!(fs.rename(path, Path::new("/g")).is_err());
        assert!(fs.create(Path::new("/h")).is_err());
        // Reads are not counted under Writes and still work.
        let r = fs.open_read(path).expect("open_read");
        let mut buf = [0u8; 3];
        r.read_exact_at(0, &mut buf, "f").expect("read");
        assert_eq!(&buf, b"abc");
        assert!(fs.exists(path).expect("exists"));
        fs.clear();
        assert!(!fs.tripped());
        w.sync_data().expect("cleared");
    }

    #[test]
    fn reads_not_counted_under_writes_but_counted_under_all() {
        let (_mem, fs) = setup();
        let path = Path::new("/f");
        fs.create(path).expect("create");
        let writes_before = fs.calls();
        let all_before = fs.calls_of(FaultOps::All);
        let r = fs.open_read(path).expect("open_read");
        let _ = r.read_at(0, &mut [0u8; 4]).expect("read");
        fs.list(Path::new("/")).expect("list");
        fs.file_size(path).expect("size");
        assert_eq!(fs.calls(), writes_before);
        assert_eq!(fs.calls_of(FaultOps::All), all_before + 4);

        fs.fail_at(2, FaultKind::Io, FaultOps::All, false);
        fs.exists(path).expect("1st counted call passes");
        assert!(
            r.read_at(0, &mut [0u8; 4]).is_err(),
            "2nd counted call (a read) fails"
        );
        r.len().expect("3rd passes");
    }

    #[test]
    fn no_space_partial_writes_half_then_fails() {
        let (mem, fs) = setup();
        let path = Path::new("/f");
        let mut w = fs.create(path).expect("create");
        fs.fail_at(1, FaultKind::NoSpacePartial, FaultOps::Writes, false);
        let err = w.append(b"0123456789").expect_err("partial");
        assert!(err.is_no_space());
        assert_eq!(w.len(), 5);
        let r = mem.open_read(path).expect("open");
        let mut buf = [0u8; 5];
        r.read_exact_at(0, &mut buf, "f").expect("read");
        assert_eq!(&buf, b"01234");
        // On a non-append call it is plain ENOSPC.
        fs.fail_at(1, FaultKind::NoSpacePartial, FaultOps::Writes, false);
        assert!(w.sync_data().expect_err("enospc").is_no_space());
    }

    #[test]
    fn crash_recipe_keeps_only_durable_state() {
        use crate::fs::PowerLoss;
        let (mem, fs) = setup();
        let dir = Path::new("/db");
        // Workload: create, append, sync, sync_dir, append, sync = 6 write calls (+mkdir).
        let workload = |fs: &FaultFs| -> Result<()> {
            fs.create_dir_all(dir)?;
            let mut w = fs.create(&dir.join("log"))?;
            w.append(b"first")?;
            w.sync_data()?;
            fs.sync_dir(dir)?;
            w.append(b"second")?;
            w.sync_data()
        };
        workload(&fs).expect("clean run");
        let total = fs.calls();
        assert_eq!(total, 7);
        drop(mem);
        for n in 1..=total {
            let (mem, fs) = setup();
            fs.fail_at(n, FaultKind::Io, FaultOps::Writes, true);
            assert!(workload(&fs).is_err(), "crash at {n}");
            let image = mem.power_loss_image(PowerLoss::DropUnsynced);
            let size = image.file_size(&dir.join("log")).ok();
            let expected = match n {
                1..=5 => None,
                6 | 7 => Some(5),
                _ => unreachable!(),
            };
            assert_eq!(size, expected, "crash at write call {n}");
        }
    }
}
