//! Bad input is refused with a clear error and changes nothing: oversized keys and values,
//! foreign directories, newer format versions, a second open of the same directory, and
//! nonsensical options. Empty keys and values are valid.

use std::path::Path;
use std::sync::Arc;

use wisckey::fs::{FileSystem, MemFs, PosixFs};
use wisckey::{Db, Error, Options, WriteBatch, MAX_KEY_SIZE, MAX_VALUE_SIZE};

fn mem_options(fs: &MemFs) -> Options {
    Options::small_for_tests(Arc::new(fs.clone()))
}

#[test]
fn empty_keys_and_values_are_valid() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).expect("open");
    db.put(b"", b"").expect("empty key and value");
    assert_eq!(db.get(b"").expect("get"), Some(Vec::new()));
    db.put(b"", b"x").expect("overwrite empty key");
    assert_eq!(db.get(b"").expect("get"), Some(b"x".to_vec()));
    db.delete(b"").expect("delete empty key");
    assert_eq!(db.get(b"").expect("get"), None);
}

#[test]
fn empty_batch_is_a_no_op() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).expect("open");
    db.write(WriteBatch::new()).expect("empty batch");
    db.put(b"k", b"v").expect("later writes still work");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn oversized_key_and_value_are_rejected_naming_the_limit() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).expect("open");
    let big_key = vec![b'k'; MAX_KEY_SIZE + 1];
    match db.put(&big_key, b"v") {
        Err(Error::InvalidArgument(msg)) => {
            assert!(
                msg.contains(&MAX_KEY_SIZE.to_string()),
                "message names the limit: {msg}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    db.put(vec![b'k'; MAX_KEY_SIZE], b"v")
        .expect("key at the limit is fine");
    let big_value = vec![0u8; MAX_VALUE_SIZE + 1];
    match db.put(b"k", &big_value) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(
                msg.contains(&MAX_VALUE_SIZE.to_string()),
                "message names the limit: {msg}"
            )
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // A batch with one bad operation is rejected whole.
    let mut batch = WriteBatch::new();
    batch.put(b"good", b"1").put(&big_key, b"2");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get(b"good").expect("get"), None);
}

#[test]
fn foreign_directory_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), b"someone else's file").expect("write");
    let before: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::NotADatabase(msg)) => assert!(msg.contains("notes.txt"), "{msg}"),
        other => panic!("expected NotADatabase, got {other:?}"),
    }
    let after: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(before, after, "nothing was created or removed");
}

/// CURRENT is a wisckey file: garbage in it is damage (issue 10), reported as corruption.
#[test]
fn garbage_current_file_is_corruption() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("mkdir");
    let mut f = fs.create(&dir.join("CURRENT")).expect("create");
    f.append(b"hello world\n").expect("append");
    drop(f);
    assert!(matches!(
        Db::open(dir, mem_options(&fs)),
        Err(Error::Corruption { ref file, .. }) if file == "CURRENT"
    ));
}

#[test]
fn newer_manifest_version_is_refused() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    Db::open(dir, mem_options(&fs))
        .expect("create")
        .close()
        .expect("close");
    // Bump the manifest's format version (bytes 8..12 after the magic).
    let manifest = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .find(|n| n.starts_with("MANIFEST-"))
        .expect("manifest exists");
    let path = dir.join(&manifest);
    let mut bytes = fs.contents(&path).expect("manifest contents");
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    fs.set_contents(&path, &bytes).expect("rewrite");
    let before = snapshot_files(&fs, dir);
    match Db::open(dir, mem_options(&fs)) {
        Err(Error::UnsupportedVersion { found, .. }) => assert_eq!(found, 99),
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    assert_eq!(
        snapshot_files(&fs, dir),
        before,
        "a refused open changes nothing"
    );
}

/// Every file in `dir` with its contents.
fn snapshot_files(fs: &MemFs, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut names = fs.list(dir).expect("list");
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let bytes = fs.contents(&dir.join(&name)).expect("listed file exists");
            (name, bytes)
        })
        .collect()
}

#[test]
fn second_open_of_the_same_directory_fails_until_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let options = || Options::default().with_fs(Arc::new(PosixFs::new()));
    let db = Db::open(&path, options()).expect("first open");
    match Db::open(&path, options()) {
        Err(Error::Locked(_)) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().expect("close");
    Db::open(&path, options()).expect("open after close");
}

/// An empty path is refused as empty by every entry point (repair said " does not
/// exist", naming nothing).
#[test]
fn an_empty_database_path_is_refused_as_empty() {
    let fs = MemFs::new();
    let refused = |what: &str, result: wisckey::Result<()>| match result {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("empty"), "{what}: {why}"),
        other => panic!("{what}: {other:?}"),
    };
    refused("open", Db::open("", mem_options(&fs)).map(drop));
    refused(
        "open_read_only",
        Db::open_read_only("", mem_options(&fs)).map(drop),
    );
    refused("repair", Db::repair("", mem_options(&fs)).map(drop));
    assert!(fs.file_names().is_empty(), "nothing created");
}

#[test]
fn missing_database_with_create_if_missing_off_is_an_error() {
    let fs = MemFs::new();
    let options = Options {
        create_if_missing: false,
        ..mem_options(&fs)
    };
    assert!(matches!(
        Db::open("/nope", options),
        Err(Error::InvalidArgument(_))
    ));
    assert!(fs.file_names().is_empty(), "nothing created");
}

/// Opening through a symbolic link whose target is missing says so: the OS's own answer,
/// `create_dir_all ...: File exists`, named no reason. Nothing is created behind the link.
#[test]
fn a_symlink_to_nothing_is_refused_with_a_reason() {
    let temp = tempfile::tempdir().expect("tempdir");
    let link = temp.path().join("db");
    let target = temp.path().join("gone");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let options = Options::small_for_tests(Arc::new(PosixFs::new()));
    match Db::open(&link, options) {
        Err(Error::InvalidArgument(why)) => {
            assert!(why.contains("symbolic link"), "{why}")
        }
        other => panic!("{:?}", other.map(drop)),
    }
    assert!(!target.exists(), "nothing created behind the link");
}

#[test]
fn error_if_exists_refuses_an_existing_database() {
    let fs = MemFs::new();
    Db::open("/db", mem_options(&fs))
        .expect("create")
        .close()
        .expect("close");
    let options = Options {
        error_if_exists: true,
        ..mem_options(&fs)
    };
    assert!(matches!(
        Db::open("/db", options),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn nonsensical_options_are_rejected_at_open() {
    let fs = MemFs::new();
    let options = Options {
        l0_stop_trigger: 1,
        ..mem_options(&fs)
    };
    match Db::open("/db", options) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("l0_"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// A memtable numbers its entries in 32 bits; a size that could hold 2^32 of them is
/// refused instead of returning older versions past that count.
#[test]
fn a_memtable_size_over_64_gib_is_rejected_at_open() {
    let fs = MemFs::new();
    let options = Options {
        memtable_size: (64 << 30) + 1,
        ..mem_options(&fs)
    };
    match Db::open("/db", options) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("memtable_size"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// Defect: `memtable_max_log_bytes = 0` was accepted, and then every memtable was "full"
/// from birth: the first write switched empty memtables until the flush queue filled and
/// never returned, while the background thread flushed empty memtables (a manifest edit
/// and an fsync each) without end.
#[test]
fn a_memtable_log_budget_of_zero_is_rejected_at_open() {
    let fs = MemFs::new();
    let options = Options {
        memtable_max_log_bytes: 0,
        ..mem_options(&fs)
    };
    match Db::open("/db", options) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("memtable_max_log_bytes"), "{msg}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(!fs
        .exists(std::path::Path::new("/db/CURRENT"))
        .expect("exists"));
}

/// Defect: a zero `vlog_flush_interval` was accepted, and the log's flusher thread then
/// never slept: one core busy for as long as the database was open.
#[test]
fn a_zero_log_flush_interval_is_rejected_at_open() {
    let fs = MemFs::new();
    let options = Options {
        vlog_flush_interval: std::time::Duration::ZERO,
        ..mem_options(&fs)
    };
    match Db::open("/db", options) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("vlog_flush_interval"), "{msg}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert!(!fs
        .exists(std::path::Path::new("/db/CURRENT"))
        .expect("exists"));
}

/// "No limit" written as the type's maximum: `vlog_segment_size = u64::MAX` overflowed GC's
/// allowance for the unflushed log (a panic on the GC thread, or in `Db::gc`, where
/// overflow checks are on), `vlog_buffer_size = usize::MAX` the log writer's buffer
/// trimming after a write-out. Both are accepted and work. The overflows panicked only
/// where overflow checks are on (`cargo test` without `--release`); CI's release build
/// wrapped them harmlessly, so there this test guards nothing but the round trip.
#[test]
fn the_largest_segment_and_buffer_sizes_work() {
    let fs = MemFs::new();
    let options = Options {
        vlog_segment_size: u64::MAX,
        vlog_buffer_size: usize::MAX,
        vlog_preallocate_size: 1 << 20,
        ..mem_options(&fs)
    };
    let db = Db::open("/db", options).expect("open");
    for i in 0..200u32 {
        db.put(format!("key{i:04}"), vec![i as u8; 300])
            .expect("put");
    }
    db.sync().expect("sync: a write-out");
    db.gc(&wisckey::GcOptions::default()).expect("gc");
    for i in 0..200u32 {
        assert_eq!(
            db.get(format!("key{i:04}")).expect("get"),
            Some(vec![i as u8; 300])
        );
    }
    db.close().expect("close");
}

/// A range that starts after it ends is refused by every call that takes one, as `range`
/// refuses it: `approximate_size` answered for it, `compact_range` compacted whatever
/// spanned both keys.
#[test]
fn a_range_that_starts_after_it_ends_is_refused_everywhere() {
    let fs = MemFs::new();
    let db = Db::open("/db", mem_options(&fs)).expect("open");
    db.put("a", "1").expect("put");
    db.put("z", "2").expect("put");
    db.flush().expect("flush");
    let refused = |result: wisckey::Result<()>, what: &str| match result {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("starts after"), "{what}: {msg}"),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    refused(db.approximate_size("z".."a").map(drop), "approximate_size");
    refused(db.compact_range(Some(b"z"), Some(b"a")), "compact_range");
    refused(db.range("z".."a").map(drop), "range");
    db.approximate_size("a".."a")
        .expect("an empty range is fine");
    db.compact_range(Some(b"a"), Some(b"a"))
        .expect("one key is fine");
    db.close().expect("close");
}
