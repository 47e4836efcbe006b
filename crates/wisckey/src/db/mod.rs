//! The database facade: `Db` ties the write path, the LSM-tree of keys and value pointers,
//! the value log and the background thread together.
//!
//! Lock order (never acquire against it): write-queue leadership → `state` → `vlog`.
//! The background thread never holds `vlog` and `state` at once except in that order.
//!
//! Invariants kept here (see docs/DESIGN.md for the full list):
//! - every write is appended to the value log before it enters a memtable, and is visible to
//!   readers only after its memtable insert (readers use `visible_seq`);
//! - immutable memtables are flushed oldest first, and the manifest's value-log `head` only
//!   moves forward, to the end position of a flushed memtable, after that memtable's table and
//!   the log bytes before the position are durable;
//! - the first background error other than a full disk is latched; later writes return it
//!   (a full disk is retried: `background`).

pub(crate) mod background;
mod check;
mod checkpoint;
mod gc;
mod properties;
mod read;
mod recovery;
mod repair;
mod space;
mod write;

pub use check::{CheckPhase, CheckProblem, CheckProgress, CheckReport};
pub use checkpoint::CheckpointReport;
pub use gc::{AutoClusterTotals, DbStats, GcOptions, GcTotals, ValueLogStats};
pub use recovery::{RecoveryReport, SalvagedDamage};
pub use repair::{RepairReport, LOST_DIR};

pub(crate) use crate::vlog::PointerRead;
pub(crate) use read::plan_pointer_read;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::iter::readahead::ReaderPool;
use crate::iter::DbIterator;
use crate::iter::{Keys, Range};
use crate::key::SequenceNumber;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::position::LogPosition;
use crate::snapshot::{Snapshot, SnapshotRegistry};
use crate::sstable::{BlockCache, TableCache};
use crate::version::{TableSource, VersionSet, NUM_LEVELS};
use crate::vlog::{ValueLog, VlogWriter};

use write::WriteQueue;

/// A memtable that no longer takes writes, waiting to be flushed to L0.
#[derive(Debug, Clone)]
pub(crate) struct ImmutableMemtable {
    pub table: Arc<MemTable>,
    /// Value-log position just past the last record in `table`: the new replay head once
    /// this memtable is durable in an SSTable.
    pub log_end: LogPosition,
    /// Value-log bytes appended while it was the active memtable (relocations included,
    /// `MemTable::relocated` says how many): the log its flush covers.
    pub log_bytes: u64,
}

/// State protected by `DbInner::state`.
#[derive(Debug)]
pub(crate) struct State {
    pub mem: Arc<MemTable>,
    /// Oldest first.
    pub imms: VecDeque<ImmutableMemtable>,
    /// Immutable memtables flushed (popped from `imms`) since open: a waiter for the ones
    /// that exist now waits for this count, not for `imms` to be empty, which writers may
    /// keep it from ever being.
    pub imms_flushed: u64,
    pub versions: VersionSet,
    pub bg_error: Option<Error>,
    /// Set while background work fails for lack of disk space or of file handles (not
    /// latched: it is retried, and writes resume once space or handles are back). Writers
    /// that would have to wait for that work fail with it instead of waiting.
    pub no_space: Option<Error>,
    /// Table numbers being written by a flush or compaction: not yet in any version, and
    /// not to be deleted as obsolete.
    pub pending_outputs: HashSet<u64>,
    /// Outputs of installs whose manifest write failed: the edit may be on disk, so they
    /// stay in `pending_outputs` until the next install succeeds. That one rewrote the
    /// manifest from memory (a failed write makes the next one roll), so no manifest
    /// CURRENT names refers to them any more and the sweep may take them.
    pub outputs_of_failed_installs: Vec<u64>,
    /// Value-log segments GC removed from the log whose files are not deleted yet (a
    /// snapshot or iterator may still read them).
    pub gc_removed: std::collections::BTreeMap<u64, GcRemoval>,
    /// Bytes of segment files GC deleted since open.
    pub gc_freed_bytes: u64,
    /// Segments a collection could not read cleanly: kept, not tried again until reopen.
    pub gc_unreadable: std::collections::BTreeSet<u64>,
    /// Whether the file system can punch holes: unknown until GC first needs to.
    pub punch_supported: Option<bool>,
}

/// The memtables and the version a read consults: one value, replaced (never changed in
/// place) whenever any of them changes, so a reader that loads it sees a set that was
/// current at one instant.
#[derive(Debug)]
pub(crate) struct ReadSources {
    pub mem: Arc<MemTable>,
    /// Newest first.
    pub imms: Vec<Arc<MemTable>>,
    pub version: Arc<crate::version::Version>,
    /// Which memtable since open `mem` is (the first is 0); the oldest still in memory is
    /// `mem_number - imms.len()`. Memtables leave memory oldest first, so a memtable
    /// numbered at least that is still here.
    pub mem_number: u64,
}

impl ReadSources {
    pub(crate) fn of(state: &State) -> ReadSources {
        ReadSources {
            mem: Arc::clone(&state.mem),
            imms: state
                .imms
                .iter()
                .rev()
                .map(|i| Arc::clone(&i.table))
                .collect(),
            version: state.versions.current(),
            mem_number: state.imms_flushed + state.imms.len() as u64,
        }
    }

    /// Whether these memtables hold every write since a view whose newest memtable was
    /// `number` (a GC judgement's mark): that memtable is still in memory. `None`: unknown.
    pub(crate) fn hold_writes_since(&self, number: Option<u64>) -> bool {
        let oldest_in_memory = self.mem_number - self.imms.len() as u64;
        number.is_some_and(|number| oldest_in_memory <= number)
    }
}

/// Republishes `DbInner::read_sources` from `state`. Called with the state lock held, right
/// after `mem`, `imms` or the current version changed, so publications follow the changes
/// in order.
pub(crate) fn publish_read_sources(inner: &DbInner, state: &State) {
    inner.read_sources.store(Arc::new(ReadSources::of(state)));
}

/// A segment GC removed from the log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GcRemoval {
    /// The file's bytes on disk: its length less the ranges already punched (those count
    /// in `GcTotals::bytes_punched`, not again in `bytes_freed`).
    pub size: u64,
    /// Every relocation of its records has a sequence number at most this: a snapshot at or
    /// above it reads the relocated copies, an older one may read the segment.
    pub relocated_through: SequenceNumber,
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub options: Options,
    pub fs: Arc<dyn FileSystem>,
    /// What a checkpoint writes its copy through: the file system the database was opened
    /// with (`fs` itself, unless the handle is read-only and `fs` refuses every change).
    pub copy_fs: Arc<dyn FileSystem>,
    pub state: Mutex<State>,
    /// What reads consult, republished under `state` by every change to `State::mem`,
    /// `State::imms` or the current version ([`publish_read_sources`]), so a read takes no
    /// lock: with the state mutex taken per read, 16 reader threads ran slower than 8.
    pub read_sources: ArcSwap<ReadSources>,
    /// Signalled whenever background work finishes or is needed.
    pub bg_cv: Condvar,
    /// Signalled when a flush or compaction finished (GC may have work) and on shutdown.
    pub gc_cv: Condvar,
    /// One value-log GC at a time (background or `Db::gc`).
    pub gc_lock: Mutex<()>,
    /// Callers waiting in [`DbInner::lock_out_gc`]: a background GC round ends at its next
    /// step while one waits, since under sustained overwrites a round can go on for minutes.
    pub gc_lock_wanted: AtomicUsize,
    pub gc_totals: Mutex<GcTotals>,
    /// Which key ranges scans read out of log order (`Options::auto_cluster_ratio`).
    pub scan_heat: Mutex<crate::gc::heat::ScanHeat>,
    /// What the clustering passes that scans triggered have done since open.
    pub auto_cluster_totals: Mutex<AutoClusterTotals>,
    /// Paces writers once their writes would take background GC far behind its target
    /// (`gc::pace`).
    pub gc_pacer: crate::gc::pace::WritePacer,
    /// What GC's victims freed per second, smoothed over the victims since open (those of
    /// `Db::gc` too: GC's rate when it does not yield, as background GC does not while
    /// writers are paced): writers are paced to it.
    pub gc_freeing: Mutex<crate::gc::pace::FreeingRate>,
    /// The share of the log written (relocations left out) that flushes find dead, for the
    /// garbage of the log not flushed yet.
    pub uncounted_garbage: Mutex<crate::gc::pace::UncountedGarbage>,
    /// Sampled dead-byte estimates per segment (not manifest state: estimates).
    pub gc_samples: Mutex<std::collections::BTreeMap<u64, gc::DeadSample>>,
    /// Dead records flushes found, on their way to being punched out of their segments.
    pub punches: Mutex<crate::gc::punch::PunchQueue>,
    pub writers: WriteQueue,
    /// The value log: writer, reader (shared with scan read-ahead jobs, which must not keep
    /// the whole database alive) and the positions the writer publishes.
    pub vlog: ValueLog,
    pub table_cache: Arc<TableCache>,
    pub tables: Arc<dyn TableSource>,
    pub snapshots: Arc<SnapshotRegistry>,
    /// Highest sequence number whose write is fully applied and may be read.
    pub visible_seq: AtomicU64,
    /// Value-log bytes appended since the current memtable was started.
    pub log_bytes_in_mem: AtomicU64,
    pub shutting_down: AtomicBool,
    /// Set by `close` before its last flush: GC's and clustering's relocations are refused
    /// from then on (`Closed`), so none lands in a memtable after that flush and a reopen
    /// after a clean close replays nothing. (A GC round ending meanwhile may still switch
    /// to an empty memtable that is never flushed: it holds no record to replay.)
    pub closing: AtomicBool,
    /// Serializes compactions (background and manual).
    pub compaction_lock: Mutex<()>,
    /// Number of `compact_range` calls waiting for or holding `compaction_lock`; while it is
    /// nonzero the background thread leaves compaction alone (and keeps flushing).
    pub manual_compaction: AtomicUsize,
    /// Serializes obsolete-file sweeps.
    pub deletion_lock: Mutex<()>,
    /// Serializes version installs (prepare → manifest I/O → finish), so the manifest's
    /// append and fsync run without the `state` lock. Taken before `state`.
    pub manifest_lock: Mutex<()>,
    /// Reader threads for scan read-ahead, started by the first scan that needs them.
    pub readers: std::sync::OnceLock<ReaderPool>,
    /// Background compaction attempts that found the compaction lock taken (by a manual
    /// compaction) and did nothing; lets a test see the background thread spin.
    pub compaction_lock_misses: AtomicU64,
    /// Read-ahead batches of scans read on the scan's own thread because the page cache
    /// held all of them (`DbIterator::issue_batch`); tests look at it.
    pub scan_batches_read_cached: AtomicU64,
    /// The `RESERVE` file holds its space (see `space`).
    pub reserve_present: AtomicBool,
    /// The reserve was released for work that must finish and is not made again yet:
    /// groups with puts must not take the space it gave back (`space::puts_may_take_space`).
    pub reserve_spent: AtomicBool,
    /// The reserve was released for background work (a flush or compaction that met a full
    /// disk) that has not succeeded since: its space is that work's, and no put group may
    /// make the reserve again out of it (`space::puts_may_take_space`).
    pub reserve_held_for_background: AtomicBool,
    /// Held while the reserve file is created or released, so a release that races a
    /// creation waits for it and gives its space back instead of finding no reserve.
    pub reserve_lock: Mutex<()>,
    /// The last write group that reserved log space failed for lack of it, and no group
    /// with puts has reserved since: delete-only batches are then grouped only with each
    /// other (`write::collect_group`), so that they may spend the disk reserve.
    pub log_space_short: AtomicBool,
    /// What open found and salvaged.
    pub recovery_report: RecoveryReport,
    /// Opened with [`Db::open_read_only`]: `fs` is a `ReadOnlyFs`, no background work runs
    /// (only the short table preload, which reads), and every write API is refused up front.
    pub read_only: bool,
    /// A read-only open's end of the valid log as replayed (`None` for a read-write open,
    /// whose writer sits there): its writer sits at the newest segment's file length,
    /// past a torn tail it may not cut, which `Db::check` must not take for records.
    pub read_only_log_end: Option<crate::position::LogPosition>,
    /// The directory's lock: exclusive, or shared for a read-only open (`None` only for a
    /// read-only open of a directory without a LOCK file).
    _lock: Option<Box<dyn FileLock>>,
}

impl DbInner {
    /// Takes `gc_lock` for work that GC must not run beside (a checkpoint, a segment's
    /// check) or for a `Db::gc`, asking a background GC round that holds it to end at its
    /// next step.
    pub fn lock_out_gc(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.gc_lock_wanted.fetch_add(1, Ordering::AcqRel);
        let guard = self.gc_lock.lock();
        self.gc_lock_wanted.fetch_sub(1, Ordering::AcqRel);
        guard
    }

    /// Refuses `what` on a read-only database.
    pub fn check_writable(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(what.to_string()));
        }
        Ok(())
    }

    /// The scan read-ahead pool (started on first use).
    pub fn readers(&self) -> &ReaderPool {
        self.readers
            .get_or_init(|| ReaderPool::start(self.options.scan_readahead_threads))
    }
}

impl std::fmt::Debug for DbInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbInner").field("dir", &self.dir).finish()
    }
}

/// An open wisckey database. `Send + Sync`: share it between threads (e.g. in an `Arc`).
/// Dropping it closes it cleanly; call [`Db::close`] to see errors from closing.
#[derive(Debug)]
pub struct Db {
    inner: Arc<DbInner>,
    background: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Opens (or creates, per `options`) the database in `path`, replaying the value log
    /// from the persisted head.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.close()?;
    /// // Reopening replays the value log from the last flushed position.
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options { create_if_missing: false, ..Default::default() })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let recovery::Recovered {
            mut inner,
            report,
            flush_replayed,
            replayed_linked,
        } = recovery::open(path.as_ref(), options, false)?;
        inner.recovery_report = report;
        let inner = Arc::new(inner);
        let handles = background::spawn(Arc::clone(&inner))?;
        let db = Db {
            inner,
            background: Mutex::new(handles),
        };
        if flush_replayed {
            match db.flush() {
                Ok(()) => {}
                // The records stay in the memtable, and the next open replays them again
                // through the new segment's link to the cut one.
                Err(e) if replayed_linked => log::warn!(
                    "wisckey: could not flush the records replayed before the log's new \
                     segment: {e}"
                ),
                // Nothing leads a replay from them into the new segment: writes there would
                // be a hole to the next open. Refuse now; the next open replays them again.
                Err(e) => return Err(e),
            }
        }
        db.background
            .lock()
            .extend(recovery::spawn_table_preload(&db.inner));
        Ok(db)
    }

    /// Opens the existing database in `path` for reading only: nothing in the directory is
    /// created, written, truncated, renamed or deleted, by the open or by anything later.
    ///
    /// - The value log is replayed into memory from the persisted head, as [`Db::open`]
    ///   does, so reads see every write acknowledged before the last writer stopped
    ///   (flushed or not). A torn tail is left on disk and skipped; damage is refused (or,
    ///   under `RecoveryMode::SalvagePrefix`, stepped over in memory and reported).
    /// - It takes a *shared* lock on the directory's `LOCK` file: any number of read-only
    ///   opens coexist (in this process or others), and none coexists with a read-write
    ///   [`Db::open`] (either fails with [`Error::Locked`]). A directory without a `LOCK` file
    ///   is opened unlocked (creating it would be a write).
    /// - No background work runs (no flush, compaction or GC; only the short-lived thread
    ///   that reads tables ahead, [`Options::table_preload_size`]), and every call that would
    ///   write — `put`, `delete`, `write`, `delete_range`, `flush`, `sync`, `compact_range`,
    ///   `gc`, `cluster_values` — fails with [`Error::ReadOnly`]. [`Db::checkpoint`] copies without writing to
    ///   the database. `close` writes nothing.
    /// - `create_if_missing` is ignored: a missing database is `InvalidArgument`.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// drop(db);
    /// let reader = wisckey::Db::open_read_only(dir.path(), wisckey::Options::default())?;
    /// let other = wisckey::Db::open_read_only(dir.path(), wisckey::Options::default())?;
    /// assert_eq!(reader.get("k")?, Some(b"v".to_vec()));
    /// assert_eq!(other.get("k")?, Some(b"v".to_vec()));
    /// assert!(reader.put("k", "w").is_err_and(|e| e.is_read_only()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let recovery::Recovered {
            mut inner, report, ..
        } = recovery::open(path.as_ref(), options, true)?;
        inner.recovery_report = report;
        let inner = Arc::new(inner);
        let preload = recovery::spawn_table_preload(&inner);
        Ok(Db {
            inner,
            background: Mutex::new(preload.into_iter().collect()),
        })
    }

    /// Whether this database was opened with [`Db::open_read_only`].
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// assert!(!db.is_read_only());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// Stores `value` under `key`.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put(b"key", b"value")?;
    /// db.put_opt("durable", "now", &wisckey::WriteOptions { sync: true })?;
    /// assert_eq!(db.get("key")?, Some(b"value".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`Db::put`] with write options: `sync: true` makes the write durable (one
    /// `fdatasync` of the value log, shared by every writer in its commit group) before the
    /// call returns; without it a crash of the machine (not of the process) can lose it.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// let durable = wisckey::WriteOptions { sync: true };
    /// db.put_opt(b"order:17", b"paid", &durable)?; // survives a power cut once it returns
    /// assert_eq!(db.get(b"order:17")?, Some(b"paid".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: &WriteOptions,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        // Before the batch copies them: an oversize value must not be copied first.
        crate::options::check_entry_size(key.len(), value.len()).map_err(Error::InvalidArgument)?;
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_opt(batch, opts)
    }

    /// Removes `key` (a no-op if absent, but still logged).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.delete("k")?;
    /// assert_eq!(db.get("k")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// [`Db::delete`] with write options (`sync`: durable before it returns).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("session", "token")?;
    /// db.delete_opt("session", &wisckey::WriteOptions { sync: true })?;
    /// assert_eq!(db.get("session")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, opts: &WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write_opt(batch, opts)
    }

    /// Applies a batch atomically.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// let mut batch = wisckey::WriteBatch::new();
    /// batch.put("a", "1").put("b", "2").delete("a");
    /// db.write(batch)?; // all or nothing
    /// assert_eq!((db.get("a")?, db.get("b")?), (None, Some(b"2".to_vec())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// [`Db::write`] with write options (`sync`: the whole batch is durable before it
    /// returns; a batch is never half applied, synced or not).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// let mut batch = wisckey::WriteBatch::new();
    /// batch.put("from", "90").put("to", "110");
    /// db.write_opt(batch, &wisckey::WriteOptions { sync: true })?;
    /// assert_eq!(db.get("to")?, Some(b"110".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_opt(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.inner.check_writable("a write")?;
        validate_batch(&batch, self.inner.options.max_batch_size)?;
        write::write(&self.inner, batch, opts.sync)
    }

    /// The value stored under `key`, or `None`.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", vec![7u8; 10_000])?; // kept in the value log
    /// assert_eq!(db.get("k")?.map(|v| v.len()), Some(10_000));
    /// assert_eq!(db.get("missing")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// [`Db::get`] with read options: `snapshot` reads the value as of that snapshot.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v1")?;
    /// let before = wisckey::ReadOptions { snapshot: Some(db.snapshot()), ..Default::default() };
    /// db.put("k", "v2")?;
    /// assert_eq!(db.get_opt("k", &before)?, Some(b"v1".to_vec()));
    /// assert_eq!(db.get_opt("k", &wisckey::ReadOptions::default())?, Some(b"v2".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_opt(&self, key: impl AsRef<[u8]>, opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        read::get(&self.inner, key.as_ref(), opts)
    }

    /// [`Db::get`] into a buffer the caller owns and reuses: `buf` is cleared, then holds
    /// the value, and the call returns whether there was one. The buffer keeps its capacity,
    /// so a loop of reads with one buffer allocates no new value buffer once it is large
    /// enough (the engine's own read still copies the value once; this saves the caller's
    /// allocation and free per read). On `Ok(false)` and on error `buf` is empty.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", vec![1u8; 4096])?; // in the value log
    /// db.put("b", "small")?;          // inline in the key index
    /// let mut buf = Vec::with_capacity(8192);
    /// for key in ["a", "b", "missing"] {
    ///     if db.get_into(key, &mut buf)? {
    ///         println!("{key}: {} bytes", buf.len());
    ///     }
    /// }
    /// assert!(buf.is_empty() && buf.capacity() >= 8192); // the same buffer throughout
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_into(&self, key: impl AsRef<[u8]>, buf: &mut Vec<u8>) -> Result<bool> {
        self.get_into_opt(key, &ReadOptions::default(), buf)
    }

    /// [`Db::get_into`] with read options (a snapshot to read at).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "old")?;
    /// let at = wisckey::ReadOptions { snapshot: Some(db.snapshot()), ..Default::default() };
    /// db.put("k", "new")?;
    /// let mut buf = Vec::new();
    /// assert!(db.get_into_opt("k", &at, &mut buf)?);
    /// assert_eq!(buf, b"old");
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_into_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions,
        buf: &mut Vec<u8>,
    ) -> Result<bool> {
        read::get_into(&self.inner, key.as_ref(), opts, buf).inspect_err(|_| buf.clear())
    }

    /// [`Db::get`] that lends the value to `use_value` instead of returning a copy, and
    /// returns what `use_value` returns (`None`: no value). The value is borrowed from where
    /// it lies: the value cache (a hot value is copied only where `use_value` puts it, e.g.
    /// straight into a network reply), the memtable, or `scratch`, which a read from the
    /// value log fills (it is cleared first and keeps its capacity, so one buffer serves a
    /// loop of reads). On an error `use_value` is not called.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", vec![7u8; 10_000])?; // kept in the value log
    /// let (mut scratch, mut reply) = (Vec::new(), Vec::new());
    /// let found = db.get_with("k", &mut scratch, |value| {
    ///     reply.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
    ///     reply.extend_from_slice(value);
    /// })?;
    /// assert!(found.is_some() && reply.len() == 10_000 + 8);
    /// assert_eq!(db.get_with("missing", &mut scratch, |value| value.len())?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_with<R>(
        &self,
        key: impl AsRef<[u8]>,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        self.get_with_opt(key, &ReadOptions::default(), scratch, use_value)
    }

    /// [`Db::get_with`] with read options (a snapshot to read at).
    pub fn get_with_opt<R>(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        read::get_with(&self.inner, key.as_ref(), opts, scratch, use_value)
    }

    /// A named property of the database as text, or `None` for a name it does not know
    /// (LevelDB's `GetProperty`). The names ([`Db::PROPERTY_NAMES`]):
    ///
    /// | name | value |
    /// |---|---|
    /// | `wisckey.num-files-at-level<N>` | table files in level N (0..=6) |
    /// | `wisckey.bytes-at-level<N>` | table bytes in level N |
    /// | `wisckey.stats` | several lines for people: files and bytes per level, the value log, GC |
    /// | `wisckey.total-sst-size` | bytes of every table (the key index) |
    /// | `wisckey.vlog-live-bytes` | value-log bytes still needed |
    /// | `wisckey.vlog-total-bytes` | value-log bytes on disk |
    /// | `wisckey.space-amplification` | the log's bytes on disk over its live bytes |
    /// | `wisckey.estimate-num-keys` | entries in memtables and tables (overwritten versions and deletes count: an upper estimate) |
    /// | `wisckey.num-immutable-memtables` | memtables waiting to be flushed |
    /// | `wisckey.last-sequence` | the sequence number of the newest visible write |
    ///
    /// Numbers are decimal integers (`space-amplification` has three decimals). The
    /// value-log properties and `stats` compute what [`Db::stats`] does.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", vec![0u8; 4096])?;
    /// db.flush()?;
    /// assert_eq!(db.property("wisckey.num-files-at-level0")?.as_deref(), Some("1"));
    /// let live: u64 = db.property("wisckey.vlog-live-bytes")?.unwrap_or_default().parse().unwrap();
    /// assert!(live >= 4096);
    /// println!("{}", db.property("wisckey.stats")?.unwrap_or_default());
    /// assert_eq!(db.property("leveldb.stats")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn property(&self, name: &str) -> Result<Option<String>> {
        properties::property(&self.inner, name)
    }

    /// The names [`Db::property`] answers (`<N>` stands for a level number).
    pub const PROPERTY_NAMES: &'static [&'static str] = properties::NAMES;

    /// About how many bytes the keys in `range` take on disk: the bytes of the key index's
    /// tables that cover the range (whole tables inside it; for a table it cuts, the data
    /// blocks from the one holding its start to the one holding its end, found in the
    /// table's index without reading data), plus the values behind those keys' pointers,
    /// estimated as the value log's live bytes in the share of the key index the range
    /// covers (values are assumed spread over the keys as evenly as their index bytes).
    /// Like LevelDB's `GetApproximateSizes`, it counts flushed data only: writes still in
    /// the memtable are not in it (call [`Db::flush`] first to include them). Cheap: no
    /// data block and no value is read.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for i in 0..100u32 {
    ///     db.put(format!("k{i:03}"), vec![7u8; 1000])?;
    /// }
    /// db.flush()?;
    /// let all = db.approximate_size::<&str, _>(..)?;
    /// assert!(all >= 100_000, "{all}");
    /// assert_eq!(db.approximate_size("x".."z")?, 0); // no table reaches there
    /// # Ok(())
    /// # }
    /// ```
    pub fn approximate_size<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<u64> {
        // As `range` does: a range that starts after it ends is a mistake, not "empty".
        checked_bounds(&range)?;
        properties::approximate_size(
            &self.inner,
            bound_bytes(range.start_bound()),
            bound_bytes(range.end_bound()),
        )
    }

    /// A consistent view of the current state.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "old")?;
    /// let snapshot = db.snapshot();
    /// db.put("k", "new")?;
    /// let at = wisckey::ReadOptions { snapshot: Some(snapshot), ..Default::default() };
    /// assert_eq!(db.get_opt("k", &at)?, Some(b"old".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        self.inner
            .snapshots
            .register_current(&self.inner.visible_seq)
    }

    /// An iterator over the keys (and lazily read values) visible at the read options'
    /// snapshot (or now), within its bounds. It starts unpositioned: call a seek first.
    /// As a cursor it moves both ways (`seek`, `seek_to_first`, `seek_to_last`, `next`,
    /// `prev`; `key`, `value`, `valid`, and `status` for an error that ended it); through
    /// `IntoIterator` it yields `Result<(key, value)>` from its position on.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for k in ["a", "b", "c"] {
    ///     db.put(k, k.to_uppercase())?;
    /// }
    /// let mut it = db.iter(&wisckey::ReadOptions::default())?;
    /// it.seek(b"b"); // the first key at or after "b"
    /// assert!(it.valid());
    /// assert_eq!((it.key(), it.value()?), (&b"b"[..], b"B".to_vec()));
    /// it.next();
    /// assert_eq!(it.key(), b"c");
    /// it.prev();
    /// it.prev();
    /// assert_eq!(it.key(), b"a");
    /// it.seek_to_last();
    /// assert_eq!(it.key(), b"c");
    /// it.next();
    /// assert!(!it.valid()); // past the end
    /// it.status()?;          // no error ended it
    /// it.seek(b"b");
    /// let rest: Vec<(Vec<u8>, Vec<u8>)> = it.into_iter().collect::<Result<_, _>>()?; // from the cursor on
    /// assert_eq!(rest.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The iterator borrows the database, so the database cannot be closed (or dropped)
    /// while it is alive:
    ///
    /// ```compile_fail
    /// # fn main() -> wisckey::Result<()> {
    /// let dir = tempfile::tempdir().expect("tempdir");
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// let it = db.iter(&wisckey::ReadOptions::default())?;
    /// db.close()?; // error: cannot move out of `db` because it is borrowed
    /// drop(it);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter(&self, opts: &ReadOptions) -> Result<DbIterator<'_>> {
        read::iter(&self.inner, opts)
    }

    /// The entries whose keys lie in `range` (any `RangeBounds` of byte strings: `..`,
    /// `a..b`, `a..=b`, `(Bound::Excluded(a), Bound::Unbounded)`, ...), in key order, as
    /// `Result<(key, value)>`; iterate from either end with `.rev()` or `next_back`. It
    /// reads one snapshot, taken now. Values behind pointers are read ahead in parallel as
    /// a forward scan goes; `.keys()` reads no value at all.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, k.to_uppercase())?;
    /// }
    /// for entry in db.range("b".."d")? {
    ///     let (key, value) = entry?;
    ///     println!("{key:?} = {value:?}");
    /// }
    /// let newest_first: Vec<Vec<u8>> = db.range::<&str, _>(..)?.rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(newest_first, [b"d", b"c", b"b", b"a"]);
    /// let keys: Vec<Vec<u8>> = db.range("b"..="c")?.keys().collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [b"b", b"c"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<Range<'_>> {
        self.range_opt(range, &ReadOptions::default())
    }

    /// [`Db::range`] with read options: a snapshot to read, `keys_only`, `scan_length_hint`.
    /// The range given here replaces `lower_bound` and `upper_bound`.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", "1")?;
    /// let at = wisckey::ReadOptions { snapshot: Some(db.snapshot()), ..Default::default() };
    /// db.put("b", "2")?; // after the snapshot: not seen
    /// let seen: Vec<(Vec<u8>, Vec<u8>)> = db.range_opt::<&str, _>(.., &at)?.collect::<Result<_, _>>()?;
    /// assert_eq!(seen, [(b"a".to_vec(), b"1".to_vec())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn range_opt<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
        opts: &ReadOptions,
    ) -> Result<Range<'_>> {
        let (lower_bound, upper_bound) = checked_bounds(&range)?;
        let options = ReadOptions {
            lower_bound,
            upper_bound,
            ..opts.clone()
        };
        let with_values = !options.keys_only;
        Ok(Range::new(self, options, with_values))
    }

    /// The entries whose keys start with `prefix`, in key order (a [`Db::range`]).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("user:1", "ann")?;
    /// db.put("user:2", "bob")?;
    /// db.put("order:1", "x")?;
    /// let users: Vec<(Vec<u8>, Vec<u8>)> = db.prefix("user:")?.collect::<Result<_, _>>()?;
    /// assert_eq!(users.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<Range<'_>> {
        let prefix = prefix.as_ref();
        let options = ReadOptions {
            lower_bound: Some(prefix.to_vec()),
            upper_bound: crate::iter::range::prefix_successor(prefix),
            ..ReadOptions::default()
        };
        Ok(Range::new(self, options, true))
    }

    /// The keys in `range`, in key order, as `Result<key>`: no value is read, so a key-only
    /// scan never touches the value log.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", vec![0u8; 100_000])?;
    /// assert_eq!(db.keys::<&str, _>(..)?.count(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn keys<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> Result<Keys<'_>> {
        let opts = ReadOptions {
            keys_only: true,
            ..ReadOptions::default()
        };
        Ok(self.range_opt(range, &opts)?.keys())
    }

    /// The values of `keys`, all read at one moment (one consistent view), in order;
    /// `None` where a key has no value. The value-log reads are issued together on the
    /// database's reader pool and proceed in parallel, so a batch of lookups costs about
    /// one read's latency, not one per key. The first error fails the call.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", vec![1u8; 4096])?;
    /// db.put("c", "small")?;
    /// let values = db.multi_get(&["a", "b", "c"])?;
    /// assert_eq!(values[0].as_deref(), Some(&[1u8; 4096][..]));
    /// assert_eq!(values[1], None);
    /// assert_eq!(values[2].as_deref(), Some(&b"small"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::default())
    }

    /// [`Db::multi_get_opt`] for a caller that cannot hold any amount of values (a server
    /// answering a client's list of keys): `Ok(None)` if the values add up to more than
    /// `max_bytes`. Each value's length is known before it is read, so no more than
    /// `max_bytes` plus one value is ever allocated. Reads in parallel, at one view, as
    /// `multi_get`.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("big", vec![7u8; 10_000])?;
    /// let opts = wisckey::ReadOptions::default();
    /// let two = db.multi_get_within(&["big", "none", "big"], &opts, 20_000)?;
    /// assert_eq!(two.map(|v| v.len()), Some(3));
    /// assert_eq!(db.multi_get_within(&["big", "big", "big"], &opts, 20_000)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn multi_get_within<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions,
        max_bytes: usize,
    ) -> Result<Option<Vec<Option<Vec<u8>>>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        read::multi_get_within(&self.inner, &keys, opts, max_bytes)
    }

    /// A hint before a batch of point reads: brings what the newest memtables hold for
    /// `keys` into the CPU caches, reading no value and no file. A batch of lookups spends
    /// most of its time waiting for memory, one key after another; after this call the
    /// misses of the whole batch have been waited for together. Worth it for batches of
    /// keys written recently (in the memtables); it never changes what a read returns.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", "1")?;
    /// db.prefetch_keys(&["a", "b"]);
    /// assert_eq!(db.get("a")?, Some(b"1".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefetch_keys<K: AsRef<[u8]>>(&self, keys: &[K]) {
        read::touch_memtables(&self.inner.read_sources.load(), keys);
    }

    /// [`Db::multi_get`] at `opts`' snapshot.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", "1")?;
    /// let at = wisckey::ReadOptions { snapshot: Some(db.snapshot()), ..Default::default() };
    /// db.put("b", "2")?;
    /// assert_eq!(db.multi_get_opt(&["a", "b"], &at)?, [Some(b"1".to_vec()), None]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn multi_get_opt<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        read::multi_get(&self.inner, &keys, opts)
    }

    /// Deletes every key in `range` as one atomic batch and returns how many there were.
    /// The keys are those present now (a key-only scan at a snapshot, which reads no value);
    /// a key written in `range` while the call runs may survive it. There are no range
    /// tombstones: the cost is one delete per key, and a range whose keys exceed
    /// `max_batch_size` is refused with `InvalidArgument` before anything is deleted.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k, "v")?;
    /// }
    /// assert_eq!(db.delete_range("b"..="c")?, 2);
    /// assert_eq!(db.keys::<&str, _>(..)?.count(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<u64> {
        self.inner.check_writable("delete_range")?;
        let mut batch = WriteBatch::new();
        let mut deleted = 0u64;
        for key in self.keys(range)? {
            batch.delete(key?);
            deleted += 1;
            if batch.payload_bytes() > self.inner.options.max_batch_size {
                return Err(Error::InvalidArgument(format!(
                    "the range holds more than {deleted} keys, over max_batch_size ({} bytes) \
                     for one atomic delete; nothing was deleted. Delete it in parts",
                    self.inner.options.max_batch_size
                )));
            }
        }
        if deleted > 0 {
            self.write(batch)?;
        }
        Ok(deleted)
    }

    /// Whether `key` has a value. Reads no value (never the value log).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// assert!(db.contains_key("k")?);
    /// db.delete("k")?;
    /// assert!(!db.contains_key("k")?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        read::contains(&self.inner, key.as_ref(), &ReadOptions::default())
    }

    /// Writes the current memtable to an SSTable and waits until every memtable written
    /// so far is durable in the LSM-tree (the value-log head then moves past them).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?; // the memtable is now a table; a reopen replays nothing before it
    /// # Ok(())
    /// # }
    /// ```
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable("flush")?;
        match write::force_memtable_switch(&self.inner) {
            // Every memtable slot is taken and a flush met the full disk: the switch refuses
            // at once, with that flush's error even when space is back by now. Wait for the
            // queued flushes as below (retried every 100 ms; `NoSpace` if the disk stays
            // full), then switch.
            Err(e) if e.is_no_space() => {
                background::wait_for_flushes(&self.inner)?;
                write::force_memtable_switch(&self.inner)?;
            }
            switched => switched?,
        }
        background::wait_for_flushes(&self.inner)
    }

    /// Flushes, then compacts every level overlapping `[begin, end]` (None = unbounded)
    /// down to the last level that holds data. As LevelDB's `CompactRange`, that level's
    /// own tables are merged only with what comes down onto them, not with each other.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("a", "1")?;
    /// db.compact_range(None, None)?;         // everything
    /// db.compact_range(Some(b"a"), Some(b"m"))?; // keys a..=m
    /// # Ok(())
    /// # }
    /// ```
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable("compact_range")?;
        if let (Some(begin), Some(end)) = (begin, end) {
            if begin > end {
                return Err(Error::InvalidArgument(
                    "the range starts after it ends".to_string(),
                ));
            }
        }
        self.flush()?;
        background::compact_range(&self.inner, begin, end)
    }

    /// Makes every write acknowledged so far durable. It does so also after a background
    /// error made the database refuse writes ([`Db::background_error`]), unless that error
    /// was the value log's own (its writer then refuses, and the error is returned).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.sync()?; // every write acknowledged so far is durable
    /// # Ok(())
    /// # }
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.inner.check_writable("sync")?;
        write::sync_log(&self.inner)
    }

    /// Number of table files in each level.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// assert_eq!(db.level_file_counts().iter().sum::<usize>(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn level_file_counts(&self) -> [usize; NUM_LEVELS] {
        let state = self.inner.state.lock();
        let version = state.versions.current();
        std::array::from_fn(|level| version.num_files(level))
    }

    /// Runs value-log garbage collection now, in the calling thread, as `options` says
    /// (by default: compact the key index, then collect every segment with dead records
    /// until nothing is collectable, among the segments there were when the call began:
    /// it returns while writes go on). Returns what it did. Space comes back when a
    /// collected segment's file is deleted, which waits for snapshots and iterators that
    /// may still read it. A segment leaves the log only after a flush has moved the replay
    /// head past its relocated values (on a full disk, where the flush cannot be written,
    /// once they are synced), so each collected segment may write a small table.
    /// Background GC ([`Options::gc_space_amp_target`]) does the same without being asked.
    ///
    /// Errors: `NoSpace` when the disk had no room for the first compaction and nothing
    /// could be collected without it; a victim judged against a damaged table fails with
    /// that table's error (`Corruption`), and the segment is left as it was.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// let dir = tempfile::tempdir().expect("tempdir");
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put(b"k", vec![1u8; 4096])?;
    /// db.put(b"k", vec![2u8; 4096])?;
    /// let done = db.gc(&wisckey::GcOptions::default())?;
    /// assert!(done.bytes_read >= done.bytes_relocated);
    /// assert_eq!(db.get(b"k")?, Some(vec![2u8; 4096]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn gc(&self, options: &GcOptions) -> Result<crate::gc::GcOutcome> {
        self.inner.check_writable("gc")?;
        gc::gc_now(self, &self.inner, options)
    }

    /// Rewrites the values of `range` at the head of the value log in key order, so that
    /// later scans of the range read neighbouring keys' values as long runs of back-to-back
    /// records — a few large reads instead of one random read per value. Worth it for
    /// small values (up to a few KiB) that were written in random order and are scanned
    /// often. Values already back to back with a key-order neighbour (after a first pass,
    /// or loaded in key order) and values of 64 KiB or more are left in place.
    ///
    /// It is online and crash-safe as GC is: each batch of values is appended under write
    /// leadership (not synced: after a crash before the log's next sync, a key still points
    /// at its old copy, which stays until the move is durable), and a key written or
    /// deleted since the pass began keeps its newer value; a value GC moved meanwhile is
    /// moved from where GC put it. The old records become garbage that value-log GC
    /// reclaims once the pass has ended (it reads them until then), so the disk needs room
    /// for a second copy of the range's values: cluster a large database range by range. On
    /// a full disk the pass fails with a no-space error (`Error::is_no_space`) and leaves
    /// the disk reserve to deletes and GC. Returns what it moved and left.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for i in [3u32, 1, 4, 0, 2] {
    ///     db.put(format!("k{i}"), vec![i as u8; 1000])?;
    /// }
    /// let done = db.cluster_values::<&str, _>(..)?;
    /// assert_eq!((done.values_in_log, done.values_relocated), (5, 5));
    /// assert_eq!(db.get("k4")?, Some(vec![4u8; 1000]));
    /// // Now stored in key order: a second pass moves nothing.
    /// assert_eq!(db.cluster_values::<&str, _>(..)?.values_relocated, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster_values<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<crate::gc::ClusterOutcome> {
        self.inner.check_writable("cluster_values")?;
        let (lower_bound, upper_bound) = checked_bounds(&range)?;
        gc::cluster_values(&self.inner, lower_bound, upper_bound, false, false)
    }

    /// What [`Db::cluster_values`] would do to `range` now, without doing it: it reads keys
    /// and value pointers only (no value, no write), so it costs a key-only scan.
    /// `values_relocated` and `bytes_relocated` count the values a pass would move and their
    /// record bytes (writes made meanwhile can change that); `values_changed` is 0.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// for i in [1u32, 0, 2] {
    ///     db.put(format!("k{i}"), vec![7u8; 500])?; // no two key-order neighbours adjacent
    /// }
    /// assert_eq!(db.cluster_values_estimate::<&str, _>(..)?.values_relocated, 3);
    /// db.cluster_values::<&str, _>(..)?;
    /// assert_eq!(db.cluster_values_estimate::<&str, _>(..)?.values_relocated, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cluster_values_estimate<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<crate::gc::ClusterOutcome> {
        let (lower_bound, upper_bound) = checked_bounds(&range)?;
        gc::cluster_values(&self.inner, lower_bound, upper_bound, true, false)
    }

    /// Reads everything the database holds — every table entry, every key's newest value
    /// (a value in the log must be a record with a valid checksum that carries the same
    /// key), every record of the sealed value-log segments — and reports what does not
    /// verify, by file and offset. Changes nothing; takes as long as reading the database.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put(b"k", vec![7u8; 1000])?;
    /// let report = db.check()?;
    /// assert!(report.is_ok(), "{:?}", report.problems);
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(&self) -> Result<CheckReport> {
        check::check(self, &self.inner, &mut |_| {})
    }

    /// [`Db::check`], telling `progress` how far it has come: at the start and end of each
    /// of its three passes (tables, values, sealed segments) and after each table, each
    /// segment and every few thousand keys. The `wisckey check` command draws its progress
    /// bar from it.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put(b"k", vec![7u8; 1000])?;
    /// db.flush()?;
    /// let mut last = None;
    /// let report = db.check_with_progress(|p| {
    ///     eprintln!("{:?}: {} of {}", p.phase, p.done, p.total);
    ///     last = Some(p);
    /// })?;
    /// assert!(report.is_ok());
    /// let last = last.expect("progress was reported");
    /// assert_eq!((last.phase, last.done), (wisckey::CheckPhase::Segments, last.total));
    /// # Ok(())
    /// # }
    /// ```
    pub fn check_with_progress(
        &self,
        mut progress: impl FnMut(CheckProgress),
    ) -> Result<CheckReport> {
        check::check(self, &self.inner, &mut progress)
    }

    /// Writes a consistent copy of the database into the new directory `target` (which must
    /// not exist, nor lie inside the database's directory, also when named through a
    /// symbolic link: `InvalidArgument`), while it
    /// stays open for reads and writes: every write acknowledged before
    /// the call is in the copy, and the copy opens as a database of its own. Every file is
    /// copied, none hard-linked (GC edits sealed value-log segments in place when it
    /// punches holes). GC waits while the copy is made. A read-only handle
    /// ([`Db::open_read_only`]) copies too, without writing to the database: the copy is
    /// written through the file system the database was opened with.
    ///
    /// A checkpoint that fails (a full disk, say) leaves what it copied in `target`, marked
    /// `CHECKPOINT-INCOMPLETE` so that open and repair refuse it; nothing is deleted for
    /// you: remove the directory before trying again to the same target.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path().join("db"), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.checkpoint(dir.path().join("backup"))?;
    /// db.put("k", "changed")?;
    /// let backup = wisckey::Db::open(dir.path().join("backup"), wisckey::Options::default())?;
    /// assert_eq!(backup.get("k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn checkpoint(&self, target: impl AsRef<Path>) -> Result<CheckpointReport> {
        checkpoint::checkpoint(&self.inner, target.as_ref())
    }

    /// Rebuilds the key index of the database in `path` — its tables, manifest and
    /// CURRENT — from the value log and whatever table entries still read, for when they
    /// are damaged or lost (open then refuses with `Corruption`). Takes the database's LOCK,
    /// so the database must not be open. Deletes nothing and changes no value-log byte: the
    /// files it replaces are moved into `lost/repair-N/` under `path`.
    ///
    /// Every key the log holds comes back with its newest value. Limits: where the tables
    /// are lost too, a key whose newest write was a delete or a value shorter than
    /// `value_threshold` can come back with an older value or vanish once GC has collected
    /// that write's record (GC keeps only the records the index points at); a key whose
    /// newest value's record is gone is kept, and its reads report `Corruption`
    /// ([`RepairReport::lost_values`]); a segment whose header does not verify is set aside
    /// unread, and the keys whose newest write was in it read as older entries or as
    /// missing ([`RepairReport::keys_reverted`]). Open the database afterwards with the
    /// same options.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.close()?;
    /// std::fs::remove_file(dir.path().join("CURRENT")).unwrap(); // lost
    /// let report = wisckey::Db::repair(dir.path(), wisckey::Options::default())?;
    /// assert_eq!(report.keys, 1);
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn repair(path: impl AsRef<Path>, options: Options) -> Result<RepairReport> {
        repair::repair(path.as_ref(), options)
    }

    /// Statistics: the tables per level, every value-log segment with its live and dead
    /// bytes and why it is or is not collected, the log's space amplification, and what GC
    /// has done since open.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", vec![0u8; 4096])?;
    /// let stats = db.stats()?;
    /// println!("space amplification {:.2}", stats.value_log.space_amp);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self) -> Result<DbStats> {
        gc::stats(&self.inner)
    }

    /// Value-log replay head persisted in the manifest (None before the first flush).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?; // the head moves past the flushed records
    /// assert!(db.vlog_head().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn vlog_head(&self) -> Option<LogPosition> {
        self.inner.state.lock().versions.vlog_head()
    }

    /// What the last open found in the value log: records replayed, bytes of a torn tail
    /// cut off, and anything `RecoveryMode::SalvagePrefix` dropped.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.close()?; // flushes: the next open has nothing to replay
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// let report = db.recovery_report();
    /// assert_eq!((report.replayed_records, report.torn_tail_bytes), (0, 0));
    /// assert!(report.salvaged.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery_report
    }

    /// The latched background error, if any: the first failure of a flush, compaction or
    /// log write, which every later write returns too (reopen the database to clear it).
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// if let Some(e) = db.background_error() {
    ///     eprintln!("writes are refused until a reopen: {e}");
    /// }
    /// assert!(db.background_error().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn background_error(&self) -> Option<Error> {
        self.inner.state.lock().bg_error.clone()
    }

    /// Flushes the memtable (so the next open replays nothing), stops background work,
    /// writes out and syncs the value-log buffer, and reports the first error met while
    /// doing so. A flush the disk has no room for is no error once the log is synced (the
    /// next open replays the memtable from the log; a warning is logged). The database is
    /// closed even if this fails. Dropping a `Db` does the same
    /// and ignores errors.
    ///
    /// ```
    /// # fn main() -> wisckey::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
    /// db.put("k", "v")?;
    /// db.close()?; // flushes, stops the background threads, syncs the log
    /// # Ok(())
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.inner.read_only {
            // Nothing buffered, nothing to flush or sync; the only thread is the table
            // preload's, which ends on its own.
            self.inner.shutting_down.store(true, Ordering::Release);
            let handles = std::mem::take(&mut *self.background.lock());
            if handles.into_iter().any(|h| h.join().is_err()) {
                return Err(Error::Internal("the table preload thread panicked".into()));
            }
            return Ok(());
        }
        // Flushing the memtable is cheap (keys and pointers only) and saves the next open
        // from replaying up to `memtable_max_log_bytes` of log. Skipped after a latched error.
        // Relocations are refused first: one committed after the flush would be replayed.
        self.inner.closing.store(true, Ordering::Release);
        let flushed = match self.background_error() {
            Some(_) => Ok(()),
            None => self.flush(),
        };
        if self.inner.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let _state = self.inner.state.lock();
            self.inner.bg_cv.notify_all();
            self.inner.gc_cv.notify_all();
        }
        let handles = std::mem::take(&mut *self.background.lock());
        // Join every thread (no short-circuit) before syncing.
        let joined: Vec<bool> = handles.into_iter().map(|h| h.join().is_err()).collect();
        let panicked = joined.contains(&true);
        // Acknowledged buffered writes reach the disk even if a background thread failed.
        let sync_result = self.inner.vlog.with_writer(VlogWriter::finish);
        // The first error met, in the order met: the flush, a thread's panic, the sync. A
        // flush with no disk space left for its table is not one once the log is synced:
        // every acknowledged write is then in the log, which the next open replays (the
        // flush only spares it that), so a close on a full disk loses nothing and says so.
        let flushed = match flushed {
            Err(e) if e.is_no_space() && sync_result.is_ok() => {
                log::warn!(
                    "wisckey: close left the memtable unflushed ({e}); the next open replays \
                     it from the value log"
                );
                Ok(())
            }
            other => other,
        };
        flushed?;
        if panicked {
            // A panicking background thread is a bug; report it instead of propagating.
            return Err(Error::Internal("a background thread panicked".into()));
        }
        sync_result?;
        match self.inner.state.lock().bg_error.clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn bound_bytes<K: AsRef<[u8]>>(bound: std::ops::Bound<&K>) -> std::ops::Bound<&[u8]> {
    match bound {
        std::ops::Bound::Included(k) => std::ops::Bound::Included(k.as_ref()),
        std::ops::Bound::Excluded(k) => std::ops::Bound::Excluded(k.as_ref()),
        std::ops::Bound::Unbounded => std::ops::Bound::Unbounded,
    }
}

/// `ReadOptions::lower_bound` (inclusive) and `upper_bound` (exclusive).
type KeyBounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// `ReadOptions` bounds for `range`, refusing one that starts after it ends.
fn checked_bounds<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(range: &R) -> Result<KeyBounds> {
    let (lower_bound, upper_bound) = crate::iter::range::bounds(range);
    if let (Some(lower), Some(upper)) = (&lower_bound, &upper_bound) {
        if lower > upper {
            return Err(Error::InvalidArgument(
                "the range starts after it ends".to_string(),
            ));
        }
    }
    Ok((lower_bound, upper_bound))
}

fn validate_batch(batch: &WriteBatch, max_batch_size: usize) -> Result<()> {
    if let Some(why) = batch.refused() {
        return Err(Error::InvalidArgument(why.to_string()));
    }
    if batch.payload_bytes() > max_batch_size {
        return Err(Error::InvalidArgument(format!(
            "write batch of {} key and value bytes exceeds max_batch_size {max_batch_size}",
            batch.payload_bytes()
        )));
    }
    Ok(())
}

/// The first of `names` that wisckey does not write (`lost/` excepted). With
/// `incidental_ok`, names other programs leave in any directory are passed over: dot-files
/// (NFS renames a deleted file that is still open to `.nfsXXXX`, and wisckey deletes files
/// readers may hold) and a mount root's `lost+found`.
pub(crate) fn first_foreign_name(names: &[String], incidental_ok: bool) -> Option<&String> {
    names.iter().find(|name| {
        let incidental = name.starts_with('.') || name.as_str() == "lost+found";
        crate::filename::parse_file_name(name).is_none()
            && name.as_str() != LOST_DIR
            && !(incidental_ok && incidental)
    })
}

/// Makes `edit` durable in the manifest and installs it, holding `state` only to prepare
/// and to install: readers and writers are not stalled for the manifest's fsync. `state`
/// must not be held by the caller; `on_installed` runs under it right after the install (or
/// is skipped on error). A caller whose edit depends on state another install could change
/// takes `manifest_lock` before it computes the edit and uses [`install_edit_holding`].
pub(crate) fn install_edit<T>(
    inner: &DbInner,
    edit: crate::version::VersionEdit,
    on_installed: impl FnOnce(&mut State) -> T,
) -> Result<T> {
    let one_install = inner.manifest_lock.lock();
    install_edit_holding(inner, &one_install, edit, on_installed)
}

/// [`install_edit`] for a caller that holds `manifest_lock` (`one_install`), taken before
/// it computed the edit, so no other install lands in between.
pub(crate) fn install_edit_holding<T>(
    inner: &DbInner,
    one_install: &parking_lot::MutexGuard<'_, ()>,
    edit: crate::version::VersionEdit,
    on_installed: impl FnOnce(&mut State) -> T,
) -> Result<T> {
    debug_assert!(
        std::ptr::eq(
            parking_lot::MutexGuard::mutex(one_install),
            &inner.manifest_lock
        ),
        "the guard is this database's manifest_lock"
    );
    let mut write = inner.state.lock().versions.prepare_apply(edit)?;
    let result = write.write();
    let mut state = inner.state.lock();
    state.versions.finish_apply(write, result)?;
    for n in std::mem::take(&mut state.outputs_of_failed_installs) {
        state.pending_outputs.remove(&n);
    }
    let installed = on_installed(&mut state);
    publish_read_sources(inner, &state);
    Ok(installed)
}

/// Latches `error` as the background error (the first one wins) and wakes waiters.
pub(crate) fn latch_error(inner: &DbInner, error: Error) -> Error {
    let latched = inner.state.lock().bg_error.get_or_insert(error).clone();
    inner.bg_cv.notify_all();
    latched
}

/// The sequence number reads should use for `opts`. A snapshot of another database is
/// refused: its sequence number means nothing here, and this database's compactions do
/// not keep what it would see.
pub(crate) fn read_sequence(inner: &DbInner, opts: &ReadOptions) -> Result<SequenceNumber> {
    match &opts.snapshot {
        None => Ok(inner.visible_seq.load(Ordering::Acquire)),
        Some(snapshot) if snapshot.belongs_to(&inner.snapshots) => Ok(snapshot.sequence()),
        Some(_) => Err(Error::InvalidArgument(
            "the snapshot in ReadOptions belongs to another database".into(),
        )),
    }
}

/// Builds the block and table caches.
pub(crate) fn make_table_cache(dir: &Path, options: &Options) -> Arc<TableCache> {
    let block_cache = (options.block_cache_size > 0)
        .then(|| BlockCache::for_blocks_of(options.block_cache_size, options.block_size))
        .map(Arc::new);
    Arc::new(TableCache::new(
        Arc::clone(&options.fs),
        dir.to_path_buf(),
        options.max_open_tables,
        block_cache,
    ))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
