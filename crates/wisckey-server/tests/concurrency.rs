//! 100 clients at once: INCR is atomic per key (no lost updates), each client's own keys
//! read back exactly, and MSET batches are all or nothing to concurrent readers (MGET and
//! EXISTS).

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use common::{TestServer, BOTH_WAYS};
use redis::cmd;

#[test]
fn hundred_clients_incr_without_lost_updates() -> redis::RedisResult<()> {
    for threads in BOTH_WAYS {
        hundred_clients_on(threads)?;
    }
    Ok(())
}

fn hundred_clients_on(threads: usize) -> redis::RedisResult<()> {
    let s = TestServer::start(|c| c.threads = threads);
    assert_eq!(s.serving_threads(), threads);
    let clients = 100;
    let per_client = 50;
    let barrier = Arc::new(Barrier::new(clients));
    let threads: Vec<_> = (0..clients)
        .map(|id| {
            let mut c = s.client();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || -> redis::RedisResult<()> {
                barrier.wait();
                for i in 0..per_client {
                    cmd("INCR").arg("shared").query::<i64>(&mut c)?;
                    cmd("APPEND").arg("log").arg("x").query::<i64>(&mut c)?;
                    let key = format!("client{id}:{i}");
                    cmd("SET")
                        .arg(&key)
                        .arg(format!("{id}/{i}"))
                        .query::<()>(&mut c)?;
                    assert_eq!(
                        cmd("GET").arg(&key).query::<String>(&mut c)?,
                        format!("{id}/{i}")
                    );
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread")?;
    }
    let mut c = s.client();
    let total = (clients * per_client) as i64;
    assert_eq!(cmd("GET").arg("shared").query::<i64>(&mut c)?, total);
    assert_eq!(cmd("STRLEN").arg("log").query::<i64>(&mut c)?, total);
    assert_eq!(cmd("DBSIZE").query::<i64>(&mut c)?, total + 2);
    Ok(())
}

#[test]
fn mset_is_atomic_to_concurrent_readers() -> redis::RedisResult<()> {
    for threads in BOTH_WAYS {
        mset_atomic_on(threads)?;
    }
    Ok(())
}

fn mset_atomic_on(threads: usize) -> redis::RedisResult<()> {
    let s = TestServer::start(|c| c.threads = threads);
    let keys: Vec<String> = (0..20).map(|i| format!("acct{i}")).collect();
    let mut c = s.client();
    let mut init = cmd("MSET");
    for k in &keys {
        init.arg(k).arg(0);
    }
    init.query::<()>(&mut c)?;
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut c = s.client();
            let keys = keys.clone();
            let done = Arc::clone(&done);
            std::thread::spawn(move || -> redis::RedisResult<Vec<i64>> {
                // The rounds this reader saw, so the test knows reads overlapped writes.
                let mut seen = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let vals: Vec<i64> = cmd("MGET").arg(&keys).query(&mut c)?;
                    assert!(vals.iter().all(|v| *v == vals[0]), "torn MSET: {vals:?}");
                    if seen.last() != Some(&vals[0]) {
                        seen.push(vals[0]);
                    }
                }
                Ok(seen)
            })
        })
        .collect();
    for round in 1..=300 {
        let mut m = cmd("MSET");
        for k in &keys {
            m.arg(k).arg(round);
        }
        m.query::<()>(&mut c)?;
    }
    done.store(true, Ordering::Relaxed);
    let mut rounds_seen = std::collections::BTreeSet::new();
    for r in readers {
        let seen = r.join().expect("reader")?;
        assert!(!seen.is_empty(), "a reader read nothing");
        rounds_seen.extend(seen);
    }
    assert!(
        rounds_seen.len() >= 2,
        "the readers never read while MSETs ran: {rounds_seen:?}"
    );
    Ok(())
}

#[test]
fn exists_sees_an_mset_or_a_del_whole() -> redis::RedisResult<()> {
    // EXISTS reads its keys one by one (so a large value asked about many times is never in
    // memory many times over), at one snapshot: never half an MSET.
    for threads in BOTH_WAYS {
        let s = TestServer::start(|c| c.threads = threads);
        let keys: Vec<String> = (0..20).map(|i| format!("e{i}")).collect();
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let mut c = s.client();
                let keys = keys.clone();
                let done = Arc::clone(&done);
                std::thread::spawn(move || -> redis::RedisResult<BTreeSet<i64>> {
                    let mut seen = BTreeSet::new();
                    while !done.load(Ordering::Relaxed) {
                        let n: i64 = cmd("EXISTS").arg(&keys).query(&mut c)?;
                        assert!(n == 0 || n == 20, "EXISTS saw part of a write: {n}");
                        seen.insert(n);
                    }
                    Ok(seen)
                })
            })
            .collect();
        let mut c = s.client();
        for _ in 0..200 {
            let mut mset = cmd("MSET");
            for k in &keys {
                mset.arg(k).arg("v");
            }
            mset.query::<()>(&mut c)?;
            cmd("DEL").arg(&keys).query::<i64>(&mut c)?;
        }
        done.store(true, Ordering::Relaxed);
        let mut seen = BTreeSet::new();
        for r in readers {
            seen.extend(r.join().expect("reader")?);
        }
        assert_eq!(seen.len(), 2, "the readers must see both states: {seen:?}");
    }
    Ok(())
}
