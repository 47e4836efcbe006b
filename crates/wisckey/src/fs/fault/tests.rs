//! Tests of `FaultFs`: which call fails, what a partial append leaves, the crash recipe.

use super::*;
use crate::fs::MemFs;

fn setup() -> (MemFs, FaultFs) {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    (mem, fault)
}

#[test]
fn fails_exactly_nth_write_once() {
    let (mem, fs) = setup();
    let path = Path::new("/d/f");
    let mut w = fs.create(path).expect("create"); // write call 1
    fs.fail_at(2, FaultKind::Io, FaultOps::Writes, false);
    w.append(b"one").expect("first counted call passes"); // +1
    let err = w.append(b"two").expect_err("second counted call fails"); // +2
    match &err {
        Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
        other => panic!("expected Io, got {other:?}"),
    }
    assert!(!err.is_no_space());
    assert!(fs.tripped());
    w.append(b"three").expect("once: later calls pass");
    assert_eq!(mem.file_size(path).expect("size"), 8);
    assert_eq!(fs.calls(), 4);
}

#[test]
fn forever_fails_every_later_counted_call_but_not_reads() {
    let (_mem, fs) = setup();
    let path = Path::new("/f");
    let mut w = fs.create(path).expect("create");
    w.append(b"abc").expect("append");
    fs.fail_at(1, FaultKind::NoSpace, FaultOps::Writes, true);
    for _ in 0..3 {
        assert!(w.sync_data().expect_err("forever").is_no_space());
    }
    assert!(fs.rename(path, Path::new("/g")).is_err());
    assert!(fs.create(Path::new("/h")).is_err());
    // Reads are not counted under Writes and still work.
    let r = fs.open_read(path).expect("open_read");
    let mut buf = [0u8; 3];
    r.read_exact_at(0, &mut buf, "f").expect("read");
    assert_eq!(&buf, b"abc");
    assert!(fs.exists(path).expect("exists"));
    fs.clear();
    assert!(!fs.tripped());
    w.sync_data().expect("cleared");
}

#[test]
fn reads_not_counted_under_writes_but_counted_under_all() {
    let (_mem, fs) = setup();
    let path = Path::new("/f");
    fs.create(path).expect("create");
    let writes_before = fs.calls();
    let all_before = fs.calls_of(FaultOps::All);
    let r = fs.open_read(path).expect("open_read");
    let _ = r.read_at(0, &mut [0u8; 4]).expect("read");
    fs.list(Path::new("/")).expect("list");
    fs.file_size(path).expect("size");
    assert_eq!(fs.calls(), writes_before);
    assert_eq!(fs.calls_of(FaultOps::All), all_before + 4);

    fs.fail_at(2, FaultKind::Io, FaultOps::All, false);
    fs.exists(path).expect("1st counted call passes");
    assert!(
        r.read_at(0, &mut [0u8; 4]).is_err(),
        "2nd counted call (a read) fails"
    );
    r.len().expect("3rd passes");
}

#[test]
fn no_space_partial_writes_half_then_fails() {
    let (mem, fs) = setup();
    let path = Path::new("/f");
    let mut w = fs.create(path).expect("create");
    fs.fail_at(1, FaultKind::NoSpacePartial, FaultOps::Writes, false);
    let err = w.append(b"0123456789").expect_err("partial");
    assert!(err.is_no_space());
    assert_eq!(w.len(), 5);
    let r = mem.open_read(path).expect("open");
    let mut buf = [0u8; 5];
    r.read_exact_at(0, &mut buf, "f").expect("read");
    assert_eq!(&buf, b"01234");
    // On a non-append call it is plain ENOSPC.
    fs.fail_at(1, FaultKind::NoSpacePartial, FaultOps::Writes, false);
    assert!(w.sync_data().expect_err("enospc").is_no_space());
}

#[test]
fn crash_recipe_keeps_only_durable_state() {
    use crate::fs::PowerLoss;
    let (mem, fs) = setup();
    let dir = Path::new("/db");
    // Workload: create, append, sync, sync_dir, append, sync = 6 write calls (+mkdir).
    let workload = |fs: &FaultFs| -> Result<()> {
        fs.create_dir_all(dir)?;
        let mut w = fs.create(&dir.join("log"))?;
        w.append(b"first")?;
        w.sync_data()?;
        fs.sync_dir(dir)?;
        w.append(b"second")?;
        w.sync_data()
    };
    workload(&fs).expect("clean run");
    let total = fs.calls();
    assert_eq!(total, 7);
    drop(mem);
    for n in 1..=total {
        let (mem, fs) = setup();
        fs.fail_at(n, FaultKind::Io, FaultOps::Writes, true);
        assert!(workload(&fs).is_err(), "crash at {n}");
        let image = mem.power_loss_image(PowerLoss::DropUnsynced);
        let size = image.file_size(&dir.join("log")).ok();
        let expected = match n {
            1..=5 => None,
            6 | 7 => Some(5),
            _ => unreachable!(),
        };
        assert_eq!(size, expected, "crash at write call {n}");
    }
}

#[test]
fn op_table_matches_declaration_order() {
    for (i, op) in FsOp::ALL.iter().enumerate() {
        assert_eq!(*op as usize, i, "{op:?}");
    }
}

#[test]
fn only_listed_ops_are_counted_and_fail() {
    let (mem, fs) = setup();
    let path = Path::new("/f");
    let mut w = fs.create(path).expect("create");
    fs.fail_at(
        2,
        FaultKind::Io,
        FaultOps::Only(&[FsOp::SyncData, FsOp::SetLen]),
        true,
    );
    w.append(b"abcd").expect("append is not listed");
    w.sync_data().expect("1st listed call passes");
    w.append(b"ef").expect("append is not listed");
    assert!(w.set_len(2).is_err(), "2nd listed call fails");
    assert!(w.sync_data().is_err(), "forever");
    fs.rename(path, Path::new("/g"))
        .expect("rename is not listed");
    assert_eq!(mem.file_size(Path::new("/g")).expect("size"), 6);
    assert_eq!(fs.calls_of(FaultOps::Only(&[FsOp::SyncData])), 2);
    assert_eq!(fs.calls_of(FaultOps::Only(&[FsOp::Append])), 2);

    let opens = FaultOps::Only(&[FsOp::OpenRead]);
    assert_eq!(fs.calls_of(opens), 0);
    let r = fs.open_read(Path::new("/g")).expect("open");
    r.len().expect("len");
    fs.open_read(Path::new("/g")).expect("open again");
    assert_eq!(fs.calls_of(opens), 2);
}

#[test]
fn records_calls_in_order_only_while_on() {
    let (_mem, fs) = setup();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("mkdir");
    fs.record_calls(true);
    let mut w = fs.create(&dir.join("a")).expect("create");
    fs.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::SyncData]), false);
    w.append(b"x").expect("append");
    assert!(w.sync_data().is_err());
    fs.sync_dir(dir).expect("sync_dir");
    let ops: Vec<(FsOp, PathBuf)> = vec![
        (FsOp::Create, dir.join("a")),
        (FsOp::Append, dir.join("a")),
        (FsOp::SyncData, dir.join("a")),
        (FsOp::SyncDir, dir.to_path_buf()),
    ];
    assert_eq!(fs.recorded(), ops, "failed calls are recorded too");
    fs.record_calls(false);
    w.append(b"y").expect("append");
    assert!(fs.recorded().is_empty());
}
