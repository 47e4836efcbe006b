//! Running out of disk space without losing anything.
//!
//! Owns the `RESERVE` file: disk space the database holds back (allocated with
//! `fallocate`, file length 0) so that the work which *frees* space — memtable flushes,
//! compactions, manifest rewrites, open and close, deletes, and value-log GC's relocations — can still complete
//! when the device is full. The first ENOSPC such work meets deletes the reserve and the
//! work is retried. One a flush or compaction spent is re-created after the next successful
//! one; one deletes or GC spent, at the next open (while they go on the disk is still full,
//! and taking the space back would leave them without it) — or, either, by the first write
//! group with puts that finds room for it (below).
//!
//! Invariants:
//! - the reserve is never needed for correctness: without it (size 0, or a file system
//!   without `fallocate`) a full disk still only fails operations cleanly;
//! - only space-freeing or must-finish work spends it; ordinary puts fail with
//!   `Error::NoSpace` before they are acknowledged (the value log's preallocation);
//! - once spent, the space it gave back is that work's: groups with puts are refused
//!   until the reserve is made again (by the work that spent it, or by a put group that
//!   finds room for it first: [`puts_may_take_space`]). A preallocation does not know
//!   whose space it takes, and puts that took it left the flush, the close and the next
//!   open without any.

use std::sync::atomic::Ordering;

use super::DbInner;
use crate::filename::RESERVE;

/// Creates the reserve file if it is missing and space allows; a failure is not an error
/// (the database works without it) and is retried after the next successful flush or
/// compaction that followed one that met a full disk, and at open.
pub(crate) fn ensure_reserve(inner: &DbInner) {
    make_reserve(inner, true);
}

/// Whether a write group with puts may take log space. While the reserve is spent, they
/// first make it again, and may only once it holds its space (nothing is said when it
/// cannot: the caller's `NoSpace` says it). So puts go on as soon as there is room for the
/// reserve again, whoever made it. Called with the log's writer locked, on a full disk only.
pub(crate) fn puts_may_take_space(inner: &DbInner) -> bool {
    !inner.reserve_spent.load(Ordering::Acquire) || make_reserve(inner, false)
}

/// Makes the reserve if it is missing; returns whether it is in place. A failure is
/// logged when `warn`.
fn make_reserve(inner: &DbInner, warn: bool) -> bool {
    let size = inner.options.disk_reserve_size;
    if size == 0 || inner.read_only || inner.reserve_present.load(Ordering::Acquire) {
        return true;
    }
    let _creating = inner.reserve_lock.lock();
    if inner.reserve_present.load(Ordering::Acquire) {
        return true;
    }
    let path = inner.dir.join(RESERVE);
    let created = (|| {
        if inner.fs.exists(&path)? && inner.fs.file_size(&path)? == 0 {
            // Re-reserve: a previous run may have been cut short after creating it.
            let mut file = inner.fs.open_append(&path)?;
            file.preallocate(size)?;
            return file.sync_data();
        }
        let mut file = inner.fs.create(&path)?;
        file.preallocate(size)?;
        file.sync_data()
    })();
    match created {
        Ok(()) => {
            inner.reserve_present.store(true, Ordering::Release);
            inner.reserve_spent.store(false, Ordering::Release);
            true
        }
        Err(_) if !warn => {
            let _ = inner.fs.remove(&path);
            false
        }
        Err(e) => {
            let _ = inner.fs.remove(&path);
            // Said once per open or per try after a spent reserve, not per write: without
            // it a full disk stops flushes and deletes (`DbStats::disk_reserve_bytes` is 0).
            log::warn!(
                "wisckey: the {size}-byte disk reserve (Options::disk_reserve_size) could not \
                 be made in {}: {e}; on a full disk, flushes and deletes will fail until \
                 space is freed",
                inner.dir.display()
            );
            false
        }
    }
}

/// Deletes the reserve file so that work that must finish gets its space. Returns whether
/// there was a reserve to give (the caller retries only then).
pub(crate) fn release_reserve(inner: &DbInner) -> bool {
    let _no_creation = inner.reserve_lock.lock();
    if !inner.reserve_present.swap(false, Ordering::AcqRel) {
        return false;
    }
    // Spent before its space is freed: a put group's leader reads the flag without this
    // lock ([`puts_may_take_space`]), and one that looked between the deletion and the
    // flag took the space the reserve was released for.
    inner.reserve_spent.store(true, Ordering::Release);
    match inner.fs.remove(&inner.dir.join(RESERVE)) {
        Ok(()) => {
            log::warn!(
                "wisckey: the disk is full; released the {}-byte reserve in {} so flushes and \
                 deletes can finish. Free space (delete data, remove other files)",
                inner.options.disk_reserve_size,
                inner.dir.display()
            );
            true
        }
        Err(_) => {
            // Nothing was freed; the next put group makes the reserve again if it can.
            inner.reserve_spent.store(false, Ordering::Release);
            false
        }
    }
}
