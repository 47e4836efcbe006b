//! The fuzz targets' bodies, shared by the cargo-fuzz crate (`fuzz/fuzz_targets/*.rs`, on
//! nightly) and by `crates/wisckey/tests/fuzz_corpus.rs`, which replays the saved corpus and
//! crashers under plain `cargo test` on stable. Each takes arbitrary bytes and must return
//! without panicking, hanging or allocating without bound: every decoder checks lengths
//! before it slices or allocates and reports damage as an error.

#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use wisckey::fs::{FileSystem, MemFs};
use wisckey::iter::InternalIterator;
use wisckey::sstable::Table;
use wisckey::version::VersionEdit;
use wisckey::vlog::format::{decode_record, SegmentHeader};
use wisckey::vlog::{ValuePointer, VlogOptions};
use wisckey::{Db, Options, ReadOptions};

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
        "table" => (template().iter())
            .filter(|(n, _)| n.ends_with(".sst"))
            .map(|(_, b)| b.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by name.
pub const TARGETS: [(&str, Target); 5] = [
    ("vlog_record", vlog_record),
    ("version_edit", version_edit),
    ("table", table),
    ("segment_recovery", segment_recovery),
    ("manifest", manifest),
];
