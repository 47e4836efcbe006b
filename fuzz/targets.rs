//! The fuzz targets' bodies, shared by the cargo-fuzz crate (`fuzz/fuzz_targets/*.rs`, on
//! nightly) and by `crates/wisckey/tests/fuzz_corpus.rs`, which replays the saved corpus and
//! crashers under plain `cargo test` on stable. Each takes arbitrary bytes and must return
//! without panicking, hanging or allocating without bound: every decoder checks lengths
//! before it slices or allocates and reports damage as an error.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use wisckey::checksum;
use wisckey::fs::{FileSystem, MemFs, PowerLoss};
use wisckey::iter::InternalIterator;
use wisckey::key::{make_internal_key, parse_internal_key, seek_key, ValueKind};
use wisckey::sstable::format::{block_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use wisckey::sstable::{Block, Table, TableBuilder, TableOptions};
use wisckey::version::VersionEdit;
use wisckey::vlog::format::{decode_record, SegmentHeader};
use wisckey::vlog::{ValuePointer, VlogOptions};
use wisckey::{Db, GcOptions, Options, ReadOptions, WriteBatch, WriteOptions};

/// A value-log record, a segment header and a value pointer decoded from the same bytes.
pub fn vlog_record(data: &[u8]) {
    let opts = VlogOptions {
        max_key_size: 1 << 10,
        max_value_size: 1 << 16,
        ..VlogOptions::default()
    };
    if let Ok((record, len)) = decode_record(data, &opts) {
        assert!(len <= data.len());
        assert!(record.key.len() + record.value.len() <= len);
    }
    let _ = SegmentHeader::decode(data, "fuzz");
    let _ = ValuePointer::decode(data);
}

/// A version edit (a manifest record's payload); one that decodes re-encodes to an edit
/// that decodes the same.
pub fn version_edit(data: &[u8]) {
    if let Ok(edit) = VersionEdit::decode(data, "fuzz", 0) {
        let again = VersionEdit::decode(&edit.encode(), "fuzz", 0).expect("re-encoded edit");
        assert_eq!(edit, again);
    }
}

/// A table file of arbitrary bytes: open it, iterate every entry, seek.
pub fn table(data: &[u8]) {
    let fs = MemFs::new();
    let path = Path::new("/t/000001.sst");
    fs.set_contents(path, data).expect("memfs");
    let file = fs.open_read(path).expect("memfs");
    let Ok(table) = Table::open(file, 1, "fuzz.sst".into(), data.len() as u64, None) else {
        return;
    };
    let table = Arc::new(table);
    let mut it = table.iter();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n < 100_000 {
        let _ = (it.key().len(), it.value().len());
        it.next();
        n += 1;
    }
    let _ = it.status();
    it.seek(b"key\x00\x00\x00\x00\x00\x00\x00\x01");
    let _ = it.status();
}

/// A valid table with edits whose checksums are made valid again, so the bytes reach the
/// block, index and filter decoders behind the checksums (random bytes never get past
/// them: [`table`] mostly tests the checksum checks). The input is a list of 3-byte edits
/// `(position u16 LE, byte)`: the byte is XORed into the template table at the position
/// modulo its length (0 sets the byte to 0). Then every block trailer of the template's
/// layout and the footer get the checksum of their new contents. The table is opened,
/// iterated both ways, sought, looked up and salvaged; none of it may panic, loop without
/// end or allocate without bound.
pub fn table_checksummed(data: &[u8]) {
    let (template, blocks) = checksummed_table_template();
    let mut bytes = template.clone();
    for edit in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % bytes.len();
        bytes[at] = if edit[2] == 0 { 0 } else { bytes[at] ^ edit[2] };
    }
    for handle in blocks {
        let end = (handle.offset + handle.size) as usize;
        let trailer = block_trailer(&bytes[handle.offset as usize..end], bytes[end]);
        // The type byte stays as edited: a non-zero type must be refused, checksum or not.
        bytes[end + 1..end + BLOCK_TRAILER_LEN].copy_from_slice(&trailer[1..]);
    }
    let footer = bytes.len() - FOOTER_LEN;
    let crc = checksum::mask(checksum::crc32c(&bytes[footer..footer + 44]));
    bytes[footer + 44..footer + 48].copy_from_slice(&crc.to_le_bytes());

    let fs = MemFs::new();
    let path = Path::new("/t/000001.sst");
    fs.set_contents(path, &bytes).expect("memfs");
    let file = fs.open_read(path).expect("memfs");
    let opened = Table::open(file, 1, "fuzz.sst".into(), bytes.len() as u64, None);
    let unedited = data.len() < 3;
    let table = match opened {
        Ok(table) => Arc::new(table),
        Err(e) if unedited => panic!("the unedited template does not open: {e}"),
        Err(_) => return,
    };
    if unedited {
        // The checksum rewrite must leave a valid table valid, or every edited input would
        // stop at a checksum again.
        let mut entries = 0u64;
        table.salvage_entries(&mut |_, _| entries += 1, &mut |e, _, _| panic!("{e}"));
        assert_eq!(entries, table.num_entries());
    }
    let mut it = table.iter();
    let mut steps = 0;
    it.seek_to_first();
    while it.valid() && steps < 10_000 {
        let _ = parse_internal_key(it.key());
        it.next();
        steps += 1;
    }
    let _ = it.status();
    it.seek_to_last();
    while it.valid() && steps < 20_000 {
        it.prev();
        steps += 1;
    }
    let _ = it.status();
    for i in 0..CHECKSUMMED_TABLE_KEYS + 1 {
        let user_key = checksummed_table_key(i);
        let target = seek_key(&user_key, u64::MAX >> 8);
        it.seek(&target);
        if it.valid() {
            it.prev();
        }
        let _ = table.get(&target);
        let _ = table.approximate_block_of(&target);
    }
    let mut entries = 0usize;
    table.salvage_entries(&mut |_, _| entries += 1, &mut |_, _, _| {});
}

const CHECKSUMMED_TABLE_KEYS: usize = 60;

fn checksummed_table_key(i: usize) -> Vec<u8> {
    format!("user-key-{i:03}").into_bytes()
}

/// The template of [`table_checksummed`]: small blocks (several data blocks, restart points
/// inside each), a filter, and entries of every kind — inline values, value pointers,
/// tombstones, several versions of a key — with the handles of all its blocks.
fn checksummed_table_template() -> &'static (Vec<u8>, Vec<BlockHandle>) {
    static TEMPLATE: OnceLock<(Vec<u8>, Vec<BlockHandle>)> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let fs = MemFs::new();
        let path = Path::new("/t/000001.sst");
        let file = fs.create(path).expect("memfs");
        let options = TableOptions {
            block_size: 256,
            restart_interval: 4,
            bloom_bits_per_key: 10,
        };
        let mut builder = TableBuilder::new(file, "template.sst".into(), options);
        for i in 0..CHECKSUMMED_TABLE_KEYS {
            let user_key = checksummed_table_key(i);
            let versions = 1 + i % 3;
            for v in 0..versions {
                let seq = (1000 - 3 * i - v) as u64;
                let (kind, value) = match (i + v) % 3 {
                    0 => (ValueKind::Deletion, Vec::new()),
                    1 => (ValueKind::Value, vec![i as u8; i % 40]),
                    _ => {
                        let ptr = ValuePointer {
                            segment: 1 + (i % 4) as u64,
                            offset: 32 + 100 * i as u64,
                            len: 60 + i as u32,
                        };
                        let mut encoded = Vec::new();
                        ptr.encode(&mut encoded);
                        (ValueKind::ValuePointer, encoded)
                    }
                };
                let ikey = make_internal_key(&user_key, seq, kind);
                builder.add(&ikey, &value).expect("sorted entries");
            }
        }
        builder.finish().expect("memfs");
        let bytes = fs.contents(path).expect("memfs");
        let footer_at = bytes.len() - FOOTER_LEN;
        let footer =
            Footer::decode(&bytes[footer_at..], "template", footer_at as u64).expect("footer");
        let mut blocks = vec![footer.index];
        if footer.filter.size > 0 {
            blocks.push(footer.filter);
        }
        let index_end = (footer.index.offset + footer.index.size) as usize;
        let index = Block::new(
            bytes[footer.index.offset as usize..index_end].to_vec(),
            Arc::from("template"),
            footer.index.offset,
        )
        .expect("index block");
        let index = Arc::new(index);
        let mut entries = index.iter();
        entries.seek_to_first();
        while entries.valid() {
            blocks.push(BlockHandle::decode_varint(entries.value()).expect("data handle"));
            entries.next();
        }
        assert!(blocks.len() > 4, "the template has several data blocks");
        (bytes, blocks)
    })
}

/// The files of a small database (manifest, CURRENT, a table, one value-log segment with
/// records after the replay head), made once.
fn template() -> &'static Vec<(String, Vec<u8>)> {
    static TEMPLATE: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let db = Db::open(dir, options(&fs)).expect("open");
        for i in 0..20u32 {
            db.put(format!("key{i:02}"), vec![i as u8; 100 + 40 * i as usize])
                .expect("put");
        }
        db.flush().expect("flush");
        for i in 0..10u32 {
            db.put(format!("later{i}"), vec![7u8; 300]).expect("put");
        }
        db.delete(b"key03").expect("delete");
        db.close().expect("close");
        (fs.list(dir).expect("list").into_iter())
            .filter(|n| n != "LOCK")
            .map(|n| {
                let bytes = fs.contents(&dir.join(&n)).expect("contents");
                (n, bytes)
            })
            .collect()
    })
}

fn options(fs: &MemFs) -> Options {
    Options {
        gc_space_amp_target: f64::INFINITY,
        scan_readahead_threads: 1,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    }
}

/// The template file a target replaces: the newest value-log segment (it holds the records
/// after the replay head, which recovery scans), or the manifest.
fn replaced(kind: &str) -> &'static str {
    let names = template().iter().map(|(n, _)| n.as_str());
    match kind {
        "vlog" => names.filter(|n| n.ends_with(".vlog")).max(),
        _ => names.filter(|n| n.starts_with("MANIFEST")).max(),
    }
    .expect("the template has the file")
}

/// Opens the template database with file `replaced(kind)` replaced by `data`, then reads
/// every key and scans.
fn open_with(kind: &str, data: &[u8]) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let target = replaced(kind);
    for (name, bytes) in template() {
        let bytes = if name == target { data } else { bytes };
        fs.set_contents(&dir.join(name), bytes).expect("memfs");
    }
    fs.sync_dir(dir).expect("memfs");
    let Ok(db) = Db::open(dir, options(&fs)) else {
        return;
    };
    for i in 0..20u32 {
        let _ = db.get(format!("key{i:02}"));
    }
    if let Ok(mut it) = db.iter(&ReadOptions::default()) {
        it.seek_to_first();
        while it.valid() {
            let _ = it.value();
            it.next();
        }
    }
    let _ = db.close();
}

/// Recovery of a value-log segment of arbitrary bytes.
pub fn segment_recovery(data: &[u8]) {
    open_with("vlog", data);
}

/// An open whose manifest is arbitrary bytes.
pub fn manifest(data: &[u8]) {
    open_with("manifest", data);
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Random operations against a model, with power cuts: the bytes are read as a program of
/// puts (every size class, sync or not), deletes, batches, flushes, compactions, GC runs,
/// clean reopens and power cuts (unsynced bytes dropped, or a torn tail). After a power cut
/// the database must hold the state after some write since the last sync write (a prefix,
/// batches whole, no resurrected delete); after a clean reopen, exactly the model. Any
/// difference panics.
pub fn model_ops(data: &[u8]) {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let Ok(mut db) = Db::open(dir, options(&fs)) else {
        panic!("a new database must open");
    };
    let mut model = Model::new();
    // The states after each write since the last sync write; a power cut keeps one of them.
    let mut since_sync: Vec<Model> = vec![model.clone()];
    let mut bytes = data.iter().copied().take(600);
    let mut next = move || bytes.next();
    let key = |b: u8| format!("k{:02}", b % 24).into_bytes();
    let value = |len_code: u8, fill: u8| {
        let len = match len_code % 4 {
            0 => usize::from(len_code / 4),
            1 => 64 + 8 * usize::from(len_code),
            2 => 1000 + 60 * usize::from(len_code),
            _ => 9000 + 200 * usize::from(len_code),
        };
        vec![fill; len]
    };
    while let Some(op) = next() {
        match op % 10 {
            0..=2 => {
                let (Some(k), Some(l), Some(f)) = (next(), next(), next()) else {
                    break;
                };
                let v = value(l, f);
                let sync = op & 0x80 != 0;
                db.put_opt(key(k), &v, &WriteOptions { sync }).expect("put");
                model.insert(key(k), v);
                if sync {
                    since_sync.clear();
                }
                since_sync.push(model.clone());
            }
            3 => {
                let Some(k) = next() else { break };
                db.delete(key(k)).expect("delete");
                model.remove(&key(k));
                since_sync.push(model.clone());
            }
            4 => {
                let (Some(a), Some(b), Some(l)) = (next(), next(), next()) else {
                    break;
                };
                let mut batch = WriteBatch::new();
                let v = value(l, a);
                batch.put(key(a), &v);
                batch.delete(key(b));
                db.write(batch).expect("batch");
                model.insert(key(a), v);
                model.remove(&key(b));
                since_sync.push(model.clone());
            }
            5 => db.flush().expect("flush"),
            6 => db.compact_range(None, None).expect("compact"),
            7 => {
                let gc = GcOptions {
                    compact_first: op & 0x80 != 0,
                    ..GcOptions::default()
                };
                db.gc(&gc).expect("gc");
            }
            8 => {
                db.close().expect("close");
                db = Db::open(dir, options(&fs)).expect("clean reopen");
                assert!(
                    contents(&db) == model,
                    "a clean reopen changed the contents"
                );
                since_sync = vec![model.clone()];
            }
            _ => {
                let loss = if op & 0x80 != 0 {
                    PowerLoss::TornTail {
                        seed: u64::from(op),
                    }
                } else {
                    PowerLoss::DropUnsynced
                };
                let image = fs.power_loss_image(loss);
                drop(db);
                let reopened = Db::open(dir, options(&image)).expect("open after a power cut");
                let found = contents(&reopened);
                let Some(kept) = since_sync.iter().find(|state| **state == found) else {
                    panic!(
                        "after a power cut the database holds no state since the last sync \
                         write ({} candidates)",
                        since_sync.len()
                    );
                };
                // Go on writing in the image, as the process that restarted would.
                return model_ops_continue(reopened, image, kept.clone(), &mut next);
            }
        }
    }
    assert!(contents(&db) == model, "the contents differ from the model");
    let _ = db.close();
}

/// After a power cut: the rest of the program must keep the model exactly on the image.
fn model_ops_continue(db: Db, fs: MemFs, mut model: Model, next: &mut dyn FnMut() -> Option<u8>) {
    while let Some(op) = next() {
        let (Some(k), Some(l)) = (next(), next()) else {
            break;
        };
        let name = format!("k{:02}", k % 24).into_bytes();
        if op % 3 == 0 {
            db.delete(&name).expect("delete after a power cut");
            model.remove(&name);
        } else {
            let v = vec![op; usize::from(l) * 40];
            db.put(&name, &v).expect("put after a power cut");
            model.insert(name, v);
        }
    }
    assert!(
        contents(&db) == model,
        "writes after a power cut differ from the model"
    );
    db.close().expect("close");
    let db = Db::open(Path::new("/db"), options(&fs)).expect("reopen after a power cut");
    assert!(
        contents(&db) == model,
        "a reopen after a power cut changed the contents"
    );
}

/// Every key and value, by a forward scan.
fn contents(db: &Db) -> Model {
    let mut seen = Model::new();
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().expect("value").to_vec());
        it.next();
    }
    it.status().expect("scan");
    // Point reads of the whole key space (touched first, then one `multi_get`) must agree
    // with the scan.
    let keys: Vec<Vec<u8>> = (0..24u8).map(|b| format!("k{b:02}").into_bytes()).collect();
    db.prefetch_keys(&keys);
    let values = db.multi_get(&keys).expect("multi_get");
    for (key, value) in keys.iter().zip(values) {
        assert!(
            value.as_ref() == seen.get(key),
            "multi_get and the scan disagree on {:?}",
            String::from_utf8_lossy(key)
        );
    }
    seen
}

/// Seed inputs of each target: the template's files, and a record and an edit.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let file = |name: &str| {
        (template().iter())
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
            .expect("template file")
    };
    match target {
        "segment_recovery" => vec![file(replaced("vlog"))],
        "manifest" => vec![file(replaced("manifest"))],
        "vlog_record" => {
            let segment = file(replaced("vlog"));
            vec![segment[32..].to_vec(), segment[..32].to_vec()]
        }
        "version_edit" => {
            let manifest = file(replaced("manifest"));
            // Header (12 bytes), then crc (4) and length (4) of the first record.
            vec![manifest.get(20..).unwrap_or_default().to_vec()]
        }
        "model_ops" => vec![
            // Puts of each size class, a sync put, deletes, a batch, flush, GC, power cut.
            vec![
                0, 1, 4, 1, 2, 9, 2, 3, 2, 0x80, 4, 5, 7, 3, 2, 4, 5, 6, 7, 5, 9, 1, 2, 3, 2, 1,
            ],
            vec![
                0, 1, 3, 1, 3, 7, 2, 5, 6, 8, 1, 2, 2, 3, 1, 0x89, 0, 5, 5, 3, 2, 2,
            ],
        ],
        "table" => (template().iter())
            .filter(|(n, _)| n.ends_with(".sst"))
            .map(|(_, b)| b.clone())
            .collect(),
        // A few edits in the first data block, the index and the footer region.
        "table_checksummed" => vec![vec![], vec![5, 0, 1, 40, 0, 0x80], vec![0xf0, 0xff, 4]],
        _ => Vec::new(),
    }
}

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by name.
pub const TARGETS: [(&str, Target); 7] = [
    ("vlog_record", vlog_record),
    ("version_edit", version_edit),
    ("table", table),
    ("table_checksummed", table_checksummed),
    ("segment_recovery", segment_recovery),
    ("manifest", manifest),
    ("model_ops", model_ops),
];
