//! `wisckey-bench bench` on a directory that already holds a database: refused unless told
//! what to do with it; nothing destroyed by default.

use std::process::Command;

use wisckey::{Db, Options};

fn wisckey(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_wisckey-bench"))
        .args(args)
        .output()
        .expect("run wisckey-bench")
}

#[test]
fn bench_refuses_to_delete_an_existing_database_unless_told() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    {
        let db = Db::open(&dir, Options::default()).expect("open");
        db.put(b"precious", b"data").expect("put");
        db.close().expect("close");
    }
    let path = dir.to_str().expect("utf-8 path");
    let before: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let small = ["--num=200", "--value_size=100", "--quiet"];
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--db", path, "--benchmarks=fillrandom,readrandom"];
        args.extend_from_slice(&small);
        args.extend_from_slice(extra);
        wisckey(&args)
    };
    let out = run(&[]);
    assert!(
        !out.status.success(),
        "bench must refuse an existing database"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--destroy_existing_db") && err.contains("Nothing was changed"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let after: Vec<_> = std::fs::read_dir(&dir)
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after, "a refused bench changes nothing");
    let db = Db::open(&dir, Options::default()).expect("open");
    assert_eq!(db.get(b"precious").expect("get"), Some(b"data".to_vec()));
    db.close().expect("close");

    // Told to use it: the fill is skipped and the data stays.
    let out = run(&["--use_existing_db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = Db::open(&dir, Options::default()).expect("open");
    assert_eq!(db.get(b"precious").expect("get"), Some(b"data".to_vec()));
    let keys = db.keys::<&[u8], _>(..).expect("keys").count();
    assert_eq!(
        keys, 1,
        "the fill was skipped: only the data before it is there"
    );
    db.close().expect("close");

    // Told to destroy it: it goes.
    let out = run(&["--destroy_existing_db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = Db::open(&dir, Options::default()).expect("open");
    assert_eq!(db.get(b"precious").expect("get"), None);
}
