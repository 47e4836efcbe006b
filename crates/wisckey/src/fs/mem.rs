//! [`MemFs`]: an in-memory [`FileSystem`] that tracks durability, so tests can simulate a
//! power loss with [`MemFs::power_loss_image`].
//!
//! Model:
//! - a file is an [`Inode`] shared (`Arc`) by the directory entries naming it and by every
//!   open handle, so appends are visible to readers at once and a removed file stays
//!   readable through handles opened before;
//! - each inode has live `data` and `durable` bytes. `dirty_from` is the lowest offset whose
//!   live byte may differ from the durable one (or `data.len()` when none does);
//!   `sync_data` copies `data[dirty_from..]` over `durable` — cost proportional to what
//!   changed, not to the file;
//! - the namespace has a `live` map path -> inode and a `durable` map path -> inode.
//!   `sync_dir(dir)` replaces the durable entries directly in `dir` by the live ones;
//! - directories are implicit (any ancestor of a file exists) or explicit (recorded by
//!   `create_dir_all`). Files may be created in any directory. Directories themselves are
//!   treated as durable as soon as they exist (the engine creates its directory once, at
//!   open; this is a deliberate simplification).
//!
//! Thread-safety: `MemFs` is `Clone`; clones share the same state behind an `Arc`. The
//! namespace and each inode have their own mutex; the namespace lock is always taken
//! before an inode lock, never the reverse.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, ReadableFile, WritableFile};
use crate::error::{Error, Result};

mod power_loss;

pub use power_loss::PowerLoss;

/// In-memory file system with durability tracking. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<Namespace>>,
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Debug, Default)]
struct Namespace {
    live: BTreeMap<PathBuf, InodeRef>,
    durable: BTreeMap<PathBuf, InodeRef>,
    /// Directory operations since their directory was last synced, in order: a power cut
    /// may keep or lose each one (`PowerLoss::TornTail`).
    pending: Vec<DirOp>,
    dirs: BTreeSet<PathBuf>,
    locks: HashSet<PathBuf>,
}

/// A directory operation not yet made durable by `sync_dir`.
#[derive(Debug, Clone)]
enum DirOp {
    /// A new name for a file (a `create` of a new name, or the LOCK file).
    Link(PathBuf, InodeRef),
    Unlink(PathBuf),
    /// Atomic: after a power cut the file has its old name or its new one, never both
    /// and never neither. Syncing either directory makes a rename across two durable
    /// whole, as a journalling file system (ext4, XFS) commits it in one transaction.
    Rename(PathBuf, PathBuf, InodeRef),
}

impl DirOp {
    /// Whether syncing `dir` makes the operation durable.
    fn synced_by(&self, dir: &Path) -> bool {
        match self {
            DirOp::Link(path, _) | DirOp::Unlink(path) => parent_of(path) == dir,
            DirOp::Rename(from, to, _) => parent_of(from) == dir || parent_of(to) == dir,
        }
    }
}

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    dirty_from: usize,
}

impl std::fmt::Debug for Inode {
    // Lengths only: printing whole file contents would drown any log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inode")
            .field("len", &self.data.len())
            .field("durable_len", &self.durable.len())
            .field("dirty_from", &self.dirty_from)
            .finish()
    }
}

impl Inode {
    fn with_durable(bytes: Vec<u8>) -> Inode {
        Inode {
            dirty_from: bytes.len(),
            data: bytes.clone(),
            durable: bytes,
        }
    }

    fn mark_dirty(&mut self, offset: usize) {
        self.dirty_from = self.dirty_from.min(offset);
    }

    fn resize(&mut self, len: usize) {
        self.mark_dirty(len.min(self.data.len()));
        self.data.resize(len, 0);
    }

    fn sync(&mut self) {
        let from = self.dirty_from.min(self.data.len());
        self.durable.truncate(from);
        self.durable.extend_from_slice(&self.data[from..]);
        self.dirty_from = self.data.len();
    }
}

fn os_err(op: &str, path: &Path, errno: i32) -> Error {
    Error::io(
        format!("{op} {}", path.display()),
        io::Error::from_raw_os_error(errno),
    )
}

fn to_usize(value: u64, op: &str, path: &Path) -> Result<usize> {
    usize::try_from(value).map_err(|_| os_err(op, path, libc::EFBIG))
}

fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

impl Namespace {
    fn file(&self, op: &str, path: &Path) -> Result<InodeRef> {
        self.live
            .get(path)
            .cloned()
            .ok_or_else(|| os_err(op, path, libc::ENOENT))
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        self.dirs.contains(dir) || self.live.keys().any(|p| p.starts_with(dir) && p != dir)
    }
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// Paths of all live files, sorted.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.state.lock().live.keys().cloned().collect()
    }

    /// A copy of the live bytes of the file at `path`; `None` if there is no such file.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let inode = self.state.lock().live.get(path).cloned()?;
        let bytes = inode.lock().data.clone();
        Some(bytes)
    }

    /// Replaces the bytes of the file at `path` (creating it), as `create` + `append` +
    /// `sync_data` would: the bytes are durable, a new directory entry is not until
    /// `sync_dir`. Handles already open on the file see the new bytes. For tests that
    /// damage or forge files.
    pub fn set_contents(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut file = self.create(path)?;
        file.append(bytes)?;
        file.sync_data()
    }

    /// Sum of the live lengths of all live files.
    pub fn total_bytes(&self) -> u64 {
        let ns = self.state.lock();
        ns.live.values().map(|f| f.lock().data.len() as u64).sum()
    }

    /// A new, independent `MemFs` holding what would survive a power loss now: the durable
    /// namespace, each file holding its durable bytes (plus, for `TornTail`, part of the
    /// unsynced bytes). No locks are held in the image.
    pub fn power_loss_image(&self, mode: PowerLoss) -> MemFs {
        let ns = self.state.lock();
        let mut rng = power_loss::SplitMix64::new(mode.seed());
        let mut image = Namespace {
            dirs: ns.dirs.clone(),
            ..Namespace::default()
        };
        // One image inode per inode, however many names it ends up with.
        let mut survivors: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        let mut survivor = |inode: &InodeRef, rng: &mut power_loss::SplitMix64| {
            Arc::clone(survivors.entry(Arc::as_ptr(inode)).or_insert_with(|| {
                let inode = inode.lock();
                let bytes = power_loss::surviving_bytes(
                    &inode.durable,
                    &inode.data,
                    inode.dirty_from,
                    mode,
                    rng,
                );
                Arc::new(Mutex::new(Inode::with_durable(bytes)))
            }))
        };
        for (path, inode) in &ns.durable {
            let kept = survivor(inode, &mut rng);
            image.live.insert(path.clone(), kept);
        }
        if matches!(mode, PowerLoss::TornTail { .. }) {
            for op in &ns.pending {
                if rng.next_u64() % 2 == 0 {
                    continue;
                }
                match op {
                    DirOp::Link(path, inode) => {
                        let kept = survivor(inode, &mut rng);
                        image.live.insert(path.clone(), kept);
                    }
                    DirOp::Unlink(path) => {
                        image.live.remove(path);
                    }
                    DirOp::Rename(from, to, inode) => {
                        image.live.remove(from);
                        let kept = survivor(inode, &mut rng);
                        image.live.insert(to.clone(), kept);
                    }
                }
            }
        }
        image.durable = image.live.clone();
        MemFs {
            state: Arc::new(Mutex::new(image)),
        }
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut ns = self.state.lock();
        for ancestor in dir.ancestors() {
            if ns.live.contains_key(ancestor) {
                return Err(os_err("create_dir_all", dir, libc::ENOTDIR));
            }
        }
        for ancestor in dir.ancestors() {
            if !ancestor.as_os_str().is_empty() {
                ns.dirs.insert(ancestor.to_path_buf());
            }
        }
        Ok(())
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut ns = self.state.lock();
        if ns.dirs.contains(path) {
            return Err(os_err("create", path, libc::EISDIR));
        }
        // Like O_TRUNC: an existing file keeps its inode (and its durable bytes until the
        // next sync); only a new name gets a new inode.
        let inode = match ns.live.get(path) {
            Some(existing) => {
                existing.lock().resize(0);
                Arc::clone(existing)
            }
            None => {
                let fresh = InodeRef::default();
                ns.live.insert(path.to_path_buf(), Arc::clone(&fresh));
                (ns.pending).push(DirOp::Link(path.to_path_buf(), Arc::clone(&fresh)));
                fresh
            }
        };
        Ok(Box::new(MemWritable {
            inode,
            path: path.to_path_buf(),
            append_at: None,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inode = self.state.lock().file("open_append", path)?;
        Ok(Box::new(MemWritable {
            inode,
            path: path.to_path_buf(),
            append_at: None,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        let inode = self.state.lock().file("open_read", path)?;
        Ok(Arc::new(MemReadable {
            inode,
            path: path.to_path_buf(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut ns = self.state.lock();
        let inode = ns.file("rename", from)?;
        if ns.dirs.contains(to) {
            return Err(os_err("rename", to, libc::EISDIR));
        }
        ns.live.remove(from);
        ns.live.insert(to.to_path_buf(), Arc::clone(&inode));
        (ns.pending).push(DirOp::Rename(from.to_path_buf(), to.to_path_buf(), inode));
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut ns = self.state.lock();
        match ns.live.remove(path) {
            Some(_) => {
                ns.pending.push(DirOp::Unlink(path.to_path_buf()));
                Ok(())
            }
            None => Err(os_err("remove", path, libc::ENOENT)),
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let ns = self.state.lock();
        if !ns.dir_exists(dir) {
            return Err(os_err("list", dir, libc::ENOENT));
        }
        let mut names = BTreeSet::new();
        let paths = ns.live.keys().chain(ns.dirs.iter());
        for path in paths {
            // The first component below `dir` is a direct entry: a file, or a directory
            // (explicit or implied by a deeper file).
            if let Ok(rest) = path.strip_prefix(dir) {
                if let Some(first) = rest.components().next() {
                    names.insert(first.as_os_str().to_string_lossy().into_owned());
                }
            }
        }
        Ok(names.into_iter().collect())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let ns = self.state.lock();
        Ok(ns.live.contains_key(path) || ns.dir_exists(path))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let inode = self.state.lock().file("file_size", path)?;
        let len = inode.lock().data.len() as u64;
        Ok(len)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut ns = self.state.lock();
        if !ns.dir_exists(dir) {
            return Err(os_err("sync_dir", dir, libc::ENOENT));
        }
        // A rename between this directory and another is durable on both sides now: the
        // other directory's durable entries change with it (copying only this directory's
        // entries left the file under both names, or neither, after a power cut).
        let crossing: Vec<(PathBuf, PathBuf, InodeRef)> = (ns.pending.iter())
            .filter_map(|op| match op {
                DirOp::Rename(from, to, inode) if op.synced_by(dir) => {
                    Some((from.clone(), to.clone(), Arc::clone(inode)))
                }
                _ => None,
            })
            .collect();
        for (from, to, inode) in crossing {
            ns.durable.remove(&from);
            ns.durable.insert(to, inode);
        }
        ns.durable.retain(|path, _| parent_of(path) != dir);
        let entries: Vec<(PathBuf, InodeRef)> = ns
            .live
            .iter()
            .filter(|(path, _)| parent_of(path) == dir)
            .map(|(path, inode)| (path.clone(), Arc::clone(inode)))
            .collect();
        ns.durable.extend(entries);
        // Also durable now: what made the renamed file's old name (a pending link or
        // unlink of it before the rename), or an image could bring that name back.
        let renamed_at: Vec<(usize, PathBuf)> = (ns.pending.iter().enumerate())
            .filter_map(|(at, op)| match op {
                DirOp::Rename(from, ..) if op.synced_by(dir) => Some((at, from.clone())),
                _ => None,
            })
            .collect();
        let mut at = 0;
        ns.pending.retain(|op| {
            let this = at;
            at += 1;
            let superseded = match op {
                DirOp::Link(path, _) | DirOp::Unlink(path) => {
                    (renamed_at.iter()).any(|(rename_at, from)| this < *rename_at && path == from)
                }
                DirOp::Rename(..) => false,
            };
            !superseded && !op.synced_by(dir)
        });
        Ok(())
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        let inode = self.state.lock().file("punch_hole", path)?;
        let mut inode = inode.lock();
        let size = inode.data.len() as u64;
        let start = offset.min(size);
        let end = offset.saturating_add(len).min(size);
        if start < end {
            // Both bounds are <= data.len(), which is a usize.
            let (start, end) = (start as usize, end as usize);
            inode.data[start..end].fill(0);
            // A real file system may keep or lose a punch at a power cut, and nothing else
            // in the file changes either way. Modelled as kept at once: the harder case for
            // a reader that should not be reading the range.
            let durable_end = end.min(inode.durable.len());
            if start < durable_end {
                inode.durable[start..durable_end].fill(0);
            }
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut ns = self.state.lock();
        if ns.locks.contains(path) {
            return Err(Error::Locked(path.display().to_string()));
        }
        if !ns.live.contains_key(path) {
            let fresh = InodeRef::default();
            ns.live.insert(path.to_path_buf(), Arc::clone(&fresh));
            ns.pending.push(DirOp::Link(path.to_path_buf(), fresh));
        }
        ns.locks.insert(path.to_path_buf());
        Ok(Box::new(MemLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }
}

struct MemReadable {
    inode: InodeRef,
    path: PathBuf,
}

impl std::fmt::Debug for MemReadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemReadable")
            .field("path", &self.path)
            .field("inode", &self.inode)
            .finish()
    }
}

impl ReadableFile for MemReadable {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.inode.lock();
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        if start >= inode.data.len() {
            return Ok(0);
        }
        let n = buf.len().min(inode.data.len() - start);
        buf[..n].copy_from_slice(&inode.data[start..start + n]);
        Ok(n)
    }

    fn len(&self) -> Result<u64> {
        Ok(self.inode.lock().data.len() as u64)
    }
}

#[derive(Debug)]
struct MemWritable {
    inode: InodeRef,
    path: PathBuf,
    /// Where appends go once `zero_fill` wrote past it (`None`: at the file's end).
    append_at: Option<usize>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut inode = self.inode.lock();
        let at = self.append_at.unwrap_or(inode.data.len());
        let Some(end) = at.checked_add(data.len()) else {
            return Err(os_err("append", &self.path, libc::EFBIG));
        };
        inode.mark_dirty(at);
        if inode.data.len() < end {
            inode.data.resize(end, 0);
        }
        inode.data[at..end].copy_from_slice(data);
        if let Some(pos) = self.append_at.as_mut() {
            *pos = end;
        }
        Ok(())
    }

    fn sync_data(&mut self) -> Result<()> {
        self.inode.lock().sync();
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        let len = to_usize(len, "set_len", &self.path)?;
        self.inode.lock().resize(len);
        self.append_at = None;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.append_at
            .unwrap_or_else(|| self.inode.lock().data.len()) as u64
    }

    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        let from = to_usize(from, "zero_fill", &self.path)?;
        let to = to_usize(to, "zero_fill", &self.path)?;
        let mut inode = self.inode.lock();
        let at = self.append_at.unwrap_or(inode.data.len());
        if from < at {
            return Err(os_err("zero_fill", &self.path, libc::EINVAL));
        }
        if to > from {
            inode.mark_dirty(from);
            if inode.data.len() < to {
                inode.data.resize(to, 0);
            }
            inode.data[from..to].fill(0);
        }
        self.append_at = Some(at);
        Ok(true)
    }

    fn preallocate(&mut self, _up_to: u64) -> Result<()> {
        // Memory has no block allocator to reserve from; FaultFs injects ENOSPC here.
        Ok(())
    }
}

#[derive(Debug)]
struct MemLock {
    state: Arc<Mutex<Namespace>>,
    path: PathBuf,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

#[cfg(test)]
mod tests;
