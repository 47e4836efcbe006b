//! [`FaultFs`]: wraps any [`FileSystem`] and makes a chosen call fail with ENOSPC or EIO.
//!
//! Every call — on the file system and on the handles it returns — is one [`FsOp`], and
//! each op is either a *write* (`create`, `open_append`, `append`, `sync_data`, `set_len`,
//! `zero_fill`, `rename`, `remove`, `sync_dir`, `punch_hole`, `create_dir_all`,
//! `preallocate`) or a *read* (`open_read`,
//! `read_at`, readable `len`, `prefetch`, `list`, `exists`, `file_size`, `lock`). Calls are counted per
//! op from creation; a [`FaultOps`] selects which ops a count covers (writes, all, or a
//! listed few). `WritableFile::len` is infallible and is not counted.
//! `fail_at(n, kind, ops, forever)` makes the n-th call counted under `ops`, counting from
//! the moment of the `fail_at`, fail; with `forever` every later call counted under `ops`
//! fails as well. Calls outside `ops` always pass through.
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
//! One op only — e.g. a failing fdatasync while everything else works:
//! `fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::SyncData]), true)`.
//! `calls_of(FaultOps::Only(&[FsOp::OpenRead]))` counts opens without arming anything, and
//! `record_calls(true)` keeps the order of calls (op and path) for `recorded()`.
//!
//! Thread-safety: `FaultFs` is `Clone`; clones and all wrapped handles share one
//! mutex-protected state, so counting is exact under concurrency (which call is "n-th" is
//! then decided by the interleaving).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{BatchRead, FileLock, FileSystem, ReadableFile, WritableFile};
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
    /// Calls that change the file system ([`FsOp::is_write`]).
    Writes,
    /// Every fallible call, reads included.
    All,
    /// Only the listed ops, e.g. `FaultOps::Only(&[FsOp::Append, FsOp::SetLen])`.
    Only(&'static [FsOp]),
}

impl FaultOps {
    /// Whether calls of `op` are counted (and may fail) under these ops.
    pub fn includes(self, op: FsOp) -> bool {
        match self {
            FaultOps::Writes => op.is_write(),
            FaultOps::All => true,
            FaultOps::Only(ops) => ops.contains(&op),
        }
    }
}

/// One kind of fallible call on a file system or on one of its handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsOp {
    /// `FileSystem::create_dir_all`.
    CreateDirAll,
    /// `FileSystem::create`.
    Create,
    /// `FileSystem::open_append`.
    OpenAppend,
    /// `FileSystem::open_read`.
    OpenRead,
    /// `FileSystem::rename`.
    Rename,
    /// `FileSystem::remove`.
    Remove,
    /// `FileSystem::list`.
    List,
    /// `FileSystem::exists`.
    Exists,
    /// `FileSystem::file_size`.
    FileSize,
    /// `FileSystem::sync_dir`.
    SyncDir,
    /// `FileSystem::punch_hole`.
    PunchHole,
    /// `FileSystem::lock`.
    Lock,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::sync_data`.
    SyncData,
    /// `WritableFile::set_len`.
    SetLen,
    /// `ReadableFile::read_at`.
    ReadAt,
    /// `ReadableFile::len`.
    ReadLen,
    /// `WritableFile::preallocate`.
    Preallocate,
    /// `WritableFile::start_write_back` (a hint: counted under `All` and `Only`, not under
    /// `Writes`, since it changes nothing a crash could observe).
    StartWriteBack,
    /// `WritableFile::zero_fill`.
    ZeroFill,
    /// `ReadableFile::prefetch` (a hint, like `StartWriteBack`).
    Prefetch,
}

impl FsOp {
    /// Every op, in declaration order: `ALL[op as usize] == op`.
    pub const ALL: [FsOp; 21] = [
        FsOp::CreateDirAll,
        FsOp::Create,
        FsOp::OpenAppend,
        FsOp::OpenRead,
        FsOp::Rename,
        FsOp::Remove,
        FsOp::List,
        FsOp::Exists,
        FsOp::FileSize,
        FsOp::SyncDir,
        FsOp::PunchHole,
        FsOp::Lock,
        FsOp::Append,
        FsOp::SyncData,
        FsOp::SetLen,
        FsOp::ReadAt,
        FsOp::ReadLen,
        FsOp::Preallocate,
        FsOp::StartWriteBack,
        FsOp::ZeroFill,
        FsOp::Prefetch,
    ];

    /// Whether the call changes the file system (is counted under [`FaultOps::Writes`]).
    pub fn is_write(self) -> bool {
        match self {
            FsOp::CreateDirAll
            | FsOp::Create
            | FsOp::OpenAppend
            | FsOp::Rename
            | FsOp::Remove
            | FsOp::SyncDir
            | FsOp::PunchHole
            | FsOp::Append
            | FsOp::SyncData
            | FsOp::SetLen
            | FsOp::Preallocate
            | FsOp::ZeroFill => true,
            FsOp::OpenRead
            | FsOp::List
            | FsOp::Exists
            | FsOp::FileSize
            | FsOp::Lock
            | FsOp::ReadAt
            | FsOp::ReadLen
            | FsOp::StartWriteBack
            | FsOp::Prefetch => false,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FsOp::CreateDirAll => "create_dir_all",
            FsOp::Create => "create",
            FsOp::OpenAppend => "open_append",
            FsOp::OpenRead => "open_read",
            FsOp::Rename => "rename",
            FsOp::Remove => "remove",
            FsOp::List => "list",
            FsOp::Exists => "exists",
            FsOp::FileSize => "file_size",
            FsOp::SyncDir => "sync_dir",
            FsOp::PunchHole => "punch_hole",
            FsOp::Lock => "lock",
            FsOp::Append => "append",
            FsOp::SyncData => "sync_data",
            FsOp::SetLen => "set_len",
            FsOp::ReadAt => "read_at",
            FsOp::ReadLen => "len",
            FsOp::Preallocate => "preallocate",
            FsOp::StartWriteBack => "start_write_back",
            FsOp::ZeroFill => "zero_fill",
            FsOp::Prefetch => "prefetch",
        }
    }
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
    /// Calls per op, indexed by `FsOp as usize`.
    calls: [u64; FsOp::ALL.len()],
    plan: Option<Plan>,
    tripped: bool,
    /// `Some` while recording: every counted call, in order.
    record: Option<Vec<(FsOp, PathBuf)>>,
}

impl FaultState {
    fn counter(&self, ops: FaultOps) -> u64 {
        FsOp::ALL
            .iter()
            .filter(|op| ops.includes(**op))
            .map(|&op| self.calls[op as usize])
            .sum()
    }
}

/// Fault-injecting wrapper. Cheap to clone; clones share counters and the armed fault.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    state: Arc<Mutex<FaultState>>,
}

impl FaultFs {
    /// A wrapper over `inner` that injects no fault until told to.
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
        self.calls_of(FaultOps::Writes)
    }

    /// Calls counted under `ops` since creation.
    pub fn calls_of(&self, ops: FaultOps) -> u64 {
        self.state.lock().counter(ops)
    }

    /// Whether an injected fault has fired since creation or the last `clear()`.
    pub fn tripped(&self) -> bool {
        self.state.lock().tripped
    }

    /// `true` starts recording every counted call (discarding an earlier record); `false`
    /// stops recording and discards the record.
    pub fn record_calls(&self, on: bool) {
        self.state.lock().record = on.then(Vec::new);
    }

    /// The calls made since `record_calls(true)`, in order, each with the path it named
    /// (`rename`: the source). A call is recorded when made, whether or not it then fails.
    pub fn recorded(&self) -> Vec<(FsOp, PathBuf)> {
        self.state.lock().record.clone().unwrap_or_default()
    }
}

/// Counts (and records) one call and decides whether it fails. Shared by the fs and its
/// handles.
fn before(state: &Mutex<FaultState>, op: FsOp, path: &Path) -> Option<FaultKind> {
    let mut state = state.lock();
    state.calls[op as usize] += 1;
    if let Some(record) = &mut state.record {
        record.push((op, path.to_path_buf()));
    }
    let plan = state.plan?;
    if !plan.ops.includes(op) {
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

fn injected(kind: FaultKind, op: FsOp, path: &Path) -> Error {
    let errno = match kind {
        FaultKind::NoSpace | FaultKind::NoSpacePartial => libc::ENOSPC,
        FaultKind::Io => libc::EIO,
    };
    Error::io(
        format!("{} {} (injected fault)", op.name(), path.display()),
        io::Error::from_raw_os_error(errno),
    )
}

fn check(state: &Mutex<FaultState>, op: FsOp, path: &Path) -> Result<()> {
    match before(state, op, path) {
        Some(kind) => Err(injected(kind, op, path)),
        None => Ok(()),
    }
}

impl FaultFs {
    fn check(&self, op: FsOp, path: &Path) -> Result<()> {
        check(&self.state, op, path)
    }

    /// A writable handle of the inner file system (`open`), checked as `op` first and
    /// wrapped so its own calls fail as armed.
    fn writable(
        &self,
        op: FsOp,
        path: &Path,
        open: impl FnOnce(&dyn FileSystem) -> Result<Box<dyn WritableFile>>,
    ) -> Result<Box<dyn WritableFile>> {
        self.check(op, path)?;
        Ok(Box::new(FaultWritable {
            inner: open(self.inner.as_ref())?,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(FsOp::CreateDirAll, dir)?;
        self.inner.create_dir_all(dir)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::Create, path, |fs| fs.create(path))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::OpenAppend, path, |fs| fs.open_append(path))
    }

    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::Create, path, |fs| fs.create_direct(path))
    }

    fn open_append_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::OpenAppend, path, |fs| fs.open_append_direct(path))
    }

    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::Create, path, |fs| fs.create_mapped(path))
    }

    fn open_append_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.writable(FsOp::OpenAppend, path, |fs| fs.open_append_mapped(path))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        self.check(FsOp::OpenRead, path)?;
        Ok(Arc::new(FaultReadable {
            inner: self.inner.open_read(path)?,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(FsOp::Rename, from)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.check(FsOp::Remove, path)?;
        self.inner.remove(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check(FsOp::List, dir)?;
        self.inner.list(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.check(FsOp::Exists, path)?;
        self.inner.exists(path)
    }

    fn canonicalize(&self, path: &Path) -> Result<std::path::PathBuf> {
        // Not a counted call: only a checkpoint asks, to compare names, and the call numbers
        // the crash tests cut at stay those of the reads and writes.
        self.inner.canonicalize(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.check(FsOp::FileSize, path)?;
        self.inner.file_size(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(FsOp::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        self.check(FsOp::PunchHole, path)?;
        self.inner.punch_hole(path, offset, len)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(FsOp::Lock, path)?;
        self.inner.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(FsOp::Lock, path)?;
        self.inner.lock_shared(path)
    }

    /// Each read is checked as a `ReadAt` of its file; the others go to the inner file
    /// system's batch, with its own handles (so `PosixFs` keeps them in flight together).
    /// Forwarded, not left to the default: readers batch only where the file system says it
    /// does, and a fault test must meet the paths production takes.
    fn read_batch(&self, reads: &mut [BatchRead<'_>]) -> Vec<Result<usize>> {
        let mut results: Vec<Option<Result<usize>>> = Vec::with_capacity(reads.len());
        let mut passed = Vec::new();
        for read in reads.iter_mut() {
            let fault_file =
                (read.file.as_any()).and_then(|any| any.downcast_ref::<FaultReadable>());
            let Some(fault_file) = fault_file else {
                // Not one of ours (never happens: callers batch this file system's handles).
                results.push(Some(read.file.read_at(read.offset, read.buf)));
                continue;
            };
            match check(&fault_file.state, FsOp::ReadAt, &fault_file.path) {
                Err(e) => results.push(Some(Err(e))),
                Ok(()) => {
                    results.push(None);
                    passed.push(BatchRead {
                        file: fault_file.inner.as_ref(),
                        offset: read.offset,
                        buf: &mut *read.buf,
                    });
                }
            }
        }
        let mut inner_results = self.inner.read_batch(&mut passed).into_iter();
        (results.into_iter())
            .map(|result| match result {
                Some(result) => result,
                // One inner result per read passed on, in order.
                None => inner_results.next().unwrap_or_else(|| {
                    Err(Error::io(
                        "read_batch",
                        io::Error::other("a read went missing"),
                    ))
                }),
            })
            .collect()
    }

    fn batches_reads(&self) -> bool {
        self.inner.batches_reads()
    }

    fn reads_if_cached(&self) -> bool {
        self.inner.reads_if_cached()
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
        check(&self.state, FsOp::ReadAt, &self.path)?;
        self.inner.read_at(offset, buf)
    }

    fn len(&self) -> Result<u64> {
        check(&self.state, FsOp::ReadLen, &self.path)?;
        self.inner.len()
    }

    fn advise_random(&self) {
        self.inner.advise_random();
    }

    fn prefetch(&self, offset: u64, len: u64) -> Result<()> {
        check(&self.state, FsOp::Prefetch, &self.path)?;
        self.inner.prefetch(offset, len)
    }

    /// Forwarded while no fault that counts reads is armed; with one, a miss, so every
    /// read goes through `read_at`, counted and failing as armed (a fault fired here could
    /// only be taken for a miss, and the caller's plain read would succeed).
    fn read_exact_if_cached(&self, offset: u64, buf: &mut [u8]) -> bool {
        let reads_armed = (self.state.lock().plan).is_some_and(|p| p.ops.includes(FsOp::ReadAt));
        !reads_armed && self.inner.read_exact_if_cached(offset, buf)
    }

    /// A hint that reads nothing: not a fault point.
    fn is_cached(&self, offset: u64, len: u64) -> bool {
        self.inner.is_cached(offset, len)
    }

    /// This handle, so [`FaultFs::read_batch`] can check and unwrap it.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[derive(Debug)]
struct FaultWritable {
    inner: Box<dyn WritableFile>,
    state: Arc<Mutex<FaultState>>,
    path: PathBuf,
}

impl FaultWritable {
    /// An append through `write` (the inner file's `append` or `append_to_sync`), failing
    /// as armed.
    fn faulty_append(
        &mut self,
        data: &[u8],
        write: fn(&mut dyn WritableFile, &[u8]) -> Result<()>,
    ) -> Result<()> {
        match before(&self.state, FsOp::Append, &self.path) {
            None => write(self.inner.as_mut(), data),
            Some(FaultKind::NoSpacePartial) => {
                write(self.inner.as_mut(), &data[..data.len() / 2])?;
                Err(injected(
                    FaultKind::NoSpacePartial,
                    FsOp::Append,
                    &self.path,
                ))
            }
            Some(kind) => Err(injected(kind, FsOp::Append, &self.path)),
        }
    }
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.faulty_append(data, |file, data| file.append(data))
    }

    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.faulty_append(data, |file, data| file.append_to_sync(data))
    }

    fn sync_data(&mut self) -> Result<()> {
        check(&self.state, FsOp::SyncData, &self.path)?;
        self.inner.sync_data()
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        check(&self.state, FsOp::SetLen, &self.path)?;
        self.inner.set_len(len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn preallocate(&mut self, up_to: u64) -> Result<()> {
        check(&self.state, FsOp::Preallocate, &self.path)?;
        self.inner.preallocate(up_to)
    }

    fn start_write_back(&mut self, offset: u64, len: u64) -> Result<()> {
        check(&self.state, FsOp::StartWriteBack, &self.path)?;
        self.inner.start_write_back(offset, len)
    }

    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        check(&self.state, FsOp::ZeroFill, &self.path)?;
        self.inner.zero_fill(from, to)
    }
}

#[cfg(test)]
mod tests;
