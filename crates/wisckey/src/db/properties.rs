//! Named properties ([`crate::Db::property`]) and approximate range sizes
//! ([`crate::Db::approximate_size`]): cheap, read-only looks into the database for
//! monitoring, as LevelDB's `GetProperty` and `GetApproximateSizes`.
//!
//! Both read the current version under the `state` lock only long enough to clone its
//! `Arc`; table indexes come from the table cache (a table not yet open is opened, which
//! reads its footer, index and filter, never a data block).

use std::fmt::Write as _;
use std::ops::Bound;

use super::DbInner;
use crate::error::Result;
use crate::key::{seek_key, MAX_SEQUENCE};
use crate::version::{FileMeta, NUM_LEVELS};

/// The property names [`crate::Db::property`] answers (a `<N>` is a level number).
pub(crate) const NAMES: &[&str] = &[
    "wisckey.num-files-at-level<N>",
    "wisckey.bytes-at-level<N>",
    "wisckey.stats",
    "wisckey.total-sst-size",
    "wisckey.vlog-live-bytes",
    "wisckey.vlog-total-bytes",
    "wisckey.space-amplification",
    "wisckey.estimate-num-keys",
    "wisckey.num-immutable-memtables",
    "wisckey.last-sequence",
];

pub(crate) fn property(inner: &DbInner, name: &str) -> Result<Option<String>> {
    let Some(name) = name.strip_prefix("wisckey.") else {
        return Ok(None);
    };
    let level_of = |prefix: &str| {
        (name.strip_prefix(prefix))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&l| l < NUM_LEVELS)
    };
    if let Some(level) = level_of("num-files-at-level") {
        let version = inner.state.lock().versions.current();
        return Ok(Some(version.num_files(level).to_string()));
    }
    if let Some(level) = level_of("bytes-at-level") {
        let version = inner.state.lock().versions.current();
        return Ok(Some(version.level_bytes(level).to_string()));
    }
    let value = match name {
        "stats" => stats_text(inner)?,
        "total-sst-size" => {
            let version = inner.state.lock().versions.current();
            let total = (0..NUM_LEVELS).fold(0u64, |t, l| t.saturating_add(version.level_bytes(l)));
            total.to_string()
        }
        "vlog-live-bytes" => super::gc::stats(inner)?.value_log.live_bytes.to_string(),
        "vlog-total-bytes" => super::gc::stats(inner)?.value_log.log_bytes.to_string(),
        "space-amplification" => format!("{:.3}", super::gc::stats(inner)?.value_log.space_amp),
        "estimate-num-keys" => estimate_num_keys(inner)?.to_string(),
        "num-immutable-memtables" => inner.state.lock().imms.len().to_string(),
        "last-sequence" => inner
            .visible_seq
            .load(std::sync::atomic::Ordering::Acquire)
            .to_string(),
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// Entries in the memtables plus entries in every table: overwritten versions and
/// tombstones count too, so it is an upper estimate of the live keys.
fn estimate_num_keys(inner: &DbInner) -> Result<u64> {
    let (mem, imms, version) = {
        let state = inner.state.lock();
        let imms: u64 = state.imms.iter().map(|i| i.table.len() as u64).sum();
        (state.mem.len() as u64, imms, state.versions.current())
    };
    let mut total = mem + imms;
    for (_, file) in version.all_files() {
        total += inner
            .table_cache
            .get(file.number, file.file_size)?
            .num_entries();
    }
    Ok(total)
}

/// `wisckey.stats`: levels (files and bytes), the value log, GC totals, as text.
fn stats_text(inner: &DbInner) -> Result<String> {
    let stats = super::gc::stats(inner)?;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "level  files        bytes");
    for level in 0..NUM_LEVELS {
        let _ = writeln!(
            out,
            "{level:>5} {:>6} {:>12}",
            stats.level_files[level], stats.level_bytes[level]
        );
    }
    let log = &stats.value_log;
    let _ = writeln!(
        out,
        "value log: {} bytes on disk in {} segments, {} live, space amplification {:.3} \
         (target {})",
        log.log_bytes,
        log.segments.len(),
        log.live_bytes,
        log.space_amp,
        log.space_amp_target
    );
    let _ = writeln!(
        out,
        "gc: {} segments collected, {} bytes freed, {} bytes punched",
        stats.gc.work.segments_collected, stats.gc.bytes_freed, stats.gc.bytes_punched
    );
    Ok(out)
}

/// About how many bytes the keys in `(lower, upper)` take on disk, as described on
/// [`crate::Db::approximate_size`].
pub(crate) fn approximate_size(
    inner: &DbInner,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> Result<u64> {
    let version = inner.state.lock().versions.current();
    let (lo, hi) = (user_bound(lower), user_bound(upper));
    let mut in_range = 0u64;
    let mut all_tables = 0u64;
    for level in 0..NUM_LEVELS {
        all_tables += version.level_bytes(level);
        for file in version.files(level) {
            if file.overlaps_user_range(lo, hi) {
                in_range += table_bytes_in(inner, file, lo, hi)?;
            }
        }
    }
    if in_range == 0 || all_tables == 0 {
        return Ok(in_range);
    }
    // The values behind the range's pointers: the log's live bytes, in the share the range
    // holds of the key index.
    let live = super::gc::stats(inner)?.value_log.live_bytes;
    let share = in_range as f64 / all_tables as f64;
    Ok(in_range + (live as f64 * share) as u64)
}

fn user_bound(bound: Bound<&[u8]>) -> Option<&[u8]> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The bytes of `file` between `lo` and `hi`, by its index: from the start of the block
/// that would hold `lo` to the end of the block that would hold `hi` (whole blocks, so a
/// range inside one block counts that block).
fn table_bytes_in(
    inner: &DbInner,
    file: &FileMeta,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<u64> {
    let starts_inside = lo.is_some_and(|lo| lo > file.smallest_user_key());
    let ends_inside = hi.is_some_and(|hi| hi < file.largest_user_key());
    if !starts_inside && !ends_inside {
        return Ok(file.file_size);
    }
    let table = inner.table_cache.get(file.number, file.file_size)?;
    let start = match lo {
        Some(lo) if starts_inside => table.approximate_block_of(&seek_key(lo, MAX_SEQUENCE)).0,
        _ => 0,
    };
    let end = match hi {
        // The block that holds `hi` counts whole.
        Some(hi) if ends_inside => table.approximate_block_of(&seek_key(hi, MAX_SEQUENCE)).1,
        _ => file.file_size,
    };
    Ok(end.saturating_sub(start))
}
