//! [`PosixFs`]: the real file system, on top of `std::fs` plus the syscalls `std` does not
//! expose (`fallocate(PUNCH_HOLE)`, `posix_fadvise`, positional I/O through `FileExt`). The
//! LOCK file's lock is its own module, `posix_lock`.
//!
//! Invariants:
//! - no user-space buffering: `append` issues the write immediately (callers buffer);
//! - a [`PosixWritable`] writes with `pwrite` at the length it tracks, so after `set_len`
//!   the next append lands at the new end; after a failed write the tracked length is
//!   re-read from the file so it never claims bytes that are not there;
//! - every error is `Error::Io` with context `"<op> <path>"` and the raw OS error kept,
//!   so `Error::is_no_space` sees ENOSPC.
//!
//! Thread-safety: `PosixFs` is stateless. Readable handles use `pread` only and are shared
//! freely; writable handles are single-owner. Two `lock` calls in the same process conflict
//! just as two processes do (see `posix_lock`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
#[cfg(target_os = "linux")]
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(target_os = "linux")]
use super::BatchRead;
use super::{FileLock, FileSystem, ReadableFile, WritableFile};
use crate::error::{Error, Result};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

impl PosixFs {
    /// The operating system's file system.
    pub fn new() -> PosixFs {
        PosixFs
    }
}

fn io_err(op: &str, path: &Path, e: io::Error) -> Error {
    Error::io(format!("{op} {}", path.display()), e)
}

#[cfg(target_os = "linux")]
impl PosixFs {
    /// A direct-write handle on `path` (created and truncated when `create`), or the
    /// buffered one where the file system refuses `O_DIRECT`.
    fn direct_or_buffered(&self, path: &Path, create: bool) -> Result<Box<dyn WritableFile>> {
        match super::direct::DirectWritable::open(path, create) {
            Ok(file) => Ok(Box::new(file)),
            Err(e) if direct_unsupported(&e) && create => self.create(path),
            Err(e) if direct_unsupported(&e) => self.open_append(path),
            Err(e) => Err(e),
        }
    }
}

/// Whether opening with `O_DIRECT` failed because the file system does not support it
/// (tmpfs, some network file systems): then the file is opened buffered instead.
#[cfg(target_os = "linux")]
fn direct_unsupported(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EINVAL))
}

impl FileSystem for PosixFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create_dir_all", dir, e))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io_err("create", path, e))?;
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_path_buf(),
            len: 0,
            zeros_past_len: false,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err("open_append", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| io_err("open_append (stat)", path, e))?
            .len();
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_path_buf(),
            len,
            zeros_past_len: false,
        }))
    }

    #[cfg(target_os = "linux")]
    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.direct_or_buffered(path, true)
    }

    #[cfg(target_os = "linux")]
    fn open_append_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.direct_or_buffered(path, false)
    }

    #[cfg(target_os = "linux")]
    fn create_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(super::mapped::MappedWritable::open(path, true)?))
    }

    #[cfg(target_os = "linux")]
    fn open_append_mapped(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(super::mapped::MappedWritable::open(path, false)?))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn ReadableFile>> {
        let file = File::open(path).map_err(|e| io_err("open_read", path, e))?;
        Ok(Arc::new(PosixReadable {
            file,
            path: path.to_path_buf(),
            no_cached_reads: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to)
            .map_err(|e| Error::io(format!("rename {} -> {}", from.display(), to.display()), e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| io_err("remove", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| io_err("exists", path, e))
    }

    fn canonicalize(&self, path: &Path) -> Result<PathBuf> {
        std::fs::canonicalize(path).map_err(|e| io_err("canonicalize", path, e))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path)
            .map_err(|e| io_err("file_size", path, e))?
            .len())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let handle = File::open(dir).map_err(|e| io_err("sync_dir (open)", dir, e))?;
        handle.sync_all().map_err(|e| io_err("sync_dir", dir, e))
    }

    fn punch_hole(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (Ok(start), Ok(length)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(Error::InvalidArgument(format!(
                "punch_hole {}: range {offset}+{len} exceeds the OS offset type",
                path.display()
            )));
        };
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_err("punch_hole (open)", path, e))?;
        punch_hole_fd(&file, start, length).map_err(|e| io_err("punch_hole", path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        super::posix_lock::lock_exclusive(path)
    }

    #[cfg(target_os = "linux")]
    fn read_batch(&self, reads: &mut [BatchRead<'_>]) -> Vec<Result<usize>> {
        let fds: Option<Vec<_>> = reads
            .iter()
            .map(|read| {
                (read.file.as_any())
                    .and_then(|any| any.downcast_ref::<PosixReadable>())
                    .map(|file| file.file.as_raw_fd())
            })
            .collect();
        // An offset past the OS offset type would reach io_uring as a negative one, which
        // it reads as "at the file position" (0 for a handle only ever read with pread):
        // such a batch goes read by read, where pread refuses it as `read_at` does.
        let offsets_fit = reads.iter().all(|read| i64::try_from(read.offset).is_ok());
        let ring_results = match fds {
            Some(fds) if offsets_fit && super::uring::available() => {
                let mut raw: Vec<super::uring::RawRead<'_>> = (reads.iter_mut().zip(fds))
                    .map(|(read, fd)| super::uring::RawRead {
                        fd,
                        offset: read.offset,
                        buf: &mut *read.buf,
                    })
                    .collect();
                super::uring::read_all(&mut raw)
            }
            // Another file system's handles, or no io_uring: one by one.
            _ => (0..reads.len()).map(|_| None).collect(),
        };
        (reads.iter_mut().zip(ring_results))
            .map(|(read, ring_result)| match ring_result {
                // A full read, or end of file right at the offset.
                Some(Ok(n)) if n == read.buf.len() || n == 0 => Ok(n),
                // A short read: the rest with pread, which stops only at end of file.
                Some(Ok(n)) => {
                    let rest = read
                        .file
                        .read_at(read.offset + n as u64, &mut read.buf[n..])?;
                    Ok(n + rest)
                }
                // Not done by the ring, or failed there: pread reports it with the path
                // (or succeeds, e.g. after an interrupted ring read).
                Some(Err(_)) | None => read.file.read_at(read.offset, read.buf),
            })
            .collect()
    }

    #[cfg(target_os = "linux")]
    fn batches_reads(&self) -> bool {
        super::uring::available()
    }

    fn reads_if_cached(&self) -> bool {
        cfg!(all(target_os = "linux", target_env = "gnu"))
            && !NO_CACHESTAT.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        super::posix_lock::lock_shared(path)
    }
}

#[cfg(target_os = "linux")]
fn punch_hole_fd(file: &File, offset: i64, len: i64) -> io::Result<()> {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: the descriptor is valid while `file` is borrowed; fallocate takes plain
    // integers and does not touch user memory.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn punch_hole_fd(_file: &File, _offset: i64, _len: i64) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
}

/// Set once `cachestat` (Linux 6.5) is found missing: reads are then never tried from the
/// page cache alone.
static NO_CACHESTAT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether every page of `[offset, offset + len)` of `file` is in the page cache, by the
/// `cachestat` system call, which counts them without reading anything. `None`: the call
/// refused this file (or is missing: then it is not made again in this process).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn page_cache_holds(file: &File, offset: u64, len: u64) -> Option<bool> {
    /// The call's number in the table every architecture but alpha and MIPS shares since
    /// Linux 5.1 (the `libc` crate does not name it for x86_64); where it is another call
    /// or none, the answer is an error and page-cache reads are simply not tried.
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Counts {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    if NO_CACHESTAT.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    if len == 0 {
        return Some(false);
    }
    let Some(last) = offset.checked_add(len - 1) else {
        return Some(false);
    };
    let range = Range { off: offset, len };
    let mut counts = Counts::default();
    // SAFETY: the descriptor is valid while `file` is borrowed; `range` and `counts` are
    // live, `#[repr(C)]` structs of the layout the call reads and fills.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut counts as *mut Counts,
            0u32,
        )
    };
    if rc != 0 {
        if io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            NO_CACHESTAT.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // EPERM (newer kernels refuse files the caller could not write), EOPNOTSUPP and
        // the like are this file's answer, not every file's.
        return None;
    }
    let page = page_size();
    Some(counts.nr_cache > last / page - offset / page)
}

/// The system's page size.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn page_size() -> u64 {
    static SIZE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf reads a system constant and touches no memory of ours.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).unwrap_or(4096)
    })
}

/// Whether page-cache reads work for a file in `dir` (a kernel before 6.5, a sandbox
/// that filters `cachestat`, or a file system without `RWF_NOWAIT` makes tests of them
/// moot): a probe file written there reads back through both calls.
#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
pub(crate) fn page_cache_reads_work(dir: &Path) -> bool {
    let path = dir.join("page-cache-probe");
    let written = std::fs::write(&path, [7u8; 4096]);
    let works = written.is_ok() && {
        let fs = PosixFs::new();
        fs.open_read(&path).is_ok_and(|file| {
            file.is_cached(0, 4096) && file.read_exact_if_cached(0, &mut [0u8; 4096])
        })
    };
    let _ = std::fs::remove_file(&path);
    works
}

/// Read handle: `pread` only, so it can be shared by any number of threads.
#[derive(Debug)]
struct PosixReadable {
    file: File,
    path: PathBuf,
    /// This file refused `cachestat` or `RWF_NOWAIT` (a file system without them, a
    /// sandbox): page-cache reads are not tried on it again.
    #[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
    no_cached_reads: std::sync::atomic::AtomicBool,
}

impl ReadableFile for PosixReadable {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read_at", &self.path, e)),
            }
        }
        Ok(done)
    }

    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| io_err("len", &self.path, e))?
            .len())
    }

    /// `preadv2` with `RWF_NOWAIT` (the raw call: glibc has a wrapper only from 2.26):
    /// the kernel copies what its page cache holds and answers `EAGAIN` or a short count
    /// rather than wait. On a miss it may still start reading the missing page, so a
    /// caller asks `is_cached` first. Any answer but the whole buffer is `false`; errors
    /// are left to the waiting read, which reports them.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn read_exact_if_cached(&self, offset: u64, buf: &mut [u8]) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if buf.is_empty() || offset > i64::MAX as u64 || self.no_cached_reads.load(Relaxed) {
            return false;
        }
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // The offset as the call takes it: low and high halves of a long each (on 64-bit
        // targets the low one holds it all and the kernel ignores the high one).
        #[cfg(target_pointer_width = "64")]
        let (low, high) = (offset as libc::c_long, 0 as libc::c_long);
        #[cfg(not(target_pointer_width = "64"))]
        let (low, high) = (
            (offset & 0xffff_ffff) as libc::c_long,
            (offset >> 32) as libc::c_long,
        );
        // SAFETY: `iov` describes `buf`, valid for writes of its whole length while it is
        // borrowed here; the descriptor is valid while `self.file` lives; the other
        // arguments are plain integers.
        let n = unsafe {
            libc::syscall(
                libc::SYS_preadv2,
                self.file.as_raw_fd(),
                &iov as *const libc::iovec,
                1 as libc::c_int,
                low,
                high,
                libc::RWF_NOWAIT,
            )
        };
        if n < 0 {
            let errno = io::Error::last_os_error().raw_os_error();
            if errno != Some(libc::EAGAIN) && errno != Some(libc::EINTR) {
                // EOPNOTSUPP (no `RWF_NOWAIT` here), ENOSYS, …: not tried on this file again.
                self.no_cached_reads.store(true, Relaxed);
            }
            return false;
        }
        usize::try_from(n).is_ok_and(|n| n == buf.len())
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn is_cached(&self, offset: u64, len: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.no_cached_reads.load(Relaxed) {
            return false;
        }
        match page_cache_holds(&self.file, offset, len) {
            Some(cached) => cached,
            None => {
                self.no_cached_reads.store(true, Relaxed);
                false
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn advise_random(&self) {
        // SAFETY: the descriptor is valid while `self.file` lives; posix_fadvise takes plain
        // integers and touches no user memory. Advisory, so its result is ignored.
        let _ =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }

    #[cfg(target_os = "linux")]
    fn prefetch(&self, offset: u64, len: u64) -> Result<()> {
        let (Ok(start), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return Ok(()); // beyond any file's size: nothing to read ahead
        };
        // SAFETY: as in `advise_random`: a valid descriptor and plain integers.
        let rc = unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), start, len, libc::POSIX_FADV_WILLNEED)
        };
        if rc == 0 {
            Ok(())
        } else {
            // posix_fadvise returns the error number instead of setting errno.
            Err(io_err(
                "prefetch",
                &self.path,
                io::Error::from_raw_os_error(rc),
            ))
        }
    }
}

/// Append handle. `len` is where the next append goes.
#[derive(Debug)]
struct PosixWritable {
    file: File,
    path: PathBuf,
    len: u64,
    /// `zero_fill` wrote past `len` since the last `set_len`: the file's size is not the
    /// append position.
    zeros_past_len: bool,
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match self.file.write_all_at(data, self.len) {
            Ok(()) => {
                self.len += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A partial write may have landed (ENOSPC mid-way): re-read the real length
                // so `len()` and later appends agree with the file. Over zero-filled space
                // the size says nothing about it; the caller cuts back with `set_len`.
                if !self.zeros_past_len {
                    if let Ok(meta) = self.file.metadata() {
                        self.len = meta.len();
                    }
                }
                Err(io_err("append", &self.path, e))
            }
        }
    }

    fn sync_data(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| io_err("sync_data", &self.path, e))
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| io_err("set_len", &self.path, e))?;
        self.len = len;
        self.zeros_past_len = false;
        Ok(())
    }

    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        zero_fill_starts_past(&self.path, from, self.len)?;
        self.zeros_past_len = true;
        write_zeros(&self.file, &self.path, from, to)?;
        Ok(true)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, up_to: u64) -> Result<()> {
        preallocate(&self.file, &self.path, self.len, up_to)
    }

    #[cfg(target_os = "linux")]
    fn start_write_back(&mut self, offset: u64, len: u64) -> Result<()> {
        start_write_back(&self.file, &self.path, offset, len)
    }
}

/// `zero_fill`'s precondition: the zeros start at or past the append position `len`.
pub(super) fn zero_fill_starts_past(path: &Path, from: u64, len: u64) -> Result<()> {
    if from < len {
        return Err(Error::InvalidArgument(format!(
            "zero_fill {}: {from} lies before the append position {len}",
            path.display()
        )));
    }
    Ok(())
}

/// Writes zeros to `[from, to)` of `file` (for `zero_fill`).
pub(super) fn write_zeros(file: &File, path: &Path, from: u64, to: u64) -> Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..n], at)
            .map_err(|e| io_err("zero_fill", path, e))?;
        at += n as u64;
    }
    Ok(())
}

/// Asks the OS to start writing `len` bytes at `offset` of `file` to the device
/// (`sync_file_range`), without waiting (for `start_write_back`).
#[cfg(target_os = "linux")]
pub(super) fn start_write_back(file: &File, path: &Path, offset: u64, len: u64) -> Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(Error::InvalidArgument(format!(
            "start_write_back {}: range exceeds the OS offset type",
            path.display()
        )));
    };
    // SAFETY: the descriptor is valid while `file` is borrowed; sync_file_range takes plain
    // integers and touches no memory of ours. SYNC_FILE_RANGE_WRITE only starts write-back
    // of dirty pages in the range; it does not wait for it.
    let rc = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io_err("start_write_back", path, io::Error::last_os_error()))
    }
}

/// Reserves space for a file of `len` bytes to grow to `up_to` without changing its size
/// (`fallocate` with KEEP_SIZE); Ok without reserving where the file system cannot.
#[cfg(target_os = "linux")]
pub(super) fn preallocate(file: &File, path: &Path, len: u64, up_to: u64) -> Result<()> {
    if up_to <= len {
        return Ok(());
    }
    let (Ok(start), Ok(length)) = (i64::try_from(len), i64::try_from(up_to - len)) else {
        return Err(Error::InvalidArgument(format!(
            "preallocate {}: {up_to} bytes exceed the OS offset type",
            path.display()
        )));
    };
    let e = loop {
        // SAFETY: the descriptor is valid while `file` is borrowed; fallocate takes plain
        // integers and touches no memory of ours.
        let rc =
            unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, start, length) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        // tmpfs's fallocate returns EINTR whenever a signal is pending, even with
        // SA_RESTART: a profiler's signal must not fail a write group.
        if e.kind() != io::ErrorKind::Interrupted {
            break e;
        }
    };
    match e.raw_os_error() {
        // No reservation on this file system: appends then find out about space late,
        // as they would without this call.
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(io_err("preallocate", path, e)),
    }
}

/// Elsewhere than Linux no space is reserved (there is no `fallocate` with KEEP_SIZE):
/// appends find out about space when they are made, as on a file system that cannot
/// reserve.
#[cfg(not(target_os = "linux"))]
pub(super) fn preallocate(_file: &File, _path: &Path, _len: u64, _up_to: u64) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_exact_if_cached` copies what the page cache holds and refuses the rest: bytes
    /// just written read back; a read past the end, or of pages dropped from the cache, is
    /// `false` (it never waits for the device), until a plain read brings them back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn reads_if_cached_take_only_what_the_page_cache_holds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let fs = PosixFs::new();
        if !page_cache_reads_work(dir.path()) {
            eprintln!("skipped: cachestat or RWF_NOWAIT does not answer here");
            return;
        }
        assert!(fs.reads_if_cached());
        let data: Vec<u8> = (0..64u32 << 10).map(|i| (i * 7) as u8).collect();
        let mut w = fs.create(&path).expect("create");
        w.append(&data).expect("append");
        w.sync_data().expect("sync");
        let r = fs.open_read(&path).expect("open");
        let mut buf = vec![0u8; 10_000];
        assert!(r.is_cached(5000, 10_000));
        assert!(r.read_exact_if_cached(5000, &mut buf));
        assert_eq!(buf, data[5000..15_000]);
        let mut past_end = vec![0u8; 100];
        assert!(!r.read_exact_if_cached((64 << 10) - 50, &mut past_end));

        let file = File::open(&path).expect("open");
        let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
        // SAFETY: a valid descriptor and a buffer of the type fstatfs fills, read only
        // after it reported success.
        let on_tmpfs = unsafe { libc::fstatfs(file.as_raw_fd(), stat.as_mut_ptr()) } == 0
            // SAFETY: fstatfs succeeded, so the struct is initialised.
            && unsafe { stat.assume_init() }.f_type == libc::TMPFS_MAGIC;
        if on_tmpfs {
            return; // tmpfs pages are the file: they cannot leave the cache.
        }
        // SAFETY: a valid descriptor and plain integers; advisory. The pages are clean
        // (synced), so the kernel drops them.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert!(!r.is_cached(5000, 10_000), "dropped pages are not counted");
        assert!(!r.is_cached(0, 1));
        r.read_exact_at(5000, &mut buf, "f").expect("read");
        assert!(r.is_cached(5000, 10_000));
        assert!(r.read_exact_if_cached(5000, &mut buf));
        assert_eq!(buf, data[5000..15_000]);
    }

    #[test]
    fn second_lock_in_same_process_conflicts_until_first_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("LOCK");
        let fs = PosixFs::new();
        let guard = fs.lock(&path).expect("first lock");
        match fs.lock(&path) {
            Err(Error::Locked(p)) => assert!(p.ends_with("LOCK")),
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(guard);
        let _again = fs.lock(&path).expect("lock after release");
        assert_eq!(fs.file_size(&path).expect("size"), 0, "LOCK stays empty");
    }

    #[test]
    fn appends_overwrite_zero_filled_space_and_set_len_cuts_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let fs = PosixFs::new();
        let mut w = fs.create(&path).expect("create");
        w.append(b"head").expect("append");
        assert!(w.zero_fill(4, 200_000).expect("zero fill"));
        assert_eq!(w.len(), 4, "the append position stays");
        assert_eq!(fs.file_size(&path).expect("size"), 200_000);
        assert!(w.zero_fill(2, 10).is_err(), "never over appended bytes");
        w.append(b"tail").expect("append");
        w.sync_data().expect("sync");
        let mut back = vec![1u8; 12];
        fs.open_read(&path)
            .expect("open")
            .read_exact_at(0, &mut back, "f")
            .expect("read");
        assert_eq!(&back, b"headtail\0\0\0\0");
        w.set_len(w.len()).expect("cut");
        assert_eq!(fs.file_size(&path).expect("size"), 8);
        w.append(b"!").expect("append");
        assert_eq!(fs.file_size(&path).expect("size"), 9);
    }

    #[test]
    fn prefetch_accepts_any_range_and_leaves_reads_as_they_were() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let fs = PosixFs::new();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut w = fs.create(&path).expect("create");
        w.append(&data).expect("append");
        w.sync_data().expect("sync");
        let file = fs.open_read(&path).expect("open");
        file.prefetch(0, data.len() as u64).expect("the whole file");
        file.prefetch(4096, 1 << 40).expect("past the end");
        file.prefetch(u64::MAX - 10, 10).expect("beyond any offset");
        let mut back = vec![0u8; data.len()];
        file.read_exact_at(0, &mut back, "f").expect("read");
        assert!(back == data, "reads after a prefetch see the file's bytes");
    }

    #[test]
    fn started_write_back_leaves_the_data_and_length_as_they_were() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let fs = PosixFs::new();
        let mut w = fs.create(&path).expect("create");
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        w.append(&data).expect("append");
        w.start_write_back(0, 2 * 4096).expect("first part");
        w.start_write_back(2 * 4096, 4096).expect("the rest");
        w.sync_data().expect("sync");
        assert_eq!(w.len(), data.len() as u64);
        let mut back = vec![0u8; data.len()];
        fs.open_read(&path)
            .expect("open")
            .read_exact_at(0, &mut back, "f")
            .expect("read");
        assert_eq!(back, data);
    }

    /// A batch reads what `read_at` reads, request by request: more requests than one ring
    /// holds, reads running past the end (short) and starting at it (0 bytes), and a handle
    /// of another file system in the batch (then read one by one).
    #[test]
    fn read_batch_reads_what_read_at_reads() {
        use crate::fs::BatchRead;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data");
        let contents: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(&path, &contents).expect("write");
        let fs = PosixFs::new();
        let file = fs.open_read(&path).expect("open");
        let mem = crate::fs::MemFs::new();
        let mem_path = Path::new("/other");
        let mut w = mem.create(mem_path).expect("create");
        w.append(b"from another file system").expect("append");
        let other = mem.open_read(mem_path).expect("open other");
        let len = contents.len() as u64;
        // (offset, length): inside, across the end, at the end, past it, empty.
        let mut requests: Vec<(u64, usize)> = (0..150u64)
            .map(|i| ((i * 1_999) % (len - 5_000), 1 + (i as usize * 37) % 4_096))
            .collect();
        requests.extend([(len - 10, 100), (len, 10), (len + 50, 10), (5, 0)]);
        for with_other in [false, true] {
            let mut bufs: Vec<Vec<u8>> = requests.iter().map(|&(_, n)| vec![0xAA; n]).collect();
            let mut batch: Vec<BatchRead<'_>> = (requests.iter().zip(bufs.iter_mut()))
                .map(|(&(offset, _), buf)| BatchRead {
                    file: &*file,
                    offset,
                    buf: buf.as_mut_slice(),
                })
                .collect();
            let mut other_buf = [0u8; 7];
            if with_other {
                batch.push(BatchRead {
                    file: &*other,
                    offset: 5,
                    buf: &mut other_buf,
                });
            }
            let results = fs.read_batch(&mut batch);
            drop(batch);
            assert_eq!(results.len(), requests.len() + usize::from(with_other));
            for ((&(offset, n), buf), result) in requests.iter().zip(&bufs).zip(&results) {
                let mut want = vec![0xAA; n];
                let want_n = file.read_at(offset, &mut want).expect("read_at");
                assert_eq!(*result.as_ref().expect("batch read"), want_n, "at {offset}");
                assert_eq!(buf, &want, "at {offset}");
            }
            if with_other {
                assert_eq!(
                    *results
                        .last()
                        .expect("one result per read")
                        .as_ref()
                        .expect("other"),
                    7
                );
                assert_eq!(&other_buf, b"another");
            }
        }
        // Defect (review): an offset past `i64::MAX` went to io_uring as -1, "at the file
        // position", and returned the file's first bytes where `read_at` refuses.
        let mut far = [0u8; 10];
        let mut near = [0u8; 10];
        let mut batch = [
            BatchRead {
                file: &*file,
                offset: 0,
                buf: &mut near,
            },
            BatchRead {
                file: &*file,
                offset: u64::MAX,
                buf: &mut far,
            },
        ];
        let results = fs.read_batch(&mut batch);
        assert_eq!(*results[0].as_ref().expect("a read at 0"), 10);
        assert!(file.read_at(u64::MAX, &mut [0u8; 10]).is_err());
        assert!(results[1].is_err(), "{:?}", results[1]);
        eprintln!("io_uring batches here: {}", fs.batches_reads());
    }

    #[test]
    fn errors_keep_context_and_os_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let err = PosixFs::new()
            .open_read(&missing)
            .expect_err("missing file");
        match &err {
            Error::Io { context, source } => {
                assert!(context.starts_with("open_read "), "{context}");
                assert!(context.ends_with("missing"), "{context}");
                assert_eq!(source.raw_os_error(), Some(libc::ENOENT));
            }
            other => panic!("expected Io, got {other:?}"),
        }
        assert!(!err.is_no_space());
    }

    #[test]
    fn failed_append_does_not_advance_len() {
        // /dev/full fails every write with ENOSPC: the error must say so.
        let fs = PosixFs::new();
        let Ok(mut w) = fs.open_append(Path::new("/dev/full")) else {
            return; // not available in this environment
        };
        let err = w.append(b"abc").expect_err("/dev/full rejects writes");
        assert!(err.is_no_space(), "{err}");
        assert_eq!(w.len(), 0);
    }
}
