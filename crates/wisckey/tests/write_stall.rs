//! Back-pressure: writers are slowed and then stalled while L0 is overloaded, so L0 never
//! grows without bound however fast they write — and no write is lost on the way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use wisckey::fs::MemFs;
use wisckey::{Db, Options};

#[test]
fn l0_stays_bounded_under_a_write_flood() {
    let options = Options {
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 4,
        max_immutable_memtables: 1,
        memtable_size: 8 << 10,
        ..Options::small_for_tests(Arc::new(MemFs::new()))
    };
    let bound = options.l0_stop_trigger + options.max_immutable_memtables;
    let db = Arc::new(Db::open("/flood", options).expect("open"));
    let done = Arc::new(AtomicBool::new(false));
    let max_l0 = Arc::new(AtomicUsize::new(0));
    let monitor = {
        let (db, done, max_l0) = (Arc::clone(&db), Arc::clone(&done), Arc::clone(&max_l0));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                max_l0.fetch_max(db.level_file_counts()[0], Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    let writers: Vec<_> = (0..2u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..6000u32 {
                    db.put(format!("t{t}-{:05}", (i * 7919) % 6000), vec![t as u8; 40])
                        .expect("put");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
    done.store(true, Ordering::Relaxed);
    monitor.join().expect("monitor");
    let seen = max_l0.load(Ordering::Relaxed);
    eprintln!("largest L0 seen: {seen} files (bound {bound})");
    assert!(
        seen >= 2,
        "the flood must build up L0 for the test to mean anything"
    );
    assert!(
        seen <= bound,
        "L0 grew to {seen} files, past the bound {bound}"
    );
    for t in 0..2u32 {
        for i in (0..6000u32).step_by(97) {
            assert_eq!(
                db.get(format!("t{t}-{i:05}")).expect("get"),
                Some(vec![t as u8; 40])
            );
        }
    }
}
