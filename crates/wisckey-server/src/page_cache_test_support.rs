//! Test support, compiled into the `disk` unit tests and the `cold_reads` integration test
//! (through `#[path]`): pushing a file out of the page cache, and telling whether a
//! directory is on a file system held in memory, where nothing is read from a disk.

use std::os::unix::io::AsRawFd;

/// Drops `file`'s clean cached pages (`POSIX_FADV_DONTNEED`, which needs no privileges):
/// the next reads of them go to the disk. Dirty pages stay: sync the file first.
pub fn evict(file: &std::fs::File) {
    // SAFETY: a valid open descriptor; the advice only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise");
}

/// Whether `dir` is on tmpfs or ramfs.
pub fn in_memory_file_system(dir: &std::path::Path) -> bool {
    const TMPFS_MAGIC: u32 = 0x0102_1994;
    const RAMFS_MAGIC: u32 = 0x8584_58f6;
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: a NUL-terminated path and a writable `statfs`, which the call fills.
    let rc = unsafe { libc::statfs(path.as_ptr(), stat.as_mut_ptr()) };
    assert_eq!(rc, 0, "statfs {}", dir.display());
    // SAFETY: `statfs` returned 0, so it filled `stat`.
    // `f_type`'s integer type differs by target (a signed 32-bit one on 32-bit glibc,
    // where ramfs's magic reads negative): the magic numbers are its low 32 bits.
    #[allow(clippy::unnecessary_cast)]
    let kind = unsafe { stat.assume_init() }.f_type as u32;
    kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
}
