//! The `FileSystem` trait contract, checked identically against `PosixFs` (in a temporary
//! directory), `MemFs`, and a `FaultFs` with no fault armed. Anything the engine relies on
//! from a file system belongs here, so that `MemFs`-based tests mean something for the real
//! thing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wisckey::fs::{FaultFs, FaultKind, FaultOps, FileSystem, MemFs, PosixFs, PowerLoss};
use wisckey::Error;

/// One implementation under test, rooted at a directory that exists and is empty.
struct Target {
    name: &'static str,
    fs: Arc<dyn FileSystem>,
    root: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

fn targets() -> Vec<Target> {
    let tmp = tempfile::tempdir().expect("tempdir");
    let posix_root = tmp.path().join("db");
    let mem_root = PathBuf::from("/mem/db");
    let fault_root = PathBuf::from("/fault/db");
    let targets = vec![
        Target {
            name: "posix",
            fs: Arc::new(PosixFs::new()),
            root: posix_root,
            _tmp: Some(tmp),
        },
        Target {
            name: "mem",
            fs: Arc::new(MemFs::new()),
            root: mem_root,
            _tmp: None,
        },
        Target {
            name: "fault(mem)",
            fs: Arc::new(FaultFs::new(Arc::new(MemFs::new()))),
            root: fault_root,
            _tmp: None,
        },
    ];
    for t in &targets {
        t.fs.create_dir_all(&t.root).expect("create root");
    }
    targets
}

fn read_all(fs: &dyn FileSystem, path: &Path) -> Vec<u8> {
    let file = fs.open_read(path).expect("open_read");
    let mut buf = vec![0; file.len().expect("len") as usize];
    file.read_exact_at(0, &mut buf, "test").expect("read");
    buf
}

fn write_file(fs: &dyn FileSystem, path: &Path, data: &[u8]) {
    let mut w = fs.create(path).expect("create");
    w.append(data).expect("append");
    w.sync_data().expect("sync");
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// Runs `check` against every implementation, naming the one that failed.
fn for_each_fs(check: impl Fn(&dyn FileSystem, &Path)) {
    for t in targets() {
        eprintln!("checking {}", t.name);
        check(t.fs.as_ref(), &t.root);
    }
}

#[test]
fn create_append_read_len() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        let mut w = fs.create(&path).expect("create");
        assert_eq!(w.len(), 0);
        w.append(b"hello ").expect("append");
        w.append(b"world").expect("append");
        assert_eq!(w.len(), 11);
        assert_eq!(fs.file_size(&path).expect("size"), 11);
        let r = fs.open_read(&path).expect("open_read");
        assert_eq!(r.len().expect("len"), 11);
        let mut buf = [0u8; 5];
        assert_eq!(r.read_at(6, &mut buf).expect("read"), 5);
        assert_eq!(&buf, b"world");
        // Short read at the end, zero past it.
        assert_eq!(r.read_at(9, &mut buf).expect("read"), 2);
        assert_eq!(r.read_at(11, &mut buf).expect("read"), 0);
        assert_eq!(r.read_at(1000, &mut buf).expect("read"), 0);
        let err = r.read_exact_at(9, &mut buf, "a").expect_err("short");
        assert!(err.is_corruption());
    });
}

#[test]
fn create_truncates_existing_file() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        write_file(fs, &path, b"old content");
        let w = fs.create(&path).expect("re-create");
        assert_eq!(w.len(), 0);
        assert_eq!(fs.file_size(&path).expect("size"), 0);
    });
}

#[test]
fn set_len_truncates_and_extends_and_appends_go_to_new_end() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        let mut w = fs.create(&path).expect("create");
        w.append(b"abcdef").expect("append");
        w.set_len(3).expect("truncate");
        assert_eq!(w.len(), 3);
        w.append(b"XY").expect("append");
        assert_eq!(read_all(fs, &path), b"abcXY");
        w.set_len(7).expect("extend");
        assert_eq!(read_all(fs, &path), b"abcXY\0\0");
        w.append(b"!").expect("append");
        assert_eq!(read_all(fs, &path), b"abcXY\0\0!");
    });
}

#[test]
fn open_append_continues_at_end() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        write_file(fs, &path, b"first");
        let mut w = fs.open_append(&path).expect("open_append");
        assert_eq!(w.len(), 5);
        w.append(b"+second").expect("append");
        assert_eq!(read_all(fs, &path), b"first+second");
        assert!(fs.open_append(&root.join("missing")).is_err());
    });
}

#[test]
fn reader_sees_later_appends() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        let mut w = fs.create(&path).expect("create");
        w.append(b"one").expect("append");
        let r = fs.open_read(&path).expect("open_read");
        w.append(b"two").expect("append");
        assert_eq!(r.len().expect("len"), 6);
        let mut buf = [0u8; 3];
        r.read_exact_at(3, &mut buf, "a").expect("read");
        assert_eq!(&buf, b"two");
    });
}

#[test]
fn rename_replaces_target() {
    for_each_fs(|fs, root| {
        let (from, to) = (root.join("tmp"), root.join("CURRENT"));
        write_file(fs, &from, b"new");
        write_file(fs, &to, b"old");
        fs.rename(&from, &to).expect("rename");
        assert!(!fs.exists(&from).expect("exists"));
        assert_eq!(read_all(fs, &to), b"new");
        assert!(fs.rename(&root.join("missing"), &to).is_err());
        fs.sync_dir(root).expect("sync_dir");
    });
}

#[test]
fn remove_exists_and_list() {
    for_each_fs(|fs, root| {
        write_file(fs, &root.join("a"), b"1");
        write_file(fs, &root.join("b"), b"2");
        fs.create_dir_all(&root.join("sub")).expect("mkdir");
        write_file(fs, &root.join("sub").join("c"), b"3");
        assert_eq!(
            sorted(fs.list(root).expect("list")),
            vec!["a".to_string(), "b".into(), "sub".into()]
        );
        assert_eq!(fs.list(&root.join("sub")).expect("list"), vec!["c"]);
        assert!(fs.exists(&root.join("a")).expect("exists"));
        assert!(fs.exists(&root.join("sub")).expect("exists dir"));
        fs.remove(&root.join("a")).expect("remove");
        assert!(!fs.exists(&root.join("a")).expect("exists"));
        assert!(fs.remove(&root.join("a")).is_err(), "second remove");
        assert!(fs.list(&root.join("nope")).is_err());
        assert!(fs.file_size(&root.join("a")).is_err());
        assert_eq!(fs.list(root).expect("list").len(), 2);
    });
}

#[test]
fn removed_file_stays_readable_through_open_handle() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        write_file(fs, &path, b"data");
        let r = fs.open_read(&path).expect("open_read");
        fs.remove(&path).expect("remove");
        let mut buf = [0u8; 4];
        r.read_exact_at(0, &mut buf, "a")
            .expect("read after remove");
        assert_eq!(&buf, b"data");
    });
}

#[test]
fn punch_hole_zeroes_and_keeps_length() {
    for_each_fs(|fs, root| {
        let path = root.join("a");
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251 + 1) as u8).collect();
        write_file(fs, &path, &data);
        fs.punch_hole(&path, 4096, 4096).expect("punch_hole");
        let got = read_all(fs, &path);
        assert_eq!(got.len(), data.len());
        assert_eq!(&got[..4096], &data[..4096]);
        assert!(got[4096..8192].iter().all(|b| *b == 0));
        assert_eq!(&got[8192..], &data[8192..]);
        fs.punch_hole(&path, 0, 0).expect("empty range");
    });
}

#[test]
fn lock_conflicts_and_releases() {
    for_each_fs(|fs, root| {
        let path = root.join("LOCK");
        let guard = fs.lock(&path).expect("lock");
        assert!(fs.exists(&path).expect("exists"), "lock creates the file");
        match fs.lock(&path) {
            Err(Error::Locked(_)) => {}
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(guard);
        let _again = fs.lock(&path).expect("relock after drop");
    });
}

#[test]
fn missing_files_are_io_errors_not_panics() {
    for_each_fs(|fs, root| {
        let missing = root.join("missing");
        for err in [
            fs.open_read(&missing).map(|_| ()).expect_err("open_read"),
            fs.remove(&missing).expect_err("remove"),
            fs.file_size(&missing).map(|_| ()).expect_err("file_size"),
        ] {
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
        }
        assert!(!fs.exists(&missing).expect("exists"));
    });
}

#[test]
fn fault_fs_over_posix_injects_enospc() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new(Arc::new(PosixFs::new()));
    let path = tmp.path().join("a");
    let mut w = fs.create(&path).expect("create");
    fs.fail_at(1, FaultKind::NoSpacePartial, FaultOps::Writes, false);
    assert!(w.append(b"abcd").expect_err("enospc").is_no_space());
    assert_eq!(std::fs::read(&path).expect("read"), b"ab");
    assert_eq!(w.len(), 2);
}

#[test]
fn crash_loop_over_memfs_never_loses_synced_records() {
    // A tiny log writer: each record is appended then synced; after a crash at any write
    // call, every record whose sync returned Ok must be in the power-loss image.
    let dir = Path::new("/db");
    let log = dir.join("log");
    let workload = |fs: &FaultFs, acked: &mut usize| -> wisckey::Result<()> {
        fs.create_dir_all(dir)?;
        let mut w = fs.create(&log)?;
        fs.sync_dir(dir)?;
        for i in 0..10u8 {
            w.append(&[i; 7])?;
            w.sync_data()?;
            *acked += 1;
        }
        Ok(())
    };
    let clean = FaultFs::new(Arc::new(MemFs::new()));
    workload(&clean, &mut 0).expect("clean run");
    let total = clean.calls();
    for n in 1..=total {
        for mode in [PowerLoss::DropUnsynced, PowerLoss::TornTail { seed: n }] {
            let mem = MemFs::new();
            let fs = FaultFs::new(Arc::new(mem.clone()));
            fs.fail_at(n, FaultKind::Io, FaultOps::Writes, true);
            let mut acked = 0;
            assert!(workload(&fs, &mut acked).is_err(), "crash at {n}");
            let image = mem.power_loss_image(mode);
            let len = image.file_size(&log).unwrap_or(0) as usize;
            assert!(
                len >= acked * 7,
                "crash at {n} {mode:?}: {len} < {}",
                acked * 7
            );
            assert!(
                len <= (acked + 1) * 7,
                "crash at {n} {mode:?}: too long {len}"
            );
        }
    }
}

/// `FaultFs` over `PosixFs` reads the way `PosixFs` does (batched, from the page cache), so
/// fault tests meet the read paths production takes; before, it answered "no batching"
/// and the scan read-ahead's batched reads never met an injected fault. A scan with one
/// read failing at each point in turn shows every key it passes with its own value, and
/// ends with the error, never skipping a key or showing a wrong value.
#[test]
fn a_scan_over_batched_reads_meets_each_injected_read_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fault = FaultFs::new(Arc::new(PosixFs::new()));
    assert_eq!(fault.batches_reads(), PosixFs::new().batches_reads());
    assert_eq!(fault.reads_if_cached(), PosixFs::new().reads_if_cached());
    // Every scan reads the files (no engine cache answers it).
    let options = wisckey::Options {
        gc_space_amp_target: f64::INFINITY,
        block_cache_size: 0,
        value_cache_size: 0,
        ..wisckey::Options::small_for_tests(Arc::new(fault.clone()))
    };
    let value = |i: u32| -> Vec<u8> { format!("value-{i:05}-").repeat(40).into_bytes() };
    let db = wisckey::Db::open(tmp.path(), options).expect("open");
    for i in 0..400u32 {
        db.put(format!("key{i:05}"), value(i)).expect("put");
    }
    db.flush().expect("flush");
    let reads = |fault: &FaultFs| fault.calls_of(FaultOps::Only(&[wisckey::fs::FsOp::ReadAt]));
    let before = reads(&fault);
    let mut it = db.iter(&wisckey::ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut clean = 0;
    while it.valid() {
        assert_eq!(it.value().expect("value"), value(clean));
        clean += 1;
        it.next();
    }
    it.status().expect("a clean scan");
    assert_eq!(clean, 400);
    let per_scan = reads(&fault) - before;
    drop(it);
    let (mut failed, mut scans) = (0, 0);
    for k in (1..=per_scan).step_by((per_scan / 40).max(1) as usize) {
        scans += 1;
        fault.fail_at(
            k,
            FaultKind::Io,
            FaultOps::Only(&[wisckey::fs::FsOp::ReadAt]),
            false,
        );
        let mut it = db.iter(&wisckey::ReadOptions::default()).expect("iter");
        it.seek_to_first();
        let mut seen = 0u32;
        let mut error = None;
        while it.valid() {
            match it.value() {
                Ok(v) => assert_eq!(v, value(seen), "fault at read {k}: key {seen}"),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
            assert_eq!(
                it.key(),
                format!("key{seen:05}").as_bytes(),
                "fault at read {k}"
            );
            seen += 1;
            it.next();
        }
        let error = error.or_else(|| it.status().err());
        match error {
            Some(e) => {
                assert!(matches!(e, Error::Io { .. }), "fault at read {k}: {e:?}");
                failed += 1;
            }
            None => assert_eq!(
                seen, 400,
                "fault at read {k}: a scan without error is whole"
            ),
        }
        drop(it);
        fault.clear();
    }
    println!("{failed} of {scans} scans met their fault ({per_scan} reads a scan)");
    assert!(failed > 0, "no scan met its fault");
}
