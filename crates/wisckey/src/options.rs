//! Options for opening a database, writing and reading. Every knob documents its default and
//! the trade-off it controls. `Options::validate` runs once at open and rejects nonsense
//! with `InvalidArgument` naming the knob.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fs::{FileSystem, PosixFs};
use crate::snapshot::Snapshot;

/// Largest `memtable_size` accepted (see `Options::validate`).
const MAX_MEMTABLE_SIZE: u64 = 64 << 30;

/// Largest key accepted: 64 KiB. Keys live in the LSM-tree, whose blocks and compactions
/// assume small keys; larger "keys" belong in the value.
pub const MAX_KEY_SIZE: usize = 64 * 1024;
/// Largest value accepted: 256 MiB (a value is written, read and verified as one unit).
pub const MAX_VALUE_SIZE: usize = 256 * 1024 * 1024;

/// Checks one key and value against [`MAX_KEY_SIZE`] and [`MAX_VALUE_SIZE`]; the message
/// names the limit.
pub(crate) fn check_entry_size(key_len: usize, value_len: usize) -> Result<(), String> {
    if key_len > MAX_KEY_SIZE {
        return Err(format!(
            "key of {key_len} bytes exceeds the maximum key size of {MAX_KEY_SIZE} bytes"
        ));
    }
    if value_len > MAX_VALUE_SIZE {
        return Err(format!(
            "value of {value_len} bytes exceeds the maximum value size of {MAX_VALUE_SIZE} bytes"
        ));
    }
    Ok(())
}

/// How the database is opened and tuned. Every field has a documented default; set the
/// ones you need and take the rest from `Default`. Checked once, at open
/// (`InvalidArgument` names the offending field).
///
/// ```
/// # fn main() -> wisckey::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let options = wisckey::Options {
///     create_if_missing: true,
///     value_threshold: 1024,          // values under 1 KiB stay inline in the key index
///     memtable_size: 64 << 20,
///     gc_space_amp_target: 2.0,       // let the log grow to 2x its live bytes before GC
///     ..wisckey::Options::default()
/// };
/// let db = wisckey::Db::open(dir.path(), options)?;
/// db.put("k", "v")?;
/// let bad = wisckey::Options { vlog_segment_size: 0, ..wisckey::Options::default() };
/// assert!(wisckey::Db::open(dir.path().join("other"), bad).is_err());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the database if the directory holds none. Default `true`.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default `false`.
    pub error_if_exists: bool,
    /// File system all I/O goes through. Default: the real one ([`PosixFs`]).
    pub fs: Arc<dyn FileSystem>,

    /// Values of at least this many bytes are stored only in the value log and the LSM-tree
    /// keeps a pointer; smaller values are kept inline in the LSM-tree too (they are still
    /// appended to the value log, which is the recovery log). Default 64 B, by measurement
    /// (`docs/BENCHMARKS.md`, threshold sweep): from 64 B up, separating loads as fast or
    /// faster, reads faster and writes ~1.3× instead of ~1.9× the user bytes; at 16–32 B the
    /// pointer saves almost nothing and inline reads are 1.4–1.8× faster. Smaller threshold:
    /// less LSM compaction traffic, but an extra read per lookup; larger: inline values are
    /// written twice (log and LSM) and make the LSM-tree bigger.
    pub value_threshold: usize,
    /// Target size of a value-log segment file. Default 64 MiB. It is the unit GC reclaims:
    /// the log always holds about two segments that GC cannot touch yet (the active one and
    /// the replay head's), so smaller segments keep space amplification closer to
    /// `gc_space_amp_target` on small databases; larger ones mean fewer files.
    pub vlog_segment_size: u64,
    /// User-space write buffer of the value log (§3.4.1). Default 1 MiB. Appends are written
    /// to the OS when it fills, on a sync write, or after `vlog_flush_interval`. This, with the
    /// interval, bounds what a non-sync write can lose in a process crash.
    pub vlog_buffer_size: usize,
    /// Longest time an appended record may sit in the write buffer. Default 10 ms; at least
    /// 100 µs.
    pub vlog_flush_interval: Duration,
    /// When true, every write (not only sync writes) reaches the operating system before it is
    /// acknowledged, so it survives the process being killed (not a power loss), as LevelDB
    /// writes do. Default `false`: faster small writes, up to one buffer / interval lost on a
    /// process crash.
    pub write_through_to_os: bool,
    /// With `write_through_to_os` (and not `vlog_direct_writes`), each write-out of the value
    /// log is a memory copy into a shared mapping of the active segment instead of a
    /// `pwrite` (Linux; elsewhere, and where the file system cannot allocate ahead, the same
    /// `pwrite`s; write-outs over 8 KiB are `pwrite`s anyway). The bytes reach the same page
    /// cache, so a killed process loses nothing either way; a helper thread makes the pages
    /// writable ahead of the writer. Measured 1.46–1.67× the write-through puts per second
    /// at 1 KiB and 1.23–1.36× at 4 KiB (`docs/BENCHMARKS.md`). Only on file systems whose
    /// `fallocate` allocates for good (ext4, XFS, tmpfs), so a copy cannot meet a full disk.
    /// The caveat of any mapped file: a device read error while the segment's partly written
    /// last page must be read back in is a `SIGBUS` (the process dies; open then recovers
    /// as after a kill) where a `pwrite` would have returned `EIO`. Default on.
    pub vlog_mapped_writes: bool,

    /// Memtable size that triggers a switch and background flush. Default 64 MiB; at least
    /// 1 KiB, at most 64 GiB.
    pub memtable_size: usize,
    /// A memtable is also switched once this many value-log bytes were written since it
    /// started, which bounds how much log must be replayed on open. Default 512 MiB; at
    /// least 1 KiB.
    pub memtable_max_log_bytes: u64,
    /// Immutable memtables waiting for flush before writers stall. Default 2.
    pub max_immutable_memtables: usize,

    /// SSTable data block size. Default 4 KiB. Values above 256 MiB are taken as 256 MiB
    /// (a block is read whole, and its restart offsets are 32-bit).
    pub block_size: usize,
    /// Keys between restart points in a block. Default 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key (0 disables). Default 10 (~1% false positives). Values
    /// above 100 are taken as 100.
    pub bloom_bits_per_key: usize,
    /// Block cache capacity in bytes. Default 64 MiB.
    pub block_cache_size: usize,
    /// Capacity in bytes of the value cache: verified values of recent point reads (`get`,
    /// `multi_get`), so a hot key's value costs no value-log read. Scans, GC and `check`
    /// neither read from it nor fill it. The block cache holds keys and pointers only, so
    /// this is where hot values live in memory besides the OS page cache. A value enters on
    /// its second read from the log within a short while (one read does not evict others);
    /// values larger than 1/64 of it are not cached. Default 32 MiB; 0 turns it off.
    pub value_cache_size: usize,
    /// Bytes of table files read ahead into the OS page cache when the database opens,
    /// level 0 (newest first) then each deeper level in key order, stopping at the first
    /// table that would pass this budget. The reads run in the background (the open asks
    /// the OS and does not wait), so the first lookups after a restart find the key index
    /// in memory instead of paying a random device read per table block. A WiscKey tree
    /// holds keys and value pointers only: 64 MiB covers about two million 16-byte keys.
    /// The pages are the kernel's, evicted under memory pressure like any file cache. On
    /// Linux (`posix_fadvise(WILLNEED)`); elsewhere the tables are only opened.
    /// Default 64 MiB; 0 turns it off.
    pub table_preload_size: u64,
    /// Open tables kept in the table cache. Default 1000.
    pub max_open_tables: usize,
    /// Target size of an SSTable written by compaction. Default 8 MiB.
    pub target_file_size: u64,
    /// Size limit of level 1; each deeper level may be 10× larger. Default 64 MiB.
    pub level1_max_bytes: u64,
    /// L0 files that trigger a compaction. Default 4.
    pub l0_compaction_trigger: usize,
    /// L0 files at which each write is delayed ~1 ms. Default 8.
    pub l0_slowdown_trigger: usize,
    /// L0 files at which writes wait for compaction. Default 12.
    pub l0_stop_trigger: usize,
    /// Scan read-ahead (WiscKey §3.3.2): from the second entry of a forward scan on, an
    /// iterator reads up to this many entries ahead (the window starts at 4 and doubles per
    /// refill; at most 8 MiB of keys and values) and their value-log reads run in parallel on
    /// `scan_readahead_threads` reader threads. Default 256. 0 or 1 turns read-ahead off:
    /// each value is then read when asked for. Larger: more reads in flight for long scans,
    /// more wasted reads when a scan stops early.
    pub scan_readahead_entries: usize,
    /// Reader threads shared by all iterators of the database, started by the first scan
    /// that reads ahead. Default 32, as in the paper (§3.3.2): a forward scan of 100,000
    /// values in random log order ran 1.09–1.31× faster with 32 than with 16 in four of five
    /// interleaved rounds on this project's virtio SSD (0.91× in the fifth; see
    /// docs/BENCHMARKS.md). 0 turns read-ahead off. `Db::multi_get` reads its values on the
    /// same threads: with 0 it reads them one at a time on the caller's thread.
    pub scan_readahead_threads: usize,
    /// What open does when the value log is damaged (not merely torn at its end). Default
    /// [`RecoveryMode::Strict`]: refuse, change nothing, and say where the damage is.
    pub recovery_mode: RecoveryMode,
    /// Disk space reserved ahead of the value log's write position, in chunks of this many
    /// bytes, so a full disk fails a write before it is acknowledged instead of losing
    /// acknowledged buffered writes later. Default 4 MiB (at most this much is allocated
    /// past the end of the active segment; a chunk past the segment's size reserves to its
    /// end; at most 1 GiB is reserved at a time, whatever this says). 0 turns it off.
    pub vlog_preallocate_size: u64,
    /// Every this many bytes written to the active value-log segment, the OS is asked to
    /// start writing them to the device (`sync_file_range(SYNC_FILE_RANGE_WRITE)` on Linux;
    /// RocksDB's `bytes_per_sync`). Not a durability promise: it keeps the dirty part of the
    /// segment small, so the sync that finishes each segment before the next one starts, and
    /// sync writes, wait for little. Default 1 MiB (by measurement, `docs/BENCHMARKS.md`:
    /// random loads of 2 GiB in 1 GiB of memory 1.13–1.40× faster than with 0, at 1 to
    /// 64 KiB values). 0 turns it off.
    pub vlog_write_back_interval: u64,
    /// Write the value log with `O_DIRECT` (Linux; where the file system refuses it, as
    /// tmpfs does, the log is written buffered as usual). Appended values then go from the
    /// write buffer to the device without being copied into the page cache, which on a
    /// fast device is what bounds a large load (the kernel copies, writes back and reclaims
    /// every byte, and under a memory limit throttles the writer). The price: a value just
    /// written is not in the page cache, so reading it soon after goes to the device
    /// (`value_cache_size` still serves hot ones; random reads right after a 256 MiB load
    /// were 22–26× slower than with this off), and every write-out rewrites the log's last
    /// partial 4 KiB block. Measured faster for sync writes (1.2–1.4×); for loads it
    /// depends on how fast the kernel writes the page cache back at the time: on one VM,
    /// 1.1–1.8× faster at 1–16 KiB and 0.75–0.81× at 64 KiB in one hour, 0.58× at 16 KiB and
    /// 1.55× at 64 KiB three hours later (`docs/BENCHMARKS.md`). Full buffers are written out by a thread of their own
    /// while the next fills, so a process crash may lose up to two `vlog_buffer_size`
    /// buffers of non-sync writes (not one); sync and write-through writes lose nothing.
    /// With `write_through_to_os`, every write then waits for the device (the kill test's
    /// write-through writer ran ~7× slower), so combine the two only where that is wanted.
    /// Default off. `vlog_write_back_interval` has nothing to do when it is on.
    pub vlog_direct_writes: bool,
    /// A sync write whose commit group is small (under 1/16 of this size) first makes sure
    /// that the next this-many bytes of the active value-log segment, past its last record,
    /// are already written with zeros and durable (topped up once less than half is left),
    /// so the write lands on allocated, written blocks and its `fdatasync` flushes data
    /// only: an append that grows the file also makes `fdatasync` write the inode, a second
    /// device write it must wait for (PostgreSQL pre-zeroes its WAL for the same reason). The price is that bytes written by sync writes reach the
    /// device twice (zeros, then records); segments written without sync writes are never
    /// filled, so loads do not pay it. After a crash the zeros are part of the torn tail
    /// that open cuts off; a finished segment and a cleanly closed log end at their last
    /// record. Default 1 MiB (`docs/BENCHMARKS.md`); more than a segment fills to the
    /// segment's end, and at most 1 GiB is filled ahead, whatever this says; 0 turns it off.
    pub vlog_zero_fill_size: u64,
    /// Size of the `RESERVE` file kept in the database directory. When the disk fills up,
    /// it is deleted so that memtable flushes, manifest rewrites, open and close (and the
    /// deletes that free space) can still complete; it is re-created once space is back.
    /// Default 32 MiB (a full default memtable flushes to a table of ~25 MB). 0 turns it off.
    ///
    /// While it is spent, a write with puts first tries to make it again and is refused
    /// with `NoSpace` until there is room for it (deletes still go through): after a full
    /// disk, puts need this much free space besides their own. While a flush or compaction
    /// it was released for has not succeeded (it is retried every 100 ms), writes with puts
    /// are refused without trying: the space is that work's. One that could not be made at
    /// open is tried again after each successful flush or compaction.
    pub disk_reserve_size: u64,
    /// Largest write batch accepted, in key and value bytes. A batch is held whole in the
    /// value-log buffer and in the memtable, so this bounds the memory one write can take,
    /// apart from about 80 bytes per operation (its log record header and memtable entry),
    /// which it does not count: a batch of many empty deletes takes more than it says.
    /// Default 512 MiB (room for one value of the maximum size and more). Larger batches
    /// fail with `InvalidArgument` before they reach the log.
    pub max_batch_size: usize,
    /// Value-log garbage collection runs in the background whenever the log's bytes on disk
    /// exceed this many times its live bytes: it collects segments (most garbage first, by
    /// cost–benefit) until the log is back at this ratio, and if it is still over (what is
    /// left is under 20% dead), punches out the dead records it may in the segments left.
    /// Writers are paced to the rate it frees once their writes would take it far behind
    /// (over 1.25× this, counting the garbage of writes not flushed yet as recent flushes
    /// found it).
    /// Default 1.5: disk use for values at most about 1.5× the live values, at the
    /// cost of rewriting a segment's live part when it is collected. Lower: less disk, more
    /// rewriting; higher: the reverse. `f64::INFINITY` turns background GC off
    /// ([`crate::Db::gc`] still works). Must be > 1.
    pub gc_space_amp_target: f64,
    /// Which collectable segments GC takes first. Default
    /// [`VictimOrder::CostBenefit`](crate::gc::VictimOrder): mostly dead, old segments first,
    /// over all sealed segments. `OldestFirst` is the WiscKey paper's tail-first order.
    pub gc_victim_order: crate::gc::VictimOrder,
    /// Background clustering of the key ranges that forward scans read: once scans have
    /// read, out of log order, `auto_cluster_ratio` × as many of a range's values as a
    /// clustering pass ([`crate::Db::cluster_values`]) would move, the GC thread runs that
    /// pass over the range, so later scans of it read runs of back-to-back records instead
    /// of one random read per value. A range is the interval between two tables of the
    /// LSM-tree's deepest level (a few MiB of keys); the first look at one comes after 4,096
    /// scattered reads in it (a keys-only estimate), and values of 64 KiB or more never
    /// count or move. Default 1.0: a pass costs about what scans have already spent there
    /// (the ski-rental rule), so ranges read once are never rewritten and ranges read again
    /// and again are rewritten once. Lower: clusters sooner; higher: later. 0 turns it off;
    /// it is also off while background GC is (`gc_space_amp_target` infinite), which is
    /// what frees the moved values' old copies, and for read-only opens. Counts are kept in
    /// memory only.
    pub auto_cluster_ratio: f64,
}

/// How open treats a value log that is damaged in the middle (valid records follow bad
/// bytes) or shorter than the manifest's replay head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Refuse to open; nothing on disk is changed. A torn tail (bad bytes with nothing
    /// valid after them, as a crash leaves) is still cut off: it holds no acknowledged
    /// sync write.
    #[default]
    Strict,
    /// Keep the log up to the damage, drop everything after it, and report what was dropped
    /// ([`crate::Db::recovery_report`], and a warning through the `log` crate). What was
    /// dropped is kept in `lost/salvage-N/` in the database directory (never read again).
    /// Reads of values that were lost return `Corruption`; they never return other data.
    SalvagePrefix,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            fs: Arc::new(PosixFs::new()),
            value_threshold: 64,
            vlog_segment_size: 64 << 20,
            vlog_buffer_size: 1 << 20,
            vlog_flush_interval: Duration::from_millis(10),
            write_through_to_os: false,
            vlog_mapped_writes: true,
            memtable_size: 64 << 20,
            memtable_max_log_bytes: 512 << 20,
            max_immutable_memtables: 2,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            block_cache_size: 64 << 20,
            value_cache_size: 32 << 20,
            table_preload_size: 64 << 20,
            max_open_tables: 1000,
            target_file_size: 8 << 20,
            level1_max_bytes: 64 << 20,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 8,
            l0_stop_trigger: 12,
            scan_readahead_entries: 256,
            scan_readahead_threads: 32,
            recovery_mode: RecoveryMode::Strict,
            vlog_preallocate_size: 4 << 20,
            vlog_write_back_interval: 1 << 20,
            vlog_direct_writes: false,
            vlog_zero_fill_size: 1 << 20,
            disk_reserve_size: 32 << 20,
            max_batch_size: 512 << 20,
            gc_space_amp_target: 1.5,
            gc_victim_order: crate::gc::VictimOrder::CostBenefit,
            auto_cluster_ratio: 1.0,
        }
    }
}

impl Options {
    /// The value log's options these set (keys and values of the format's maximum sizes).
    pub(crate) fn vlog_options(&self) -> crate::vlog::VlogOptions {
        crate::vlog::VlogOptions {
            segment_size: self.vlog_segment_size,
            buffer_size: self.vlog_buffer_size,
            max_key_size: MAX_KEY_SIZE,
            max_value_size: MAX_VALUE_SIZE,
            preallocate_size: self.vlog_preallocate_size,
            write_back_interval: self.vlog_write_back_interval,
            direct_writes: self.vlog_direct_writes,
            mapped_writes: self.write_through_to_os
                && self.vlog_mapped_writes
                && !self.vlog_direct_writes,
            zero_fill_size: self.vlog_zero_fill_size,
        }
    }

    /// Tiny memtables, tables and segments so that tests exercise flushes, compactions and
    /// segment rollover with little data. Uses the given file system.
    pub fn small_for_tests(fs: Arc<dyn FileSystem>) -> Options {
        Options {
            fs,
            value_threshold: 64,
            vlog_segment_size: 64 << 10,
            vlog_buffer_size: 4 << 10,
            memtable_size: 32 << 10,
            memtable_max_log_bytes: 256 << 10,
            block_size: 512,
            block_cache_size: 256 << 10,
            // Its thread would make the calls a test counts after an open depend on timing.
            table_preload_size: 0,
            max_open_tables: 16,
            target_file_size: 16 << 10,
            level1_max_bytes: 64 << 10,
            vlog_preallocate_size: 64 << 10,
            vlog_zero_fill_size: 16 << 10,
            disk_reserve_size: 256 << 10,
            ..Options::default()
        }
    }

    /// Sets the file system.
    #[must_use]
    pub fn with_fs(mut self, fs: Arc<dyn FileSystem>) -> Options {
        self.fs = fs;
        self
    }

    /// Checks every knob; called by `Db::open`.
    pub fn validate(&self) -> Result<()> {
        let check = |ok: bool, msg: &str| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidArgument(msg.to_string()))
            }
        };
        check(
            self.gc_space_amp_target > 1.0,
            "gc_space_amp_target must be greater than 1 (f64::INFINITY turns GC off)",
        )?;
        check(
            self.vlog_segment_size >= 4096,
            "vlog_segment_size must be at least 4096 bytes",
        )?;
        check(self.vlog_buffer_size > 0, "vlog_buffer_size must be > 0")?;
        check(
            self.max_batch_size >= 1 << 20,
            "max_batch_size must be at least 1 MiB",
        )?;
        check(
            self.memtable_size >= 1024,
            "memtable_size must be at least 1024 bytes",
        )?;
        // A memtable numbers its entries in 32 bits; at 72 bytes or more charged per entry,
        // this keeps it far below 2^32 of them.
        check(
            self.memtable_size as u64 <= MAX_MEMTABLE_SIZE,
            "memtable_size must be at most 64 GiB",
        )?;
        check(
            self.max_immutable_memtables >= 1,
            "max_immutable_memtables must be at least 1",
        )?;
        check(
            self.memtable_max_log_bytes >= 1024,
            "memtable_max_log_bytes must be at least 1024 bytes",
        )?;
        // The log's flusher thread wakes every interval: a zero one never sleeps.
        check(
            self.vlog_flush_interval >= Duration::from_micros(100),
            "vlog_flush_interval must be at least 100 microseconds (for writes that reach the \
             OS before they are acknowledged, set write_through_to_os)",
        )?;
        check(
            self.block_size >= 64,
            "block_size must be at least 64 bytes",
        )?;
        check(
            self.block_restart_interval >= 1,
            "block_restart_interval must be at least 1",
        )?;
        check(
            self.max_open_tables >= 1,
            "max_open_tables must be at least 1",
        )?;
        check(
            self.target_file_size >= 1024,
            "target_file_size must be at least 1024 bytes",
        )?;
        check(self.level1_max_bytes > 0, "level1_max_bytes must be > 0")?;
        check(
            self.l0_compaction_trigger >= 1
                && self.l0_slowdown_trigger >= self.l0_compaction_trigger
                && self.l0_stop_trigger > self.l0_slowdown_trigger,
            "need 1 <= l0_compaction_trigger <= l0_slowdown_trigger < l0_stop_trigger",
        )?;
        check(
            self.auto_cluster_ratio >= 0.0 && self.auto_cluster_ratio.is_finite(),
            "auto_cluster_ratio must be finite and at least 0 (0 turns it off)",
        )?;
        check(
            self.scan_readahead_threads <= 1024,
            "scan_readahead_threads must be at most 1024",
        )?;
        Ok(())
    }
}

/// Options for one write.
///
/// ```
/// # fn main() -> wisckey::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
/// db.put_opt("fast", "v", &wisckey::WriteOptions::default())?;      // buffered
/// db.put_opt("safe", "v", &wisckey::WriteOptions { sync: true })?;  // durable on return
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Make the write durable (fdatasync of the value log) before it is acknowledged. A
    /// sync write also makes every earlier write durable. Default `false`.
    pub sync: bool,
}

/// Options for one read or iterator: a snapshot to read at, bounds for an iterator, and
/// whether an iterator reads values at all.
///
/// ```
/// # fn main() -> wisckey::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, vec![0u8; 10_000])?;
/// }
/// let opts = wisckey::ReadOptions {
///     lower_bound: Some(b"b".to_vec()),  // inclusive
///     upper_bound: Some(b"d".to_vec()),  // exclusive
///     keys_only: true,                   // never reads the value log
///     ..Default::default()
/// };
/// let mut it = db.iter(&opts)?;
/// it.seek_to_first();
/// let keys: Vec<Vec<u8>> = it.into_iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(keys, [b"b", b"c"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<Snapshot>,
    /// Iterators: only keys `>= lower_bound`.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: only keys `< upper_bound`.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators: the caller reads keys only, so no value is read ahead of it (a key-only
    /// scan never touches the value log); `value()` still reads one when asked.
    pub keys_only: bool,
    /// Iterators: about how many entries the caller reads after each positioning call (a
    /// query's `LIMIT`; Badger's `PrefetchSize`). When set, read-ahead starts at the seek
    /// itself with a window of that many entries (at most [`MAX_SCAN_LENGTH_HINT`], and
    /// 8 MiB of keys and values), so a short scan issues all its value reads at once; without it a
    /// scan reads ahead from its second entry with a window that starts at 4 and doubles
    /// per refill up to [`Options::scan_readahead_entries`]. Default `None`: a seek may be
    /// a point lookup, and reading values ahead of one would waste device reads.
    pub scan_length_hint: Option<usize>,
}

/// The largest [`ReadOptions::scan_length_hint`] honoured; larger hints are clamped to it.
pub const MAX_SCAN_LENGTH_HINT: usize = 1024;
