//! A panic inside the engine (a bug) on one of its own threads or in the writer leading a
//! group commit reaches callers as `Error::Internal` and is latched: writers waiting on the
//! thread that panicked get the error instead of waiting for good, later writes are
//! refused, reads keep working, `close` reports it, and a reopen finds every acknowledged
//! write. The panics are injected by a file system that panics on a chosen call.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{HookFs, Hooks};
use parking_lot::Mutex;
use wisckey::fs::MemFs;
use wisckey::{Db, Error, Options, Result, WriteOptions};

/// Which call panics once armed: the op's name, the end of the file's name, and the thread
/// making the call (`None`: an unnamed thread, i.e. one of the test's writers; `Some("*")`:
/// any thread).
#[derive(Debug, Clone, Copy)]
struct Trap {
    op: &'static str,
    suffix: &'static str,
    thread: Option<&'static str>,
}

/// Hooks with a trap: the first call matching it after `arm` panics (once).
#[derive(Debug, Default)]
struct PanicTrap {
    trap: Mutex<Option<Trap>>,
    sprung: AtomicBool,
}

impl PanicTrap {
    fn arm(&self, op: &'static str, suffix: &'static str, thread: Option<&'static str>) {
        *self.trap.lock() = Some(Trap { op, suffix, thread });
    }

    fn sprung(&self) -> bool {
        self.sprung.load(Ordering::SeqCst)
    }

    fn check(&self, op: &str, path: &Path) {
        let mut trap = self.trap.lock();
        let hit = trap.is_some_and(|t| {
            t.op == op
                && path.to_string_lossy().ends_with(t.suffix)
                && (t.thread == Some("*") || std::thread::current().name() == t.thread)
        });
        if hit {
            *trap = None;
            drop(trap);
            self.sprung.store(true, Ordering::SeqCst);
            panic!("injected panic in {op} of {}", path.display());
        }
    }
}

impl Hooks for PanicTrap {
    fn before_create(&self, path: &Path) -> Result<()> {
        self.check("create", path);
        Ok(())
    }
    fn before_file_size(&self, path: &Path) -> Result<()> {
        self.check("file_size", path);
        Ok(())
    }
    fn after_append(&self, path: &Path, _data: &[u8]) {
        self.check("after_append", path);
    }
}

/// A `MemFs` (`fs.mem`, to reopen without the trap) behind the trap (`fs.hooks`).
fn trapped_fs() -> HookFs<PanicTrap> {
    HookFs::new(PanicTrap::default())
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} of round {round} ").into_bytes();
    v.resize(300, b'.');
    v
}

/// Runs `work` on another thread and fails the test if it does not finish in time (a
/// writer left waiting for a thread that panicked never would).
fn finishes<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    result
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not finish within 60 s: it waits for good"))
}

fn assert_internal_panic(e: &Error) {
    match e {
        Error::Internal(msg) => assert!(msg.contains("injected panic"), "{msg}"),
        other => panic!("expected Error::Internal for the panic, got {other:?}"),
    }
}

/// Reopens on the bare `MemFs` and checks every acknowledged write of `rounds`.
fn reopen_and_check(mem: MemFs, keys: u32, last_round: &[u32]) {
    let db = Db::open("/db", Options::small_for_tests(Arc::new(mem))).expect("reopen");
    for i in 0..keys {
        let got = db.get(key(i)).expect("get");
        assert_eq!(got, Some(value(i, last_round[i as usize])), "key {i}");
    }
    db.put(b"after", b"reopen")
        .expect("writes work after a reopen");
    db.close().expect("close");
}

#[test]
fn a_panicking_flush_is_latched_and_stalled_writers_get_it() {
    let fs = trapped_fs();
    let mem = fs.mem.clone();
    let db =
        Arc::new(Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open"));
    const KEYS: u32 = 200;
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.sync().expect("sync");
    fs.hooks.arm("create", ".sst", Some("wisckey-bg"));
    // Enough writes to fill several memtables: the flush thread panics on the first table,
    // and the writers stall on immutable memtables nothing drains.
    let writer = Arc::clone(&db);
    let outcome = finishes("writers behind a panicked flush", move || {
        for round in 1..=50u32 {
            for i in 0..KEYS {
                if let Err(e) = writer.put(key(i), value(i, round)) {
                    return Err((e, round, i));
                }
            }
        }
        Ok(())
    });
    assert!(fs.hooks.sprung(), "the trap was never reached");
    let (e, round, failed_at) = outcome.expect_err("writes go on after a flush panicked");
    assert_internal_panic(&e);
    let latched = db.background_error().expect("the panic is latched");
    assert_internal_panic(&latched);
    assert_internal_panic(
        &db.put(b"later", b"x")
            .expect_err("later writes are refused"),
    );
    assert_internal_panic(&db.flush().expect_err("a flush reports the latched error"));
    let mut last_round = vec![round; KEYS as usize];
    for r in last_round.iter_mut().skip(failed_at as usize) {
        *r = round - 1;
    }
    // Reads still work, from the memtables the flush never wrote.
    assert_eq!(
        db.get(key(KEYS - 1)).expect("get"),
        Some(value(KEYS - 1, last_round[KEYS as usize - 1]))
    );

    let db = Arc::try_unwrap(db).expect("the only handle");
    assert_internal_panic(&db.close().expect_err("close reports the latched error"));
    reopen_and_check(mem, KEYS, &last_round);
}

#[test]
fn a_panicking_write_leader_hands_the_error_to_its_group_and_the_next_writers() {
    let fs = trapped_fs();
    let mem = fs.mem.clone();
    let options = Options {
        // Sync writes: the leader itself appends, so it meets the next segment's creation.
        vlog_segment_size: 64 << 10,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    fs.hooks.arm("create", ".vlog", None);
    const THREADS: u32 = 4;
    const KEYS: u32 = 100;
    let outcome = finishes("writers sharing a group with a panicked leader", {
        let db = Arc::clone(&db);
        move || {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let db = Arc::clone(&db);
                    std::thread::spawn(move || {
                        let mut acknowledged = Vec::new();
                        for round in 0..1000u32 {
                            let i = t * KEYS + round % KEYS;
                            match db.put_opt(key(i), value(i, round), &WriteOptions { sync: true })
                            {
                                Ok(()) => acknowledged.push((i, round)),
                                Err(e) => return (acknowledged, Some(e)),
                            }
                        }
                        (acknowledged, None)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .expect("a writer's thread panicked: the panic was not caught")
                })
                .collect::<Vec<_>>()
        }
    });
    assert!(
        fs.hooks.sprung(),
        "no segment was created: the trap was never reached"
    );
    let mut last_round = vec![0u32; (THREADS * KEYS) as usize];
    let mut written = vec![false; last_round.len()];
    for (acknowledged, error) in outcome {
        let e = error.expect("every writer stops at the latched error");
        assert_internal_panic(&e);
        for (i, round) in acknowledged {
            last_round[i as usize] = round;
            written[i as usize] = true;
        }
    }
    assert_internal_panic(&db.background_error().expect("the panic is latched"));
    assert_internal_panic(
        &db.put(b"later", b"x")
            .expect_err("later writes are refused"),
    );
    let db = Arc::try_unwrap(db).expect("the only handle");
    assert_internal_panic(&db.close().expect_err("close reports the latched error"));

    // Every acknowledged write is there after a reopen (a failed one may be or not).
    let db = Db::open("/db", Options::small_for_tests(Arc::new(mem))).expect("reopen");
    for (i, round) in last_round.iter().enumerate() {
        if !written[i] {
            continue;
        }
        let got = db
            .get(key(i as u32))
            .expect("get")
            .expect("an acknowledged key");
        let newest_acknowledged = value(i as u32, *round);
        let next_attempt = value(i as u32, round + KEYS);
        assert!(
            got == newest_acknowledged || got == next_attempt,
            "key {i}: not its last acknowledged value"
        );
    }
    db.close().expect("close");
}

#[test]
fn a_panicking_gc_round_is_latched_not_lost() {
    let fs = trapped_fs();
    let mem = fs.mem.clone();
    let options = Options {
        vlog_segment_size: 64 << 10,
        gc_space_amp_target: 1.2,
        ..Options::small_for_tests(Arc::new(fs.clone()))
    };
    let db = Db::open("/db", options).expect("open");
    const KEYS: u32 = 200;
    // The trap catches the GC thread's first look at a segment's size.
    fs.hooks.arm("file_size", ".vlog", Some("wisckey-gc"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rounds = 0u32;
    while !fs.hooks.sprung() {
        assert!(Instant::now() < deadline, "GC never looked at a segment");
        for i in 0..KEYS {
            match db.put(key(i), value(i, rounds)) {
                Ok(()) => {}
                Err(e) => panic!("a write failed before GC panicked: {e}"),
            }
        }
        rounds += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let latched = loop {
        if let Some(e) = db.background_error() {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "GC panicked and nothing was latched: writes would go on without GC"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_internal_panic(&latched);
    assert_internal_panic(
        &db.put(b"later", b"x")
            .expect_err("later writes are refused"),
    );
    assert_eq!(db.get(key(0)).expect("get"), Some(value(0, rounds - 1)));
    assert_internal_panic(&db.close().expect_err("close reports the latched error"));
    reopen_and_check(mem, KEYS, &vec![rounds - 1; KEYS as usize]);
}

/// A panic inside a value-log write-out, after its bytes reached the file but before the
/// writer counted them, on the log thread (buffered writes) or in a write leader (sync
/// writes, written out as they are appended): the writer is poisoned, so neither
/// `Db::sync` nor `close` writes its buffer again (which would append the same records a
/// second time, after bytes the writer does not know of); a reopen finds every write
/// acknowledged before, once.
#[test]
fn a_panicking_log_write_out_poisons_the_writer() {
    for (thread, sync) in [(Some("wisckey-log"), false), (Some("*"), true)] {
        let fs = trapped_fs();
        let mem = fs.mem.clone();
        let options = Options {
            gc_space_amp_target: f64::INFINITY,
            ..Options::small_for_tests(Arc::new(fs.clone()))
        };
        let db = Db::open("/db", options).expect("open");
        const KEYS: u32 = 20;
        for i in 0..KEYS {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.sync().expect("sync");
        fs.hooks.arm("after_append", ".vlog", thread);
        // One small write at a time (far below the buffer's size): buffered, the log
        // thread writes it out within its interval; synced, its leader does at once.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut round = 1;
        // Per key: the round of its last acknowledged write, and of its last attempt.
        let mut acked = vec![0u32; KEYS as usize];
        let mut attempted = vec![0u32; KEYS as usize];
        while !fs.hooks.sprung() {
            assert!(
                Instant::now() < deadline,
                "{thread:?}: no write-out reached the trap"
            );
            let i = round % KEYS;
            attempted[i as usize] = round;
            if db
                .put_opt(key(i), value(i, round), &WriteOptions { sync })
                .is_err()
            {
                break;
            }
            acked[i as usize] = round;
            round += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        // A sync write's own write-out meets the trap at once; buffered ones are
        // acknowledged before the log thread writes them out.
        assert!(
            sync || round > 1,
            "{thread:?}: a write was acknowledged before the trap"
        );
        while db.background_error().is_none() {
            assert!(
                Instant::now() < deadline,
                "{thread:?}: the panic was not latched"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            db.sync().is_err(),
            "{thread:?}: a writer a panic left half done syncs nothing"
        );
        db.close().expect_err("close reports the latched error");
        let db = Db::open("/db", Options::small_for_tests(Arc::new(mem))).expect("reopen");
        // Every acknowledged write reached the file before the panic (the panic comes after
        // the bytes are appended), and nothing is lost without a power cut: each key holds
        // its last acknowledged value, or the failed attempt's if its bytes got there too.
        for i in 0..KEYS {
            let got = db.get(key(i)).expect("get");
            let (a, t) = (acked[i as usize], attempted[i as usize]);
            assert!(
                got == Some(value(i, a)) || got == Some(value(i, t)),
                "{thread:?}: key {i} lost its acknowledged round {a} (attempted {t})"
            );
        }
        let report = db.check().expect("check");
        assert!(report.is_ok(), "{thread:?}: {:?}", report.problems);
        db.close().expect("close");
    }
}
