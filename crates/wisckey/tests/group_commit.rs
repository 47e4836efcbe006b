//! Group commit: concurrent sync writers share fdatasync calls (a leader syncs once for the
//! whole group), and every one of them is durable when acknowledged.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{HookFs, Hooks};
use wisckey::fs::PowerLoss;
use wisckey::{Db, Options, Result, WriteOptions};

/// Counts `sync_data` calls and makes each take 2 ms like a real device.
#[derive(Debug, Default)]
struct SlowSync {
    syncs: AtomicU64,
}

impl Hooks for SlowSync {
    fn before_sync_data(&self, _path: &Path) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        Ok(())
    }
}

#[test]
fn concurrent_sync_writes_share_fdatasyncs_and_are_durable() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    let fs = HookFs::new(SlowSync::default());
    let mem = fs.mem.clone();
    let options = Options {
        memtable_size: 64 << 20,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    let before = fs.hooks.syncs.load(Ordering::SeqCst);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    db.put_opt(
                        format!("t{t}-{i:03}"),
                        vec![t as u8; 100],
                        &WriteOptions { sync: true },
                    )
                    .expect("sync put");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    let syncs = fs.hooks.syncs.load(Ordering::SeqCst) - before;
    let writes = (THREADS * PER_THREAD) as u64;
    eprintln!("{writes} sync writes used {syncs} fdatasync calls");
    assert!(syncs >= 1);
    assert!(
        syncs * 2 <= writes,
        "group commit should share syncs: {syncs} syncs for {writes} writes"
    );
    // Every acknowledged sync write survives a power loss.
    let image = mem.power_loss_image(PowerLoss::DropUnsynced);
    let db = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            assert_eq!(
                db.get(format!("t{t}-{i:03}")).expect("get"),
                Some(vec![t as u8; 100])
            );
        }
    }
}

/// Writers hand over results and leadership through per-writer slots: with more writer
/// threads than cores, sync and non-sync writers mixed and memtable switches forced in
/// between, every writer sees its own write as soon as its call returns, no write is lost or
/// reordered per key, and the log replays to the same state.
#[test]
fn mixed_concurrent_writers_each_see_their_own_writes_and_all_survive_reopen() {
    const THREADS: usize = 12;
    const PER_THREAD: usize = 600;
    let fs = wisckey::fs::MemFs::new();
    let options = || Options::small_for_tests(Arc::new(fs.clone()));
    let db = Arc::new(Db::open("/db", options()).expect("open"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let switcher = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut switches = 0u32;
            while !stop.load(Ordering::Relaxed) {
                db.flush().expect("flush between writes");
                switches += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            switches
        })
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    // Each key is written twice; the second value must win.
                    let key = format!("t{t:02}-{:04}", i / 2);
                    let value = format!("{t}:{i}").repeat(1 + i % 40);
                    let sync = i % 50 == 0;
                    db.put_opt(&key, &value, &WriteOptions { sync })
                        .expect("put");
                    assert_eq!(
                        db.get(&key).expect("get"),
                        Some(value.into_bytes()),
                        "thread {t} write {i} not visible when acknowledged"
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    stop.store(true, Ordering::Relaxed);
    assert!(switcher.join().expect("switcher") > 0);
    let expected = |t: usize, k: usize| {
        let i = 2 * k + 1;
        format!("{t}:{i}").repeat(1 + i % 40).into_bytes()
    };
    let check = |db: &Db| {
        for t in 0..THREADS {
            for k in 0..PER_THREAD / 2 {
                assert_eq!(
                    db.get(format!("t{t:02}-{k:04}")).expect("get"),
                    Some(expected(t, k)),
                    "thread {t} key {k}"
                );
            }
        }
    };
    check(&db);
    // The log replays to the same state: a power cut after everything was synced (a clean
    // close would flush the memtable first, leaving nothing to replay). The switcher may
    // have flushed after the last writer: one more write, after it stopped, is in the log
    // only.
    db.put_opt("tail", "written last", &WriteOptions { sync: true })
        .expect("put");
    let image = fs.power_loss_image(wisckey::fs::PowerLoss::DropUnsynced);
    std::mem::forget(db);
    let reopened = Db::open("/db", Options::small_for_tests(Arc::new(image))).expect("reopen");
    assert!(
        reopened.recovery_report().replayed_records > 0,
        "the reopen replayed the log"
    );
    check(&reopened);
    assert_eq!(
        reopened.get("tail").expect("get"),
        Some(b"written last".to_vec())
    );
}
