//! A background failure (I/O error while flushing a memtable) is latched: the flush reports
//! it, later writes return it even after the fault is gone, reads keep working, and a reopen
//! recovers every acknowledged write from the value log.

use std::sync::Arc;

use wisckey::fs::{FaultFs, FaultKind, FaultOps, MemFs};
use wisckey::{Db, Error, Options, WriteOptions};

#[test]
fn flush_failure_is_latched_and_returned_by_later_writes() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open("/db", Options::small_for_tests(Arc::new(fault.clone()))).expect("open");
    for i in 0..100u32 {
        db.put_opt(
            format!("k{i:03}"),
            vec![1u8; 100],
            &WriteOptions { sync: i == 99 },
        )
        .expect("put");
    }
    // The next write-class call — the flush creating its table file — fails once with EIO.
    fault.fail_at(1, FaultKind::Io, FaultOps::Writes, false);
    let flush = db.flush();
    assert!(
        matches!(flush, Err(Error::Io { .. })),
        "flush reports the failure: {flush:?}"
    );
    assert!(fault.tripped());
    assert!(db.background_error().is_some(), "the error is latched");
    // The fault is gone, but writes keep failing with the latched error.
    match db.put(b"later", b"x") {
        Err(Error::Io { .. }) => {}
        other => panic!("expected the latched Io error, got {other:?}"),
    }
    // Reads still work.
    assert_eq!(db.get(b"k050").expect("get"), Some(vec![1u8; 100]));
    assert!(db.close().is_err(), "close reports the latched error");

    let db = Db::open("/db", Options::small_for_tests(Arc::new(mem))).expect("reopen");
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("k{i:03}")).expect("get"),
            Some(vec![1u8; 100])
        );
    }
    assert_eq!(
        db.get(b"later").expect("get"),
        None,
        "the refused write is not there"
    );
    db.put(b"later", b"x")
        .expect("writes work again after reopen");
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
    assert_send_sync::<wisckey::Snapshot>();
}
