//! The binary on databases in trouble: one held open by another process, one with a
//! damaged value record, one on a full disk. Each failure is one clear line on stderr and a
//! non-zero exit status, and nothing the database held before is lost.

use std::path::Path;

use wisckey::{Db, Options};

mod common;
#[path = "../../wisckey/tests/common/tmpfs.rs"]
mod tmpfs;

use common::{damage_value, wisckey};
use tmpfs::TmpfsMount;

/// The one line a failed command printed on stderr.
fn failure_line(args: &[&str]) -> String {
    let out = wisckey(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8(out.stderr).expect("utf-8 stderr");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: not one line: {stderr:?}");
    assert!(lines[0].starts_with("wisckey: "), "{stderr}");
    lines[0].to_string()
}

fn create(dir: &Path, keys: u32, value_len: usize) {
    let db = Db::open(dir, Options::default()).expect("create");
    for i in 0..keys {
        db.put(format!("k{i:05}"), value_of(i, value_len))
            .expect("put");
    }
    db.close().expect("close");
}

/// `wisckey load --create` of `input` in `format` into `db`.
fn load_create<'a>(db: &'a Path, format: &'a str, input: &'a Path) -> [&'a str; 8] {
    let (db, input) = (
        db.to_str().expect("utf-8 path"),
        input.to_str().expect("utf-8 path"),
    );
    [
        "load", "--db", db, "--create", "--format", format, "--in", input,
    ]
}

fn value_of(i: u32, len: usize) -> Vec<u8> {
    let mut v = format!("value-{i:05}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

#[test]
fn a_database_another_process_holds_is_one_line_naming_the_lock() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir, 10, 100);
    let path = dir.to_str().expect("utf-8 path");
    let holder = Db::open(&dir, Options::default()).expect("hold it open");
    let lock = dir.join("LOCK").display().to_string();
    for args in [
        vec!["get", "--db", path, "k00001"],
        vec!["put", "--db", path, "k", "v"],
        vec!["scan", "--db", path],
        vec!["stats", "--db", path],
        vec!["check", "--db", path],
        vec!["gc", "--db", path],
        vec!["dump", "--db", path],
        vec!["repair", "--db", path],
    ] {
        let line = failure_line(&args);
        assert!(
            line.contains("locked") && line.contains(&lock),
            "{args:?}: {line}"
        );
    }
    drop(holder);
    let out = wisckey(&["get", "--db", path, "k00001"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Walkthrough review: one damaged value stopped every dump, so nothing could be exported
/// from a database with one bad record (repair names such a key but cannot bring it back).
/// `--skip-damaged` dumps the rest, names what it left out, keeps the file and exits 2.
#[test]
fn dump_skip_damaged_keeps_everything_that_reads() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir, 50, 2000);
    damage_value(&dir, b"value-00007-");
    let path = dir.to_str().expect("utf-8 path");
    for format in ["native", "jsonl"] {
        let dump = temp.path().join(format!("salvage.{format}"));
        let dump_arg = dump.to_str().expect("utf-8 path");
        let out = wisckey(&[
            "dump",
            "--db",
            path,
            "--out",
            dump_arg,
            "--format",
            format,
            "--skip-damaged",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("left out key 'k00007'"), "{err}");
        assert!(
            err.contains("dumped 49 entries; left out 1 whose values do not verify"),
            "{err}"
        );
        // The kept dump loads, with every key but the damaged one.
        let copy = temp.path().join(format!("copy-{format}"));
        let out = wisckey(&load_create(&copy, format, &dump));
        assert!(out.status.success(), "{out:?}");
        let db = Db::open(&copy, Options::default()).expect("open the copy");
        for i in 0..50 {
            let got = db.get(format!("k{i:05}")).expect("get");
            let want = (i != 7).then(|| value_of(i, 2000));
            assert_eq!(got, want, "k{i:05}");
        }
        db.close().expect("close");
    }
    // To standard output as well: every entry but the damaged one, exit 2.
    let out = wisckey(&["dump", "--db", path, "--format", "jsonl", "--skip-damaged"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 49);
    // A sound database dumps as before: exit 0, nothing left out.
    let sound = temp.path().join("sound");
    create(&sound, 10, 100);
    let out = wisckey(&[
        "dump",
        "--db",
        sound.to_str().expect("utf-8 path"),
        "--format",
        "jsonl",
        "--skip-damaged",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 10);
}

#[test]
fn a_damaged_value_is_reported_with_its_file_and_offset() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir, 50, 2000);
    // Flip one byte inside the value of k00007 in the value log.
    let (segment, at) = damage_value(&dir, b"value-00007-");
    let path = dir.to_str().expect("utf-8 path");

    let line = failure_line(&["get", "--db", path, "k00007"]);
    let name = segment.display().to_string();
    assert!(
        line.contains("corruption") && line.contains(&name),
        "{line}"
    );
    let offset: u64 = line
        .split("at offset ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line}"));
    // The record that holds the flipped byte starts at most one record (2 KB) before it.
    assert!(
        offset <= at && at - offset < 2200,
        "offset {offset}, damage at {at}"
    );
    // Damage met on a read exits 2 for every command, also when a dump to a file wraps
    // the error in its own line (the partial file is removed).
    assert_eq!(
        wisckey(&["get", "--db", path, "k00007"]).status.code(),
        Some(2)
    );
    let dump = temp.path().join("all.dump");
    let dump = dump.to_str().expect("utf-8 path");
    let out = wisckey(&["dump", "--db", path, "--out", dump]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(!Path::new(dump).exists());
    // Other keys still read; check names the damage and exits with status 2.
    let out = wisckey(&["get", "--db", path, "k00008"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = wisckey(&["check", "--db", path]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("problem: {name} at offset {offset}")),
        "{said}"
    );
}

/// Fills the file system holding `path` (a file of zeros, written until ENOSPC).
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 64 << 10];
    while file.write_all(&chunk).is_ok() {}
    let _ = file.sync_all();
}

/// A dump that fails (here: its file's disk is full) removes its partial file, so it can
/// be run again once space is back (the partial file made the rerun refuse: dumps never
/// overwrite).
#[test]
fn a_failed_dump_removes_its_partial_file_and_can_be_run_again() {
    let Some(mount) = TmpfsMount::or_skip(
        24,
        "a_failed_dump_removes_its_partial_file_and_can_be_run_again",
    ) else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    // About 16 MiB of entries, on the ordinary disk.
    let source = temp.path().join("source");
    create(&source, 2000, 8192);
    let src = source.to_str().expect("utf-8");
    fill(&mount.path().join("filler"));
    let dump = mount.path().join("all.dump");
    let dump_path = dump.to_str().expect("utf-8");
    let line = failure_line(&["dump", "--db", src, "--out", dump_path]);
    assert!(line.to_lowercase().contains("no space left"), "{line}");
    assert!(!dump.exists(), "the failed dump left its partial file");
    std::fs::remove_file(mount.path().join("filler")).expect("free space");
    let out = wisckey(&["dump", "--db", src, "--out", dump_path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = temp.path().join("fresh");
    let out = wisckey(&[
        "load",
        "--db",
        fresh.to_str().expect("utf-8"),
        "--in",
        dump_path,
        "--create",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("loaded 2000 entries"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_full_disk_fails_the_load_with_one_line_and_loses_nothing() {
    let Some(mount) = TmpfsMount::or_skip(
        24,
        "a_full_disk_fails_the_load_with_one_line_and_loses_nothing",
    ) else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    // A 16 MiB dump, made from a database on the ordinary disk.
    let source = temp.path().join("source");
    create(&source, 2000, 8192);
    let dump = temp.path().join("all.dump");
    let out = wisckey(&[
        "dump",
        "--db",
        source.to_str().expect("utf-8"),
        "--out",
        dump.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = mount.path().join("db");
    let before: Vec<(String, Vec<u8>)> = (0..100u32)
        .map(|i| (format!("before{i:03}"), value_of(i, 1000)))
        .collect();
    {
        let db = Db::open(&dir, Options::default()).expect("create on tmpfs");
        for (k, v) in &before {
            db.put(k, v).expect("put");
        }
        db.close().expect("close");
    }
    fill(&mount.path().join("filler"));
    let path = dir.to_str().expect("utf-8 path");
    let dump_path = dump.to_str().expect("utf-8");
    let line = failure_line(&["load", "--db", path, "--merge", "--in", dump_path]);
    assert!(line.contains("no space left"), "{line}");
    let big = "x".repeat(100_000);
    let out = wisckey(&["put", "--db", path, "--sync", "big", &big]);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no space left"), "{stderr}");
    }

    // Still full: the read commands work (a read-only open needs no space), and the
    // database holds everything written before.
    let out = wisckey(&["get", "--db", path, "before042"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = wisckey(&["check", "--db", path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let db = Db::open_read_only(&dir, Options::default()).expect("read-only open, disk full");
    for (k, v) in &before {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{k}");
    }
    db.close().expect("close");
    // With space back, it opens for writing and takes writes again.
    std::fs::remove_file(mount.path().join("filler")).expect("free space");
    let db = Db::open(&dir, Options::default()).expect("open once space is back");
    for (k, v) in &before {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{k}");
    }
    db.put(b"after", b"space came back").expect("put");
    let report = db.check().expect("check");
    assert!(report.is_ok(), "{:?}", report.problems);
}

/// `load --create` opens its input before creating anything: a missing file leaves no
/// database behind. A bad record midway keeps the batches written before it (nothing is
/// ever deleted) and the one error line says how much of the dump they held.
#[test]
fn a_failed_load_creates_nothing_or_says_what_it_kept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let load_jsonl = |input: &Path| failure_line(&load_create(&db, "jsonl", input));
    let line = load_jsonl(&tmp.path().join("missing.jsonl"));
    assert!(line.contains("missing.jsonl"), "{line}");
    assert!(
        !db.exists(),
        "a load whose input is missing created {}",
        db.display()
    );

    let input = tmp.path().join("bad.jsonl");
    std::fs::write(
        &input,
        "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\"b\",\"value\":\"2\"}\nnot json\n",
    )
    .expect("write input");
    let line = load_jsonl(&input);
    assert!(line.contains("line 3"), "{line}");
    assert!(line.contains("the database this load created"), "{line}");
    // Entries go in by batches of many MiB: the two before the bad line were still in the
    // unwritten batch.
    assert!(line.contains("no entry of the dump was written"), "{line}");
    let reopened = Db::open(&db, Options::default()).expect("reopen");
    assert_eq!(reopened.get("a").expect("get"), None);
    reopened.close().expect("close");

    // A key over the engine's limit once made the batch refuse it and every entry after it
    // without a word, and the load said it loaded them all. (On the first line, it is
    // refused before the database is created: see the test below.)
    std::fs::remove_dir_all(&db).expect("remove db");
    let long_key = "k".repeat(wisckey::MAX_KEY_SIZE + 1);
    std::fs::write(
        &input,
        format!("{{\"key\":\"a\",\"value\":\"1\"}}\n{{\"key\":\"{long_key}\",\"value\":\"1\"}}\n"),
    )
    .expect("write input");
    let line = load_jsonl(&input);
    assert!(
        line.contains(&format!("line 2: a key of {} bytes", long_key.len())),
        "{line}"
    );
    assert!(line.contains("no entry of the dump was written"), "{line}");
}

/// Defect (review): a load that met a damaged entry misstated how far it got. Batches are
/// cut at 65,536 entries, so with entry 68,000 of 70,000 damaged, entries 65,536 to 67,999
/// were never written, yet the line said "nothing after it was loaded"; with --merge it
/// said the database "now holds 70000 keys", counting keys that were there before.
#[test]
fn a_load_that_fails_midway_says_which_entries_of_the_dump_were_written() {
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("source");
    let db = Db::open(&source, Options::default()).expect("create");
    let mut batch = wisckey::WriteBatch::new();
    for i in 0..70_000u32 {
        batch.put(format!("k{i:05}"), value_of(i, 16));
    }
    db.write(batch).expect("write");
    db.close().expect("close");
    let dump = temp.path().join("all.dump");
    let dump_arg = dump.to_str().expect("utf-8 path");
    let out = wisckey(&[
        "dump",
        "--db",
        source.to_str().expect("utf-8"),
        "--out",
        dump_arg,
    ]);
    assert!(out.status.success(), "{out:?}");
    // Entry 68000 is the key k68000: one byte of its value flipped (the key, its value
    // length, then the value).
    let mut bytes = std::fs::read(&dump).expect("read dump");
    let at = bytes
        .windows(6)
        .position(|w| w == b"k68000")
        .expect("the entry is in the dump");
    bytes[at + 6 + 1 + 3] ^= 0x01;
    std::fs::write(&dump, &bytes).expect("damage the dump");

    let said = "the first 65536 entries of the dump (through key 'k65535', entry 65535) were \
                written to";
    let not = "; entry 65536 and every entry after it were not";
    let created = temp.path().join("created");
    let line = failure_line(&load_create(&created, "native", &dump));
    assert!(
        line.starts_with("wisckey: entry 68000 of the dump fails its checksum; "),
        "{line}"
    );
    assert!(line.contains(said) && line.ends_with(not), "{line}");
    assert!(line.contains("the database this load created"), "{line}");
    assert!(!line.contains("nothing after it was loaded"), "{line}");
    let db = Db::open_read_only(&created, Options::default()).expect("open");
    assert_eq!(db.keys::<&[u8], _>(..).expect("keys").count(), 65_536);
    assert!(db.get("k65535").expect("get").is_some());
    assert_eq!(db.get("k65536").expect("get"), None);
    db.close().expect("close");

    // --merge into a database that held other keys: the line counts the dump's entries,
    // not the database's keys.
    let merged = temp.path().join("merged");
    let db = Db::open(&merged, Options::default()).expect("create");
    for i in 0..10 {
        db.put(format!("other{i}"), "kept").expect("put");
    }
    db.close().expect("close");
    let line = failure_line(&[
        "load",
        "--db",
        merged.to_str().expect("utf-8 path"),
        "--merge",
        "--in",
        dump_arg,
    ]);
    assert!(line.contains(said) && line.ends_with(not), "{line}");
    assert!(line.contains("to the database ("), "{line}");
    assert!(!line.contains("70000") && !line.contains("65546"), "{line}");
    let db = Db::open_read_only(&merged, Options::default()).expect("open");
    assert_eq!(db.keys::<&[u8], _>(..).expect("keys").count(), 65_536 + 10);
    db.close().expect("close");
}

/// Defect: `load --create` created the database before it read any of its input, so an
/// input that is unreadable or does not start as a dump failed the load and left a new,
/// empty database behind (which the next `load --create` then took for the target).
#[test]
fn a_load_whose_input_does_not_start_as_a_dump_creates_no_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let db_arg = db.to_str().expect("utf-8 path");
    let long_key = "k".repeat(wisckey::MAX_KEY_SIZE + 1);
    let cases: [(&str, &str, Vec<u8>, &str); 7] = [
        (
            "native",
            "empty.dump",
            Vec::new(),
            "shorter than its header",
        ),
        ("native", "text.dump", b"key\tvalue\n".to_vec(), "bad magic"),
        (
            "native",
            "cut.dump",
            b"WKDUMP\x00\x01\x01\x00".to_vec(),
            "entry 0's checksum",
        ),
        ("jsonl", "text.jsonl", b"key value\n".to_vec(), "line 1"),
        // No newline at all (as `/dev/zero`): refused at its first byte, not read whole.
        (
            "jsonl",
            "zeros.jsonl",
            vec![0u8; 8 << 20],
            "line 1: not a JSON object",
        ),
        (
            "jsonl",
            "novalue.jsonl",
            b"\n{\"key\":\"a\"}\n{\"key\":\"b\",\"value\":\"2\"}\n".to_vec(),
            "line 2: no \"value\"",
        ),
        (
            "jsonl",
            "longkey.jsonl",
            format!("{{\"key\":\"{long_key}\",\"value\":\"1\"}}\n").into_bytes(),
            "line 1: a key of",
        ),
    ];
    for (format, name, bytes, says) in cases {
        let input = tmp.path().join(name);
        std::fs::write(&input, bytes).expect("write input");
        let line = failure_line(&load_create(&db, format, &input));
        assert!(line.contains(says), "{name}: {line}");
        assert!(line.contains("nothing was loaded"), "{name}: {line}");
        assert!(!db.exists(), "{name}: the failed load created {db_arg}");
    }
    // A directory opens as a file but does not read as one.
    let dir = tmp.path().join("a-directory");
    std::fs::create_dir(&dir).expect("mkdir");
    let line = failure_line(&[
        "load",
        "--db",
        db_arg,
        "--create",
        "--in",
        dir.to_str().expect("utf-8 path"),
    ]);
    assert!(line.to_lowercase().contains("is a directory"), "{line}");
    assert!(!db.exists(), "a load of a directory created {db_arg}");
    // A dump of an empty database is a dump: it creates the empty database.
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write input");
    let out = wisckey(&load_create(&db, "jsonl", &empty));
    assert!(out.status.success(), "{out:?}");
    assert!(db.join("CURRENT").exists());
}

/// Defect: errors in JSON lines named no line where the line could not be read as text
/// (bytes that are not UTF-8) and named the entry, not the line, for a key or value over
/// the engine's limits (blank lines make the two differ).
#[test]
fn json_lines_load_errors_name_the_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let long_key = "k".repeat(wisckey::MAX_KEY_SIZE + 1);
    let good = "{\"key\":\"a\",\"value\":\"1\"}\n\n{\"key\":\"b\",\"value\":\"2\"}\n";
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "utf8",
            [good.as_bytes(), b"{\"key\":\"\xff\",\"value\":\"1\"}\n"].concat(),
            "line 4: ",
        ),
        (
            "long",
            format!("{good}\n{{\"key\":\"{long_key}\",\"value\":\"1\"}}\n").into_bytes(),
            "line 5: a key of",
        ),
        (
            "hex",
            format!("{good}{{\"key_hex\":\"zz\",\"value\":\"1\"}}\n").into_bytes(),
            "line 4: key_hex",
        ),
        (
            "array",
            format!("{good}\n\n[1, 2]\n").into_bytes(),
            "line 6: not a JSON object",
        ),
        // Walkthrough review: the text field silently won over the hex one.
        (
            "both",
            format!("{good}{{\"key\":\"a\",\"value\":\"1\",\"value_hex\":\"32\"}}\n").into_bytes(),
            "line 4: both \"value\" and \"value_hex\"",
        ),
    ];
    for (name, bytes, says) in cases {
        let input = tmp.path().join(format!("{name}.jsonl"));
        std::fs::write(&input, bytes).expect("write input");
        let db = tmp.path().join(name);
        let line = failure_line(&load_create(&db, "jsonl", &input));
        assert!(
            line.starts_with(&format!("wisckey: {says}")),
            "{name}: {line}"
        );
    }
}

/// Defect: bytes after a dump's end marker were ignored, so two dumps joined into one
/// input (`cat a.dump b.dump | wisckey load --merge`) loaded the first alone and reported
/// success.
#[test]
fn bytes_after_a_dumps_end_marker_fail_the_load() {
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("source");
    create(&source, 20, 100);
    let dump = temp.path().join("a.dump");
    let out = wisckey(&[
        "dump",
        "--db",
        source.to_str().expect("utf-8 path"),
        "--out",
        dump.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let once = std::fs::read(&dump).expect("read dump");
    let joined = temp.path().join("joined.dump");
    std::fs::write(&joined, [once.as_slice(), once.as_slice()].concat()).expect("write");
    let target = temp.path().join("target");
    let line = failure_line(&[
        "load",
        "--db",
        target.to_str().expect("utf-8 path"),
        "--create",
        "--in",
        joined.to_str().expect("utf-8 path"),
    ]);
    assert!(line.contains("end marker"), "{line}");
    // Defect (review): the line said "its 20 entries were loaded" while the batch being
    // filled was dropped and the database held none of them. What it says now is true.
    let db = Db::open(&target, Options::default()).expect("the load's database opens");
    let held = db.keys::<&[u8], _>(..).expect("keys").count();
    assert_eq!(held, 0, "the batch being filled was written");
    assert!(line.contains("no entry of the dump was written"), "{line}");
    assert!(!line.contains("were loaded"), "{line}");
}

/// Defect (review): `put`, `delete` and `load --merge` wrote raw entries into a database
/// `wisckey serve` created, which the server then misread (a GET answered a format error).
#[test]
fn raw_writes_into_a_server_database_are_refused_unless_asked_for() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("served");
    server_database(&path);
    let db_arg = path.to_str().expect("utf-8 path");
    let dump = dir.path().join("one.jsonl");
    std::fs::write(&dump, "{\"key\":\"dfoo\",\"value\":\"bar\"}\n").expect("dump file");
    let dump_arg = dump.to_str().expect("utf-8 path");
    let refused: [&[&str]; 3] = [
        &["put", "--db", db_arg, "dfoo", "bar"],
        &["delete", "--db", db_arg, "dfoo"],
        &[
            "load", "--db", db_arg, "--merge", "--format", "jsonl", "--in", dump_arg,
        ],
    ];
    for args in refused {
        let line = failure_line(args);
        assert!(line.contains("was created by `wisckey serve`"), "{line}");
        assert!(line.ends_with("nothing was written"), "{line}");
    }
    let db = Db::open(&path, Options::default()).expect("open");
    assert_eq!(db.get(b"dfoo").expect("get"), None, "nothing was written");
    db.close().expect("close");
    let out = wisckey(&["put", "--db", db_arg, "--raw-keyspace", "dfoo", "bar"]);
    assert!(out.status.success(), "{out:?}");
    let db = Db::open(&path, Options::default()).expect("open");
    assert_eq!(db.get(b"dfoo").expect("get"), Some(b"bar".to_vec()));
}

/// A database at `path` as `wisckey serve` marks one it created (its keyspace format key).
fn server_database(path: &Path) {
    let db = Db::open(path, Options::default()).expect("create");
    let version = wisckey_server::format::FORMAT_VERSION.to_string();
    db.put(wisckey_server::format::META_VERSION_KEY, version)
        .expect("the server's format key");
    db.close().expect("close");
}

/// Defect (walkthrough review): `get` of a key set through `wisckey serve` said only "not
/// found" (the server stores it behind a namespace byte), and `scan` showed the stored form
/// without a word, so the key looked lost.
#[test]
fn get_and_scan_on_a_server_database_say_how_its_keys_are_stored() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("served");
    server_database(&path);
    let db_arg = path.to_str().expect("utf-8 path");
    let line = failure_line(&["get", "--db", db_arg, "user:1"]);
    assert!(line.contains("key 'user:1' not found"), "{line}");
    assert!(line.contains("created by `wisckey serve`"), "{line}");
    let out = wisckey(&["scan", "--db", db_arg]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("created by `wisckey serve`"), "{err}");
    // A plain database gets neither note.
    let plain = dir.path().join("plain");
    Db::open(&plain, Options::default())
        .expect("create")
        .close()
        .expect("close");
    let plain_arg = plain.to_str().expect("utf-8 path");
    let line = failure_line(&["get", "--db", plain_arg, "user:1"]);
    assert!(!line.contains("wisckey serve"), "{line}");
    let out = wisckey(&["scan", "--db", plain_arg]);
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// Defect (review): only `check` exited 2 on damage; `get` on a database whose CURRENT is
/// gone exited 1, as for a key with no value, so `get … || default` took a damaged
/// database for a missing key.
#[test]
fn every_command_exits_2_on_damaged_files() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("db");
    create(&path, 10, 100);
    std::fs::remove_file(path.join("CURRENT")).expect("lose CURRENT");
    let db_arg = path.to_str().expect("utf-8 path");
    for args in [
        &["get", "--db", db_arg, "k00001"][..],
        &["scan", "--db", db_arg],
        &["stats", "--db", db_arg],
        &["check", "--db", db_arg],
        &["serve", "--db", db_arg, "--port", "0"],
    ] {
        let out = wisckey(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    // Not damage: a key with no value, a wrong path.
    std::fs::remove_dir_all(&path).expect("remove");
    create(&path, 10, 100);
    assert_eq!(
        wisckey(&["get", "--db", db_arg, "nope"]).status.code(),
        Some(1)
    );
    let missing = dir.path().join("missing");
    let missing = missing.to_str().expect("utf-8 path");
    assert_eq!(
        wisckey(&["get", "--db", missing, "k"]).status.code(),
        Some(1)
    );
}

/// `dump --out` inside the database directory is refused before anything is opened or
/// written (exit 64): the dump would be a file the database does not own, which `repair`
/// refuses to run beside. A malformed `--prefix` is a usage error too.
#[test]
fn a_dump_into_the_database_directory_is_refused_and_writes_nothing() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    create(&dir, 10, 100);
    let path = dir.to_str().expect("utf-8 path");
    let before: std::collections::BTreeSet<_> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    let sneaky = format!("{}/../db/all.dump", dir.join("lost").display());
    for target in [
        dir.join("all.dump").to_str().expect("utf-8").to_string(),
        dir.join("sub/all.dump")
            .to_str()
            .expect("utf-8")
            .to_string(),
        sneaky,
    ] {
        let out = wisckey(&["dump", "--db", path, "--out", &target]);
        assert_eq!(out.status.code(), Some(64), "{target}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("inside it"), "{target}: {err}");
    }
    let after: std::collections::BTreeSet<_> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(before, after, "the refused dumps changed the directory");
    let out = wisckey(&["dump", "--db", path, "--prefix", "bad\\q"]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    // Beside the database it works.
    let beside = temp.path().join("all.dump");
    let out = wisckey(&[
        "dump",
        "--db",
        path,
        "--out",
        beside.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// Defect (review): some arguments checked before the database is opened exited 1, not the
/// README's 64 (EX_USAGE): `serve`'s limits, thread count and an empty password file,
/// which the server's own check refused as a configuration error (`demo`'s are
/// `kv::demo_refuses_a_value_size_over_the_maximum_and_zero_keys`). None of them creates
/// anything.
#[test]
fn serve_arguments_refused_before_anything_is_opened_exit_64() {
    let temp = tempfile::tempdir().expect("tempdir");
    let fresh = temp.path().join("fresh");
    let db = fresh.to_str().expect("utf-8 path");
    let empty_password = temp.path().join("password");
    std::fs::write(&empty_password, "\n").expect("write");
    let password_file = empty_password.to_str().expect("utf-8 path");
    for args in [
        vec!["serve", "--db", db, "--port", "0", "--max-bulk-len", "0"],
        vec!["serve", "--db", db, "--port", "0", "--threads", "100000"],
        vec![
            "serve",
            "--db",
            db,
            "--port",
            "0",
            "--requirepass-file",
            password_file,
        ],
    ] {
        let out = wisckey(&args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        assert!(!fresh.exists(), "{args:?} created {db}");
    }
}
