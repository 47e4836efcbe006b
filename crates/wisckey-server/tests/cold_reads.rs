//! Pipelined reads of values that are on the disk, not in the page cache: the batches run
//! slow, are counted as such (INFO's `slow_read_batches`) and send the reads to the
//! blocking pool, and every reply is still the right one, in order. GETs read their values
//! on the server's thread; MGET's values are read by the engine's reader threads, which the
//! server's per-thread disk count cannot see.
#![cfg(target_os = "linux")]

mod common;
#[path = "../src/page_cache_test_support.rs"]
mod page_cache;

use common::{resp, TestServer, BOTH_WAYS};
use wisckey_server::AppendFsync;

/// Keys 0..KEYS/2 are read by GETs, the others by MGETs: each value is read once, so none
/// comes from the engine's value cache.
const KEYS: usize = 1024;
const VALUE_LEN: usize = 16 << 10;
/// Keys per pipelined batch: within what a multi-threaded server runs on the connection's
/// task (32 keys), over the 4 a single event loop keeps, and 512 KiB of replies (under
/// the 1 MiB that counts as slow without a disk read).
const BATCH: usize = 32;
/// Keys per MGET: a batch of MGETs reads [`BATCH`] keys, two at a time in parallel, so it
/// waits on the disk as long as a batch of GETs half its size.
const MGET_KEYS: usize = 2;

/// Keys `from..from + count` in a scattered order (a stride coprime to `count`), so the
/// values a batch reads are not neighbours in the log: each is a read of its own, which
/// the kernel's read-ahead of the previous one has not brought in.
fn scattered(from: usize, count: usize) -> Vec<usize> {
    (0..count).map(|i| from + (i * 97) % count).collect()
}

fn key(i: usize) -> Vec<u8> {
    format!("key:{i:06}").into_bytes()
}

/// Reads `keys` in pipelined batches of [`BATCH`] keys, one command per `per_command` keys
/// (1: GET, more: MGET), and checks every reply, in order. Two new connections take turns,
/// so on one event loop the second one's batches meet the reader thread while it hands
/// batches to the pool after the first one's.
fn read_in_batches(server: &TestServer, keys: &[usize], per_command: usize) {
    let command: &[u8] = if per_command == 1 { b"GET" } else { b"MGET" };
    let mut conns = [server.raw(), server.raw()];
    for (round, batch) in keys.chunks(BATCH).enumerate() {
        let conn = &mut conns[round % 2];
        let mut request = Vec::new();
        for keys in batch.chunks(per_command) {
            let names: Vec<Vec<u8>> = keys.iter().map(|&i| key(i)).collect();
            let mut args = vec![command];
            args.extend(names.iter().map(Vec::as_slice));
            request.extend(resp(&args));
        }
        conn.send(&request);
        for keys in batch.chunks(per_command) {
            if per_command > 1 {
                conn.expect(format!("*{}\r\n", keys.len()).as_bytes());
            }
            for &i in keys {
                let mut reply = format!("${VALUE_LEN}\r\n").into_bytes();
                reply.extend(value(i));
                reply.extend(b"\r\n");
                conn.expect(&reply);
            }
        }
    }
}

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
                request.extend(resp(&[b"SET", &key(i), &value(i)]));
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

        let batches = KEYS / 2 / BATCH;
        read_in_batches(&server, &scattered(0, KEYS / 2), 1);
        let slow_gets = info_stat(&server, "slow_read_batches");
        eprintln!("threads {threads}: {slow_gets} of {batches} GET batches ran slow");
        assert!(
            slow_gets > 0,
            "{batches} batches of {BATCH} GETs of evicted values, none counted as slow (threads {threads})"
        );

        // New connections (the old ones run on the pool, where batches are not timed),
        // after the reader thread's time on the pool has passed (100 ms).
        std::thread::sleep(std::time::Duration::from_millis(300));
        read_in_batches(&server, &scattered(KEYS / 2, KEYS / 2), MGET_KEYS);
        let slow_mgets = info_stat(&server, "slow_read_batches") - slow_gets;
        eprintln!("threads {threads}: {slow_mgets} of {batches} MGET batches ran slow");
        assert!(
            slow_mgets > 0,
            "{batches} batches of MGETs of {BATCH} evicted values, none counted as slow (threads {threads})"
        );
        server.stop();
    }
}
