//! Commands whose standard output is a pipe nobody reads any more (`wisckey get … | head -c
//! 10`): Rust ignores SIGPIPE, so every write fails with EPIPE. The reader has what it
//! wanted, so each command ends quietly with status 0 (never a panic, status 101), except
//! that `check` still says "damaged" with status 2.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use wisckey::{Db, Options};

/// The write end of a pipe whose read end is already closed: the only reader, a `true`
/// process, has exited. Deterministic, unlike dropping our end while the command may
/// already have written into the pipe's buffer.
fn closed_pipe() -> Stdio {
    let mut reader = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("run true");
    let write_end = reader.stdin.take().expect("piped stdin");
    reader.wait().expect("true exits");
    Stdio::from(write_end)
}

fn into_closed_pipe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(args)
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("run wisckey")
}

fn create(dir: &Path) {
    let db = Db::open(dir, Options::default()).expect("create");
    // Larger than any pipe buffer: no single write of it can succeed.
    db.put(b"big", vec![b'x'; 2 << 20]).expect("put");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("value-{i}"))
            .expect("put");
    }
    db.close().expect("close");
}

#[test]
fn a_reader_that_stops_reading_ends_each_command_quietly() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let path = dir.to_str().expect("utf-8 path");
    for args in [
        vec!["get", "--db", path, "big"],
        vec!["get", "--db", path, "--hex", "626967"],
        vec!["stats", "--db", path],
        vec!["stats", "--db", path, "--json"],
        vec!["check", "--db", path],
        vec!["scan", "--db", path],
        vec!["dump", "--db", path],
        vec!["dump", "--db", path, "--format", "jsonl"],
    ] {
        let out = into_closed_pipe(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

#[test]
fn check_into_a_closed_pipe_still_exits_2_on_damage() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let segment = dir.join("000001.vlog");
    let mut bytes = std::fs::read(&segment).expect("read segment");
    // Inside the big value, which nothing overwrote: a damaged live value.
    bytes[1 << 20] ^= 0xff;
    std::fs::write(&segment, &bytes).expect("damage");
    let path = dir.to_str().expect("utf-8 path");
    let out = into_closed_pipe(&["check", "--db", path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Defect (review): with stderr a pipe nobody reads, the closing "dumped N entries" note
/// (and any error line) panicked: status 101 after a dump that had finished.
#[test]
fn a_closed_stderr_changes_no_exit_status() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("db");
    create(&db);
    let db_arg = db.to_str().expect("utf-8 path");
    let out_file = dir.path().join("dump");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wisckey"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(closed_pipe())
            .status()
            .expect("run wisckey")
    };
    let out_arg = out_file.to_str().expect("utf-8 path");
    assert_eq!(
        run(&["dump", "--db", db_arg, "--out", out_arg]).code(),
        Some(0)
    );
    assert!(std::fs::metadata(&out_file).expect("dump written").len() > 2 << 20);
    assert_eq!(run(&["get", "--db", db_arg, "no-such-key"]).code(), Some(1));
}
