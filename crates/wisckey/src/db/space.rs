//! Running out of disk space without losing anything.
//!
//! Owns the `RESERVE` file: disk space the database holds back (allocated with
//! `fallocate`, file length 0) so that the work which *frees* space — memtable flushes,
//! compactions, manifest rewrites, open and close, deletes, and value-log GC's relocations — can still complete
//! when the device is full. The first ENOSPC such work meets deletes the reserve and the
//! work is retried. One a flush or compaction spent is re-created after the next successful
//! one; one deletes or GC spent, at the next open (while they go on the disk is still full,
//! and taking the space back would leave them without it) — or, either, by the first write
//! group with puts that finds room for it (below). One that could not be made at all (at
//! open, or a release that failed) is tried again after each successful flush or compaction.
//!
//! Invariants:
//! - the reserve is never needed for correctness: without it (size 0, or a file system
//!   without `fallocate`) a full disk still only fails operations cleanly;
//! - only space-freeing or must-finish work spends it; ordinary puts fail with
//!   `Error::NoSpace` before they are acknowledged (the value log's preallocation);
//! - once spent, the space it gave back is that work's: groups with puts are refused
//!   until the reserve is made again (by the work that spent it, or by a put group that
//!   finds room for it first: [`puts_may_take_space`]; not while the flush or compaction
//!   it was released for has not succeeded, `DbInner::reserve_held_for_background`). A
//!   preallocation does not know whose space it takes, and puts that took it left the
//!   flush, the close and the next open without any.

use std::sync::atomic::Ordering;

use super::DbInner;
use crate::filename::RESERVE;

/// Creates the reserve file if it is missing and space allows; a failure is not an error
/// (the database works without it): it is said once, and the reserve is tried again after
/// later successful flushes and compactions ([`retry_missing_reserve`]).
pub(crate) fn ensure_reserve(inner: &DbInner) {
    if let Err(e) = make_reserve(inner) {
        // Said once per open or per try after a spent reserve, not per write: without it a
        // full disk stops flushes and deletes (`DbStats::disk_reserve_bytes` is 0).
        log::warn!(
            "wisckey: the {}-byte disk reserve (Options::disk_reserve_size) could not be made \
             in {}: {e}; on a full disk, flushes and deletes will fail until space is freed",
            inner.options.disk_reserve_size,
            inner.dir.display()
        );
    }
}

/// [`ensure_reserve`] without a word, for a reserve missing although nothing spent it (it
/// could not be made at open, or its release failed): tried after each successful flush,
/// so it comes back once space does.
pub(crate) fn retry_missing_reserve(inner: &DbInner) {
    let missing = inner.options.disk_reserve_size > 0
        && !inner.reserve_present.load(Ordering::Acquire)
        && !inner.reserve_spent.load(Ordering::Acquire);
    if missing {
        let _ = make_reserve(inner);
    }
}

/// Whether a write group with puts may take log space. While the reserve is spent, they
/// first make it again, and may only once it holds its space: so puts go on as soon as
/// there is room for the reserve again, whoever made it. Not while background work it was
/// released for has not succeeded: the space it gave back is that work's, and a put group
/// that made the reserve again out of it left the flush to meet a full disk again.
/// `Ok(false)`: refused for space; an error other than a full disk while making the
/// reserve (no file handle, EIO) is returned as it is. Called with the log's writer
/// locked, for every group with puts: one load unless the reserve is spent.
pub(crate) fn puts_may_take_space(inner: &DbInner) -> crate::error::Result<bool> {
    if !inner.reserve_spent.load(Ordering::Acquire) {
        return Ok(true);
    }
    if inner.reserve_held_for_background.load(Ordering::Acquire) {
        return Ok(false);
    }
    match make_reserve(inner) {
        Ok(()) => Ok(true),
        Err(e) if e.is_no_space() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes the reserve if it is missing: `Ok` once it holds its space.
fn make_reserve(inner: &DbInner) -> crate::error::Result<()> {
    let size = inner.options.disk_reserve_size;
    if size == 0 || inner.read_only || inner.reserve_present.load(Ordering::Acquire) {
        return Ok(());
    }
    let _creating = inner.reserve_lock.lock();
    if inner.reserve_present.load(Ordering::Acquire) {
        return Ok(());
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
            Ok(())
        }
        Err(e) => {
            let _ = inner.fs.remove(&path);
            Err(e)
        }
    }
}

/// Deletes the reserve file so that work that must finish gets its space. Returns whether
/// there was a reserve to give (the caller retries only then). `for_background`: released
/// for a flush or compaction, whose space it is until it succeeds
/// ([`background_work_succeeded`]); the write path's own release (deletes, GC's
/// relocations) spends the space under the log writer's lock at once.
pub(crate) fn release_reserve(inner: &DbInner, for_background: bool) -> bool {
    let _no_creation = inner.reserve_lock.lock();
    if !inner.reserve_present.swap(false, Ordering::AcqRel) {
        return false;
    }
    // Spent before its space is freed: a put group's leader reads the flags without this
    // lock ([`puts_may_take_space`]), and one that looked between the deletion and the
    // flags took the space the reserve was released for.
    if for_background {
        inner
            .reserve_held_for_background
            .store(true, Ordering::Release);
    }
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
            // Nothing was freed: the reserve counts as missing, not spent (the file may
            // still hold its space), and is made sure of after the next successful flush
            // ([`retry_missing_reserve`]).
            inner.reserve_spent.store(false, Ordering::Release);
            inner
                .reserve_held_for_background
                .store(false, Ordering::Release);
            false
        }
    }
}

/// Background work that met a full disk (and may have had the reserve released for it) has
/// now succeeded: put groups may make the reserve again (it is made here first, if the
/// release was for this work).
pub(crate) fn background_work_succeeded(inner: &DbInner, released_for_it: bool) {
    inner
        .reserve_held_for_background
        .store(false, Ordering::Release);
    if released_for_it {
        ensure_reserve(inner);
    }
}
