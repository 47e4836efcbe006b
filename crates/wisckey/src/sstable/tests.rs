//! Table-level tests: builder + reader round trips, point lookups, iteration, damage
//! detection (every byte flip, every truncation), and the two caches.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::error::Error;
use crate::fs::{FaultFs, FaultOps, FileSystem, FsOp, MemFs, ReadableFile};
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, seek_key, ValueKind};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn small_options() -> TableOptions {
    TableOptions {
        block_size: 256,
        restart_interval: 4,
        bloom_bits_per_key: 10,
    }
}

/// `n` user keys, each with two versions (seq 20 newer first, then seq 10).
fn versioned_entries(n: usize) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("key-{:04}", i * 2);
        for seq in [20, 10] {
            out.push((
                make_internal_key(user.as_bytes(), seq, ValueKind::Value),
                format!("value-{i}-{seq}").into_bytes(),
            ));
        }
    }
    out
}

const TABLE_PATH: &str = "/t.sst";

fn build_table(entries: &Entries, options: TableOptions) -> Vec<u8> {
    let fs = MemFs::new();
    let path = Path::new(TABLE_PATH);
    let file = fs.create(path).expect("create");
    let mut builder = TableBuilder::new(file, "t.sst".into(), options);
    for (k, v) in entries {
        builder.add(k, v).expect("add");
    }
    assert_eq!(builder.num_entries(), entries.len() as u64);
    let written = fs.file_size(path).expect("size");
    assert!(builder.estimated_size() <= written + options.block_size as u64 * 2);
    let size = builder.finish().expect("finish");
    let bytes = fs.contents(path).expect("table");
    assert_eq!(size, bytes.len() as u64);
    bytes
}

/// An in-memory file holding `bytes`, open for reading.
fn file_holding(bytes: &[u8]) -> Arc<dyn ReadableFile> {
    let fs = MemFs::new();
    let path = Path::new(TABLE_PATH);
    fs.set_contents(path, bytes).expect("set_contents");
    fs.open_read(path).expect("open")
}

fn open_table(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> crate::Result<Arc<Table>> {
    let size = bytes.len() as u64;
    Table::open(file_holding(&bytes), 7, "t.sst".into(), size, cache).map(Arc::new)
}

fn scan_forward(table: &Arc<Table>) -> crate::Result<Entries> {
    let mut it = table.iter();
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

fn scan_backward(table: &Arc<Table>) -> crate::Result<Entries> {
    let mut it = table.iter();
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    it.status().map(|()| out)
}

#[test]
fn table_and_iterator_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    fn assert_send_static<T: Send + 'static>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_send_sync::<TableCache>();
    assert_send_static::<TableIterator>();
}

#[test]
fn round_trip_both_directions_over_many_blocks() {
    let entries = versioned_entries(300);
    for options in [small_options(), TableOptions::default()] {
        let table = open_table(build_table(&entries, options), None).expect("open");
        assert_eq!(table.num_entries(), entries.len() as u64);
        assert_eq!(scan_forward(&table).expect("forward"), entries);
        assert_eq!(scan_backward(&table).expect("backward"), entries);
    }
}

/// An index block past its limit (4 GiB: 32-bit restart offsets) is refused while the
/// table is written, and every later call returns the same error; it once wrapped its
/// offsets and wrote a table that could not be read.
#[test]
fn an_index_block_past_its_limit_fails_the_build() {
    let fs = MemFs::new();
    let file = fs.create(Path::new(TABLE_PATH)).expect("create");
    let mut builder = TableBuilder::new(file, "t.sst".into(), small_options());
    builder.set_index_block_limit(2000);
    let key = |i: usize| make_internal_key(format!("{i:0>200}").as_bytes(), 1, ValueKind::Value);
    let failed = (0..200).find_map(|i| builder.add(&key(i), &[7u8; 300]).err());
    let err = failed.expect("the index passes 2,000 bytes within 200 blocks");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("index"), "{err}");
    assert!(builder.add(&key(500), b"v").is_err(), "latched");
    assert!(builder.finish().is_err(), "latched");
}

#[test]
fn empty_table_opens_and_is_empty() {
    let table = open_table(build_table(&Vec::new(), small_options()), None).expect("open");
    assert_eq!(table.num_entries(), 0);
    assert!(scan_forward(&table).expect("scan").is_empty());
    assert!(scan_backward(&table).expect("scan").is_empty());
    assert_eq!(table.get(&seek_key(b"a", 1)).expect("get"), None);
}

#[test]
fn get_finds_present_skips_absent_and_respects_sequence() {
    let entries = versioned_entries(200);
    let table = open_table(build_table(&entries, small_options()), None).expect("open");
    for i in 0..200 {
        let user = format!("key-{:04}", i * 2);
        let newest = table.get(&seek_key(user.as_bytes(), 100)).expect("get");
        let (k, v) = newest.expect("present");
        assert_eq!(k, make_internal_key(user.as_bytes(), 20, ValueKind::Value));
        assert_eq!(v, format!("value-{i}-20").into_bytes());
        // As of sequence 15 only the older version is visible.
        let older = table.get(&seek_key(user.as_bytes(), 15)).expect("get");
        assert_eq!(
            older.expect("older").1,
            format!("value-{i}-10").into_bytes()
        );
        // Before the first version: the next entry has another user key.
        assert_eq!(table.get(&seek_key(user.as_bytes(), 5)).expect("get"), None);
        let absent = format!("key-{:04}", i * 2 + 1);
        assert_eq!(
            table.get(&seek_key(absent.as_bytes(), 100)).expect("get"),
            None
        );
    }
    assert_eq!(table.get(&seek_key(b"zzz", 100)).expect("get"), None);
    assert_eq!(table.get(&seek_key(b"", 100)).expect("get"), None);
}

#[test]
fn get_works_without_a_bloom_filter() {
    let entries = versioned_entries(50);
    let options = TableOptions {
        bloom_bits_per_key: 0,
        ..small_options()
    };
    let table = open_table(build_table(&entries, options), None).expect("open");
    assert!(table.may_contain(b"anything"));
    assert!(table
        .get(&seek_key(b"key-0010", 100))
        .expect("get")
        .is_some());
    assert_eq!(table.get(&seek_key(b"key-0011", 100)).expect("get"), None);
}

/// A table cursor (the held data block of GC's ascending lookups) answers every lookup as
/// `Table::get` does, in ascending order (where the held block is used), descending and
/// shuffled order (where it must not be), with and without a Bloom filter (without one,
/// absent keys and keys between blocks reach the held block too).
#[test]
fn a_table_cursor_answers_as_get_does_in_any_order() {
    use rand::{rngs::SmallRng, seq::SliceRandom, SeedableRng};

    use crate::version::PointCursor;

    let entries = versioned_entries(300);
    let mut lookups: Vec<Vec<u8>> = vec![seek_key(b"", 100), seek_key(b"zzz", 100)];
    for i in 0..600 {
        let user = format!("key-{i:04}");
        for seq in [100, 15, 5] {
            lookups.push(seek_key(user.as_bytes(), seq));
        }
        // Between a key and the next one (absent; without a filter it reaches the blocks).
        lookups.push(seek_key(format!("key-{i:04}a").as_bytes(), 100));
    }
    lookups.sort_by(|a, b| crate::key::compare_internal(a, b));
    let seed = 20261130;
    for bloom_bits_per_key in [10, 0] {
        let options = TableOptions {
            bloom_bits_per_key,
            ..small_options()
        };
        let table = open_table(build_table(&entries, options), None).expect("open");
        let mut orders = vec![("ascending", lookups.clone())];
        orders.push(("descending", lookups.iter().rev().cloned().collect()));
        let mut shuffled = lookups.clone();
        shuffled.shuffle(&mut SmallRng::seed_from_u64(seed));
        orders.push(("shuffled", shuffled));
        for (order, keys) in orders {
            let mut cursor = super::reader::TableCursor::new(Arc::clone(&table));
            let mut found = 0;
            for ikey in &keys {
                let expected = table.get(ikey).expect("get");
                found += usize::from(expected.is_some());
                assert_eq!(
                    cursor.get(ikey).expect("cursor get"),
                    expected,
                    "{order} order, bloom {bloom_bits_per_key}, seed {seed}, key {:?}",
                    String::from_utf8_lossy(ikey)
                );
            }
            // Each present key at sequences 100 and 15.
            assert_eq!(found, 600, "{order}");
        }
    }
}

#[test]
fn seek_to_every_key_and_between_keys_across_blocks() {
    let entries = versioned_entries(150);
    let table = open_table(build_table(&entries, small_options()), None).expect("open");
    let mut it = table.iter();
    for (i, (k, v)) in entries.iter().enumerate() {
        it.seek(k);
        assert!(it.valid(), "seek {i}");
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        if i > 0 {
            it.prev();
            assert_eq!(it.key(), &entries[i - 1].0[..]);
            it.next();
        }
        it.next();
        match entries.get(i + 1) {
            Some((next, _)) => assert_eq!(it.key(), &next[..]),
            None => assert!(!it.valid()),
        }
    }
    for i in 0..150 {
        let between = format!("key-{:04}", i * 2 + 1);
        it.seek(&seek_key(between.as_bytes(), 100));
        match entries.get(2 * i + 2) {
            Some((next, _)) => assert_eq!(it.key(), &next[..]),
            None => assert!(!it.valid()),
        }
    }
    it.status().expect("no errors");
}

#[test]
fn newer_version_and_foreign_files_are_told_apart() {
    let bytes = build_table(&versioned_entries(5), small_options());
    let footer_at = bytes.len() - format::FOOTER_LEN;
    // A newer build's footer: its version, checksummed with it.
    let mut newer = bytes.clone();
    newer[footer_at + 40..footer_at + 44].copy_from_slice(&2u32.to_le_bytes());
    let crc = crate::checksum::mask(crate::checksum::crc32c(&newer[footer_at..footer_at + 44]));
    newer[footer_at + 44..footer_at + 48].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        open_table(newer, None),
        Err(Error::UnsupportedVersion {
            found: 2,
            supported: 1,
            ..
        })
    ));
    let foreign: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    let err = open_table(foreign, None).expect_err("not a table");
    assert!(
        err.is_corruption() && err.to_string().contains("bad magic"),
        "{err}"
    );
    let err = open_table(vec![0; 10], None).expect_err("too short");
    assert!(err.is_corruption(), "{err}");
}

/// Checks that reading a (possibly damaged) table never returns wrong data: each read
/// either fails with an error or returns exactly what was written.
fn assert_never_wrong(bytes: Vec<u8>, entries: &Entries, what: &str) -> bool {
    let Ok(table) = open_table(bytes, None) else {
        return true;
    };
    let mut any_error = false;
    for result in [scan_forward(&table), scan_backward(&table)] {
        match result {
            Ok(scanned) => assert_eq!(&scanned, entries, "{what}: wrong scan"),
            Err(e) => {
                assert!(e.is_corruption(), "{what}: {e}");
                any_error = true;
            }
        }
    }
    for (k, v) in entries {
        match table.get(k) {
            Ok(found) => assert_eq!(found, Some((k.clone(), v.clone())), "{what}: wrong get"),
            Err(e) => {
                assert!(e.is_corruption(), "{what}: {e}");
                any_error = true;
            }
        }
    }
    any_error
}

#[test]
fn every_single_byte_corruption_is_detected() {
    let entries = versioned_entries(12);
    let bytes = build_table(&entries, small_options());
    assert!(
        bytes.len() > 3 * small_options().block_size / 2,
        "several blocks"
    );
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[i] ^= flip;
            // The table has no unused bytes, so every flip must surface as an error.
            assert!(
                assert_never_wrong(damaged, &entries, &format!("byte {i} ^ {flip:#x}")),
                "flip of byte {i} by {flip:#x} went unnoticed"
            );
        }
    }
}

#[test]
fn every_truncation_fails_cleanly() {
    let entries = versioned_entries(12);
    let bytes = build_table(&entries, small_options());
    for len in 0..bytes.len() {
        let truncated = bytes[..len].to_vec();
        assert!(
            open_table(truncated, None).is_err(),
            "truncation to {len} opened"
        );
    }
    // A file that is shorter than the size the caller believes it has.
    let full_len = bytes.len() as u64;
    for len in [0, bytes.len() / 2, bytes.len() - 1] {
        let file = file_holding(&bytes[..len]);
        let err = Table::open(file, 1, "t".into(), full_len, None).expect_err("short file");
        assert!(err.is_corruption(), "{err}");
    }
}

#[test]
fn block_cache_serves_blocks_and_stays_within_capacity() {
    let entries = versioned_entries(300);
    let cache = Arc::new(BlockCache::new(2000));
    let table =
        open_table(build_table(&entries, small_options()), Some(cache.clone())).expect("open");
    assert_eq!(scan_forward(&table).expect("scan"), entries);
    assert!(cache.usage() <= cache.capacity());
    assert!(cache.usage() > 0);
    for (k, v) in entries.iter().rev() {
        assert_eq!(table.get(k).expect("get"), Some((k.clone(), v.clone())));
        assert!(cache.usage() <= 2000, "usage {}", cache.usage());
    }
    // A block larger than the whole capacity is not cached at all.
    let tiny = Arc::new(BlockCache::new(10));
    let table =
        open_table(build_table(&entries, small_options()), Some(tiny.clone())).expect("open");
    assert_eq!(scan_forward(&table).expect("scan"), entries);
    assert_eq!(tiny.usage(), 0);
}

#[test]
fn block_cache_hit_returns_the_same_block() {
    let entries = versioned_entries(50);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let table =
        open_table(build_table(&entries, small_options()), Some(cache.clone())).expect("open");
    assert!(table.get(&entries[0].0).expect("get").is_some());
    let first = cache.get(7, 0).expect("first block cached");
    assert!(table.get(&entries[1].0).expect("get").is_some());
    assert!(Arc::ptr_eq(&first, &cache.get(7, 0).expect("still cached")));
}

fn write_table_file(fs: &dyn FileSystem, dir: &Path, number: u64, entries: &Entries) -> u64 {
    let path = crate::filename::table_file_name(dir, number);
    let file = fs.create(&path).expect("create");
    let mut builder = TableBuilder::new(file, path.display().to_string(), small_options());
    for (k, v) in entries {
        builder.add(k, v).expect("add");
    }
    builder.finish().expect("finish")
}

#[test]
fn table_cache_reuses_reopens_after_evict_and_bounds_open_tables() {
    // Counts the table files opened for reading.
    let fs = Arc::new(FaultFs::new(Arc::new(MemFs::new())));
    let open_count = || fs.calls_of(FaultOps::Only(&[FsOp::OpenRead]));
    let dir = PathBuf::from("/db");
    let entries = versioned_entries(20);
    let sizes: Vec<u64> = (1..=3)
        .map(|n| write_table_file(fs.as_ref(), &dir, n, &entries))
        .collect();
    let cache = TableCache::new(fs.clone(), dir, 2, Some(Arc::new(BlockCache::new(1 << 16))));
    let t1 = cache.get(1, sizes[0]).expect("open 1");
    let again = cache.get(1, sizes[0]).expect("cached 1");
    assert!(Arc::ptr_eq(&t1, &again));
    assert_eq!(open_count(), 1);
    cache.evict(1);
    let reopened = cache.get(1, sizes[0]).expect("reopen 1");
    assert_eq!(open_count(), 2);
    assert!(!Arc::ptr_eq(&t1, &reopened));
    assert_eq!(scan_forward(&reopened).expect("scan"), entries);
    // Capacity 2: opening 2 and 3 evicts 1, the least recently used.
    cache.get(2, sizes[1]).expect("open 2");
    cache.get(3, sizes[2]).expect("open 3");
    assert_eq!(cache.len(), 2);
    cache.get(1, sizes[0]).expect("reopen 1 again");
    assert_eq!(open_count(), 5);
    // The evicted handle held elsewhere keeps working.
    assert_eq!(scan_forward(&t1).expect("old handle"), entries);
    assert!(cache.get(9, 100).is_err());
}

#[test]
fn concurrent_gets_through_a_shared_cache() {
    let entries = Arc::new(versioned_entries(200));
    let cache = Arc::new(BlockCache::new(3000));
    let table =
        open_table(build_table(&entries, small_options()), Some(cache.clone())).expect("open");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (table, entries) = (Arc::clone(&table), Arc::clone(&entries));
            std::thread::spawn(move || {
                for (k, v) in entries.iter().skip(t).step_by(3) {
                    assert_eq!(table.get(k).expect("get"), Some((k.clone(), v.clone())));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("reader thread");
    }
    assert!(cache.usage() <= 3000);
}

/// A table whose single index entry carries `index_value` instead of a real handle. The
/// data block at offset 0 holds `entries`; checksums are all valid.
fn forge_table(entries: &Entries, index_value: Option<Vec<u8>>) -> Vec<u8> {
    use super::block_builder::BlockBuilder;
    use super::format::{block_trailer, BlockHandle, Footer};
    let mut out = Vec::new();
    let mut data = BlockBuilder::new(4);
    for (k, v) in entries {
        data.add(k, v);
    }
    let data = data.finish();
    let data_handle = BlockHandle {
        offset: 0,
        size: data.len() as u64,
    };
    out.extend_from_slice(&data);
    out.extend_from_slice(&block_trailer(&data, 0));
    let mut index = BlockBuilder::new(1);
    let value = index_value.unwrap_or_else(|| {
        let mut v = Vec::new();
        data_handle.encode_varint_to(&mut v);
        v
    });
    index.add(&entries[entries.len() - 1].0, &value);
    let index = index.finish();
    let index_handle = BlockHandle {
        offset: out.len() as u64,
        size: index.len() as u64,
    };
    out.extend_from_slice(&index);
    out.extend_from_slice(&block_trailer(&index, 0));
    let footer = Footer {
        filter: BlockHandle::default(),
        index: index_handle,
        num_entries: entries.len() as u64,
    };
    out.extend_from_slice(&footer.encode());
    out
}

#[test]
fn checksummed_but_impossible_handles_are_corruption() {
    let entries = versioned_entries(5);
    let sane = open_table(forge_table(&entries, None), None).expect("forged table opens");
    assert_eq!(scan_forward(&sane).expect("scan"), entries);
    let mut handles = Vec::new();
    for (offset, size) in [
        (1u64 << 40, 100u64),
        (0, u64::MAX),
        (u64::MAX, 1),
        (0, 1 << 40),
    ] {
        let mut v = Vec::new();
        format::BlockHandle { offset, size }.encode_varint_to(&mut v);
        handles.push(v);
    }
    handles.push(vec![0xff; 3]); // not a handle at all
    for value in handles {
        let table = open_table(forge_table(&entries, Some(value.clone())), None).expect("open");
        let err = table.get(&entries[0].0).expect_err("bad handle");
        assert!(err.is_corruption(), "{value:?}: {err}");
        let err = scan_forward(&table).expect_err("bad handle");
        assert!(err.is_corruption(), "{value:?}: {err}");
        // The size estimate neither overflows nor reaches past the data blocks.
        let (start, end) = table.approximate_block_of(&entries[0].0);
        assert!(start <= end && end <= 1 << 20, "{value:?}: ({start}, {end})");
    }
    // The footer's own handles are bounds-checked too (valid footer checksum).
    let bytes = build_table(&entries, small_options());
    let footer_at = bytes.len() - format::FOOTER_LEN;
    let mut footer = format::Footer::decode(&bytes[footer_at..], "t", 0).expect("footer");
    footer.index.size = u64::MAX - 10;
    let mut forged = bytes[..footer_at].to_vec();
    forged.extend_from_slice(&footer.encode());
    assert!(open_table(forged, None)
        .expect_err("huge index")
        .is_corruption());
}

/// A writable file that fails every append after the first `ok_appends`.
#[derive(Debug)]
struct FailingFile {
    ok_appends: usize,
    len: u64,
}

impl crate::fs::WritableFile for FailingFile {
    fn append(&mut self, data: &[u8]) -> crate::Result<()> {
        if self.ok_appends == 0 {
            return Err(Error::io("append", std::io::Error::other("disk on fire")));
        }
        self.ok_appends -= 1;
        self.len += data.len() as u64;
        Ok(())
    }
    fn sync_data(&mut self) -> crate::Result<()> {
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> crate::Result<()> {
        self.len = len;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn preallocate(&mut self, _up_to: u64) -> crate::Result<()> {
        Ok(())
    }
}

#[test]
fn builder_latches_the_first_write_error() {
    let file = FailingFile {
        ok_appends: 1,
        len: 0,
    };
    let mut builder = TableBuilder::new(Box::new(file), "f.sst".into(), small_options());
    let entries = versioned_entries(100);
    let first_error = entries
        .iter()
        .map(|(k, v)| builder.add(k, v))
        .position(|r| r.is_err())
        .expect("a block flush fails");
    for (k, v) in &entries[first_error..] {
        assert!(matches!(builder.add(k, v), Err(Error::Io { .. })));
    }
    assert!(matches!(builder.finish(), Err(Error::Io { .. })));
}
