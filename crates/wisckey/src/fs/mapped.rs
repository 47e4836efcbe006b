//! [`MappedWritable`]: an append-only file whose small appends are memory copies into a
//! shared mapping of the file. What it is for: writes that must reach the OS one by one
//! (the value log with `write_through_to_os`) cost a `pwrite` each, and on a small record
//! the kernel's write path (page-cache lookup, block reservation, size update) is most of
//! a put. A copy into a mapped page that is already writable reaches the same page cache,
//! so it survives the process being killed just as a `pwrite` does, for a tenth of the
//! time (`docs/BENCHMARKS.md`). Making pages writable (the page fault) is the expensive
//! part; a helper thread does it ahead of the writer (`MADV_POPULATE_WRITE`), on another
//! core.
//!
//! Invariants:
//! - the file's size runs ahead of the append position `len` by zeros (blocks allocated
//!   with `fallocate`, so a copy into them never needs space the disk does not have, and
//!   is never past the end of the file, which would be a `SIGBUS`); recovery reads them as
//!   the log's torn tail, and [`MappedWritable::set_len`] cuts them off (the value-log
//!   writer does so when a segment is finished);
//! - after an `append` returns, its bytes are in the page cache: readers reading the file
//!   through their own handles see them, and `sync_data` (`fdatasync`, which writes back
//!   pages dirtied through a mapping too) makes them durable;
//! - the mapping is only changed (unmapped, replaced) with `map_lock` held, which the
//!   helper holds across each `madvise`, so it never touches an unmapped range;
//! - pages wholly behind the writer do not stay mapped (they are unmapped every few MiB
//!   and before `start_write_back`): write-back of a mapped page write-protects it with a
//!   TLB flush on every core, measured as most of the writer's time before this rule;
//! - anything the mapped path cannot do or should not (an append over 8 KiB, one into the
//!   file's first page, one a sync follows (`append_to_sync`), a file system not known to
//!   allocate for good with `fallocate`, a failed `mmap`) is done with `pwrite`, which
//!   writes the same page cache. The first page
//!   holds a segment's header: a segment of nothing else keeps its size, so a database
//!   whose creation was cut short is still recognised as such by the next open.
//!
//! Linux only (`MADV_POPULATE_WRITE` and `fallocate`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::WritableFile;
use crate::error::{Error, Result};

const PAGE: u64 = 4096;
/// Mapped at a time: remapping (an `munmap`/`mmap` pair) happens once per this many bytes.
const WINDOW: u64 = 64 << 20;
/// How far the file's size (allocated zeros) is kept ahead of the append position: the
/// helper makes these pages writable before the writer gets there.
const SIZE_AHEAD: u64 = 2 << 20;
/// Mapped pages wholly behind the writer are unmapped once there are this many of them
/// (and before every `start_write_back`): the kernel's write-back of a page that is still
/// mapped write-protects it, a TLB flush on every core the process ran on (an interrupt to
/// each, costly in a VM), where one `munmap` flushes a whole range at once.
const UNMAP_BEHIND: u64 = 4 << 20;
/// Appends larger than this go through `pwrite`: the mapping pays off on small appends
/// only. A copy needs its pages made writable first, one fault each, which costs more than
/// `pwrite`'s own page handling once an append spans pages and the helper cannot keep
/// ahead: in a first build that mapped appends up to 256 KiB, write-through puts of 4 KiB
/// values ran 1.17–1.40× faster mapped, of 16 KiB 0.76–0.81× and of 64 KiB 0.43–0.55×
/// (`docs/BENCHMARKS.md`).
const LARGEST_MAPPED_APPEND: usize = 8 << 10;
/// Pages made writable by one `madvise` of the helper. It holds `map_lock` meanwhile, which
/// the writer waits for only when it remaps, cuts the file or hints write-back (once per
/// MiB or so).
const POPULATE_STEP: u64 = 32 << 10;
/// How long an idle helper sleeps before it looks again without being woken: the writer
/// wakes it only when it can do so without waiting for the lock, so a wake-up can be lost.
const HELPER_IDLE_CHECK: Duration = Duration::from_millis(50);
/// File systems (`statfs` `f_type`) whose `fallocate` allocates blocks that a write into
/// them cannot then fail to get: ext2/3/4, XFS, tmpfs. Elsewhere (btrfs and ZFS reserve
/// nothing for good, copy-on-write) a copy into a mapped page could meet a full disk as a
/// `SIGBUS`, so the mapped path is not taken.
const MAPPABLE_FILE_SYSTEMS: [i64; 3] = [0xEF53, 0x5846_5342, 0x0102_1994];

/// The mapped range of the file: `len` bytes from file offset `start`, at address `base`.
#[derive(Debug, Clone, Copy)]
struct Window {
    base: usize,
    start: u64,
    len: u64,
}

/// What the writer and its helper share.
#[derive(Debug)]
struct Shared {
    map_lock: Mutex<MapState>,
    wake: Condvar,
    /// The append position, so the helper never populates pages behind the writer.
    len: AtomicU64,
    /// The file's size: the helper populates up to it and no further.
    size: AtomicU64,
}

#[derive(Debug)]
struct MapState {
    window: Option<Window>,
    /// The helper has been over the pages before this offset (or they lie behind the
    /// writer); write-back may have made some read-only again since.
    populated_to: u64,
    stop: bool,
}

/// An append handle writing through a shared mapping. See the module docs.
#[derive(Debug)]
pub(super) struct MappedWritable {
    file: File,
    path: PathBuf,
    len: u64,
    /// The file's size: `len` and the zeros past it.
    size: u64,
    /// The writer's copy of the mapped window (the shared one changes only with it).
    window: Option<Window>,
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
    /// Set when `fallocate` or `mmap` is refused: every later append uses `pwrite`.
    unmappable: bool,
}

fn io_err(op: &str, path: &Path, e: io::Error) -> Error {
    Error::io(format!("{op} {}", path.display()), e)
}

/// Whether the system's pages are `bytes` long. The window arithmetic (`mmap` offsets,
/// `munmap` lengths) assumes `PAGE`: with 16 or 64 KiB pages an unmap would take the page
/// being written too, so there every append is a `pwrite`.
fn pages_are(bytes: u64) -> bool {
    static SIZE: std::sync::OnceLock<libc::c_long> = std::sync::OnceLock::new();
    // SAFETY: sysconf reads a system constant and touches no memory of ours.
    let size = *SIZE.get_or_init(|| unsafe { libc::sysconf(libc::_SC_PAGESIZE) });
    u64::try_from(size) == Ok(bytes)
}

impl MappedWritable {
    /// Opens `path` for mapped appends at its current end (creating and truncating it when
    /// `create`). The file's size is taken as the append position, as `open_append` does.
    pub(super) fn open(path: &Path, create: bool) -> Result<MappedWritable> {
        // A writable shared mapping needs a descriptor open for reading too.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .open(path)
            .map_err(|e| io_err(if create { "create" } else { "open_append" }, path, e))?;
        let len = file
            .metadata()
            .map_err(|e| io_err("open_append (stat)", path, e))?
            .len();
        let unmappable = !pages_are(PAGE) || !allocates_for_good(&file);
        let shared = Arc::new(Shared {
            map_lock: Mutex::new(MapState {
                window: None,
                populated_to: 0,
                stop: false,
            }),
            wake: Condvar::new(),
            len: AtomicU64::new(len),
            size: AtomicU64::new(len),
        });
        Ok(MappedWritable {
            file,
            path: path.to_path_buf(),
            len,
            size: len,
            window: None,
            shared,
            helper: None,
            unmappable,
        })
    }

    /// Copies `data` to the file at `len` through the mapping; false (nothing written)
    /// where the mapped path cannot take it, and the caller writes it with `pwrite`.
    fn copy_mapped(&mut self, data: &[u8]) -> bool {
        if self.unmappable || data.len() > LARGEST_MAPPED_APPEND || self.len < PAGE {
            return false;
        }
        let end = self.len + data.len() as u64;
        if end > self.size && !self.grow_size(end) {
            return false;
        }
        let covered = self
            .window
            .is_some_and(|w| w.start <= self.len && end <= w.start + w.len);
        if !covered && !self.map_window(end) {
            return false;
        }
        let Some(window) = self.window else {
            return false;
        };
        let Ok(at) = usize::try_from(self.len - window.start) else {
            return false;
        };
        // SAFETY: the window maps `window.len` bytes of the file from `window.start`
        // (checked above to cover `[len, end)`), readable and writable, and stays mapped
        // until this handle unmaps it (only `&mut self` methods do). Those bytes lie within
        // the file's size (`grow_size`) on blocks `fallocate` allocated, so the copy cannot
        // fault past the end of the file or for want of space. `data` is our caller's
        // memory, not part of the mapping, so the ranges do not overlap. The helper thread
        // only asks the kernel to make pages writable; it never writes to them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                (window.base as *mut u8).add(at),
                data.len(),
            );
        }
        true
    }

    /// Unmaps the window's pages wholly before `end` (the append position), so that
    /// write-back finds them unmapped. With `wait` false it gives up if the helper holds
    /// the lock (the next append tries again); with `wait` it waits for the helper's step
    /// (32 KiB of pages past the writer, zeros that need no read from the device).
    fn unmap_behind(&mut self, end: u64, wait: bool) {
        let Some(window) = self.window else {
            return;
        };
        let behind = (end - end % PAGE).min(window.start + window.len);
        if behind <= window.start {
            return;
        }
        let mut state = if wait {
            self.shared.map_lock.lock()
        } else {
            match self.shared.map_lock.try_lock() {
                Some(state) => state,
                None => return,
            }
        };
        let cut = behind - window.start;
        let trimmed = Window {
            base: window.base + cut as usize,
            start: behind,
            len: window.len - cut,
        };
        // SAFETY: `[base, base + cut)` is the front of the mapping this handle made (the
        // window, not yet unmapped) and holds no byte anyone refers to: the writer's copies
        // are done (`&mut self`) and the helper is outside its step (`map_lock`), which
        // only ever touches pages at or past the writer's position.
        let rc = unsafe { libc::munmap(window.base as *mut libc::c_void, cut as usize) };
        if rc != 0 {
            return; // still mapped as it was: harmless, only slower write-back
        }
        let remaining = (trimmed.len > 0).then_some(trimmed);
        state.window = remaining;
        state.populated_to = state.populated_to.max(behind);
        drop(state);
        self.window = remaining;
    }

    /// Extends the file's size (allocating the blocks) to past `end` by [`SIZE_AHEAD`], or
    /// to `end` exactly when that much does not fit. False (the file unchanged) when even
    /// that fails: the append then goes through `pwrite`, which reports the error.
    fn grow_size(&mut self, end: u64) -> bool {
        let ahead = (end + SIZE_AHEAD).next_multiple_of(PAGE);
        for target in [ahead, end] {
            if self.allocate_size(target) {
                self.size = target;
                self.shared.size.store(target, Ordering::Release);
                // Under the lock where it is free, so a helper that read the old size is
                // already waiting (or will read the new one). A helper mid-step reads the
                // size again after it; one caught between its check and its wait sleeps
                // until `HELPER_IDLE_CHECK` — never a reason for a put to wait.
                if let Some(_state) = self.shared.map_lock.try_lock() {
                    self.shared.wake.notify_one();
                }
                return true;
            }
        }
        false
    }

    fn allocate_size(&mut self, target: u64) -> bool {
        let (Ok(start), Ok(length)) = (
            libc::off_t::try_from(self.size),
            libc::off_t::try_from(target - self.size),
        ) else {
            return false;
        };
        // SAFETY: the descriptor is valid while `self.file` lives; fallocate takes plain
        // integers and touches no memory of ours.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, start, length) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
            ) {
                // Without allocated blocks a copy could meet a full disk as a SIGBUS.
                self.unmappable = true;
            }
            return false;
        }
        true
    }

    /// Maps a window from the page holding `len` that covers `end`, replacing the current
    /// one, and starts the helper if it is not running. False (nothing mapped) on failure.
    fn map_window(&mut self, end: u64) -> bool {
        let start = self.len - self.len % PAGE;
        let len = WINDOW.max((end - start).next_multiple_of(PAGE));
        let (Ok(offset), Ok(map_len)) = (libc::off_t::try_from(start), usize::try_from(len)) else {
            return false;
        };
        let mut state = self.shared.map_lock.lock();
        if let Some(old) = state.window.take() {
            unmap(old);
        }
        self.window = None;
        // SAFETY: a new mapping chosen by the kernel (null hint), of a descriptor valid
        // while `self.file` lives, at a page-aligned offset; it aliases no Rust object.
        // It is unmapped only by this handle, under `map_lock`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.file.as_raw_fd(),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            self.unmappable = true;
            return false;
        }
        // SAFETY: the range is the mapping just made. MADV_DONTFORK only keeps a child
        // process from inheriting it (advice; a failure changes nothing here).
        let _ = unsafe { libc::madvise(base, map_len, libc::MADV_DONTFORK) };
        let window = Window {
            base: base as usize,
            start,
            len,
        };
        state.window = Some(window);
        state.populated_to = start;
        drop(state);
        self.window = Some(window);
        if self.helper.is_none() {
            let shared = Arc::clone(&self.shared);
            self.helper = std::thread::Builder::new()
                .name("wisckey-vlog-prefault".into())
                .spawn(move || populate_ahead(&shared))
                .ok();
        }
        self.shared.wake.notify_one();
        true
    }

    /// Unmaps the window (the helper is between two steps: `map_lock`).
    fn unmap_window(&mut self) {
        let mut state = self.shared.map_lock.lock();
        if let Some(old) = state.window.take() {
            unmap(old);
        }
        self.window = None;
    }

    fn set_position(&mut self, len: u64) {
        self.len = len;
        self.shared.len.store(len, Ordering::Release);
    }
}

/// The helper's loop: makes the pages between the writer and the file's size writable,
/// a step at a time, and sleeps when it is ahead. Stops for good when the kernel refuses
/// (no `MADV_POPULATE_WRITE` before Linux 5.14): the writer's copies then fault the pages
/// in themselves, which is slower but the same.
fn populate_ahead(shared: &Shared) {
    static REFUSED: AtomicBool = AtomicBool::new(false);
    let mut state = shared.map_lock.lock();
    while !state.stop && !REFUSED.load(Ordering::Relaxed) {
        let Some(window) = state.window else {
            shared.wake.wait_for(&mut state, HELPER_IDLE_CHECK);
            continue;
        };
        let writer_at = shared.len.load(Ordering::Acquire);
        let from = state.populated_to.max(writer_at - writer_at % PAGE);
        let until = shared
            .size
            .load(Ordering::Acquire)
            .min(window.start + window.len);
        if from >= until || from < window.start {
            shared.wake.wait_for(&mut state, HELPER_IDLE_CHECK);
            continue;
        }
        let step_end = until.min(from + POPULATE_STEP);
        let Ok(at) = usize::try_from(from - window.start) else {
            break;
        };
        // SAFETY: `[from, step_end)` lies inside the window (`from >= window.start`,
        // `step_end <= window.start + window.len`), which stays mapped while `map_lock` is
        // held, and inside the file's size. MADV_POPULATE_WRITE only makes the pages
        // present and writable; it changes no byte, so the writer's concurrent copies into
        // the same pages are unaffected.
        let rc = unsafe {
            libc::madvise(
                (window.base as *mut u8).add(at).cast::<libc::c_void>(),
                (step_end - from) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                REFUSED.store(true, Ordering::Relaxed);
            }
            // Anything else (a range the writer cut meanwhile): skip to the next wake.
            state.populated_to = until;
            continue;
        }
        state.populated_to = step_end;
        // Let the writer remap or cut between two steps.
        parking_lot::MutexGuard::bump(&mut state);
    }
}

/// Whether files in the existing directory `dir` get mapped appends (tests on file systems
/// without them check the `pwrite` path instead).
#[cfg(test)]
pub(crate) fn mapped_appends_supported(dir: &Path) -> bool {
    File::open(dir).is_ok_and(|d| allocates_for_good(&d))
}

/// Whether `file` lies on a file system listed in [`MAPPABLE_FILE_SYSTEMS`].
fn allocates_for_good(file: &File) -> bool {
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: the descriptor is valid while `file` is borrowed, and `stat` is a buffer of
    // the type fstatfs fills; it is read only after fstatfs reported success.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), stat.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: fstatfs succeeded, so it initialised the whole struct.
    let f_type = unsafe { stat.assume_init() }.f_type;
    #[allow(clippy::unnecessary_cast)] // `f_type`'s integer type differs between targets
    MAPPABLE_FILE_SYSTEMS.contains(&(f_type as i64))
}

fn unmap(window: Window) {
    // SAFETY: `window` describes a mapping this handle made and has not unmapped (it was
    // just taken out of the shared state, under `map_lock`), and nothing refers into it
    // any more: the writer's copies are done (`&mut self`), the helper is outside its step.
    let rc = unsafe { libc::munmap(window.base as *mut libc::c_void, window.len as usize) };
    if rc != 0 {
        log::warn!(
            "wisckey: munmap of a value-log window failed: {}",
            io::Error::last_os_error()
        );
    }
}

impl MappedWritable {
    /// Appends `data`, copied through the mapping where `mapped` and the mapped path can
    /// take it, else with `pwrite`.
    fn append_by(&mut self, data: &[u8], mapped: bool) -> Result<()> {
        if !(mapped && self.copy_mapped(data)) {
            // Through the same page cache, mapped or not.
            self.file
                .write_all_at(data, self.len)
                .map_err(|e| io_err("append", &self.path, e))?;
        }
        self.set_position(self.len + data.len() as u64);
        if self.len > self.size {
            self.size = self.len;
            self.shared.size.store(self.size, Ordering::Release);
        }
        if self
            .window
            .is_some_and(|w| self.len - w.start >= UNMAP_BEHIND + PAGE)
        {
            self.unmap_behind(self.len, false);
        }
        Ok(())
    }
}

impl WritableFile for MappedWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.append_by(data, true)
    }

    /// A sync follows: the copy would save nothing next to it, and growing the size ahead
    /// would have the helper dirty pages of zeros that the sync then writes out (a sync
    /// write with write-through ran 0.79–0.91× the `pwrite` path's rate that way).
    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.append_by(data, false)
    }

    fn sync_data(&mut self) -> Result<()> {
        // fdatasync writes back every dirty page of the file, those dirtied through the
        // mapping included (Linux's page cache is one for both).
        self.file
            .sync_data()
            .map_err(|e| io_err("sync_data", &self.path, e))
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        // The window may reach past the new size: unmap it first, so neither a copy nor
        // the helper can touch a page past the end of the file.
        self.unmap_window();
        self.file
            .set_len(len)
            .map_err(|e| io_err("set_len", &self.path, e))?;
        self.set_position(len);
        self.size = len;
        self.shared.size.store(len, Ordering::Release);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, up_to: u64) -> Result<()> {
        super::posix::preallocate(&self.file, &self.path, self.len, up_to)
    }

    fn start_write_back(&mut self, offset: u64, len: u64) -> Result<()> {
        // Waits for a helper mid-step (the helper holds the lock nearly all the time it
        // works): write-back of pages still mapped costs a TLB flush per page.
        self.unmap_behind(self.len, true);
        super::posix::start_write_back(&self.file, &self.path, offset, len)
    }

    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        super::posix::zero_fill_starts_past(&self.path, from, self.len)?;
        super::posix::write_zeros(&self.file, &self.path, from, to)?;
        // Only zeros that join the size already allocated extend it: past a gap (a fill
        // that failed part way, then one from where it meant to end) lies a hole, and a copy
        // into a hole must allocate first (`grow_size`), or a full disk is a SIGBUS.
        if from <= self.size && to > self.size {
            self.size = to;
            self.shared.size.store(to, Ordering::Release);
        }
        Ok(true)
    }
}

impl Drop for MappedWritable {
    fn drop(&mut self) {
        {
            let mut state = self.shared.map_lock.lock();
            state.stop = true;
            if let Some(old) = state.window.take() {
                unmap(old);
            }
        }
        self.shared.wake.notify_all();
        if let Some(helper) = self.helper.take() {
            let _ = helper.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> Vec<u8> {
        std::fs::read(path).expect("read")
    }

    /// A new, empty file `seg` opened for mapped appends in a directory of its own.
    fn new_file() -> (tempfile::TempDir, PathBuf, MappedWritable) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        let file = MappedWritable::open(&path, true).expect("create");
        (dir, path, file)
    }

    /// Defect (review): zeros written past a gap (a fill that failed part way, then the next
    /// from where it meant to end) raised the allocated size over the hole between, so a
    /// later copy landed in unallocated blocks: on a full disk, a SIGBUS instead of ENOSPC.
    #[test]
    fn zeros_past_a_gap_do_not_count_the_gap_as_allocated() {
        let (_dir, _path, mut file) = new_file();
        file.append(&[1u8; 5000]).expect("append");
        let allocated = file.size;
        let len = file.len();
        file.zero_fill(allocated + (1 << 20), allocated + (2 << 20))
            .expect("zeros past a gap");
        assert_eq!(
            file.size, allocated,
            "the hole before them is not allocated"
        );
        file.zero_fill(len, allocated + (1 << 20))
            .expect("contiguous zeros");
        assert_eq!(
            file.size,
            allocated + (1 << 20),
            "contiguous zeros extend it"
        );
    }

    #[test]
    fn appends_reach_the_file_at_once_and_set_len_cuts_the_zeros_ahead() {
        let (dir, path, mut file) = new_file();
        let mut expected = Vec::new();
        // Small appends (mapped), one large one (pwrite), across several pages.
        for i in 0..3000u32 {
            let record = vec![(i % 251) as u8 + 1; 1000 + (i % 97) as usize];
            file.append(&record).expect("append");
            expected.extend_from_slice(&record);
            if i == 1500 {
                let big = vec![7u8; LARGEST_MAPPED_APPEND + 1];
                file.append(&big).expect("large append");
                expected.extend_from_slice(&big);
            }
        }
        assert_eq!(file.len(), expected.len() as u64);
        let mapped = mapped_appends_supported(dir.path());
        if mapped {
            assert!(
                !file.unmappable && file.helper.is_some(),
                "the mapped path ran"
            );
        } else {
            eprintln!("no mapped appends on this file system: the pwrite path was tested");
        }
        // Before any sync or close, another handle sees every byte, then zeros.
        let seen = read_all(&path);
        assert_eq!(
            seen.len() as u64 > file.len(),
            mapped,
            "the size runs ahead"
        );
        assert_eq!(&seen[..expected.len()], &expected[..]);
        assert!(seen[expected.len()..].iter().all(|&b| b == 0));
        file.sync_data().expect("sync");
        file.set_len(file.len()).expect("cut");
        assert_eq!(read_all(&path), expected);
        // Appends go on at the cut.
        file.append(b"tail").expect("append after cut");
        expected.extend_from_slice(b"tail");
        drop(file);
        assert_eq!(&read_all(&path)[..expected.len()], &expected[..]);
    }

    #[test]
    fn appends_into_the_first_page_leave_the_size_alone() {
        let (dir, path, mut file) = new_file();
        // A segment's header: an interrupted creation must still look like one.
        file.append(&[9u8; 24]).expect("header");
        file.sync_data().expect("sync");
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 24);
        file.append(&[8u8; 4000]).expect("append");
        // Starting inside the first page even if it ends past it.
        file.append(&[7u8; 100]).expect("append");
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 4124);
        // Past the first page, the size runs ahead (where appends are mapped).
        file.append(&[6u8; 100]).expect("append");
        let size = std::fs::metadata(&path).expect("stat").len();
        assert_eq!(
            size > 4224,
            mapped_appends_supported(dir.path()),
            "size {size}"
        );
        file.set_len(4224).expect("cut");
        let bytes = std::fs::read(&path).expect("read");
        assert!(bytes[..24].iter().all(|&b| b == 9) && bytes[4124..].iter().all(|&b| b == 6));
    }

    #[test]
    fn appends_to_sync_are_not_mapped_and_grow_nothing_ahead() {
        let (dir, path, mut file) = new_file();
        file.append(&[1u8; 5000]).expect("first page");
        for _ in 0..50 {
            file.append_to_sync(&[2u8; 1000]).expect("append to sync");
            file.sync_data().expect("sync");
        }
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 55_000);
        assert!(
            file.window.is_none() && file.helper.is_none(),
            "nothing was mapped"
        );
        // Plain appends after them are mapped as usual.
        file.append(&[3u8; 1000]).expect("append");
        assert_eq!(file.window.is_some(), mapped_appends_supported(dir.path()));
    }

    #[test]
    fn a_reopened_file_appends_at_its_size_across_windows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        std::fs::write(&path, b"header").expect("write");
        let mut file = MappedWritable::open(&path, false).expect("open");
        assert_eq!(file.len(), 6);
        // More than one window of appends: the mapping is replaced on the way.
        let record = [0xabu8; 4000];
        let count = (WINDOW / 4000) as usize + 100;
        for _ in 0..count {
            file.append(&record).expect("append");
        }
        let end = file.len();
        assert_eq!(end, 6 + (count * 4000) as u64);
        file.set_len(end).expect("cut");
        drop(file);
        let seen = read_all(&path);
        assert_eq!(seen.len() as u64, end);
        assert_eq!(&seen[..6], b"header");
        assert!(seen[6..].iter().all(|&b| b == 0xab));
    }

    #[test]
    fn a_cut_back_to_before_the_window_maps_again_where_appends_resume() {
        let (_dir, path, mut file) = new_file();
        file.append(&[1u8; 5000]).expect("append");
        file.append(&[2u8; 5000]).expect("append");
        // A failed write-out is undone like this: cut back to where it started.
        file.set_len(5000).expect("cut");
        file.append(&[3u8; 100]).expect("append after cut");
        file.set_len(file.len()).expect("cut zeros");
        let seen = read_all(&path);
        assert_eq!(seen.len(), 5100);
        assert!(seen[..5000].iter().all(|&b| b == 1));
        assert!(seen[5000..].iter().all(|&b| b == 3));
    }
}
