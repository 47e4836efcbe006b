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
