//! Real-process crash test: a child process writes with `sync = true` and prints each key
//! once its write is acknowledged; the parent kills it with SIGKILL at a random moment,
//! reopens the database and checks that every acknowledged write is there, that the keys
//! form a prefix of the written order (no holes), and that values are intact.
//! A second variant uses non-sync writes with `write_through_to_os`, which must also survive
//! a process kill (the bytes reached the OS before the acknowledgement). A third uses plain
//! buffered writes: a kill may lose a suffix of them, at most one value-log buffer's worth,
//! and never leaves a hole. A fourth runs value-log GC in a loop in the child while it
//! writes through and rewrites earlier keys (garbage), so kills land inside relocations,
//! syncs, manifest edits and segment deletions. Three more run the write-through, the
//! buffered and the GC variants with the value log written `O_DIRECT` (`vlog_direct_writes`),
//! whose pipelined write-outs may hold up to two buffers of buffered writes in memory.
//!
//! CI runs a few dozen cycles with a fixed seed. Long variant:
//! `WISCKEY_KILL_CYCLES=500 cargo test --release --test kill -- --nocapture`.

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::{Db, Options, WriteOptions};

const CHILD_DIR_ENV: &str = "WISCKEY_KILL_CHILD_DIR";
const CHILD_MODE_ENV: &str = "WISCKEY_KILL_CHILD_MODE";

/// Key `i`'s value at `version`: 0 is its first write (by write `i`); in the GC modes write
/// `2i` rewrites it at version 1 and write `2i + 1` at version 2 (garbage for GC, and
/// distinct, so an older version brought back by a relocation is seen). The version comes
/// first: a 10-byte value keeps it whatever `i`'s length.
fn value_for(i: u64, version: u64) -> Vec<u8> {
    let len = [10usize, 100, 700, 5000][(i % 4) as usize];
    let mut v = format!("v{version}-value-{i}-").into_bytes();
    v.resize(len, (i % 251) as u8);
    v
}

/// Whether `got` is one of key `i`'s values (any version).
fn is_a_value_of(got: &[u8], i: u64) -> bool {
    (0..=2).any(|version| got == value_for(i, version))
}

/// The versions key `j` may hold once writes `0..end` are the ones whose first put is
/// there, this cycle's child having started at write `next`. A write's rewrite is surely
/// there when the next write's first put is, in the same process (it follows the rewrite
/// in the log); the rewrites of write `end - 1` (killed before it, maybe) and of write
/// `next - 1` (the previous cycle's last, maybe killed before it, and never redone) may be
/// missing. The key holds the newest version among the rewrites there.
fn versions_after(j: u64, next: u64, end: u64, with_gc: bool) -> Vec<u64> {
    if !with_gc {
        return vec![0];
    }
    let rewrites = [(2 * j, 1), (2 * j + 1, 2)];
    let uncertain = |by: u64| by + 1 == end || by + 1 == next;
    let surely = (rewrites.iter())
        .filter(|&&(by, _)| by + 1 < end && !uncertain(by))
        .map(|&(_, version)| version)
        .max()
        .unwrap_or(0);
    let mut allowed = vec![surely];
    allowed.extend(
        (rewrites.iter())
            .filter(|&&(by, version)| by < end && uncertain(by) && version > surely)
            .map(|&(_, version)| version),
    );
    allowed
}

fn child_options() -> Options {
    Options {
        memtable_size: 256 << 10,
        vlog_segment_size: 1 << 20,
        ..Options::default()
    }
}

/// The child's body: runs only when the parent re-executes this test binary.
#[test]
#[ignore = "the child's body: its parent test runs it (--ignored)"]
fn kill_child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return; // Not a child: nothing to do.
    };
    let mode = std::env::var(CHILD_MODE_ENV).unwrap_or_default();
    if mode == "hold" {
        // Only hold the database open (for the cross-process lock test) until killed.
        let _db = Db::open(Path::new(&dir), child_options()).expect("child open");
        println!("READY");
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let with_gc = with_gc_mode(&mode);
    let db = Db::open(
        Path::new(&dir),
        Options {
            write_through_to_os: mode.ends_with("write_through") || with_gc,
            vlog_direct_writes: mode.starts_with("direct_"),
            ..child_options()
        },
    )
    .expect("child open");
    let db = std::sync::Arc::new(db);
    if with_gc {
        // GC in a loop while the writer runs (the kill lands in either).
        let db = std::sync::Arc::clone(&db);
        std::thread::spawn(move || {
            for round in 0u64.. {
                let options = wisckey::GcOptions {
                    compact_first: round % 4 == 0,
                    ..wisckey::GcOptions::default()
                };
                let _ = db.gc(&options);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
    }
    let start: u64 = std::fs::read_to_string(Path::new(&dir).join("next"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let opts = WriteOptions {
        sync: mode == "sync",
    };
    writeln!(out, "READY").expect("child stdout");
    out.flush().expect("child flush");
    for i in start.. {
        db.put_opt(format!("k{i:08}"), value_for(i, 0), &opts)
            .expect("child put");
        if with_gc {
            // Garbage for GC: an earlier key written again, at its next version.
            let again = i / 2;
            db.put_opt(format!("k{again:08}"), value_for(again, 1 + i % 2), &opts)
                .expect("child rewrite");
        }
        writeln!(out, "ACK {i}").expect("child stdout");
        out.flush().expect("child flush");
    }
}

fn with_gc_mode(mode: &str) -> bool {
    mode.ends_with("gc")
}

/// Re-executes this test binary as a child running `kill_child_writer` in `mode`.
fn spawn_child(dir: &Path, mode: &str) -> std::process::Child {
    Command::new(std::env::current_exe().expect("current exe"))
        .args([
            "--ignored",
            "--exact",
            "kill_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_MODE_ENV, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// Env var `name` as a number, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_cycles(mode: &str, cycles: u64, seed: u64) {
    eprintln!("kill test mode = {mode}, seed = {seed}, cycles = {cycles}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let mut next = 0u64;
    for cycle in 0..cycles {
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut child = spawn_child(&dir, mode);
        let mut stderr = child.stderr.take().expect("child stderr");
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let stdout = child.stdout.take().expect("child stdout");
        let kill_after = Duration::from_millis(rng.gen_range(5..120));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            // The test harness prints its own lines too; only ours carry a tag.
            let mut lines = BufReader::new(stdout).lines().map_while(|l| l.ok());
            let ready = lines.any(|l| l.ends_with("READY"));
            let _ = ready_tx.send(ready);
            for line in lines {
                if let Some(i) = line
                    .strip_prefix("ACK ")
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    acked.push(i);
                }
            }
            acked
        });
        // The kill lands at a random moment after the child opened the database.
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or(false);
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr_reader.join().unwrap_or_default();
            panic!("cycle {cycle}: child did not open the database:\n{stderr}");
        }
        let started = Instant::now();
        std::thread::sleep(kill_after);
        child.kill().expect("SIGKILL child");
        let _ = child.wait();
        let acked = reader.join().expect("reader thread");
        let _ = stderr_reader.join();
        let last_acked = acked.last().copied();

        let db = Db::open(&dir, child_options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen after kill failed: {e}"));
        // Every acknowledged key is present with its value — except, in buffered mode, a
        // suffix of writes that were still in the value-log buffer (at most its size).
        let buffered = mode.ends_with("buffered");
        let mut lost_bytes = 0usize;
        for &i in &acked {
            let got = db.get(format!("k{i:08}")).expect("get");
            if got.is_none() && buffered {
                lost_bytes += 9 + value_for(i, 0).len() + 22;
                continue;
            }
            // Which version is checked below, once the run of writes that are there is known.
            assert!(
                got.as_deref().is_some_and(|v| is_a_value_of(v, i)),
                "cycle {cycle} ({mode}): acknowledged write {i} lost (killed after {:?})",
                started.elapsed()
            );
        }
        // Direct writes: one buffer in flight on the write-out thread, one being filled.
        let buffers = if mode.starts_with("direct_") { 2 } else { 1 };
        assert!(
            lost_bytes <= buffers * child_options().vlog_buffer_size + 5031,
            "cycle {cycle}: lost {lost_bytes} bytes of acknowledged writes, more than \
             {buffers} buffer(s)"
        );
        let last_acked = if buffered {
            acked
                .iter()
                .copied()
                .take_while(|i| db.get(format!("k{i:08}")).ok().flatten().is_some())
                .last()
        } else {
            last_acked
        };
        // No holes: the keys present from `next` on are a contiguous run.
        let mut end = last_acked.map_or(next, |l| l + 1);
        while let Some(got) = db.get(format!("k{end:08}")).expect("get") {
            assert!(
                is_a_value_of(&got, end),
                "cycle {cycle}: unacknowledged survivor has a wrong value"
            );
            end += 1;
        }
        for i in next..end {
            assert!(
                db.get(format!("k{i:08}")).expect("get").is_some(),
                "cycle {cycle}: hole at {i} below {end}"
            );
        }
        // Every key a write of this cycle wrote (its own, or the earlier one it rewrote)
        // holds its newest version: none lost, none older brought back (by a relocation).
        let with_gc = with_gc_mode(mode);
        // This cycle's writes `next..end` wrote keys `next..end` and rewrote `next/2..=end/2`.
        let written = |j: u64| j >= next || (with_gc && j <= end / 2);
        for j in (next / 2..end).filter(|&j| written(j)) {
            let got = db.get(format!("k{j:08}")).expect("get");
            let allowed = versions_after(j, next, end, with_gc);
            assert!(
                (allowed.iter())
                    .any(|&version| got.as_deref() == Some(value_for(j, version).as_slice())),
                "cycle {cycle} ({mode}): key {j} holds {:?}, not one of versions {allowed:?}; \
                 writes {next}..{end} of this cycle are there",
                got.as_deref().map(String::from_utf8_lossy)
            );
        }
        // Nothing beyond the run: a lost write (buffered mode) takes every later one with
        // it, so no key above the first missing one survives.
        let beyond: Vec<String> = (db.keys(format!("k{end:08}")..).expect("keys"))
            .map(|k| String::from_utf8_lossy(&k.expect("key")).into_owned())
            .take(3)
            .collect();
        assert!(
            beyond.is_empty(),
            "cycle {cycle} ({mode}): keys survive beyond the hole at {end}: {beyond:?}"
        );
        db.close().expect("close");
        next = end;
        std::fs::write(dir.join("next"), next.to_string()).expect("write next");
    }
    assert!(next > 0, "the child never acknowledged a write");
    eprintln!("{mode}: {next} writes over {cycles} cycles");
    if with_gc_mode(mode) {
        // GC really ran: segment numbers below the newest are missing (collected).
        let mut segments: Vec<u64> = (std::fs::read_dir(&dir).expect("ls").flatten())
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".vlog")?.parse().ok())
            .collect();
        segments.sort_unstable();
        let newest = segments.last().copied().unwrap_or(0);
        let collected = newest as usize - segments.len();
        eprintln!("gc: {collected} of {newest} segments collected");
        assert!(collected > 0, "GC never collected a segment: {segments:?}");
    }
}

#[test]
fn sigkill_never_loses_an_acknowledged_sync_write() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 24);
    run_cycles("sync", cycles, 4242);
}

#[test]
fn sigkill_loses_at_most_the_buffer_of_buffered_writes() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("buffered", cycles, 7);
}

#[test]
fn sigkill_never_loses_a_write_through_write() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("write_through", cycles, 99);
}

/// With GC looping in the child (and the writer rewriting earlier keys, so there is
/// garbage), a kill at any moment of a relocation, sync, manifest edit or deletion loses no
/// acknowledged write-through write and leaves no hole.
#[test]
fn sigkill_with_gc_running_loses_no_write_through_write() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("gc", cycles, 2026);
}

#[test]
fn sigkill_never_loses_a_write_through_write_with_direct_writes() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("direct_write_through", cycles, 515);
}

#[test]
fn sigkill_loses_at_most_two_buffers_of_buffered_writes_with_direct_writes() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("direct_buffered", cycles, 616);
}

/// The GC variant with the value log written `O_DIRECT`: relocations go through the
/// pipelined write-outs, and roll-overs cut the finished segments' padding.
#[test]
fn sigkill_with_gc_running_loses_no_write_through_write_with_direct_writes() {
    let cycles = env_or("WISCKEY_KILL_CYCLES", 12);
    run_cycles("direct_gc", cycles, 717);
}

#[test]
fn a_second_process_cannot_open_an_open_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let mut child = spawn_child(&dir, "hold");
    let stdout = child.stdout.take().expect("child stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(|l| l.ok())
        .any(|l| l.ends_with("READY"));
    assert!(ready, "child did not open the database");
    match Db::open(&dir, child_options()) {
        Err(wisckey::Error::Locked(msg)) => assert!(msg.contains("LOCK"), "{msg}"),
        other => panic!("expected Locked while another process holds it, got {other:?}"),
    }
    child.kill().expect("kill child");
    let _ = child.wait();
    Db::open(&dir, child_options()).expect("open once the other process is gone");
}
