//! A client that pipelines requests for far more reply bytes than it reads: the server
//! stops reading its requests once the unsent replies reach the output-buffer limit, so its
//! memory stays bounded, other clients are served meanwhile, and nothing is lost when the
//! slow client finally reads. (Its own test binary: it measures the process's RSS.)

mod common;

use std::io::Read;
use std::time::Duration;

use common::{resp, TestServer, BOTH_WAYS};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn slow_reader_does_not_grow_memory_without_bound() {
    // On one event loop that commits the writes itself, and on four workers.
    for threads in BOTH_WAYS {
        slow_reader_on(threads);
    }
}

fn slow_reader_on(threads: usize) {
    let s = TestServer::start(|c| {
        c.output_buffer_limit = 1 << 20;
        c.threads = threads;
    });
    let value = vec![b'v'; 1 << 20];
    let mut setter = s.raw();
    setter.send(&resp(&[b"SET", b"big", &value]));
    setter.expect(b"+OK\r\n");
    let before = rss_bytes();
    assert!(before > 0, "VmRSS unreadable: nothing to measure");

    // 600 GETs of 1 MiB: 600 MiB of replies requested, none read yet.
    let requests = 600;
    let mut slow = s.raw();
    let mut writer = slow.0.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let one = resp(&[b"GET", b"big"]);
        for _ in 0..requests {
            // Blocks once the server stops reading: that is the point.
            if std::io::Write::write_all(&mut writer, &one).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    let during = rss_bytes();
    let growth = during.saturating_sub(before);
    assert!(
        growth < 96 << 20,
        "RSS grew by {} MiB while a client left {} MiB of replies unread",
        growth >> 20,
        requests
    );
    // Others are served meanwhile, writes included.
    let mut other = s.raw();
    other.send(b"PING\r\n");
    other.expect(b"+PONG\r\n");
    other.send(&resp(&[b"SET", b"other", b"fine"]));
    other.expect(b"+OK\r\n");
    other.send(&resp(&[b"GET", b"other"]));
    other.expect(b"$4\r\nfine\r\n");

    // Finally read everything: every reply arrives, complete.
    let header = b"$1048576\r\n";
    let mut buf = vec![0u8; header.len() + value.len() + 2];
    for i in 0..requests {
        slow.0
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("reply {i}: {e}"));
        assert!(
            buf.starts_with(header) && buf.ends_with(b"\r\n"),
            "reply {i}"
        );
    }
    sender.join().expect("sender");
}
