//! `VlogReader`: verified point reads of values by `ValuePointer`, with a cache of open
//! segment handles.
//!
//! Invariant: `read_value` returns the value bytes only if the pointer lies inside the live
//! log, the record at that exact place and length passes its checksum, holds the expected
//! key and is a `Value`; every other outcome is `Error::Corruption` (or `Error::Io` for an
//! OS failure other than a missing file) — never wrong bytes, never a panic. This is the
//! check WiscKey §3.3.3 uses to detect values lost in a crash.
//!
//! Thread-safety: `Send + Sync`; the handle cache is a map replaced whole on the rare open or
//! close of a segment (`ArcSwap`), so a read looks a handle up without writing any shared
//! word but its handle's count, and reads on a handle are positional (`read_at`): any
//! number of threads read at once.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::cache::ValueCache;
use super::format::{decode_record, SEGMENT_HEADER_LEN};
use super::{ValuePointer, VlogOptions};
use crate::error::{Error, Result};
use crate::filename::vlog_file_name;
use crate::fs::{BatchRead, FileSystem, ReadableFile};
use crate::key::ValueKind;
use crate::position::LogPosition;

/// A value pointer and the key its record must carry.
pub type PointerAndKey = (ValuePointer, Vec<u8>);

/// Open segment handles kept at most; beyond this an arbitrary one is closed.
const MAX_CACHED_SEGMENTS: usize = 256;

/// How far the value log reaches right now: nothing has been written past `end`. (Which
/// older segments GC removed is the caller's knowledge: the database checks a pointer's
/// segment against the `Version` its reader holds; a deleted segment's file is missing.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRange {
    pub end: LogPosition,
}

/// An open segment file and its name.
#[derive(Debug, Clone)]
struct OpenSegment {
    file: Arc<dyn ReadableFile>,
    name: Arc<str>,
    /// A length the file has been seen to have, so that a read inside it needs no `stat`
    /// (one per read was ~3% of a point read's CPU). Segments only grow while readers hold
    /// them; the one exception, the writer cutting off a failed group, leaves no pointer to
    /// the bytes it cut, and a damaged pointer into them meets a short read: `Corruption`.
    known_len: Arc<AtomicU64>,
}

impl OpenSegment {
    /// Whether the file reaches `end`: from the length seen before, or else from its
    /// length now.
    fn reaches(&self, end: u64) -> Result<bool> {
        if end <= self.known_len.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let len = self.file.len()?;
        self.known_len.fetch_max(len, Ordering::Relaxed);
        Ok(end <= len)
    }
}

/// Shared reader of the value log.
#[derive(Debug)]
pub struct VlogReader {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    opts: VlogOptions,
    /// Open segments with their file names (named in errors; formatted once per open).
    handles: ArcSwap<HashMap<u64, Arc<OpenSegment>>>,
    /// How many segments were forgotten (`forget_segment`, called only once the file is
    /// deleted), changed under `cache_lock`. An open caches its handle, under that lock,
    /// only if no segment was forgotten since it began: a handle opened just before a
    /// deletion is used for its read but never cached, so no handle of a deleted file stays
    /// cached holding its space, and nothing is kept per segment ever deleted. Opens run
    /// in parallel; only the caching is serialized.
    forgets: AtomicU64,
    cache_lock: parking_lot::Mutex<()>,
    /// Verified values of recent point reads (`Options::value_cache_size`; none at 0).
    value_cache: Option<ValueCache>,
}

impl VlogReader {
    pub fn new(fs: Arc<dyn FileSystem>, dir: PathBuf, opts: VlogOptions) -> VlogReader {
        VlogReader {
            fs,
            dir,
            opts,
            handles: ArcSwap::default(),
            forgets: AtomicU64::new(0),
            cache_lock: parking_lot::Mutex::new(()),
            value_cache: None,
        }
    }

    /// The database directory the segments are in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Keeps up to `bytes` of recently read values in memory (0: no cache).
    pub fn with_value_cache(mut self, bytes: usize) -> VlogReader {
        self.value_cache = (bytes > 0).then(|| ValueCache::new(bytes));
        self
    }

    /// Bytes the value cache holds.
    pub fn value_cache_bytes(&self) -> u64 {
        self.value_cache.as_ref().map_or(0, ValueCache::weight)
    }

    /// Reads the record at `ptr` with one positional read and returns its value after the
    /// checks described in the module docs.
    pub fn read_value(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
    ) -> Result<Vec<u8>> {
        self.read_value_filling(ptr, expected_key, limits, true)
    }

    /// [`VlogReader::read_value`] from the file, bypassing the value cache: scans (one scan
    /// must not flush the hot values out), GC and `Db::check` (which must see the disk).
    pub fn read_value_uncached(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
    ) -> Result<Vec<u8>> {
        self.read_value_filling(ptr, expected_key, limits, false)
    }

    /// [`VlogReader::read_value`], appending the value to `buf` instead of returning it:
    /// the record is read straight into `buf` and its value moved to where the record
    /// began, so a point read of a large value costs one allocation at most (none when
    /// `buf` has room) and no copy beyond that move. On an error `buf` is as it was.
    pub fn read_value_into(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.read_into(ptr, expected_key, limits, true, buf)
    }

    /// With `cached`, a point read: served from the value cache if it holds the record, and
    /// a value read from the file enters it.
    fn read_value_filling(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        cached: bool,
    ) -> Result<Vec<u8>> {
        self.read_value_in(ptr, expected_key, limits, cached, Vec::new())
    }

    /// [`VlogReader::read_value_filling`] into `buf` (emptied first), which becomes the
    /// returned value: a read-ahead value lives in a buffer its consumer allocated.
    fn read_value_in(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        cached: bool,
        mut buf: Vec<u8>,
    ) -> Result<Vec<u8>> {
        buf.clear();
        self.read_into(ptr, expected_key, limits, cached, &mut buf)?;
        Ok(buf)
    }

    fn read_into(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        cached: bool,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let cache = self.value_cache.as_ref().filter(|_| cached);
        if let Some(hit) = cache.and_then(|cache| cache.get(ptr, expected_key)) {
            // The pointer must still pass the checks a file read makes.
            self.check_pointer(ptr, limits)?;
            buf.extend_from_slice(hit.value());
            return Ok(());
        }
        let start = buf.len();
        let value = self.read_record(ptr, expected_key, limits, cache, buf)?;
        move_value_to(buf, value, start);
        Ok(())
    }

    /// A point read that lends the value to `use_value` where it lies: in the value cache
    /// (no copy), or in `scratch`, which a read from the file fills (cleared first; its
    /// capacity is reused). The checks are [`VlogReader::read_value`]'s; on an error
    /// `use_value` is not called.
    pub fn read_value_with<R>(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        let cache = self.value_cache.as_ref();
        if let Some(hit) = cache.and_then(|cache| cache.get(ptr, expected_key)) {
            self.check_pointer(ptr, limits)?;
            return Ok(use_value(hit.value()));
        }
        scratch.clear();
        let value = self.read_record(ptr, expected_key, limits, cache, scratch)?;
        Ok(use_value(&scratch[value]))
    }

    /// Reads the record at `ptr` onto the end of `buf` and verifies it; returns where its
    /// value lies in `buf` and offers the value to `cache`. On an error `buf` is as it was.
    fn read_record(
        &self,
        ptr: &ValuePointer,
        expected_key: &[u8],
        limits: LiveRange,
        cache: Option<&ValueCache>,
        buf: &mut Vec<u8>,
    ) -> Result<Range<usize>> {
        self.check_pointer(ptr, limits)?;
        let open = self.segment(ptr.segment)?;
        if !open.reaches(ptr.end())? {
            return Err(Error::corruption(
                &*open.name,
                ptr.offset,
                "value pointer: record extends past the end of the segment file",
            ));
        }
        let start = buf.len();
        buf.resize(start + ptr.len as usize, 0);
        let verified = open
            .file
            .read_exact_at(ptr.offset, &mut buf[start..], &open.name)
            .and_then(|()| value_range(&buf[start..], ptr, expected_key, &self.opts, &open.name));
        let value = match verified {
            Ok(range) => start + range.start..start + range.end,
            Err(e) => {
                buf.truncate(start);
                return Err(e);
            }
        };
        if let Some(cache) = cache {
            cache.offer(ptr, expected_key, &buf[value.clone()]);
        }
        Ok(value)
    }

    /// Reads the records of a run of pointers that lie back to back in one segment (each
    /// starts where the one before ends) with one positional read, and returns each value
    /// after the same checks as [`VlogReader::read_value`]. A scan of values written in key
    /// order reads them this way: one `pread` per run instead of one per value.
    ///
    /// `buffers` (one per pointer; missing ones are allocated here) become the values: a
    /// scan allocates them on its own thread, where its user frees them. Values allocated
    /// on a reader thread and freed on another made the allocator hand fresh pages out
    /// (and fault them in) for most values read (docs/BENCHMARKS.md, readseq at 64 KiB).
    pub fn read_run(
        &self,
        run: &[(ValuePointer, Vec<u8>)],
        limits: LiveRange,
        buffers: Vec<Vec<u8>>,
    ) -> Vec<Result<Vec<u8>>> {
        let mut buffers = buffers.into_iter();
        let (Some((first, _)), Some((last, _))) = (run.first(), run.last()) else {
            return Vec::new();
        };
        let adjacent = run.windows(2).all(|w| {
            w[0].0.segment == w[1].0.segment && w[0].0.end() == w[1].0.offset
        });
        let one_by_one = |mut buffers: std::vec::IntoIter<Vec<u8>>| {
            run.iter()
                .map(|(ptr, key)| {
                    let buf = buffers.next().unwrap_or_default();
                    self.read_value_in(ptr, key, limits, false, buf)
                })
                .collect()
        };
        if run.len() == 1 || !adjacent {
            return one_by_one(buffers);
        }
        // Every pointer passes the single-read checks, bounds included, before the read.
        let whole = ValuePointer {
            segment: first.segment,
            offset: first.offset,
            len: match u32::try_from(last.end() - first.offset) {
                Ok(len) => len,
                Err(_) => return one_by_one(buffers),
            },
        };
        let checked = run
            .iter()
            .map(|(ptr, _)| self.check_pointer(ptr, limits))
            .collect::<Result<Vec<()>>>();
        let read = checked.and_then(|_| {
            let open = self.segment(whole.segment)?;
            if !open.reaches(whole.end())? {
                return Err(Error::corruption(
                    &*open.name,
                    whole.offset,
                    "value pointer: record extends past the end of the segment file",
                ));
            }
            let mut bytes = vec![0u8; whole.len as usize];
            open.file.read_exact_at(whole.offset, &mut bytes, &open.name)?;
            Ok((bytes, Arc::clone(&open.name)))
        });
        match read {
            Ok((bytes, name)) => run
                .iter()
                .map(|(ptr, key)| {
                    let start = (ptr.offset - whole.offset) as usize;
                    let record = &bytes[start..start + ptr.len as usize];
                    let buf = buffers.next().unwrap_or_default();
                    extract_value_into(record, ptr, key, &self.opts, &name, buf)
                })
                .collect(),
            // Whatever failed, each pointer gets its own read and its own verdict.
            Err(_) => one_by_one(buffers),
        }
    }

    /// Several runs, each read as by [`VlogReader::read_run`], through one
    /// [`FileSystem::read_batch`]: on a file system that batches, every run's read is in
    /// flight at once. Results per run, per pointer, in order. `buffers` (per run, per
    /// pointer) become the values as in `read_run`; a record read alone is read straight
    /// into its buffer and its value moved to the front.
    pub fn read_runs(
        &self,
        runs: &[(&[PointerAndKey], LiveRange)],
        mut buffers: Vec<Vec<Vec<u8>>>,
    ) -> Vec<Vec<Result<Vec<u8>>>> {
        let read_all = |batch: &mut [BatchRead<'_>]| {
            let results = self.fs.read_batch(batch);
            let ok = batch.iter().zip(results);
            Some(ok.map(|(read, n)| n.is_ok_and(|n| n == read.buf.len())).collect())
        };
        // Never `None`: `read_all` always answers.
        (self.read_runs_with(runs, &mut buffers, read_all)).unwrap_or_default()
    }

    /// [`VlogReader::read_runs`] only if every byte the runs need is in the OS's page
    /// cache (`ReadableFile::is_cached`, then `read_exact_if_cached`): then the values,
    /// read and verified on this thread without waiting for the device. `None` otherwise,
    /// `buffers` left as they were, for the read to go to a thread that may wait. A pointer
    /// that fails a check before the read gets its verdict as in `read_runs` (its own
    /// `read_value_in`, which refuses it without reading; a sound pointer of the same run
    /// is then read alone, with a `pread` that finds it cached). Opening a segment not
    /// opened before happens here too.
    pub fn read_runs_if_cached(
        &self,
        runs: &[(&[PointerAndKey], LiveRange)],
        buffers: &mut Vec<Vec<Vec<u8>>>,
    ) -> Option<Vec<Vec<Result<Vec<u8>>>>> {
        // Every record's bytes are looked up first, one `is_cached` per stretch of
        // back-to-back records (it counts pages, reads none): a batch with any byte not
        // cached (a cold scan's, or one whose run starts in a page the previous read
        // brought in) goes to the waiting path at once, before a buffer is prepared for it,
        // and no device read is started for it here.
        let cached = |segment: u64, start: u64, end: u64| {
            (self.segment(segment)).is_ok_and(|open| open.file.is_cached(start, end - start))
        };
        let mut stretch: Option<(u64, u64, u64)> = None;
        for (ptr, _) in runs.iter().flat_map(|(run, _)| run.iter()) {
            match &mut stretch {
                Some((segment, _, end)) if *segment == ptr.segment && *end == ptr.offset => {
                    *end = ptr.end();
                }
                _ => {
                    let done = stretch.replace((ptr.segment, ptr.offset, ptr.end()));
                    if done.is_some_and(|(segment, start, end)| !cached(segment, start, end)) {
                        return None;
                    }
                }
            }
        }
        let (segment, start, end) = stretch?;
        if !cached(segment, start, end) {
            return None;
        }
        let read_cached = |batch: &mut [BatchRead<'_>]| {
            (batch.iter_mut())
                .all(|read| read.file.read_exact_if_cached(read.offset, read.buf))
                .then(|| vec![true; batch.len()])
        };
        self.read_runs_with(runs, buffers, read_cached)
    }

    /// `read_runs` with its I/O step `read`: given the batch of spans to read, says per
    /// span whether it was read whole, or `None` to give up (every buffer taken from
    /// `buffers` is put back first).
    fn read_runs_with(
        &self,
        runs: &[(&[PointerAndKey], LiveRange)],
        buffers: &mut Vec<Vec<Vec<u8>>>,
        read: impl FnOnce(&mut [BatchRead<'_>]) -> Option<Vec<bool>>,
    ) -> Option<Vec<Vec<Result<Vec<u8>>>>> {
        let take_buffer = |buffers: &mut Vec<Vec<Vec<u8>>>, run: usize, index: usize| {
            (buffers.get_mut(run))
                .and_then(|run| run.get_mut(index))
                .map(std::mem::take)
                .unwrap_or_default()
        };
        /// Pointers `first..first + count` of run `run`, read as the one span `whole`.
        struct Unit {
            run: usize,
            first: usize,
            count: usize,
            whole: ValuePointer,
            segment: Option<Arc<OpenSegment>>,
        }
        let mut units = Vec::new();
        for (run_index, (run, _)) in runs.iter().enumerate() {
            let adjacent = run.windows(2).all(|w| {
                w[0].0.segment == w[1].0.segment && w[0].0.end() == w[1].0.offset
            });
            let span = match (run.first(), run.last()) {
                (Some((first, _)), Some((last, _))) if adjacent => {
                    u32::try_from(last.end() - first.offset)
                        .ok()
                        .map(|len| ValuePointer { len, ..*first })
                }
                _ => None,
            };
            match span {
                Some(whole) => units.push(Unit {
                    run: run_index,
                    first: 0,
                    count: run.len(),
                    whole,
                    segment: None,
                }),
                None => units.extend(run.iter().enumerate().map(|(i, (ptr, _))| Unit {
                    run: run_index,
                    first: i,
                    count: 1,
                    whole: *ptr,
                    segment: None,
                })),
            }
        }
        // A unit that fails a check before the read is left without a segment: its
        // pointers are read one by one below, which reports each one's own error.
        for unit in &mut units {
            let (run, limits) = &runs[unit.run];
            let pointers = &run[unit.first..unit.first + unit.count];
            let checked = pointers
                .iter()
                .try_for_each(|(ptr, _)| self.check_pointer(ptr, *limits));
            unit.segment = checked
                .and_then(|()| self.segment(unit.whole.segment))
                .ok()
                .filter(|open| open.reaches(unit.whole.end()).unwrap_or(false));
        }
        // A unit of one record is read into that value's own buffer; a longer one into a
        // buffer of its own, its values copied out below.
        let mut unit_buffers: Vec<Vec<u8>> = (units.iter())
            .map(|unit| match unit.segment {
                Some(_) if unit.count == 1 => {
                    let mut buf = take_buffer(buffers, unit.run, unit.first);
                    buf.clear();
                    buf.resize(unit.whole.len as usize, 0);
                    buf
                }
                Some(_) => vec![0u8; unit.whole.len as usize],
                None => Vec::new(),
            })
            .collect();
        let read_ok: Vec<bool> = {
            let mut batch: Vec<BatchRead<'_>> = Vec::with_capacity(units.len());
            let mut batched = Vec::with_capacity(units.len());
            for (index, (unit, buf)) in units.iter().zip(unit_buffers.iter_mut()).enumerate() {
                if let Some(open) = &unit.segment {
                    batch.push(BatchRead {
                        file: &*open.file,
                        offset: unit.whole.offset,
                        buf: buf.as_mut_slice(),
                    });
                    batched.push(index);
                }
            }
            let Some(results) = read(&mut batch) else {
                drop(batch);
                for (unit, mut buf) in units.iter().zip(unit_buffers) {
                    if unit.segment.is_some() && unit.count == 1 {
                        buf.clear();
                        if let Some(slot) =
                            (buffers.get_mut(unit.run)).and_then(|run| run.get_mut(unit.first))
                        {
                            *slot = buf;
                        }
                    }
                }
                return None;
            };
            let mut ok = vec![false; units.len()];
            for (index, result) in batched.into_iter().zip(results) {
                ok[index] = result;
            }
            ok
        };
        let mut out: Vec<Vec<Result<Vec<u8>>>> = (runs.iter())
            .map(|(run, _)| Vec::with_capacity(run.len()))
            .collect();
        for ((unit, mut bytes), ok) in units.iter().zip(unit_buffers).zip(read_ok) {
            let (run, limits) = &runs[unit.run];
            if unit.count == 1 {
                let (ptr, key) = &run[unit.first];
                let value = match (&unit.segment, ok) {
                    (Some(open), true) => value_range(&bytes, ptr, key, &self.opts, &open.name)
                        .map(|range| {
                            move_value_to(&mut bytes, range, 0);
                            bytes
                        }),
                    // Whatever failed, the pointer gets its own read and its own verdict.
                    _ => self.read_value_in(ptr, key, *limits, false, bytes),
                };
                out[unit.run].push(value);
                continue;
            }
            for (index, (ptr, key)) in (unit.first..).zip(&run[unit.first..unit.first + unit.count]) {
                let buf = take_buffer(buffers, unit.run, index);
                let value = match (&unit.segment, ok) {
                    (Some(open), true) => {
                        let start = (ptr.offset - unit.whole.offset) as usize;
                        let record = &bytes[start..start + ptr.len as usize];
                        extract_value_into(record, ptr, key, &self.opts, &open.name, buf)
                    }
                    // Whatever failed, each pointer gets its own read and its own verdict.
                    _ => self.read_value_in(ptr, key, *limits, false, buf),
                };
                out[unit.run].push(value);
            }
        }
        Some(out)
    }

    /// The checks `read_value` makes before reading.
    fn check_pointer(&self, ptr: &ValuePointer, limits: LiveRange) -> Result<()> {
        let bad = |why: &str| {
            let name = vlog_file_name(&self.dir, ptr.segment);
            Error::corruption(
                name.display().to_string(),
                ptr.offset,
                format!("value pointer: {why}"),
            )
        };
        if ptr.segment > limits.end.segment {
            return Err(bad("segment outside the live value log"));
        }
        if ptr.offset < SEGMENT_HEADER_LEN {
            return Err(bad("offset inside the segment header"));
        }
        if !self.opts.record_len_possible(ptr.len) {
            return Err(bad("impossible record length"));
        }
        let past_end = ptr.offset.checked_add(u64::from(ptr.len)).is_none()
            || (ptr.segment == limits.end.segment && ptr.end() > limits.end.offset);
        if past_end {
            return Err(bad("record extends past the end of the log"));
        }
        Ok(())
    }

    /// Drops the cached handle of segment `n`. Call once its file is deleted (GC's): no open
    /// can cache it again after that.
    pub fn forget_segment(&self, n: u64) {
        let _caching = self.cache_lock.lock();
        self.forgets.fetch_add(1, Ordering::AcqRel);
        self.remove_handle(n);
    }

    fn remove_handle(&self, n: u64) {
        self.handles.rcu(|handles| {
            let mut handles = HashMap::clone(handles);
            handles.remove(&n);
            handles
        });
    }

    fn segment(&self, n: u64) -> Result<Arc<OpenSegment>> {
        if let Some(open) = self.handles.load().get(&n) {
            return Ok(Arc::clone(open));
        }
        let forgets_before = self.forgets.load(Ordering::Acquire);
        let opened = self.open_segment(n)?;
        Ok(self.cache_handle(n, opened, forgets_before))
    }

    fn open_segment(&self, n: u64) -> Result<Arc<OpenSegment>> {
        let path = vlog_file_name(&self.dir, n);
        let name: Arc<str> = Arc::from(path.display().to_string());
        let file = self.fs.open_read(&path).map_err(|e| match &e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::corruption(&*name, 0, "live value-log segment is missing")
            }
            _ => e,
        })?;
        // Point reads and read-ahead fetch single records at scattered offsets: a kernel
        // read-ahead window around each would multiply the device bytes per value read.
        // Runs of back-to-back records are read with one `pread` of the whole run.
        file.advise_random();
        Ok(Arc::new(OpenSegment {
            file,
            name,
            known_len: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// Caches `opened` as segment `n`'s handle and returns the handle to use: one another
    /// thread cached meanwhile wins. Not cached if a segment was forgotten since the open
    /// began (`forgets_before`): it may be this one, deleted after the open.
    fn cache_handle(
        &self,
        n: u64,
        opened: Arc<OpenSegment>,
        forgets_before: u64,
    ) -> Arc<OpenSegment> {
        let _caching = self.cache_lock.lock();
        if self.forgets.load(Ordering::Acquire) != forgets_before {
            return opened;
        }
        let mut kept = Arc::clone(&opened);
        self.handles.rcu(|handles| {
            let mut handles = HashMap::clone(handles);
            if handles.len() >= MAX_CACHED_SEGMENTS && !handles.contains_key(&n) {
                if let Some(&victim) = handles.keys().next() {
                    handles.remove(&victim);
                }
            }
            kept = Arc::clone(handles.entry(n).or_insert_with(|| Arc::clone(&opened)));
            handles
        });
        kept
    }

    #[cfg(test)]
    fn cached_segments(&self) -> Vec<u64> {
        let mut numbers: Vec<u64> = self.handles.load().keys().copied().collect();
        numbers.sort_unstable();
        numbers
    }
}

/// Verifies the bytes of the whole record `ptr` addresses (from a file read or from
/// `VlogWriter::read_buffered`) and returns its value: checksum, exact length, kind `Value`
/// and key equal to `expected_key`. Failures are `Corruption` naming `file` and the offset.
pub fn extract_value(
    record: &[u8],
    ptr: &ValuePointer,
    expected_key: &[u8],
    opts: &VlogOptions,
    file: &str,
) -> Result<Vec<u8>> {
    extract_value_into(record, ptr, expected_key, opts, file, Vec::new())
}

/// Moves the value at `value` (a range of `buf`) to `start` and cuts `buf` after it: a
/// record read into a buffer becomes its value without another allocation.
fn move_value_to(buf: &mut Vec<u8>, value: Range<usize>, start: usize) {
    let len = value.len();
    buf.copy_within(value, start);
    buf.truncate(start + len);
}

/// [`extract_value`] into `buf` (emptied first), which becomes the returned value.
fn extract_value_into(
    record: &[u8],
    ptr: &ValuePointer,
    expected_key: &[u8],
    opts: &VlogOptions,
    file: &str,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>> {
    let range = value_range(record, ptr, expected_key, opts, file)?;
    buf.clear();
    buf.extend_from_slice(&record[range]);
    Ok(buf)
}

/// [`extract_value`]'s checks; returns where in `record` the value lies.
fn value_range(
    record: &[u8],
    ptr: &ValuePointer,
    expected_key: &[u8],
    opts: &VlogOptions,
    file: &str,
) -> Result<Range<usize>> {
    let bad = |why: &str| Error::corruption(file, ptr.offset, format!("value record: {why}"));
    let (rec, len) = decode_record(record, opts).map_err(bad)?;
    if len != ptr.len as usize || len != record.len() {
        return Err(bad("record length differs from the pointer's"));
    }
    if rec.kind != ValueKind::Value {
        return Err(bad("record is not a value"));
    }
    if rec.key != expected_key {
        return Err(bad("record belongs to a different key"));
    }
    // The value is the record's tail (format.rs: header, key, value).
    Ok(len - rec.value.len()..len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::vlog::{BatchEntry, VlogWriter};
    use std::path::Path;

    fn opts() -> VlogOptions {
        VlogOptions {
            segment_size: 4096,
            buffer_size: 1 << 20,
            max_key_size: 100,
            max_value_size: 10_000,
            preallocate_size: 0,
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
        }
    }

    /// A log with one synced segment holding `key1 -> value1` and a deletion of `key2`.
    fn setup() -> (MemFs, VlogReader, Vec<ValuePointer>, LiveRange) {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        let mut w = VlogWriter::create(fs_dyn(&fs), dir.clone(), 1, opts()).expect("create");
        let entries = [
            BatchEntry {
                kind: ValueKind::Value,
                key: b"key1",
                value: b"value1",
            },
            BatchEntry {
                kind: ValueKind::Deletion,
                key: b"key2",
                value: b"",
            },
        ];
        let ptrs = w.append_batch(10, &entries).expect("append");
        w.sync().expect("sync");
        let live = LiveRange { end: w.end() };
        let reader = VlogReader::new(fs_dyn(&fs), dir, opts());
        (fs, reader, ptrs, live)
    }

    fn fs_dyn(fs: &MemFs) -> Arc<dyn FileSystem> {
        Arc::new(fs.clone())
    }

    fn assert_corruption(r: Result<Vec<u8>>, what: &str) {
        match r {
            Err(Error::Corruption { .. }) => {}
            other => panic!("{what}: expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn reads_value_and_rejects_pointers_outside_the_live_range() {
        let (_fs, reader, ptrs, live) = setup();
        assert_eq!(
            reader.read_value(&ptrs[0], b"key1", live).expect("read"),
            b"value1"
        );
        let shorter = LiveRange {
            end: LogPosition::new(1, ptrs[0].end() - 1),
        };
        assert_corruption(
            reader.read_value(&ptrs[0], b"key1", shorter),
            "past live end",
        );
        let future = ValuePointer {
            segment: 2,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&future, b"key1", live), "future segment");
        let in_header = ValuePointer {
            offset: 0,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&in_header, b"key1", live), "header");
        let overflow = ValuePointer {
            offset: u64::MAX - 3,
            ..ptrs[0]
        };
        let all = LiveRange {
            end: LogPosition::new(u64::MAX, u64::MAX),
        };
        assert_corruption(reader.read_value(&overflow, b"key1", all), "overflow");
    }

    #[test]
    fn read_value_into_appends_and_leaves_the_buffer_alone_on_errors() {
        let (_fs, reader, ptrs, live) = setup();
        let mut buf = b"prefix:".to_vec();
        reader
            .read_value_into(&ptrs[0], b"key1", live, &mut buf)
            .expect("read");
        assert_eq!(buf, b"prefix:value1");
        for (ptr, key) in [(ptrs[0], &b"key2"[..]), (ptrs[1], &b"key2"[..])] {
            let err = reader.read_value_into(&ptr, key, live, &mut buf);
            assert!(matches!(err, Err(Error::Corruption { .. })), "{err:?}");
            assert_eq!(buf, b"prefix:value1", "buffer changed by a failed read");
        }
        // The segment's length is known now; a pointer past it is still refused.
        let beyond = ValuePointer {
            offset: live.end.offset + 100,
            ..ptrs[0]
        };
        let all = LiveRange {
            end: LogPosition::new(1, u64::MAX),
        };
        let err = reader.read_value_into(&beyond, b"key1", all, &mut buf);
        assert!(matches!(err, Err(Error::Corruption { .. })), "{err:?}");
        assert_eq!(buf, b"prefix:value1");
    }

    #[test]
    fn read_value_with_lends_from_the_cache_or_the_scratch_and_never_lends_a_bad_record() {
        let (_fs, reader, ptrs, live) = setup();
        let reader = reader.with_value_cache(1 << 20);
        let mut scratch = Vec::with_capacity(256);
        let address = scratch.as_ptr();
        // From the file twice (the cache admits on a second miss), then from the cache.
        for read in 0..3 {
            let lent = reader
                .read_value_with(&ptrs[0], b"key1", live, &mut scratch, |v| v.to_vec())
                .expect("read");
            assert_eq!(lent, b"value1", "read {read}");
            assert_eq!(scratch.as_ptr(), address, "read {read}: scratch reallocated");
        }
        assert!(reader.value_cache_bytes() > 0, "admitted on its second miss");
        // A cached record of another key, a tombstone and a pointer past the live log are
        // errors, and `use_value` never sees their bytes.
        let shorter = LiveRange {
            end: LogPosition::new(1, ptrs[0].end() - 1),
        };
        for (ptr, key, limits) in [
            (ptrs[0], &b"key2"[..], live),
            (ptrs[1], &b"key2"[..], live),
            (ptrs[0], &b"key1"[..], shorter),
        ] {
            let mut called = false;
            let err = reader.read_value_with(&ptr, key, limits, &mut scratch, |_| called = true);
            assert!(matches!(err, Err(Error::Corruption { .. })), "{err:?}");
            assert!(!called, "a bad record was lent");
        }
    }

    #[test]
    fn a_segment_read_before_it_grew_serves_records_appended_since() {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        let mut w = VlogWriter::create(fs_dyn(&fs), dir.clone(), 1, opts()).expect("create");
        let reader = VlogReader::new(fs_dyn(&fs), dir, opts());
        for i in 0..20u8 {
            let key = [b'k', i];
            let value = vec![i; 50];
            let entry = BatchEntry {
                kind: ValueKind::Value,
                key: &key,
                value: &value,
            };
            let ptrs = w.append_batch(u64::from(i) + 1, &[entry]).expect("append");
            w.sync().expect("sync");
            let live = LiveRange { end: w.end() };
            assert_eq!(reader.read_value(&ptrs[0], &key, live).expect("read"), value);
        }
    }

    #[test]
    fn rejects_offset_beyond_file_end_wrong_key_kind_and_length() {
        let (_fs, reader, ptrs, live) = setup();
        let all = LiveRange {
            end: LogPosition::new(1, u64::MAX),
        };
        let beyond = ValuePointer {
            offset: live.end.offset + 100,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&beyond, b"key1", all), "beyond file end");
        assert_corruption(reader.read_value(&ptrs[0], b"key2", live), "different key");
        assert_corruption(
            reader.read_value(&ptrs[1], b"key2", live),
            "deletion record",
        );
        let longer = ValuePointer {
            len: ptrs[0].len + 1,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&longer, b"key1", live), "length mismatch");
        let shifted = ValuePointer {
            offset: ptrs[0].offset + 1,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&shifted, b"key1", live), "misaligned");
        let huge = ValuePointer {
            len: u32::MAX,
            ..ptrs[0]
        };
        assert_corruption(reader.read_value(&huge, b"key1", all), "huge length");
    }

    #[test]
    fn rejects_bad_crc_and_missing_segment() {
        let (fs, reader, ptrs, live) = setup();
        let path = vlog_file_name(Path::new("/db"), 1);
        let mut bytes = fs.contents(&path).expect("segment");
        let last_value_byte = ptrs[0].end() as usize - 1;
        bytes[last_value_byte] ^= 0x01;
        fs.set_contents(&path, &bytes).expect("set_contents");
        assert_corruption(reader.read_value(&ptrs[0], b"key1", live), "bad crc");

        fs.remove(&path).expect("remove");
        reader.forget_segment(1);
        assert_corruption(
            reader.read_value(&ptrs[0], b"key1", live),
            "missing segment",
        );
    }

    /// A segment GC deleted and forgot leaves no handle cached (it would hold the deleted
    /// file's space until evicted), and an open after the deletion caches none either; a
    /// handle cached before the forget is dropped by it. (The race this guards, a read
    /// that opened the segment before the deletion, is the next test's.)
    #[test]
    fn a_deleted_and_forgotten_segment_keeps_no_handle_cached() {
        let (fs, reader, ptrs, live) = setup();
        assert_eq!(
            reader.read_value(&ptrs[0], b"key1", live).expect("read"),
            b"value1"
        );
        assert_eq!(reader.cached_segments(), vec![1]);
        fs.remove(&vlog_file_name(Path::new("/db"), 1)).expect("remove");
        reader.forget_segment(1);
        assert!(reader.cached_segments().is_empty());
        assert_corruption(reader.read_value(&ptrs[0], b"key1", live), "deleted segment");
        assert!(
            reader.cached_segments().is_empty(),
            "a deleted segment was cached again"
        );
    }

    /// The race itself: a read that opened segment 1 before its deletion caches the handle
    /// after GC forgot it. The handle serves that read but is not cached; without the
    /// check it stayed cached, holding the deleted file's space.
    #[test]
    fn a_handle_opened_before_its_segment_was_deleted_and_forgotten_is_not_cached() {
        let (fs, reader, _ptrs, _live) = setup();
        let forgets_before = reader.forgets.load(Ordering::Acquire);
        let opened = reader.open_segment(1).expect("open");
        fs.remove(&vlog_file_name(Path::new("/db"), 1)).expect("remove");
        reader.forget_segment(1);
        let used = reader.cache_handle(1, opened, forgets_before);
        assert!(used.reaches(1).expect("len"), "the racing read keeps its handle");
        assert!(
            reader.cached_segments().is_empty(),
            "the deleted segment's handle stayed cached"
        );
        // An open that began after the forget caches as before.
        let fresh = VlogReader::new(Arc::clone(&reader.fs), reader.dir.clone(), opts());
        fs.set_contents(&vlog_file_name(Path::new("/db"), 2), b"x").expect("write");
        let forgets_before = fresh.forgets.load(Ordering::Acquire);
        fresh.cache_handle(2, fresh.open_segment(2).expect("open"), forgets_before);
        assert_eq!(fresh.cached_segments(), vec![2]);
    }

    /// The values of a `read_runs` answer, each error as its kind's name (errors hold
    /// no `PartialEq`).
    fn batched_values(batched: &[Vec<Result<Vec<u8>>>]) -> Vec<Vec<Result<Vec<u8>, String>>> {
        (batched.iter())
            .map(|run| {
                (run.iter())
                    .map(|r| match r {
                        Ok(v) => Ok(v.clone()),
                        Err(Error::Corruption { .. }) => Err("corruption".to_string()),
                        Err(e) => Err(format!("{e}")),
                    })
                    .collect()
            })
            .collect()
    }

    /// `read_runs` gives each pointer what `read_run` of its own run gives: adjacent runs,
    /// scattered ones, and a run holding a pointer past the live log (that pointer fails,
    /// its neighbours do not) — on a real file system, where the batch may go through
    /// io_uring, and on `MemFs`, where it is read one by one.
    #[test]
    fn read_runs_matches_read_run_for_every_pointer() {
        let temp = tempfile::tempdir().expect("tempdir");
        let posix: Arc<dyn FileSystem> = Arc::new(crate::fs::PosixFs::new());
        let mem: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        for (fs, dir) in [(posix, temp.path().to_path_buf()), (mem, PathBuf::from("/db"))] {
            fs.create_dir_all(&dir).expect("mkdir");
            let options = VlogOptions {
                segment_size: 1 << 20,
                ..opts()
            };
            let mut w = VlogWriter::create(Arc::clone(&fs), dir.clone(), 1, options.clone())
                .expect("create");
            let keys: Vec<Vec<u8>> = (0..120).map(|i| format!("key{i:03}").into_bytes()).collect();
            let values: Vec<Vec<u8>> = (0..120)
                .map(|i| format!("value-{i}-").repeat(i % 7 + 1).into_bytes())
                .collect();
            let entries: Vec<BatchEntry<'_>> = (keys.iter().zip(&values))
                .map(|(key, value)| BatchEntry {
                    kind: ValueKind::Value,
                    key,
                    value,
                })
                .collect();
            let ptrs = w.append_batch(1, &entries).expect("append");
            w.sync().expect("sync");
            let live = LiveRange { end: w.end() };
            let reader = VlogReader::new(Arc::clone(&fs), dir.clone(), options);
            let read = |i: usize| (ptrs[i], keys[i].clone());
            let mut past_the_log = read(61);
            past_the_log.0.offset = live.end.offset + 100;
            let bad_offset = past_the_log.0.offset;
            let runs: Vec<Vec<(ValuePointer, Vec<u8>)>> = vec![
                (0..10).map(read).collect(),                     // back to back
                [30, 5, 90, 44].into_iter().map(read).collect(), // scattered
                vec![read(60), past_the_log, read(62)],          // one bad pointer
                (70..110).map(read).collect(),                   // a long run
                vec![read(119)],
            ];
            let inputs: Vec<(&[PointerAndKey], LiveRange)> =
                runs.iter().map(|run| (run.as_slice(), live)).collect();
            // Buffers given for some pointers (of another length, holding old bytes), not
            // for others: each value is the same either way.
            let buffers: Vec<Vec<Vec<u8>>> = (runs.iter())
                .map(|run| (0..run.len() / 2).map(|i| vec![7u8; i * 3]).collect())
                .collect();
            // A read that gives up (`read_runs_if_cached` finding a page gone) returns
            // every buffer it took, and reading with them afterwards gives the same values.
            let mut given_back = buffers.clone();
            assert!(reader.read_runs_with(&inputs, &mut given_back, |_| None).is_none());
            let counts = |b: &Vec<Vec<Vec<u8>>>| b.iter().map(Vec::len).collect::<Vec<_>>();
            assert_eq!(counts(&given_back), counts(&buffers));
            let batched = reader.read_runs(&inputs, buffers);
            let again = reader.read_runs(&inputs, given_back);
            assert_eq!(batched_values(&again), batched_values(&batched));
            assert_eq!(batched.len(), runs.len());
            for (run, got) in runs.iter().zip(&batched) {
                let one = reader.read_run(run, live, vec![b"stale".to_vec(); run.len()]);
                assert_eq!(got.len(), run.len());
                for ((got, want), (ptr, key)) in got.iter().zip(&one).zip(run) {
                    match (got, want) {
                        (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", String::from_utf8_lossy(key)),
                        (Err(Error::Corruption { .. }), Err(Error::Corruption { .. })) => {
                            assert_eq!(ptr.offset, bad_offset, "only the bad one fails")
                        }
                        other => panic!("{}: {other:?}", String::from_utf8_lossy(key)),
                    }
                }
            }
            // From the page cache (the bytes were just written): the same values, and the
            // same verdict for the pointer past the log (refused by its check, unread).
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            if dir.starts_with(temp.path()) && crate::fs::page_cache_reads_work(&dir) {
                let mut none = Vec::new();
                let cached = reader.read_runs_if_cached(&inputs, &mut none).expect("cached");
                assert_eq!(batched_values(&cached), batched_values(&batched));
            }
            let index = |k: &[u8]| -> usize {
                String::from_utf8_lossy(&k[3..]).parse().expect("index")
            };
            for (run, got) in runs.iter().zip(&batched) {
                for ((_, key), got) in run.iter().zip(got) {
                    if let Ok(value) = got {
                        assert_eq!(value, &values[index(key)]);
                    }
                }
            }
        }
    }

    #[test]
    fn reader_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<VlogReader>();
    }
}
