//! Whether the calling thread has read from a block device: what tells a read batch that
//! waited on the disk from one that waited for a core.
//!
//! The server sends a connection's reads off its event loop (or the reader thread) once a
//! batch runs slow, so batches that wait on the disk wait in parallel. Wall time alone
//! cannot say why a batch was slow: on two cores shared with the client, a batch of
//! page-cache reads is often descheduled for longer than a disk read takes, and reads
//! handed to the blocking pool for that reason cost more CPU each and run slower still.
//! The kernel counts, per thread, the bytes it submitted to a block device for reading
//! (`getrusage(RUSAGE_THREAD).ru_inblock`, counted when a page-cache miss or an O_DIRECT
//! read issues its I/O; NFS and the netfs-based file systems count their reads too):
//! page-cache hits never move it. On a file system that counts nothing (tmpfs, which has
//! no disk to wait on) only large replies send reads off the loop.
//!
//! Invariant: [`read_since_last_look`] errs towards "yes". Where the count is unavailable
//! (not Linux; a kernel without per-task I/O accounting, which then reports 0 and has no
//! `/proc/self/io`; or the call fails) it always answers yes, so the server behaves as it
//! would by wall time alone. "Since the last look" is not "during this batch": a disk read
//! by an earlier batch on the thread, one that was not slow, counts for the next slow one
//! (once), which again errs towards yes. One wait it does miss: a read that waits for a
//! page another thread's read already asked for counts for that thread only.

use std::cell::Cell;

thread_local! {
    /// This thread's block-input count when it last looked: a thread starts at zero.
    static LAST_LOOK: Cell<u64> = const { Cell::new(0) };
}

/// Whether this thread has read from a block device since it last called this (on its
/// first call: since it started). One `getrusage` call (about half a microsecond), so the
/// server asks only about batches that already ran slow.
pub(crate) fn read_since_last_look() -> bool {
    let Some(now) = thread_block_input() else {
        return true;
    };
    LAST_LOOK.replace(now) < now
}

/// Blocks (512-byte units) this thread has submitted to block devices for reading.
#[cfg(target_os = "linux")]
fn thread_block_input() -> Option<u64> {
    if !kernel_counts_task_io() {
        return None;
    }
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; `getrusage` writes only into it and
    // reports failure (an unknown `who`, on an old kernel) through its return value.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: `getrusage` returned 0, so it filled `usage` (and it was zeroed besides).
    let usage = unsafe { usage.assume_init() };
    u64::try_from(usage.ru_inblock).ok()
}

/// Whether the kernel counts each task's I/O: built without `CONFIG_TASK_IO_ACCOUNTING`
/// it still answers `getrusage`, with `ru_inblock` always 0, and has no `/proc/self/io`.
/// Looked up once per process.
#[cfg(target_os = "linux")]
pub(crate) fn kernel_counts_task_io() -> bool {
    static COUNTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COUNTS.get_or_init(|| std::path::Path::new("/proc/self/io").exists())
}

#[cfg(not(target_os = "linux"))]
fn thread_block_input() -> Option<u64> {
    None
}

#[cfg(all(test, target_os = "linux"))]
#[path = "page_cache_test_support.rs"]
mod page_cache;

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::page_cache::{evict, in_memory_file_system};
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_page_cache_miss_counts_and_a_hit_does_not() {
        // In the crate's directory, not the system temp dir (often a tmpfs).
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).expect("temp dir");
        if in_memory_file_system(dir.path()) {
            eprintln!(
                "skipped: {} is on a file system in memory",
                dir.path().display()
            );
            return;
        }
        let path = dir.path().join("cold");
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(&vec![7u8; 1 << 20]).expect("write");
        file.sync_all().expect("sync the test file");
        evict(&file);
        let file = std::fs::File::open(&path).expect("open");
        let mut buf = vec![0u8; 4096];
        read_since_last_look(); // start counting from here
        file.read_exact_at(&mut buf, 512 << 10).expect("cold read");
        assert!(
            read_since_last_look(),
            "a read of an evicted page went to the disk"
        );
        file.read_exact_at(&mut buf, 512 << 10).expect("warm read");
        assert!(
            !read_since_last_look(),
            "the same page again came from the page cache"
        );
        assert_eq!(buf, vec![7u8; 4096]);
    }
}
