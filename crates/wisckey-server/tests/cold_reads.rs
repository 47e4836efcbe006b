//! Pipelined reads of values that are on the disk, not in the page cache: the batches run
//! slow, are counted as such (INFO's `slow_read_batches`) and send the reads to the
//! blocking pool, and every reply is still the right one, in order.
#![cfg(target_os = "linux")]

mod common;
#[path = "../src/page_cache_test_support.rs"]
mod page_cache;

use common::{resp, TestServer, BOTH_WAYS};
use wisckey_server::AppendFsync;

const KEYS: usize = 512;
const VALUE_LEN: usize = 16 << 10;
/// GETs per pipelined batch: within what a multi-threaded server runs on the connection's
/// task (32 keys), over the 4 a single event loop keeps, and 512 KiB of replies (under
/// the 1 MiB that counts as slow without a disk read).
const BATCH: usize = 32;

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value {i:06} ").into_bytes();
    v.resize(VALUE_LEN, b'a' + (i % 26) as u8);
    v
}

/// Drops the clean cached pages of every file of the database (they were synced), so the
/// next reads of them go to the disk.
fn evict_page_cache(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).expect("list the database") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            page_cache::evict(&std::fs::File::open(&path).expect("open a database file"));
        }
    }
}

fn info_stat(server: &TestServer, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut server.client())
        .expect("INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("INFO stats has no {name}: {info}"))
        .trim()
        .parse()
        .expect("a count")
}

#[test]
fn pipelined_reads_of_evicted_values_go_to_the_pool_and_answer_in_order() {
    for threads in BOTH_WAYS {
        // Under the build directory, not the system temp dir (often a tmpfs).
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        if page_cache::in_memory_file_system(dir.path()) {
            eprintln!(
                "skipped: {} is on a file system in memory",
                dir.path().display()
            );
            return;
        }
        // Synced writes: only clean pages can be dropped from the page cache.
        let server = TestServer::start_in(dir, |c| {
            c.threads = threads;
            c.appendfsync = AppendFsync::Always;
        });
        let mut writer = server.raw();
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(64) {
            let mut request = Vec::new();
            for &i in chunk {
                request.extend(resp(&[b"SET", format!("key:{i:06}").as_bytes(), &value(i)]));
            }
            writer.send(&request);
            for _ in chunk {
                writer.expect(b"+OK\r\n");
            }
        }
        evict_page_cache(server.dir.path());
        assert_eq!(
            info_stat(&server, "slow_read_batches"),
            0,
            "nothing read yet"
        );

        // Two connections take turns, so on one event loop the second one's batches meet
        // the reader thread while it hands batches to the pool after the first one's.
        let mut conns = [server.raw(), server.raw()];
        for (round, keys) in (0..KEYS).collect::<Vec<_>>().chunks(BATCH).enumerate() {
            let conn = &mut conns[round % 2];
            let mut request = Vec::new();
            for &i in keys {
                request.extend(resp(&[b"GET", format!("key:{i:06}").as_bytes()]));
            }
            conn.send(&request);
            for &i in keys {
                let mut reply = format!("${VALUE_LEN}\r\n").into_bytes();
                reply.extend(value(i));
                reply.extend(b"\r\n");
                conn.expect(&reply);
            }
        }
        let slow = info_stat(&server, "slow_read_batches");
        eprintln!(
            "threads {threads}: {slow} of {} batches ran slow",
            KEYS / BATCH
        );
        assert!(
            slow > 0,
            "{} batches of {BATCH} GETs of evicted values, none counted as slow (threads {threads})",
            KEYS / BATCH
        );
        server.stop();
    }
}
