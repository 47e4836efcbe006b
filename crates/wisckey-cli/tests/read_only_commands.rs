//! The read commands (`get`, `scan`, `stats`, `check`, `dump`) open the database
//! read-only: they change no file in it (names, lengths, mtimes, bytes), they run while
//! another read-only handle holds it, and `checkpoint` makes a copy that opens on its own
//! without changing the database it copies.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::SystemTime;

use wisckey::{Db, Options};

fn wisckey(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(args)
        .output()
        .expect("run wisckey")
}

fn ok(args: &[&str]) -> String {
    let out = wisckey(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn files(dir: &Path) -> BTreeMap<String, (u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let meta = entry.metadata().expect("metadata");
        if meta.is_file() {
            let bytes = std::fs::read(entry.path()).expect("read");
            out.insert(
                entry.file_name().to_string_lossy().into_owned(),
                (meta.len(), meta.modified().expect("mtime"), bytes),
            );
        }
    }
    out
}

fn create(dir: &Path) {
    let db = Db::open(dir, Options::default()).expect("create");
    for i in 0..300u32 {
        db.put(
            format!("k{i:04}"),
            vec![b'a' + (i % 26) as u8; 100 + i as usize * 10],
        )
        .expect("put");
    }
    db.flush().expect("flush");
    for i in 0..300u32 {
        if i % 3 == 0 {
            db.put(format!("k{i:04}"), format!("new{i}"))
                .expect("overwrite");
        }
    }
    db.close().expect("close");
}

#[test]
fn read_commands_change_nothing_and_share_the_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let path = dir.to_str().expect("utf-8 path");
    let before = files(&dir);
    // A read-only handle in this process: the commands' shared locks coexist with it.
    let reader = Db::open_read_only(&dir, Options::default()).expect("open read-only");

    assert_eq!(ok(&["get", "--db", path, "k0003"]), "new3\n");
    assert_eq!(
        ok(&["scan", "--db", path, "--keys-only"]).lines().count(),
        300
    );
    assert!(
        ok(&["scan", "--db", path, "--prefix", "k000", "--limit", "2"])
            .starts_with("k0000\tnew0\n")
    );
    let stats = ok(&["stats", "--db", path]);
    assert!(
        stats.contains("level") && stats.contains("tables"),
        "{stats}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", "--db", path, "--json"])).expect("json");
    assert!(
        json["level_bytes"].as_array().is_some_and(|l| l.len() == 7),
        "{json}"
    );
    assert!(ok(&["check", "--db", path]).contains("no problems found"));
    let dump = temp.path().join("all.dump");
    ok(&["dump", "--db", path, "--out", dump.to_str().expect("utf-8")]);
    assert!(std::fs::metadata(&dump).expect("dump written").len() > 0);
    // Writes are refused while the read-only handle holds it.
    let out = wisckey(&["put", "--db", path, "k", "v"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("locked"));
    drop(reader);

    let after = files(&dir);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, (len, mtime, bytes)) in &before {
        let (len2, mtime2, bytes2) = &after[name];
        assert_eq!((len, mtime), (len2, mtime2), "{name} changed");
        assert!(bytes == bytes2, "{name}: bytes changed");
    }
}

#[test]
fn stats_show_table_bytes_per_level() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let path = dir.to_str().expect("utf-8 path");
    let stats = ok(&["stats", "--db", path]);
    let level0 = stats
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap_or_else(|| panic!("no level 0 row: {stats}"));
    let fields: Vec<&str> = level0.split_whitespace().collect();
    assert_eq!(fields.len(), 4, "{level0}"); // level, tables, bytes, unit
    assert!(fields[1].parse::<u32>().expect("tables") >= 1, "{level0}");
    assert_eq!(fields[3], "MiB", "{level0}");
}

#[test]
fn checkpoint_copies_a_database_that_opens_on_its_own() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let path = dir.to_str().expect("utf-8 path");
    let copy = temp.path().join("backup");
    let before = files(&dir);
    let said = ok(&[
        "checkpoint",
        "--db",
        path,
        "--to",
        copy.to_str().expect("utf-8"),
    ]);
    assert!(said.contains("copied") && said.contains("backup"), "{said}");
    assert!(
        files(&dir) == before,
        "the checkpoint wrote to the database it copied"
    );
    // The original moves on; the copy keeps what was there.
    ok(&["put", "--db", path, "k0001", "changed"]);
    let copy_path = copy.to_str().expect("utf-8");
    assert_eq!(ok(&["get", "--db", copy_path, "k0000"]), "new0\n");
    assert_eq!(
        ok(&["get", "--db", copy_path, "k0001"]).trim_end().len(),
        110
    );
    assert!(ok(&["check", "--db", copy_path]).contains("no problems found"));
    // A target that exists is refused with one line, and left alone.
    let out = wisckey(&["checkpoint", "--db", path, "--to", copy_path]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("already exists"), "{stderr}");
}

#[test]
fn old_flag_spellings_still_work() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir);
    let path = dir.to_str().expect("utf-8 path");
    ok(&[
        "gc",
        "--db",
        path,
        "--min-dead-fraction",
        "0.5",
        "--no-compact",
    ]);
    ok(&[
        "gc",
        "--db",
        path,
        "--min_dead_fraction",
        "0.5",
        "--no_compact",
    ]);
}
