//! Errors met by iterators and batched reads over tables in a deeper level (L1+): a failed
//! read while the merged iterator turns backward is reported, not replaced by another
//! position; an error met only by the scan read-ahead, never shown to the user, does not
//! break a later `prev` or seek; an error a seek meets is not lost by the iterator's
//! fallbacks; and a `multi_get_within` that gives up early skips the reads it queued.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;

use common::{HookFs, Hooks};
use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Error, Options, ReadOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// Short enough to stay inline in the tables (under the 64-byte value threshold).
fn inline_value(i: u32) -> Vec<u8> {
    format!("v{i:04}-inline").into_bytes()
}

fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut options = Options::small_for_tests(fs);
    // Background GC reads files too; these tests choose which reads fail or count.
    options.gc_space_amp_target = f64::INFINITY;
    options
}

/// Writes keys `0..n` with inline values and compacts them out of L0.
fn fill_deeper_level(db: &Db, n: u32) {
    for i in 0..n {
        db.put(key(i), inline_value(i)).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        db.property("wisckey.num-files-at-level0")
            .expect("property"),
        Some("0".to_string()),
        "the tables should all be in a deeper level"
    );
}

/// The thread a [`FailRereadOnce`] is armed for, and the table blocks it read since.
type Armed = Option<(ThreadId, HashSet<(PathBuf, u64)>)>;

/// Once armed for a thread, fails the first table read of that thread that reads a block
/// it already read since arming (a transient EIO on a re-read), then disarms. Other
/// threads (background compaction) neither count nor fail.
#[derive(Debug, Default)]
struct FailRereadOnce {
    armed: Mutex<Armed>,
    failed: AtomicUsize,
}

impl FailRereadOnce {
    fn arm(&self) {
        *self.armed.lock().expect("lock") = Some((std::thread::current().id(), HashSet::new()));
    }
}

impl Hooks for FailRereadOnce {
    fn before_read(&self, path: &Path, offset: u64, _len: usize) -> wisckey::Result<()> {
        if path.extension().is_none_or(|e| e != "sst") {
            return Ok(());
        }
        let mut armed = self.armed.lock().expect("lock");
        let Some((thread, seen)) = armed.as_mut() else {
            return Ok(());
        };
        if *thread != std::thread::current().id() || seen.insert((path.to_path_buf(), offset)) {
            return Ok(());
        }
        *armed = None;
        self.failed.fetch_add(1, Ordering::SeqCst);
        Err(Error::io(
            format!("read {}", path.display()),
            std::io::Error::other("injected EIO"),
        ))
    }
}

/// Keys 0..100 in a deeper level, `key0050z` in the memtable; every table block read
/// from the file system (no block cache) and every table already open.
fn level_and_memtable(fs: &HookFs<FailRereadOnce>) -> Db {
    let mut opts = options(Arc::new(fs.clone()));
    opts.block_cache_size = 0;
    let db = Db::open(Path::new("/db"), opts).expect("open");
    fill_deeper_level(&db, 100);
    db.put(b"key0050z", b"mem").expect("put");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().expect("warm-up scan");
    assert_eq!(n, 101);
    drop(it);
    db
}

/// The memtable's entry is current; stepping back re-seeks the level to it, which reads
/// the block just read again, and that read fails.
#[test]
fn a_read_error_while_turning_backward_is_reported() {
    let fs = HookFs::new(FailRereadOnce::default());
    let db = level_and_memtable(&fs);
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    fs.hooks.arm();
    it.seek(b"key0050z");
    assert_eq!(it.key(), b"key0050z");
    it.prev();
    assert_eq!(
        fs.hooks.failed.load(Ordering::SeqCst),
        1,
        "the re-read failed"
    );
    assert!(
        !it.valid(),
        "prev() showed {:?} and dropped the read error",
        String::from_utf8_lossy(it.key())
    );
    let err = it.status().expect_err("the failed read is reported");
    assert!(err.to_string().contains("injected EIO"), "{err}");
}

/// `seek_to_last` with an upper bound seeks to the bound, then steps back: the same turn.
/// Losing the error there put the iterator on the level's last key, past the bound.
#[test]
fn a_read_error_in_seek_to_last_below_an_upper_bound_is_reported_not_a_key_past_it() {
    let fs = HookFs::new(FailRereadOnce::default());
    let db = level_and_memtable(&fs);
    let opts = ReadOptions {
        upper_bound: Some(b"key0050z".to_vec()),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts).expect("iter");
    fs.hooks.arm();
    it.seek_to_last();
    assert_eq!(
        fs.hooks.failed.load(Ordering::SeqCst),
        1,
        "the re-read failed"
    );
    assert!(
        !it.valid(),
        "seek_to_last showed {:?} (upper bound key0050z) and dropped the read error",
        String::from_utf8_lossy(it.key())
    );
    it.status().expect_err("the failed read is reported");
}

/// Keys 0..400 in a deeper level (or in one level-0 table), the table block holding key
/// 100 damaged (one byte of its value flipped, so its checksum fails on every read).
fn damaged_block_at_key_100(mem: &MemFs, in_level0: bool) {
    let db = Db::open(Path::new("/db"), options(Arc::new(mem.clone()))).expect("open");
    if in_level0 {
        for i in 0..400 {
            db.put(key(i), inline_value(i)).expect("put");
        }
        db.flush().expect("flush");
        for level in 1..7 {
            assert_eq!(
                db.property(&format!("wisckey.num-files-at-level{level}"))
                    .expect("property"),
                Some("0".to_string()),
                "every table in level 0"
            );
        }
    } else {
        fill_deeper_level(&db, 400);
    }
    db.close().expect("close");
    let needle = inline_value(100);
    let mut damaged = 0;
    for name in mem.list(Path::new("/db")).expect("list") {
        if !name.ends_with(".sst") {
            continue;
        }
        let path = Path::new("/db").join(&name);
        let mut bytes = mem.contents(&path).expect("contents");
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            bytes[at + 1] ^= 0x40;
            mem.set_contents(&path, &bytes).expect("set");
            damaged += 1;
        }
    }
    assert_eq!(damaged, 1, "the value should be in exactly one table");
}

/// Reads the first three entries, then repositions with `reposition`; returns where it
/// landed and the status.
fn read_three_then(
    db: &Db,
    opts: &ReadOptions,
    reposition: fn(&mut wisckey::DbIterator<'_>),
) -> (Option<Vec<u8>>, wisckey::Result<()>) {
    let mut it = db.iter(opts).expect("iter");
    it.seek_to_first();
    for i in 0..3 {
        assert_eq!(it.key(), key(i));
        assert_eq!(it.value().expect("value"), inline_value(i));
        if i < 2 {
            it.next();
        }
    }
    reposition(&mut it);
    (it.valid().then(|| it.key().to_vec()), it.status())
}

/// With a scan-length hint of 200 the read-ahead reaches the damaged block (at key 100)
/// while the user has read three entries. The user never reached the damage, so `prev`,
/// `seek` and `seek_to_last` go on as they do without read-ahead; the damage is still
/// reported when the scan reaches it.
#[test]
fn an_error_met_only_by_the_read_ahead_does_not_break_a_later_prev_or_seek() {
    for in_level0 in [false, true] {
        read_ahead_error_case(in_level0);
    }
}

fn read_ahead_error_case(in_level0: bool) {
    let mem = MemFs::new();
    damaged_block_at_key_100(&mem, in_level0);
    type Reposition = fn(&mut wisckey::DbIterator<'_>);
    let cases: [(&str, Reposition, Vec<u8>); 3] = [
        ("prev", |it| it.prev(), key(1)),
        ("seek(a)", |it| it.seek(b"a"), key(0)),
        ("seek_to_last", |it| it.seek_to_last(), key(399)),
    ];
    for readahead in [true, false] {
        let mut opts = options(Arc::new(mem.clone()));
        if !readahead {
            opts.scan_readahead_entries = 0;
        }
        let db = Db::open(Path::new("/db"), opts).expect("open");
        let read = ReadOptions {
            scan_length_hint: Some(200),
            ..ReadOptions::default()
        };
        for (name, reposition, want) in &cases {
            let (at, status) = read_three_then(&db, &read, *reposition);
            assert!(
                status.is_ok(),
                "level 0 {in_level0}, read-ahead {readahead}, {name}: {:?}",
                status.err()
            );
            assert_eq!(
                at.as_deref(),
                Some(&want[..]),
                "level 0 {in_level0}, read-ahead {readahead}, {name}"
            );
        }
        // The damage is not hidden: a scan over it still fails there.
        let mut it = db.iter(&read).expect("iter");
        it.seek(b"a");
        scan_stops_at_the_damage(&mut it, readahead);
        drop(it);
        db.close().expect("close");
    }
}

/// `seek_to_last` below an upper bound seeks to the bound first; when that seek fails on
/// the damaged block, the fallback to the very last entry must not hide the error (it
/// would show a key past the bound).
#[test]
fn a_damaged_block_at_the_upper_bound_fails_seek_to_last() {
    let mem = MemFs::new();
    damaged_block_at_key_100(&mem, false);
    let db = Db::open(Path::new("/db"), options(Arc::new(mem.clone()))).expect("open");
    let read = ReadOptions {
        upper_bound: Some(key(100)),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&read).expect("iter");
    it.seek_to_last();
    assert!(
        !it.valid(),
        "seek_to_last showed {:?} past the bound key0100",
        String::from_utf8_lossy(it.key())
    );
    let err = it.status().expect_err("the damaged block is reported");
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}

/// Holds every value-log read at a gate while it is closed, and counts them.
#[derive(Debug, Default)]
struct GatedLogReads {
    closed: Mutex<bool>,
    opened: Condvar,
    reads: AtomicUsize,
}

impl GatedLogReads {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock().expect("lock") = closed;
        self.opened.notify_all();
    }
}

impl Hooks for GatedLogReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        if path.extension().is_some_and(|e| e == "vlog") {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let mut closed = self.closed.lock().expect("lock");
            while *closed {
                closed = self.opened.wait(closed).expect("wait");
            }
        }
        Ok(())
    }
}

/// Four 1000-byte values fit a 4500-byte budget, the fifth does not: the four reads
/// already queued are abandoned when the call gives up, so (the one reader thread being
/// held at the gate meanwhile) at most the one it had started reads its file.
#[test]
fn a_multi_get_within_that_passes_its_budget_skips_the_reads_it_queued() {
    let fs = HookFs::new(GatedLogReads::default());
    let mut opts = options(Arc::new(fs.clone()));
    opts.scan_readahead_threads = 1;
    opts.value_cache_size = 0;
    let db = Db::open(Path::new("/db"), opts).expect("open");
    let keys: Vec<Vec<u8>> = (0..6).map(key).collect();
    for k in &keys {
        db.put(k, vec![7u8; 1000]).expect("put");
    }
    db.flush().expect("flush");
    let before = fs.hooks.reads.load(Ordering::SeqCst);
    let all = db.multi_get(&keys).expect("multi_get");
    assert!(all.iter().all(|v| v.as_deref() == Some(&[7u8; 1000][..])));
    assert_eq!(
        fs.hooks.reads.load(Ordering::SeqCst) - before,
        keys.len(),
        "each value is read from its file"
    );

    fs.hooks.set_closed(true);
    let before = fs.hooks.reads.load(Ordering::SeqCst);
    let got = db
        .multi_get_within(&keys, &ReadOptions::default(), 4500)
        .expect("multi_get_within");
    assert_eq!(got, None, "the values pass the budget");
    fs.hooks.set_closed(false);
    // The pool's one thread runs jobs in order: once this read is done, so are the
    // four queued before it.
    let last = db.multi_get(&keys[..1]).expect("multi_get");
    assert_eq!(last[0].as_deref(), Some(&[7u8; 1000][..]));
    let reads = fs.hooks.reads.load(Ordering::SeqCst) - before - 1;
    assert!(
        reads <= 1,
        "{reads} of the 4 reads queued before the call gave up still read their files"
    );
}

/// A seek after an error the user was shown starts over: the iterator is valid with a
/// clean status at the new position (it was valid with the old error still in `status()`,
/// or, before positioning calls forgot errors, invalid for good), and the damage is met
/// again when the scan reaches it.
#[test]
fn a_seek_after_a_reported_error_starts_over_and_meets_the_damage_again() {
    let mem = MemFs::new();
    damaged_block_at_key_100(&mem, false);
    for readahead in [false, true] {
        let mut opts = options(Arc::new(mem.clone()));
        if !readahead {
            opts.scan_readahead_entries = 0;
        }
        let db = Db::open(Path::new("/db"), opts).expect("open");
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        while it.valid() {
            it.next();
        }
        it.status().expect_err("the scan meets the damaged block");
        it.seek(b"a");
        assert!(it.valid(), "read-ahead {readahead}: a fresh position");
        assert_eq!(it.key(), key(0));
        it.status()
            .unwrap_or_else(|e| panic!("read-ahead {readahead}: stale error {e}"));
        scan_stops_at_the_damage(&mut it, readahead);
        drop(it);
        db.close().expect("close");
    }
}

/// Steps `it` forward to its end and checks that it stopped with `Corruption` before the
/// damaged block at key 100, never past it.
fn scan_stops_at_the_damage(it: &mut wisckey::DbIterator<'_>, readahead: bool) {
    let mut last = Vec::new();
    while it.valid() {
        last = it.key().to_vec();
        it.next();
    }
    let err = it.status().expect_err("the scan meets the damaged block");
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(
        last < key(100),
        "read-ahead {readahead}: scanned on to {last:?}"
    );
}
