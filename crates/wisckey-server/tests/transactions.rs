//! MULTI / EXEC / DISCARD as Redis 7 answers them (replies checked byte for byte, sent one
//! at a time and pipelined in one write), EXEC's isolation against concurrent clients (no
//! write between two of a transaction's commands, no reader seeing half of one), the queue's
//! limits, a transaction's writes surviving a restart under `always`, and WATCH: every
//! write path aborts a watching EXEC, nothing else does, and a client library's
//! check-and-set loses no update under contention.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{resp, TestServer, BOTH_WAYS};
use redis::cmd;
use wisckey_server::AppendFsync;

/// A request and the exact reply it gets.
type Step<'a> = (&'a [&'a [u8]], &'a [u8]);

/// Runs `steps` on a fresh connection twice: one request at a time (each reply read
/// before the next request), then every request in one write. Both must get exactly the
/// expected replies.
fn both_ways(server: &TestServer, steps: &[Step<'_>]) {
    let mut raw = server.raw();
    for (request, reply) in steps {
        raw.send(&resp(request));
        raw.expect(reply);
    }
    let mut raw = server.raw();
    let all: Vec<u8> = steps.iter().flat_map(|(r, _)| resp(r)).collect();
    raw.send(&all);
    let expected: Vec<u8> = steps.iter().flat_map(|(_, e)| e.to_vec()).collect();
    raw.expect(&expected);
}

/// Servers on one event loop and on four workers, under `always` and `everysec`.
fn each_server(test: impl Fn(&TestServer)) {
    each_server_with(|_| {}, test)
}

/// [`each_server`], each server's configuration changed by `tweak`.
fn each_server_with(tweak: impl Fn(&mut wisckey_server::Config), test: impl Fn(&TestServer)) {
    for threads in BOTH_WAYS {
        for mode in [AppendFsync::Always, AppendFsync::Everysec] {
            let server = TestServer::start(|c| {
                c.threads = threads;
                c.appendfsync = mode;
                tweak(c);
            });
            test(&server);
        }
    }
}

const OK: &[u8] = b"+OK\r\n";
const QUEUED: &[u8] = b"+QUEUED\r\n";
const EXECABORT: &[u8] = b"-EXECABORT Transaction discarded because of previous errors.\r\n";

#[test]
fn multi_exec_replies_as_redis() {
    each_server(|server| {
        // The sequence from the differential review against redis-server 7.0, then the
        // errors around it. Replies are redis-server 7.0.15's.
        both_ways(
            server,
            &[
                (&[b"MULTI"], OK),
                (&[b"INCR", b"txc"], QUEUED),
                (&[b"SET", b"txs", b"1"], QUEUED),
                (&[b"EXEC"], b"*2\r\n:1\r\n+OK\r\n"),
                (&[b"EXEC"], b"-ERR EXEC without MULTI\r\n"),
                (&[b"DISCARD"], b"-ERR DISCARD without MULTI\r\n"),
                (&[b"MULTI"], OK),
                (&[b"MULTI"], b"-ERR MULTI calls can not be nested\r\n"),
                (
                    &[b"WATCH", b"a"],
                    b"-ERR WATCH inside MULTI is not allowed\r\n",
                ),
                (&[b"UNWATCH"], QUEUED),
                (&[b"GET", b"txc"], QUEUED),
                (&[b"EXEC"], b"*2\r\n+OK\r\n$1\r\n1\r\n"),
                (&[b"MULTI"], OK),
                (&[b"EXEC"], b"*0\r\n"),
                (&[b"GET", b"txc"], b"$1\r\n1\r\n"),
                (&[b"DEL", b"txc", b"txs"], b":2\r\n"),
            ],
        );
    });
}

#[test]
fn a_refused_command_discards_the_whole_transaction() {
    each_server(|server| {
        both_ways(
            server,
            &[
                (&[b"MULTI"], OK),
                (&[b"SET", b"a", b"1"], QUEUED),
                (
                    &[b"FOO", b"x"],
                    b"-ERR unknown command 'FOO', with args beginning with: 'x' \r\n",
                ),
                (
                    &[b"GET"],
                    b"-ERR wrong number of arguments for 'get' command\r\n",
                ),
                (&[b"INCR", b"n"], QUEUED),
                (&[b"EXEC"], EXECABORT),
                // Nothing ran, and the connection has left the transaction.
                (&[b"GET", b"a"], b"$-1\r\n"),
                (&[b"GET", b"n"], b"$-1\r\n"),
                (&[b"EXEC"], b"-ERR EXEC without MULTI\r\n"),
                // SHUTDOWN is refused inside a transaction (Redis 7: `no-multi`), and that
                // discards it too; the server keeps running.
                (&[b"MULTI"], OK),
                (&[b"SET", b"a", b"1"], QUEUED),
                (
                    &[b"SHUTDOWN"],
                    b"-ERR Command not allowed inside a transaction\r\n",
                ),
                (&[b"EXEC"], EXECABORT),
                (&[b"EXISTS", b"a"], b":0\r\n"),
                // A nested MULTI and WATCH are refused without discarding it (as Redis).
                (&[b"MULTI"], OK),
                (&[b"MULTI"], b"-ERR MULTI calls can not be nested\r\n"),
                (
                    &[b"WATCH", b"a"],
                    b"-ERR WATCH inside MULTI is not allowed\r\n",
                ),
                (&[b"SET", b"w", b"1"], QUEUED),
                (&[b"EXEC"], b"*1\r\n+OK\r\n"),
                (&[b"DEL", b"w"], b":1\r\n"),
            ],
        );
    });
}

#[test]
fn a_runtime_error_fails_only_its_command() {
    each_server(|server| {
        both_ways(
            server,
            &[
                (&[b"SET", b"s", b"x"], OK),
                (&[b"MULTI"], OK),
                (&[b"SET", b"t", b"2"], QUEUED),
                (&[b"INCR", b"s"], QUEUED),
                (&[b"INCRBY", b"t", b"nope"], QUEUED),
                (&[b"INCR", b"t"], QUEUED),
                (
                    &[b"EXEC"],
                    b"*4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n\
                      -ERR value is not an integer or out of range\r\n:3\r\n",
                ),
                (&[b"MGET", b"s", b"t"], b"*2\r\n$1\r\nx\r\n$1\r\n3\r\n"),
                (&[b"DEL", b"s", b"t"], b":2\r\n"),
            ],
        );
    });
}

#[test]
fn discard_drops_the_queue() {
    each_server(|server| {
        both_ways(
            server,
            &[
                (&[b"MULTI"], OK),
                (&[b"SET", b"d", b"1"], QUEUED),
                (&[b"INCR", b"e"], QUEUED),
                (&[b"DISCARD"], OK),
                (&[b"MGET", b"d", b"e"], b"*2\r\n$-1\r\n$-1\r\n"),
                (&[b"EXEC"], b"-ERR EXEC without MULTI\r\n"),
                (&[b"DISCARD"], b"-ERR DISCARD without MULTI\r\n"),
            ],
        );
    });
}

#[test]
fn commands_inside_see_the_transactions_own_writes() {
    let server = TestServer::start(|c| c.enable_flushdb = true);
    both_ways(
        &server,
        &[
            (&[b"SET", b"old", b"o"], OK),
            (&[b"MULTI"], OK),
            (&[b"MSET", b"m1", b"a", b"m2", b"b"], QUEUED),
            (&[b"MGET", b"m1", b"m2", b"m3", b"old"], QUEUED),
            (&[b"APPEND", b"m1", b"x"], QUEUED),
            (&[b"GET", b"m1"], QUEUED),
            (&[b"EXPIRE", b"m2", b"100"], QUEUED),
            (&[b"TTL", b"m2"], QUEUED),
            (&[b"DEL", b"old"], QUEUED),
            (&[b"EXISTS", b"old", b"m1", b"m2"], QUEUED),
            (&[b"DBSIZE"], QUEUED),
            (&[b"SCAN", b"0", b"COUNT", b"100"], QUEUED),
            (&[b"SET", b"m3", b"c", b"NX", b"GET"], QUEUED),
            (&[b"GETDEL", b"m3"], QUEUED),
            (&[b"TYPE", b"m3"], QUEUED),
            // Passes the queue's argument-count check (at least 3), fails when run.
            (&[b"MSET", b"m1", b"a", b"m2"], QUEUED),
            (
                &[b"EXEC"],
                b"*14\r\n+OK\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n$1\r\no\r\n:2\r\n\
                  $2\r\nax\r\n:1\r\n:100\r\n:1\r\n:2\r\n:2\r\n\
                  *2\r\n$1\r\n0\r\n*2\r\n$2\r\nm1\r\n$2\r\nm2\r\n\
                  $-1\r\n$1\r\nc\r\n+none\r\n\
                  -ERR wrong number of arguments for 'mset' command\r\n",
            ),
            (
                &[b"MGET", b"m1", b"m2", b"old"],
                b"*3\r\n$2\r\nax\r\n$1\r\nb\r\n$-1\r\n",
            ),
            (&[b"TTL", b"m2"], b":100\r\n"),
            // FLUSHDB inside: writes before it are flushed too, writes after it stay.
            (&[b"MULTI"], OK),
            (&[b"SET", b"before", b"1"], QUEUED),
            (&[b"FLUSHDB"], QUEUED),
            (&[b"SET", b"after", b"2"], QUEUED),
            (&[b"DBSIZE"], QUEUED),
            (&[b"EXEC"], b"*4\r\n+OK\r\n+OK\r\n+OK\r\n:1\r\n"),
            (
                &[b"MGET", b"before", b"after", b"m1"],
                b"*3\r\n$-1\r\n$1\r\n2\r\n$-1\r\n",
            ),
            (&[b"DEL", b"after"], b":1\r\n"),
        ],
    );
}

#[test]
fn pipelined_transactions_mix_with_batched_writes() {
    each_server(|server| {
        // SET/INCR/GET before and after take the batched path; inside MULTI they must be
        // queued, not run. Sent one at a time and in one write: the same replies.
        both_ways(
            server,
            &[
                (&[b"SET", b"p", b"1"], OK),
                (&[b"INCR", b"p"], b":2\r\n"),
                (&[b"MULTI"], OK),
                (&[b"INCR", b"p"], QUEUED),
                (&[b"GET", b"p"], QUEUED),
                (&[b"SET", b"q", b"x"], QUEUED),
                (&[b"MSET", b"r", b"1", b"s", b"2"], QUEUED),
                (&[b"GET", b"q"], QUEUED),
                (
                    &[b"EXEC"],
                    b"*5\r\n:3\r\n$1\r\n3\r\n+OK\r\n+OK\r\n$1\r\nx\r\n",
                ),
                (&[b"INCR", b"p"], b":4\r\n"),
                (&[b"GET", b"q"], b"$1\r\nx\r\n"),
                (&[b"MULTI"], OK),
                (&[b"GET", b"p"], QUEUED),
                (&[b"GET", b"q"], QUEUED),
                (&[b"EXEC"], b"*2\r\n$1\r\n4\r\n$1\r\nx\r\n"),
                (&[b"DEL", b"p", b"q", b"r", b"s"], b":4\r\n"),
            ],
        );
    });
}

#[test]
fn a_client_library_transaction_applies_once() {
    // The `redis` crate's atomic pipeline sends MULTI ... EXEC in one write (as redis-py's
    // `pipeline()` does): it must return the commands' replies, applied exactly once.
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let (n, ok, v): (i64, String, String) = redis::pipe()
        .atomic()
        .incr("txc", 1)
        .set("txs", "1")
        .get("txs")
        .query(&mut c)
        .expect("atomic pipeline");
    assert_eq!((n, ok.as_str(), v.as_str()), (1, "OK", "1"));
    assert_eq!(cmd("GET").arg("txc").query::<i64>(&mut c).expect("GET"), 1);
    // A queued error fails the whole pipeline and applies nothing.
    let failed: redis::RedisResult<redis::Value> = redis::pipe()
        .atomic()
        .incr("txc", 1)
        .cmd("NOSUCHCOMMAND")
        .query(&mut c);
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(cmd("GET").arg("txc").query::<i64>(&mut c).expect("GET"), 1);
}

#[test]
fn auth_comes_before_multi() {
    let server = TestServer::start(|c| c.requirepass = Some(b"pw".to_vec()));
    both_ways(
        &server,
        &[
            (&[b"MULTI"], b"-NOAUTH Authentication required.\r\n"),
            (&[b"EXEC"], b"-NOAUTH Authentication required.\r\n"),
            (&[b"AUTH", b"pw"], OK),
            (&[b"MULTI"], OK),
            (&[b"AUTH", b"pw"], QUEUED),
            (&[b"INCR", b"au"], QUEUED),
            (&[b"EXEC"], b"*2\r\n+OK\r\n:1\r\n"),
            (&[b"DEL", b"au"], b":1\r\n"),
        ],
    );
}

#[test]
fn quit_inside_multi_closes_and_forgets_the_queue() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    raw.send(
        &[
            resp(&[b"MULTI"]),
            resp(&[b"SET", b"qq", b"1"]),
            resp(&[b"QUIT"]),
        ]
        .concat(),
    );
    assert_eq!(raw.read_to_close(), b"+OK\r\n+QUEUED\r\n+OK\r\n");
    let mut c = server.client();
    let v: Option<String> = cmd("GET").arg("qq").query(&mut c).expect("GET");
    assert_eq!(v, None);
}

#[test]
fn the_queue_is_bounded() {
    // At most --max-multibulk-len commands...
    let server = TestServer::start(|c| c.limits.max_multibulk_len = 4);
    let too_large: &[u8] = b"-ERR transaction too large: at most 4 commands and 1073741824 bytes \
        of arguments can be queued (--max-multibulk-len, --max-query-len); EXEC will discard it\r\n";
    both_ways(
        &server,
        &[
            (&[b"MULTI"], OK),
            (&[b"SET", b"b1", b"1"], QUEUED),
            (&[b"SET", b"b2", b"1"], QUEUED),
            (&[b"SET", b"b3", b"1"], QUEUED),
            (&[b"SET", b"b4", b"1"], QUEUED),
            (&[b"SET", b"b5", b"1"], too_large),
            (&[b"PING"], too_large),
            (&[b"EXEC"], EXECABORT),
            (&[b"EXISTS", b"b1", b"b4"], b":0\r\n"),
            (&[b"MULTI"], OK),
            (&[b"SET", b"b1", b"1"], QUEUED),
            (&[b"EXEC"], b"*1\r\n+OK\r\n"),
            (&[b"DEL", b"b1"], b":1\r\n"),
        ],
    );
    drop(server);
    // ...and --max-query-len bytes (each argument counted with 24 bytes of overhead).
    let server = TestServer::start(|c| {
        c.limits.max_bulk_len = 1000;
        c.limits.max_query_len = 4096;
    });
    let v = vec![b'v'; 1000];
    let too_large = b"-ERR transaction too large: at most 1048576 commands and 4096 bytes \
        of arguments can be queued (--max-multibulk-len, --max-query-len); EXEC will discard it\r\n";
    both_ways(
        &server,
        &[
            (&[b"MULTI"], OK),
            (&[b"SET", b"c1", &v], QUEUED),
            (&[b"SET", b"c2", &v], QUEUED),
            (&[b"SET", b"c3", &v], QUEUED),
            (&[b"SET", b"c4", &v], too_large),
            (&[b"DISCARD"], OK),
            (&[b"EXISTS", b"c1"], b":0\r\n"),
        ],
    );
}

#[test]
fn an_exec_reply_is_bounded_as_mget_is() {
    // Five GETs of a 1,000-byte value pass a 4,096-byte query-buffer limit: EXEC answers
    // an error, as MGET does, and applies nothing.
    let server = TestServer::start(|c| {
        c.limits.max_bulk_len = 1000;
        c.limits.max_query_len = 4096;
    });
    let v = vec![b'v'; 1000];
    let get: &[&[u8]] = &[b"GET", b"big"];
    both_ways(
        &server,
        &[
            (&[b"SET", b"big", &v], OK),
            (&[b"MULTI"], OK),
            (&[b"SET", b"z", b"1"], QUEUED),
            (get, QUEUED),
            (get, QUEUED),
            (get, QUEUED),
            (get, QUEUED),
            (get, QUEUED),
            (
                &[b"EXEC"],
                b"-ERR EXEC reply would exceed 4096 bytes (the query buffer limit); the \
                  transaction's writes were not applied\r\n",
            ),
            (&[b"EXISTS", b"z"], b":0\r\n"),
            (&[b"MGET", b"big", b"big", b"big", b"big", b"big"], b"-ERR MGET reply would exceed 4096 bytes (the query buffer limit); ask for fewer keys\r\n"),
        ],
    );
}

#[test]
fn a_transaction_the_engine_refuses_applies_nothing() {
    let server = TestServer::start(|c| c.engine.max_batch_size = 1 << 20);
    let big = vec![b'v'; 600 << 10];
    let mut raw = server.raw();
    raw.send(
        &[
            resp(&[b"MULTI"]),
            resp(&[b"SET", b"small", b"1"]),
            resp(&[b"SET", b"big1", &big]),
            resp(&[b"SET", b"big2", &big]),
            resp(&[b"EXEC"]),
            resp(&[b"EXISTS", b"small", b"big1", b"big2"]),
        ]
        .concat(),
    );
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n-ERR EXEC failed, the transaction's writes were not applied: ");
    raw.read_line(); // the engine's reason
    raw.expect(b":0\r\n");
}

#[test]
fn writes_survive_a_restart_under_always() {
    let server = TestServer::start(|c| c.appendfsync = AppendFsync::Always);
    let mut raw = server.raw();
    raw.send(
        &[
            resp(&[b"MULTI"]),
            resp(&[b"MSET", b"d1", b"1", b"d2", b"2"]),
            resp(&[b"INCR", b"d3"]),
            resp(&[b"SET", b"d4", b"x", b"EX", b"1000"]),
            resp(&[b"EXEC"]),
        ]
        .concat(),
    );
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:1\r\n+OK\r\n");
    let dir = server.stop();
    let server = TestServer::start_in(dir, |c| c.appendfsync = AppendFsync::Always);
    let mut raw = server.raw();
    raw.send(&resp(&[b"MGET", b"d1", b"d2", b"d3", b"d4"]));
    raw.expect(b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\nx\r\n");
}

/// While transactions run `INCR k`, `INCR k` and set two keys to one value, other clients
/// INCR `k` (one at a time and pipelined: both write paths) and read the two keys with MGET
/// (one view). Isolation means: each transaction's two INCRs return consecutive values (no
/// INCR landed between them), no INCR is lost, and no MGET sees the two keys differ (half a
/// transaction).
#[test]
fn exec_is_isolated_from_concurrent_clients() {
    for threads in BOTH_WAYS {
        isolated_on(threads);
    }
}

fn isolated_on(threads: usize) {
    let server = TestServer::start(|c| c.threads = threads);
    let (txn_clients, txns) = (3, 150);
    let (incr_clients, incrs) = (3, 300);
    let barrier = Arc::new(Barrier::new(txn_clients + incr_clients + 1));
    let done = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for id in 0..txn_clients {
        let mut c = server.client();
        let barrier = Arc::clone(&barrier);
        workers.push(std::thread::spawn(move || {
            barrier.wait();
            for i in 0..txns {
                let tag = format!("{id}/{i}");
                let (a, b, _, _): (i64, i64, (), ()) = redis::pipe()
                    .atomic()
                    .incr("k", 1)
                    .incr("k", 1)
                    .set("x", &tag)
                    .set("y", &tag)
                    .query(&mut c)
                    .expect("transaction");
                assert_eq!(b, a + 1, "an INCR landed inside a transaction");
            }
        }));
    }
    for id in 0..incr_clients {
        let mut c = server.client();
        let barrier = Arc::clone(&barrier);
        workers.push(std::thread::spawn(move || {
            barrier.wait();
            for i in 0..incrs / 4 {
                if (id + i) % 2 == 0 {
                    for _ in 0..4 {
                        cmd("INCR").arg("k").query::<i64>(&mut c).expect("INCR");
                    }
                } else {
                    let mut p = redis::pipe();
                    for _ in 0..4 {
                        p.incr("k", 1);
                    }
                    p.query::<Vec<i64>>(&mut c).expect("pipelined INCR");
                }
            }
        }));
    }
    let reader = {
        let mut c = server.client();
        let (barrier, done) = (Arc::clone(&barrier), Arc::clone(&done));
        std::thread::spawn(move || {
            barrier.wait();
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let (x, y): (Option<String>, Option<String>) =
                    cmd("MGET").arg("x").arg("y").query(&mut c).expect("MGET");
                assert_eq!(x, y, "a reader saw half a transaction");
                reads += 1;
            }
            reads
        })
    };
    for w in workers {
        w.join().expect("worker");
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader");
    assert!(reads > 0);
    let mut c = server.client();
    let total = (txn_clients * txns * 2 + incr_clients * (incrs / 4) * 4) as i64;
    assert_eq!(
        cmd("GET").arg("k").query::<i64>(&mut c).expect("GET"),
        total,
        "an INCR was lost"
    );
}

/// A FLUSHDB that ran inside a transaction the engine then refuses: the error says the
/// flush and the writes before it were applied (it said nothing was, with every key gone).
#[test]
fn a_refused_transaction_after_its_flushdb_says_what_was_applied() {
    let server = TestServer::start(|c| {
        c.engine.max_batch_size = 1 << 20;
        c.enable_flushdb = true;
    });
    let big = vec![b'v'; 600 << 10];
    let mut raw = server.raw();
    raw.send(
        &[
            resp(&[b"SET", b"old", b"1"]),
            resp(&[b"MULTI"]),
            resp(&[b"SET", b"a", b"1"]),
            resp(&[b"FLUSHDB"]),
            resp(&[b"SET", b"big1", &big]),
            resp(&[b"SET", b"big2", &big]),
            resp(&[b"EXEC"]),
            resp(&[b"EXISTS", b"old", b"a", b"big1", b"big2"]),
        ]
        .concat(),
    );
    raw.expect(
        b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n-ERR EXEC failed, the \
          FLUSHDB it ran and the writes before it were applied, the writes after it were not: ",
    );
    raw.read_line(); // the engine's reason
    raw.expect(b":0\r\n");
}

/// INFO keyspace inside EXEC counts the transaction's own writes, and those counts, not
/// committed yet, are not left in the counts other clients are given meanwhile.
#[test]
fn info_inside_exec_sees_its_writes_and_keeps_them_to_itself() {
    let server = TestServer::start(|c| c.info_keyspace_refresh = Duration::from_secs(3600));
    let mut c = server.client();
    let before: String = cmd("INFO").arg("keyspace").query(&mut c).expect("info");
    assert!(!before.contains("db0:"), "{before}");
    let (ok, inside): (String, String) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("n")
        .arg("1")
        .cmd("INFO")
        .arg("keyspace")
        .query(&mut c)
        .expect("transaction");
    assert_eq!(ok, "OK");
    assert!(inside.contains("db0:keys=1,"), "{inside}");
    let after: String = cmd("INFO").arg("keyspace").query(&mut c).expect("info");
    assert!(
        !after.contains("db0:"),
        "the shared counts are as before: {after}"
    );
}

const ABORTED: &[u8] = b"*-1\r\n";

/// Each way of writing a key, sent by another connection (with its exact replies), with
/// the key `wk` holding "5" before it.
const WRITERS: &[(&[&[u8]], &[u8])] = &[
    (&[b"SET", b"wk", b"1"], b"+OK\r\n"),
    (&[b"SET", b"wk", b"1", b"EX", b"100"], b"+OK\r\n"),
    (&[b"INCR", b"wk"], b":6\r\n"),
    (&[b"INCRBY", b"wk", b"-5"], b":0\r\n"),
    (&[b"MSET", b"other", b"1", b"wk", b"2"], b"+OK\r\n"),
    (&[b"DEL", b"wk"], b":1\r\n"),
    (&[b"APPEND", b"wk", b"z"], b":2\r\n"),
    (&[b"EXPIRE", b"wk", b"100"], b":1\r\n"),
    (&[b"GETDEL", b"wk"], b"$1\r\n5\r\n"),
    (&[b"FLUSHDB"], b"+OK\r\n"),
];

/// Sends `request` and checks its reply.
fn step(raw: &mut common::Raw, request: &[&[u8]], reply: &[u8]) {
    raw.send(&resp(request));
    raw.expect(reply);
}

/// WATCH `wk`, let `write` happen, then MULTI / SET / EXEC on the watching connection:
/// EXEC's reply must be `exec_reply`, and the transaction's SET of `side` applied only if
/// EXEC ran.
fn watch_then(server: &TestServer, write: impl FnOnce(&mut common::Raw), exec_reply: &[u8]) {
    let mut watcher = server.raw();
    step(&mut watcher, &[b"SET", b"wk", b"5"], OK);
    step(&mut watcher, &[b"DEL", b"side"], b":0\r\n");
    step(&mut watcher, &[b"WATCH", b"wk"], OK);
    write(&mut watcher);
    step(&mut watcher, &[b"MULTI"], OK);
    step(&mut watcher, &[b"SET", b"side", b"ran"], QUEUED);
    step(&mut watcher, &[b"EXEC"], exec_reply);
    let side: &[u8] = if exec_reply == ABORTED {
        b"$-1\r\n"
    } else {
        b"$3\r\nran\r\n"
    };
    step(&mut watcher, &[b"GET", b"side"], side);
    step(&mut watcher, &[b"DEL", b"side"], b"");
    watcher.read_line();
}

#[test]
fn every_write_of_a_watched_key_aborts_exec() {
    each_server_with(
        |c| c.enable_flushdb = true,
        |server| {
            let mut other = server.raw();
            for (request, reply) in WRITERS {
                watch_then(server, |_| step(&mut other, request, reply), ABORTED);
            }
            // Another connection's transaction writing the key.
            watch_then(
                server,
                |_| {
                    step(&mut other, &[b"MULTI"], OK);
                    step(&mut other, &[b"SET", b"wk", b"2"], QUEUED);
                    step(&mut other, &[b"EXEC"], b"*1\r\n+OK\r\n");
                },
                ABORTED,
            );
            // The watching connection's own write, pipelined with another (the batched path).
            watch_then(
                server,
                |me| {
                    let mut both = resp(&[b"SET", b"x", b"1"]);
                    both.extend(resp(&[b"SET", b"wk", b"1"]));
                    me.send(&both);
                    me.expect(b"+OK\r\n+OK\r\n");
                },
                ABORTED,
            );
            // Writes of other keys, reads of this one and commands that leave it as it is
            // (PERSIST of a key without an expiry, SET NX of an existing key) abort nothing.
            watch_then(
                server,
                |_| {
                    step(&mut other, &[b"SET", b"x", b"1"], OK);
                    step(&mut other, &[b"DEL", b"x"], b":1\r\n");
                    step(&mut other, &[b"GET", b"wk"], b"$1\r\n5\r\n");
                    step(&mut other, &[b"EXISTS", b"wk"], b":1\r\n");
                    step(&mut other, &[b"PERSIST", b"wk"], b":0\r\n");
                    step(&mut other, &[b"SET", b"wk", b"9", b"NX"], b"$-1\r\n");
                },
                b"*1\r\n+OK\r\n",
            );
        },
    );
}

/// DEL and FLUSHDB of a watched key that does not exist (never written, or expired before
/// the WATCH) change nothing a transaction could read: EXEC runs, as in Redis 7, which
/// raises only keys that existed. A FLUSHDB that deletes a watched key that exists aborts.
#[test]
fn deleting_a_watched_key_that_does_not_exist_aborts_nothing() {
    each_server_with(
        |c| {
            c.enable_flushdb = true;
            // The expired key must still be there when it is deleted, not swept before.
            c.sweep_interval = std::time::Duration::from_secs(3600);
        },
        |server| {
            let mut me = server.raw();
            let mut other = server.raw();
            let line = |raw: &mut common::Raw| {
                String::from_utf8_lossy(&raw.read_line())
                    .trim_end()
                    .to_string()
            };
            let exec_after = |me: &mut common::Raw, other: &mut common::Raw, write: &[Step<'_>]| {
                step(me, &[b"SET", b"expired", b"1", b"PX", b"1"], OK);
                std::thread::sleep(std::time::Duration::from_millis(20));
                step(me, &[b"WATCH", b"absent", b"expired"], OK);
                for (request, reply) in write {
                    step(other, request, reply);
                }
                step(me, &[b"MULTI"], OK);
                step(me, &[b"PING"], QUEUED);
                me.send(&resp(&[b"EXEC"]));
                let exec = line(me);
                if exec == "*1" {
                    assert_eq!(line(me), "+PONG");
                }
                exec
            };
            let del: &[Step<'_>] = &[(&[b"DEL", b"absent", b"expired"], b":0\r\n")];
            assert_eq!(exec_after(&mut me, &mut other, del), "*1", "DEL");
            let del_in_multi: &[Step<'_>] = &[
                (&[b"MULTI"], OK),
                (&[b"DEL", b"absent", b"expired"], QUEUED),
                (&[b"EXEC"], b"*1\r\n:0\r\n"),
            ];
            assert_eq!(
                exec_after(&mut me, &mut other, del_in_multi),
                "*1",
                "DEL in another client's transaction"
            );
            let flush: &[Step<'_>] = &[(&[b"FLUSHDB"], b"+OK\r\n")];
            assert_eq!(exec_after(&mut me, &mut other, flush), "*1", "FLUSHDB");
            step(&mut me, &[b"SET", b"absent", b"now"], OK);
            assert_eq!(
                exec_after(&mut me, &mut other, flush),
                "*-1",
                "FLUSHDB of a watched key that exists"
            );
        },
    );
}

#[test]
fn exec_discard_unwatch_and_disconnect_forget_the_watches() {
    let server = TestServer::start(|_| {});
    let mut me = server.raw();
    let mut other = server.raw();
    let watched_keys = |c: &mut redis::Connection| {
        let info: String = cmd("INFO").arg("clients").query(c).expect("INFO");
        let line = info.lines().find(|l| l.starts_with("total_watched_keys:"));
        let count = line.and_then(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok());
        count.expect("INFO clients has total_watched_keys")
    };
    let mut c = server.client();
    // After each way of ending, a write of the key no longer aborts a transaction.
    let endings: [&[Step<'_>]; 4] = [
        &[(&[b"MULTI"], OK), (&[b"EXEC"], b"*0\r\n")],
        &[(&[b"MULTI"], OK), (&[b"DISCARD"], OK)],
        &[(&[b"UNWATCH"], OK)],
        // An aborted EXEC forgets them too.
        &[
            (&[b"SET", b"wk", b"0"], OK),
            (&[b"MULTI"], OK),
            (&[b"EXEC"], ABORTED),
        ],
    ];
    for ending in endings {
        step(&mut me, &[b"WATCH", b"wk", b"wk2", b"wk"], OK);
        assert_eq!(watched_keys(&mut c), 2, "a key watched twice counts once");
        for (request, reply) in ending {
            step(&mut me, request, reply);
        }
        assert_eq!(watched_keys(&mut c), 0);
        step(&mut other, &[b"SET", b"wk", b"1"], OK);
        step(&mut me, &[b"MULTI"], OK);
        step(&mut me, &[b"EXEC"], b"*0\r\n");
    }
    // Two connections watch one key; one leaves, the other's watch stands.
    step(&mut me, &[b"WATCH", b"wk"], OK);
    let mut leaving = server.raw();
    step(&mut leaving, &[b"WATCH", b"wk", b"gone"], OK);
    assert_eq!(watched_keys(&mut c), 2);
    drop(leaving);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while watched_keys(&mut c) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the disconnect is seen"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    step(&mut other, &[b"SET", b"wk", b"2"], OK);
    step(&mut me, &[b"MULTI"], OK);
    step(&mut me, &[b"EXEC"], ABORTED);
    assert_eq!(watched_keys(&mut c), 0);
}

#[test]
fn a_key_that_expires_after_watch_aborts_and_one_expired_before_does_not() {
    let server = TestServer::start(|c| c.sweep_interval = Duration::from_millis(10));
    let mut me = server.raw();
    step(&mut me, &[b"SET", b"soon", b"v", b"PX", b"300"], OK);
    step(&mut me, &[b"WATCH", b"soon"], OK);
    std::thread::sleep(Duration::from_millis(400));
    step(&mut me, &[b"MULTI"], OK);
    step(&mut me, &[b"EXEC"], ABORTED);
    // Expired (and absent to every reader) before WATCH: the sweeper deleting it later
    // changes nothing a reader could see.
    step(&mut me, &[b"SET", b"past", b"v", b"PX", b"20"], OK);
    std::thread::sleep(Duration::from_millis(60));
    step(&mut me, &[b"WATCH", b"past"], OK);
    std::thread::sleep(Duration::from_millis(300));
    step(&mut me, &[b"MULTI"], OK);
    step(&mut me, &[b"EXEC"], b"*0\r\n");
}

#[test]
fn an_aborted_exec_is_a_null_in_resp3_too() {
    let server = TestServer::start(|_| {});
    let mut me = server.raw();
    let mut other = server.raw();
    me.send(&resp(&[b"HELLO", b"3"]));
    me.send(&resp(&[b"PING"]));
    while me.read_line() != b"+PONG\r\n" {}
    step(&mut me, &[b"WATCH", b"wk"], OK);
    step(&mut other, &[b"SET", b"wk", b"1"], OK);
    step(&mut me, &[b"MULTI"], OK);
    step(&mut me, &[b"SET", b"wk", b"2"], QUEUED);
    step(&mut me, &[b"EXEC"], b"_\r\n");
    step(&mut me, &[b"GET", b"wk"], b"$1\r\n1\r\n");
}

/// A HELLO inside a transaction switches the protocol from its own reply on, as in Redis:
/// the nil before it is RESP2's, the map it answers and the nil after it RESP3's; and back.
#[test]
fn a_hello_inside_a_transaction_switches_the_protocol_from_its_reply_on() {
    let server = TestServer::start(|_| {});
    let mut me = server.raw();
    for (to, before, after) in [(b"3", "$-1", "_"), (b"2", "_", "$-1")] {
        step(&mut me, &[b"MULTI"], OK);
        step(&mut me, &[b"GET", b"missing"], QUEUED);
        step(&mut me, &[b"HELLO", to], QUEUED);
        step(&mut me, &[b"GET", b"missing"], QUEUED);
        me.send(&resp(&[b"EXEC"]));
        let mut lines = Vec::new();
        loop {
            let line = String::from_utf8_lossy(&me.read_line())
                .trim_end()
                .to_string();
            let last = line == after && lines.len() > 2;
            lines.push(line);
            if last {
                break;
            }
        }
        assert_eq!(lines[0], "*3", "{lines:?}");
        assert_eq!(lines[1], before, "{lines:?}");
        let map = if to == b"3" { '%' } else { '*' };
        assert!(lines[2].starts_with(map), "HELLO's reply: {lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some(after), "{lines:?}");
    }
}

#[test]
fn a_connection_watches_a_bounded_number_of_bytes() {
    let server = TestServer::start(|c| {
        c.limits.max_bulk_len = 1000;
        c.limits.max_query_len = 4096;
    });
    let mut c = server.client();
    let keys =
        |n: usize, tag: char| -> Vec<String> { (0..n).map(|i| format!("{tag}{i:099}")).collect() };
    // 100-byte keys cost 2 * (100 + 80) = 360 bytes each: 11 fit in 4,096, 12 do not.
    let refused: redis::RedisResult<()> = cmd("WATCH").arg(keys(12, 'a')).query(&mut c);
    let e = refused.expect_err("over the limit");
    assert!(
        e.detail()
            .is_some_and(|d| d.starts_with("too many watched keys")),
        "{e:?}"
    );
    let () = cmd("WATCH").arg(keys(9, 'b')).query(&mut c).expect("WATCH");
    let refused: redis::RedisResult<()> = cmd("WATCH").arg(keys(3, 'c')).query(&mut c);
    assert!(refused.is_err(), "9 + 3 keys pass the limit");
    let () = cmd("WATCH")
        .arg(keys(2, 'c'))
        .query(&mut c)
        .expect("11 fit");
    let info: String = cmd("INFO").arg("clients").query(&mut c).expect("INFO");
    assert!(info.contains("total_watched_keys:11\r\n"), "{info}");
}

#[test]
fn check_and_set_through_a_client_library_loses_no_update() {
    // Each thread adds 1 to a counter 25 times by GET, then SET of the value plus one
    // inside MULTI, retried while WATCH aborts it: a lost update would leave less than
    // 100.
    for threads in BOTH_WAYS {
        let server = TestServer::start(|c| c.threads = threads);
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let mut c = server.client();
                std::thread::spawn(move || {
                    let mut retries = 0u32;
                    for _ in 0..25 {
                        redis::transaction(&mut c, &["counter"], |c, pipe| {
                            let n: Option<i64> = cmd("GET").arg("counter").query(c)?;
                            // Widen the window between the read and the write.
                            std::thread::yield_now();
                            let done: Option<()> =
                                pipe.set("counter", n.unwrap_or(0) + 1).ignore().query(c)?;
                            retries += u32::from(done.is_none());
                            Ok(done)
                        })
                        .expect("transaction");
                    }
                    retries
                })
            })
            .collect();
        let retries: u32 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
        let mut c = server.client();
        let n: i64 = cmd("GET").arg("counter").query(&mut c).expect("GET");
        assert_eq!(n, 100, "threads {threads}, {retries} retries");
    }
}

#[test]
fn a_transaction_never_sees_part_of_a_flushdb() {
    // 30,000 keys: FLUSHDB deletes them in three batches, in key order. A transaction
    // reading the first and the last key must find both or neither, whenever it runs.
    let server = TestServer::start(|c| c.enable_flushdb = true);
    let mut c = server.client();
    let keys: Vec<String> = (0..30_000).map(|i| format!("f{i:05}")).collect();
    for chunk in keys.chunks(1000) {
        let pairs: Vec<(&String, &str)> = chunk.iter().map(|k| (k, "v")).collect();
        let () = cmd("MSET").arg(pairs).query(&mut c).expect("MSET");
    }
    let (first, last) = (keys[0].clone(), keys[keys.len() - 1].clone());
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let mut c = server.client();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Acquire) {
                let (a, b): (Option<String>, Option<String>) = redis::pipe()
                    .atomic()
                    .get(&first)
                    .get(&last)
                    .query(&mut c)
                    .expect("transaction");
                seen.push((a.is_some(), b.is_some()));
            }
            seen
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let () = cmd("FLUSHDB").query(&mut c).expect("FLUSHDB");
    std::thread::sleep(Duration::from_millis(20));
    done.store(true, Ordering::Release);
    let seen = reader.join().expect("reader");
    let mixed = seen.iter().filter(|(a, b)| a != b).count();
    assert_eq!(
        mixed,
        0,
        "{mixed} of {} transactions saw part of the flush",
        seen.len()
    );
    assert!(seen.first() == Some(&(true, true)) && seen.last() == Some(&(false, false)));
}
