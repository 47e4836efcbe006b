//! The batched request path: a pipeline's writes are committed together (and, across
//! connections, in one executor round), and everything still behaves as if each command ran
//! alone, in order.

mod common;

use common::{resp, TestServer, BOTH_WAYS};
use wisckey_server::AppendFsync;

/// One request's arguments.
type Request<'a> = &'a [&'a [u8]];

/// Every request in one write to the socket.
fn pipeline(requests: &[&[&[u8]]]) -> Vec<u8> {
    requests.iter().flat_map(|r| resp(r)).collect()
}

/// Runs `test` under `always` and `everysec`, each on one event loop that commits the
/// writes itself and on four workers with an executor thread.
fn both_modes(test: impl Fn(&TestServer)) {
    for threads in BOTH_WAYS {
        for mode in [AppendFsync::Always, AppendFsync::Everysec] {
            let server = TestServer::start(|c| {
                c.appendfsync = mode;
                c.threads = threads;
            });
            assert_eq!(server.serving_threads(), threads);
            test(&server);
        }
    }
}

#[test]
fn a_read_after_a_write_in_one_pipeline_sees_the_write() {
    both_modes(|server| {
        let mut raw = server.raw();
        raw.send(&pipeline(&[
            &[b"SET", b"k", b"old"],
            &[b"GET", b"k"],
            &[b"SET", b"k", b"new"],
            &[b"GET", b"k"],
            &[b"INCR", b"n"],
            &[b"INCRBY", b"n", b"41"],
            &[b"GET", b"n"],
            &[b"MSET", b"k", b"m", b"n", b"7"],
            &[b"INCR", b"n"],
            &[b"GET", b"k"],
            // Not on the batched path: runs after the pending writes are committed.
            &[b"STRLEN", b"k"],
            &[b"APPEND", b"k", b"!"],
            &[b"DECR", b"n"],
            &[b"GET", b"k"],
            &[b"MGET", b"k", b"n", b"none"],
        ]));
        raw.expect(
            b"+OK\r\n$3\r\nold\r\n+OK\r\n$3\r\nnew\r\n:1\r\n:42\r\n$2\r\n42\r\n+OK\r\n:8\r\n\
              $1\r\nm\r\n:1\r\n:2\r\n:7\r\n$2\r\nm!\r\n*3\r\n$2\r\nm!\r\n$1\r\n7\r\n$-1\r\n",
        );
        // And another connection sees the committed values.
        let mut other = server.raw();
        other.send(&pipeline(&[&[b"GET", b"k"], &[b"GET", b"n"]]));
        other.expect(b"$2\r\nm!\r\n$1\r\n7\r\n");
    });
}

#[test]
fn large_values_written_and_read_in_one_pipeline() {
    both_modes(|server| {
        let big: Vec<u8> = (0..5000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut raw = server.raw();
        raw.send(&pipeline(&[
            &[b"SET", b"big", &big],
            &[b"GET", b"big"],
            &[
                b"SET",
                b"num",
                b"100000000000000000000000000000000000000000000000000000000000000000007",
            ],
            &[b"INCR", b"num"],
            &[b"SET", b"num", &b"1".repeat(18)],
            &[
                b"SET",
                b"num",
                &[b"1".repeat(18), b"  ".repeat(40)].concat(),
            ],
            &[b"INCR", b"num"],
            &[b"MSET", b"big", b"small", b"big2", &big],
            &[b"GET", b"big2"],
            &[b"GET", b"big"],
        ]));
        let bulk = |v: &[u8]| [format!("${}\r\n", v.len()).as_bytes(), v, b"\r\n"].concat();
        let mut expected = b"+OK\r\n".to_vec();
        expected.extend(bulk(&big));
        expected.extend_from_slice(b"+OK\r\n-ERR value is not an integer or out of range\r\n");
        expected
            .extend_from_slice(b"+OK\r\n+OK\r\n-ERR value is not an integer or out of range\r\n");
        expected.extend_from_slice(b"+OK\r\n");
        expected.extend(bulk(&big));
        expected.extend(bulk(b"small"));
        raw.expect(&expected);
    });
}

#[test]
fn an_error_in_a_pipeline_leaves_the_other_replies_alone() {
    both_modes(|server| {
        let mut raw = server.raw();
        raw.send(&pipeline(&[
            &[b"SET", b"a", b"1"],
            &[b"INCR", b"a"],
            &[b"SET", b"b", b"x"],
            &[b"INCR", b"b"],
            &[b"INCRBY", b"a", b"nope"],
            &[b"SET", b"a"],
            &[b"MSET", b"c", b"1", b"d"],
            &[b"NOSUCHCOMMAND"],
            &[b"INCRBY", b"a", b"9223372036854775807"],
            &[b"DECRBY", b"a", b"-9223372036854775808"],
            &[b"INCR", b"a"],
            &[b"GET", b"b"],
            &[b"SET", b"c", b"3", b"NX"],
            &[b"SET", b"c", b"4", b"NX"],
            &[b"GET", b"c"],
        ]));
        raw.expect(
            b"+OK\r\n:2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n\
              -ERR value is not an integer or out of range\r\n\
              -ERR wrong number of arguments for 'set' command\r\n\
              -ERR wrong number of arguments for 'mset' command\r\n\
              -ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n\
              -ERR increment or decrement would overflow\r\n\
              -ERR decrement would overflow\r\n\
              :3\r\n$1\r\nx\r\n+OK\r\n$-1\r\n$1\r\n3\r\n",
        );
        // The key `b` was not touched by the failed INCR, and the connection still works.
        raw.send(&resp(&[b"GET", b"a"]));
        raw.expect(b"$1\r\n3\r\n");
    });
}

#[test]
fn a_counter_with_an_oversized_key_is_refused_and_loses_no_other_write() {
    // An INCR of a key over the keyspace's limit once went unchecked into the pending batch,
    // which refused it silently: the INCR replied `:1`, and every write after it in the same
    // commit (this pipeline's SET, other connections' writes) was acknowledged and dropped.
    let long = vec![b'k'; wisckey_server::format::MAX_USER_KEY + 1];
    let too_large = format!(
        "-ERR key too large ({} bytes; the maximum is {})\r\n",
        long.len(),
        wisckey_server::format::MAX_USER_KEY
    );
    both_modes(|server| {
        let mut raw = server.raw();
        raw.send(&pipeline(&[
            &[b"SET", b"before", b"1"],
            &[b"INCR", &long],
            &[b"SET", b"after", b"2"],
            &[b"DECRBY", &long, b"5"],
            &[b"INCR", b"n"],
        ]));
        let mut expected = b"+OK\r\n".to_vec();
        expected.extend_from_slice(too_large.as_bytes());
        expected.extend_from_slice(b"+OK\r\n");
        expected.extend_from_slice(too_large.as_bytes());
        expected.extend_from_slice(b":1\r\n");
        raw.expect(&expected);
        // A lone INCR takes the unbatched path.
        raw.send(&resp(&[b"INCR", &long]));
        raw.expect(too_large.as_bytes());
        raw.send(&pipeline(&[
            &[b"GET", b"before"],
            &[b"GET", b"after"],
            &[b"GET", b"n"],
            &[b"EXISTS", &long],
        ]));
        raw.expect(b"$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n:0\r\n");
    });
}

#[test]
fn a_write_the_engine_refuses_fails_alone() {
    // An MSET or SET over the engine's max_batch_size once went into the round's pending
    // batch: the whole batch was refused, and every command of the round (writes before it
    // dropped, writes after it committed) replied with the error.
    for threads in BOTH_WAYS {
        for mode in [AppendFsync::Always, AppendFsync::Everysec] {
            let server = TestServer::start(|c| {
                c.appendfsync = mode;
                c.threads = threads;
                c.engine.max_batch_size = 1 << 20;
            });
            let big = vec![b'v'; 600 << 10];
            let huge = vec![b'v'; 1100 << 10];
            let mut raw = server.raw();
            raw.send(&pipeline(&[
                &[b"SET", b"a", b"1"],
                &[b"INCR", b"n"],
                &[b"MSET", b"big1", &big, b"big2", &big],
                &[b"SET", b"b", b"2"],
                &[b"SET", b"huge", &huge],
                &[b"INCR", b"n"],
                &[b"MSET", b"big3", &big],
                &[b"GET", b"n"],
            ]));
            let refused = |bytes: usize| {
                format!(
                    "-ERR engine: invalid argument: write batch of {bytes} key and value bytes \
                     exceeds max_batch_size 1048576\r\n"
                )
            };
            let mut expected = b"+OK\r\n:1\r\n".to_vec();
            expected.extend_from_slice(refused(2 * ((600 << 10) + 6)).as_bytes());
            expected.extend_from_slice(b"+OK\r\n");
            expected.extend_from_slice(refused((1100 << 10) + 5 + 1).as_bytes());
            expected.extend_from_slice(b":2\r\n+OK\r\n$1\r\n2\r\n");
            raw.expect(&expected);
            raw.send(&pipeline(&[
                &[b"GET", b"a"],
                &[b"GET", b"b"],
                &[b"EXISTS", b"big1", b"big2", b"huge", b"big3"],
            ]));
            raw.expect(b"$1\r\n1\r\n$1\r\n2\r\n:1\r\n");
        }
    }
}

#[test]
fn pipelined_incrs_from_many_clients_add_up_exactly() {
    both_modes(|server| {
        let clients = 6;
        let per_client = 1000;
        let threads: Vec<_> = (0..clients)
            .map(|c| {
                let mut raw = server.raw();
                std::thread::spawn(move || {
                    // Every INCR of every client in one write: the shared counter, and this
                    // client's own, interleaved.
                    let own = format!("own{c}");
                    let mut bytes = Vec::new();
                    for _ in 0..per_client {
                        bytes.extend(resp(&[b"INCR", b"shared"]));
                        bytes.extend(resp(&[b"INCRBY", own.as_bytes(), b"2"]));
                    }
                    raw.send(&bytes);
                    let mut expected_own = Vec::new();
                    for i in 1..=per_client {
                        expected_own.push(format!(":{}\r\n", 2 * i));
                    }
                    // Read the replies: the shared counter's replies grow strictly.
                    let mut reader = std::io::BufReader::new(&mut raw.0);
                    let mut last_shared = 0i64;
                    for want_own in expected_own {
                        let mut line = String::new();
                        std::io::BufRead::read_line(&mut reader, &mut line).expect("reply");
                        let shared: i64 = line
                            .trim_end()
                            .strip_prefix(':')
                            .and_then(|n| n.parse().ok())
                            .unwrap_or_else(|| panic!("not an integer reply: {line:?}"));
                        assert!(shared > last_shared, "{shared} after {last_shared}");
                        last_shared = shared;
                        let mut line = String::new();
                        std::io::BufRead::read_line(&mut reader, &mut line).expect("reply");
                        assert_eq!(line, want_own);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("client");
        }
        let mut raw = server.raw();
        raw.send(&resp(&[b"GET", b"shared"]));
        let total = (clients * per_client).to_string();
        raw.expect(format!("${}\r\n{total}\r\n", total.len()).as_bytes());
        for c in 0..clients {
            raw.send(&resp(&[b"GET", format!("own{c}").as_bytes()]));
            let own = (2 * per_client).to_string();
            raw.expect(format!("${}\r\n{own}\r\n", own.len()).as_bytes());
        }
    });
}

#[test]
fn pipelined_writes_survive_a_restart_and_keep_their_expiry() {
    let server = TestServer::start(|c| c.appendfsync = AppendFsync::Always);
    let mut raw = server.raw();
    let mut bytes = Vec::new();
    for i in 0..500 {
        bytes.extend(resp(&[b"SET", format!("k{i}").as_bytes(), &[b'v'; 300]]));
    }
    bytes.extend(resp(&[b"SET", b"ttl", b"10", b"EX", b"1000"]));
    bytes.extend(resp(&[b"INCR", b"ttl"]));
    bytes.extend(resp(&[b"INCR", b"ttl"]));
    raw.send(&bytes);
    let mut expected = b"+OK\r\n".repeat(501);
    expected.extend_from_slice(b":11\r\n:12\r\n");
    raw.expect(&expected);
    drop(raw);
    let dir = server.stop();
    let server = TestServer::start_in(dir, |c| c.appendfsync = AppendFsync::Always);
    let mut raw = server.raw();
    raw.send(&pipeline(&[
        &[b"GET", b"k0"],
        &[b"STRLEN", b"k499"],
        &[b"GET", b"ttl"],
    ]));
    let mut expected = b"$300\r\n".to_vec();
    expected.extend_from_slice(&[b'v'; 300]);
    expected.extend_from_slice(b"\r\n:300\r\n$2\r\n12\r\n");
    raw.expect(&expected);
    // INCR kept the key's expiry.
    raw.send(&resp(&[b"TTL", b"ttl"]));
    let mut reply = [0u8; 16];
    let n = std::io::Read::read(&mut raw.0, &mut reply).expect("TTL reply");
    let ttl: i64 = String::from_utf8_lossy(&reply[..n])
        .trim()
        .trim_start_matches(':')
        .parse()
        .expect("integer");
    assert!((1..=1000).contains(&ttl), "TTL {ttl}");
}

#[test]
fn concurrent_pipelines_of_sets_and_gets_see_whole_values() {
    // Writers pipeline SETs of one key with values that tell whose they are; readers
    // pipeline GETs of it. Every GET returns a value some SET wrote, whole.
    for threads in BOTH_WAYS {
        sets_and_gets_on(threads);
    }
}

fn sets_and_gets_on(threads: usize) {
    let server = TestServer::start(|c| {
        c.appendfsync = AppendFsync::Always;
        c.threads = threads;
    });
    let writers: Vec<_> = (0..3u8)
        .map(|w| {
            let mut raw = server.raw();
            std::thread::spawn(move || {
                for round in 0..50 {
                    let mut bytes = Vec::new();
                    for i in 0..20u8 {
                        let v = vec![b'a' + w; 100 + usize::from(i)];
                        bytes.extend(resp(&[b"SET", b"hot", &v]));
                        bytes.extend(resp(&[b"SET", format!("w{w}").as_bytes(), &v]));
                    }
                    raw.send(&bytes);
                    raw.expect(&b"+OK\r\n".repeat(40));
                    let _ = round;
                }
            })
        })
        .collect();
    let mut reader = server.raw();
    for _ in 0..50 {
        let mut bytes = Vec::new();
        for _ in 0..20 {
            bytes.extend(resp(&[b"GET", b"hot"]));
        }
        reader.send(&bytes);
        let mut buf = std::io::BufReader::new(&mut reader.0);
        for _ in 0..20 {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut buf, &mut line).expect("reply");
            if line == "$-1\r\n" {
                continue;
            }
            let len: usize = line
                .trim_end()
                .strip_prefix('$')
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not a bulk reply: {line:?}"));
            let mut value = vec![0u8; len + 2];
            std::io::Read::read_exact(&mut buf, &mut value).expect("value");
            value.truncate(len);
            assert!((100..120).contains(&len), "length {len}");
            assert!(
                value.iter().all(|&b| b == value[0]),
                "a torn value: {value:?}"
            );
        }
        assert!(buf.buffer().is_empty(), "more replies than requests");
    }
    for w in writers {
        w.join().expect("writer");
    }
}

#[test]
fn unauthenticated_pipelines_are_refused_command_by_command() {
    let server = TestServer::start(|c| c.requirepass = Some("secret".into()));
    let mut raw = server.raw();
    raw.send(&pipeline(&[
        &[b"SET", b"k", b"v"],
        &[b"INCR", b"n"],
        &[b"AUTH", b"secret"],
        &[b"SET", b"k", b"v"],
        &[b"INCR", b"n"],
        &[b"GET", b"k"],
    ]));
    raw.expect(
        b"-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n\
          +OK\r\n+OK\r\n:1\r\n$1\r\nv\r\n",
    );
}

#[test]
fn before_auth_requests_are_held_to_small_limits() {
    // With requirepass, a client without the password may not make the server buffer large
    // requests (Redis 7: 10 arguments of 16 KiB at most before AUTH).
    let server = TestServer::start(|c| c.requirepass = Some("secret".into()));
    let big = vec![b'v'; 20_000];
    let mut raw = server.raw();
    raw.send(&resp(&[b"SET", b"k", &big]));
    assert_eq!(
        raw.read_to_close(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    let mut raw = server.raw();
    let eleven: Vec<&[u8]> = std::iter::once(&b"DEL"[..])
        .chain(std::iter::repeat_n(&b"k"[..], 10))
        .collect();
    raw.send(&resp(&eleven));
    assert_eq!(
        raw.read_to_close(),
        b"-ERR Protocol error: invalid multibulk length\r\n"
    );
    // Within the small limits: NOAUTH, and the connection stays.
    let mut raw = server.raw();
    raw.send(&resp(&[b"SET", b"k", &big[..16 << 10]]));
    raw.expect(b"-NOAUTH Authentication required.\r\n");
    // After AUTH (even in the same write) the full limits apply.
    raw.send(&pipeline(&[
        &[b"AUTH", b"secret"],
        &[b"SET", b"k", &big],
        &eleven,
    ]));
    raw.expect(b"+OK\r\n+OK\r\n:1\r\n");
}

/// Sends `requests` in one pipeline to a server whose next value-log append fails, on
/// both ways of serving and on both paths (with ECHO first the pipeline is not all batched
/// commands: it runs on the connection's batch path, `run_batch`, otherwise in an executor
/// round), and hands `check` the replies, each one line. The server's engine latches the
/// injected failure: closing it reports it.
fn with_the_next_append_failing(requests: &[Request], check: impl Fn(&[&str], &str)) {
    use std::io::Read;
    use std::sync::Arc;
    use wisckey::fs::{FaultFs, FaultKind, FaultOps, FsOp, PosixFs};
    const ECHO: Request = &[b"ECHO", b"e"];
    for (threads, mixed) in [(1, false), (4, false), (1, true), (4, true)] {
        let fault = FaultFs::new(Arc::new(PosixFs::new()));
        let fs = fault.clone();
        let server = TestServer::start(move |c| {
            c.threads = threads;
            c.appendfsync = AppendFsync::No;
            c.engine.fs = Arc::new(fs);
            c.engine.vlog_buffer_size = 4 << 10;
            c.engine.vlog_flush_interval = std::time::Duration::from_secs(3600);
            // Buffered, so the first append is the write-out that overflows the buffer
            // (the test's requests say which); write-through would make every commit one.
            c.engine.write_through_to_os = false;
        });
        let mut raw = server.raw();
        fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Append]), true);
        let mut sent = requests.to_vec();
        if mixed {
            sent.insert(0, ECHO);
        }
        raw.send(&pipeline(&sent));
        let (mut reply, mut chunk) = (Vec::new(), [0u8; 4096]);
        let lines_due = requests.len() + 2 * usize::from(mixed);
        while reply.iter().filter(|&&b| b == b'\n').count() < lines_due {
            let n = raw
                .0
                .read(&mut chunk)
                .unwrap_or_else(|e| panic!("read: {e}: {}", String::from_utf8_lossy(&reply)));
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&reply));
            reply.extend_from_slice(&chunk[..n]);
        }
        let text = String::from_utf8_lossy(&reply).into_owned();
        let text = text
            .strip_prefix(if mixed { "$1\r\ne\r\n" } else { "" })
            .unwrap_or_else(|| panic!("{text:?}"));
        let lines: Vec<&str> = text.split("\r\n").collect();
        check(&lines, text);
        assert!(server.stop_with_result().is_err());
    }
}

#[test]
fn a_failed_commit_fails_only_the_replies_it_covered() {
    // A commit inside a command (here: a GET of a value too large for the pending overlay
    // commits what is pending first) makes the replies before it final; a later failed
    // commit once turned every reply of the round into an error, so a client told its SET
    // failed would send it again although it was written. The failing append is the
    // write-out of the last SET's commit.
    let (first, large) = (vec![b'a'; 100], vec![b'c'; 8 << 10]);
    let requests: [Request; 3] = [
        &[b"SET", b"k", &first],
        &[b"GET", b"k"],
        &[b"SET", b"c", &large],
    ];
    with_the_next_append_failing(&requests, |lines, text| {
        assert_eq!(
            lines[0], "+OK",
            "the committed SET's reply stands: {text:?}"
        );
        assert!(lines[1].starts_with("-ERR"), "{text:?}");
        assert!(
            lines[2].starts_with("-ERR"),
            "the failed SET fails: {text:?}"
        );
    });
}

#[test]
fn a_commit_that_fails_before_a_read_fails_the_writes_it_held() {
    // A GET of a large pending value commits it first; that commit's failure was once
    // answered as the GET's own error while the SET before it kept its `+OK`.
    let large = vec![b'a'; 8 << 10];
    let requests: [Request; 2] = [&[b"SET", b"k", &large], &[b"GET", b"k"]];
    with_the_next_append_failing(&requests, |lines, text| {
        assert!(
            lines[0].starts_with("-ERR"),
            "the SET was not written: {text:?}"
        );
        assert!(lines[1].starts_with("-ERR"), "{text:?}");
    });
}

#[test]
fn long_read_pipelines_from_many_connections_get_their_own_replies_in_order() {
    // Read-only batches longer than a connection runs itself (41 keys: over the 32 of a
    // multi-threaded server and the 4 of one event loop) are run elsewhere (the blocking
    // pool, or on one event loop a reader thread) and handed back:
    // each connection must get exactly its own replies, in request order, and the server
    // must still shut down cleanly afterwards.
    for threads in BOTH_WAYS {
        let server = TestServer::start(|c| c.threads = threads);
        let clients: Vec<_> = (0..8u8)
            .map(|c| {
                let mut raw = server.raw();
                std::thread::spawn(move || {
                    let key = |i: u8| format!("c{c}-k{i}").into_bytes();
                    let value =
                        |i: u8| vec![b'a' + (i % 26); 50 + 10 * usize::from(c) + usize::from(i)];
                    let sets: Vec<u8> = (0..30)
                        .flat_map(|i| resp(&[b"SET", &key(i), &value(i)]))
                        .collect();
                    raw.send(&sets);
                    raw.expect(&b"+OK\r\n".repeat(30));
                    let bulk = |v: &[u8]| {
                        [
                            format!("${}\r\n", v.len()).into_bytes(),
                            v.to_vec(),
                            b"\r\n".to_vec(),
                        ]
                        .concat()
                    };
                    for round in 0..20u8 {
                        let (mut request, mut expected) = (Vec::new(), Vec::new());
                        for j in 0..30u8 {
                            let i = (round + j * 7) % 30;
                            request.extend(resp(&[b"GET", &key(i)]));
                            expected.extend(bulk(&value(i)));
                        }
                        let mget: Vec<Vec<u8>> = (0..10u8).map(|j| key((round + j) % 30)).collect();
                        let mut args: Vec<&[u8]> = vec![b"MGET"];
                        args.extend(mget.iter().map(Vec::as_slice));
                        request.extend(resp(&args));
                        expected.extend(b"*10\r\n");
                        for j in 0..10u8 {
                            expected.extend(bulk(&value((round + j) % 30)));
                        }
                        request.extend(resp(&[b"GET", b"missing"]));
                        expected.extend(b"$-1\r\n");
                        raw.send(&request);
                        raw.expect(&expected);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().expect("client");
        }
        server.stop();
    }
}
