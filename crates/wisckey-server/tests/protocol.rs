//! The wire, byte by byte over raw TCP: inline commands, pipelining, malformed and oversize
//! requests (an error, then that connection alone closes), the client limit and the idle
//! timeout.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{resp, TestServer};

#[test]
fn inline_commands_as_redis_benchmark_and_telnet_send_them() {
    let s = TestServer::start(|_| {});
    let mut c = s.raw();
    c.send(b"PING\r\n");
    c.expect(b"+PONG\r\n");
    c.send(b"SET greeting \"hello world\\x21\\n\"\n");
    c.expect(b"+OK\r\n");
    c.send(b"GET greeting\r\n");
    c.expect(b"$13\r\nhello world!\n\r\n");
    c.send(b"  \r\n\r\nEXISTS greeting 'x y'\r\n");
    c.expect(b":1\r\n");
    // Inline and multibulk mixed in one write.
    let mut both = b"ECHO a\r\n".to_vec();
    both.extend(resp(&[b"ECHO", b"b"]));
    c.send(&both);
    c.expect(b"$1\r\na\r\n$1\r\nb\r\n");
    c.send(b"nosuch one two\r\n");
    c.expect(b"-ERR unknown command 'nosuch', with args beginning with: 'one' 'two' \r\n");
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = TestServer::start(|_| {});
    let mut c = s.raw();
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 0..3000 {
        let v = format!("value-{i}");
        request.extend(resp(&[b"SET", format!("k{i}").as_bytes(), v.as_bytes()]));
        request.extend(resp(&[b"INCR", b"counter"]));
        request.extend(resp(&[b"GET", format!("k{i}").as_bytes()]));
        expected.extend_from_slice(b"+OK\r\n");
        expected.extend(format!(":{}\r\n", i + 1).into_bytes());
        expected.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
    }
    // Sent in odd-sized pieces, from another thread, while replies are read.
    let mut writer = c.0.try_clone().expect("clone");
    let t = std::thread::spawn(move || {
        for piece in request.chunks(1777) {
            std::io::Write::write_all(&mut writer, piece).expect("send");
        }
    });
    c.expect(&expected);
    t.join().expect("writer");
}

fn assert_closed_after(s: &TestServer, request: &[u8], error: &str) {
    let mut c = s.raw();
    c.send(request);
    let got = c.read_to_close();
    assert_eq!(
        String::from_utf8_lossy(&got),
        format!("-ERR Protocol error: {error}\r\n")
    );
}

#[test]
fn malformed_requests_get_an_error_and_close_only_that_connection() {
    let s = TestServer::start(|_| {});
    let mut bystander = s.raw();
    bystander.send(&resp(&[b"SET", b"k", b"v"]));
    bystander.expect(b"+OK\r\n");
    assert_closed_after(&s, b"*x\r\n", "invalid multibulk length");
    assert_closed_after(&s, b"*1\r\n$-5\r\n", "invalid bulk length");
    assert_closed_after(&s, b"*2\r\n$3\r\nGET\r\n:1\r\n", "expected '$', got ':'");
    assert_closed_after(
        &s,
        b"*1\r\n$4\r\nPINGxx",
        "bulk string not followed by CRLF",
    );
    assert_closed_after(
        &s,
        b"SET \"unterminated\r\n",
        "unbalanced quotes in request",
    );
    // Requests before the bad one are answered first.
    let mut c = s.raw();
    let mut req = resp(&[b"PING"]);
    req.extend_from_slice(b"*1\r\n$x\r\n");
    c.send(&req);
    assert_eq!(
        String::from_utf8_lossy(&c.read_to_close()),
        "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
    );
    // Random garbage never takes the server down.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..50 {
        let mut junk = vec![0u8; 200];
        for b in junk.iter_mut() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *b = rng as u8;
        }
        junk[0] = b'*';
        let mut c = s.raw();
        c.send(&junk);
        c.0.shutdown(std::net::Shutdown::Write).expect("half-close");
        let _ = c.read_to_close();
    }
    bystander.send(&resp(&[b"GET", b"k"]));
    bystander.expect(b"$1\r\nv\r\n");
}

#[test]
fn oversize_requests_are_refused_before_they_are_buffered() {
    let s = TestServer::start(|c| {
        c.limits.max_bulk_len = 1 << 20;
        c.limits.max_multibulk_len = 100;
        c.limits.max_inline_len = 1024;
        c.limits.max_query_len = 2 << 20;
    });
    // Refused at the header: the 1 GiB body is never sent.
    assert_closed_after(
        &s,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1073741824\r\n",
        "invalid bulk length",
    );
    assert_closed_after(&s, b"*101\r\n", "invalid multibulk length");
    assert_closed_after(
        &s,
        b"*99999999999999999999999\r\n",
        "invalid multibulk length",
    );
    assert_closed_after(&s, &[b'A'; 2000], "too big inline request");
    assert_closed_after(&s, &[b'*'; 2000], "too big mbulk count string");
    // Three 1 MiB arguments exceed the 2 MiB query limit.
    let mib = vec![b'x'; 1 << 20];
    let req = resp(&[b"MSET", b"a", &mib, b"b", &mib]);
    assert_closed_after(&s, &req, "request exceeds the query buffer limit");
    // Within the limits all is well.
    let mut c = s.raw();
    c.send(&resp(&[b"SET", b"k", &mib]));
    c.expect(b"+OK\r\n");
}

/// Limits as large as a usize holds (`--max-bulk-len 18446744073709551615`, "no limit")
/// serve requests: compared as i64 they wrapped to -1 and every multibulk request got
/// `ERR Protocol error: invalid bulk length`.
#[test]
fn limits_up_to_usize_max_serve_requests() {
    let s = TestServer::start(|c| {
        c.limits.max_bulk_len = usize::MAX;
        c.limits.max_multibulk_len = usize::MAX;
        c.limits.max_query_len = usize::MAX;
    });
    let mut c = s.raw();
    c.send(&resp(&[b"SET", b"k", b"v"]));
    c.expect(b"+OK\r\n");
    c.send(&resp(&[b"GET", b"k"]));
    c.expect(b"$1\r\nv\r\n");
}

#[test]
fn clients_over_the_limit_are_refused() {
    let s = TestServer::start(|c| c.max_clients = 3);
    let mut held: Vec<_> = (0..3).map(|_| s.raw()).collect();
    for c in held.iter_mut() {
        c.send(b"PING\r\n");
        c.expect(b"+PONG\r\n");
    }
    let mut extra = s.raw();
    assert_eq!(
        String::from_utf8_lossy(&extra.read_to_close()),
        "-ERR max number of clients reached\r\n"
    );
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = s.raw();
        c.send(b"PING\r\n");
        let mut buf = [0u8; 64];
        let n = c.0.read(&mut buf).unwrap_or(0);
        if &buf[..n] == b"+PONG\r\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "slot not freed: {:?}",
            String::from_utf8_lossy(&buf[..n])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_clients_are_closed_after_the_timeout() {
    let s = TestServer::start(|c| c.idle_timeout = Some(Duration::from_millis(300)));
    let mut c = s.raw();
    c.send(b"PING\r\n");
    c.expect(b"+PONG\r\n");
    let start = Instant::now();
    // `read_to_close` fails if the server has not closed within the socket's read timeout.
    assert!(c.read_to_close().is_empty());
    // Only a lower bound: a slow machine makes the close later, never earlier.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed early: {waited:?}"
    );
}

#[test]
fn a_client_reading_a_large_reply_slowly_is_not_idle() {
    // The idle timeout once covered the whole reply's write: a client that kept reading, but
    // took longer than the timeout for all of it, was cut off midway.
    // Reading 256 KiB every 20 ms frees the socket's buffer far faster than the timeout
    // (the kernel wakes the writer once about a third of it is free), and 16 MiB take
    // about 1.3 s.
    let s = TestServer::start(|c| c.idle_timeout = Some(Duration::from_millis(300)));
    let value = vec![b'v'; 16 << 20];
    let mut c = s.raw();
    c.send(&resp(&[b"SET", b"big", &value]));
    c.expect(b"+OK\r\n");
    c.send(&resp(&[b"GET", b"big"]));
    let started = Instant::now();
    let mut reply = Vec::new();
    let mut chunk = vec![0u8; 256 << 10];
    while reply.len() < value.len() + 13 {
        std::thread::sleep(Duration::from_millis(20));
        match c.0.read(&mut chunk) {
            Ok(0) => break,
            Err(e) => panic!("read failed after {} bytes: {e}", reply.len()),
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
        }
    }
    assert!(
        started.elapsed() > Duration::from_millis(600),
        "the reply came faster than the timeout: this test checks nothing"
    );
    assert_eq!(reply.len(), value.len() + 13, "the reply was cut off");
    assert!(reply.starts_with(b"$16777216\r\nvvv") && reply.ends_with(b"v\r\n"));
}

#[test]
fn hello_3_switches_replies_to_resp3() {
    let s = TestServer::start(|_| {});
    let mut c = s.raw();
    c.send(&resp(&[b"SET", b"a", b"1"]));
    c.expect(b"+OK\r\n");
    c.send(&resp(&[b"HELLO", b"3"]));
    c.expect(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n");
    c.expect(b"$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:");
    let mut rest = Vec::new();
    while !rest.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        let mut byte = [0u8; 1];
        c.0.read_exact(&mut byte).expect("HELLO reply");
        rest.push(byte[0]);
    }
    // Nil is `_`, maps are `%`; everything else as in RESP2.
    c.send(&resp(&[b"MGET", b"a", b"missing"]));
    c.expect(b"*2\r\n$1\r\n1\r\n_\r\n");
    c.send(&resp(&[b"CONFIG", b"GET", b"save"]));
    c.expect(b"%1\r\n$4\r\nsave\r\n$0\r\n\r\n");
    c.send(&resp(&[b"HELLO", b"2"]));
    c.expect(b"*14\r\n");
    let mut c2 = s.raw();
    c2.send(&resp(&[b"GET", b"missing"]));
    c2.expect(b"$-1\r\n");
}
