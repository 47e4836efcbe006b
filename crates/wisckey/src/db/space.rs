//! Running out of disk space without losing anything.
//!
//! Owns the `RESERVE` file: disk space the database holds back (allocated with
//! `fallocate`, file length 0) so that the work which *frees* space — memtable flushes,
//! compactions, manifest rewrites, open and close, deletes, and value-log GC's relocations — can still complete
//! when the device is full. The first ENOSPC such work meets deletes the reserve and the
//! work is retried. One a flush or compaction spent is re-created after the next successful
//! one; one deletes or GC spent, at the next open (while they go on the disk is still full,
//! and taking the space back would leave them without it).
//!
//! Invariants:
//! - the reserve is never needed for correctness: without it (size 0, or a file system
//!   without `fallocate`) a full disk still only fails operations cleanly;
//! - only space-freeing or must-finish work spends it; ordinary puts fail with
//!   `Error::NoSpace` before they are acknowledged (the value log's preallocation).

use std::sync::atomic::Ordering;

use super::DbInner;
use crate::filename::RESERVE;

/// Creates the reserve file if it is missing and space allows; a failure is not an error
/// (the database works without it) and is retried after the next successful flush or
/// compaction that followed one that met a full disk, and at open.
pub(crate) fn ensure_reserve(inner: &DbInner) {
    let size = inner.options.disk_reserve_size;
    if size == 0 || inner.read_only || inner.reserve_present.load(Ordering::Acquire) {
        return;
    }
    let _creating = inner.reserve_lock.lock();
    if inner.reserve_present.load(Ordering::Acquire) {
        return;
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
        Ok(()) => inner.reserve_present.store(true, Ordering::Release),
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
        Err(_) => false,
    }
}
