//! `wisckey get/put/delete/scan/compact` on a database: binary keys and values round-trip
//! through escaped and hex forms, scans honour their range flags, and a missing key or
//! database is one clear line with a non-zero exit.

use std::process::Command;

fn wisckey(args: &[&str]) -> std::process::Output {
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

#[test]
fn put_get_delete_and_scan_round_trip_binary_bytes() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    wisckey::Db::open(&dir, wisckey::Options::default())
        .expect("create")
        .close()
        .expect("close");
    let db = dir.to_str().expect("utf-8 path");

    ok(&["put", "--db", db, "user:1", "ann"]);
    ok(&["put", "--db", db, "user:2", "b\\tob\\n"]);
    ok(&["put", "--db", db, "--hex", "00ff", "0x0102"]);
    ok(&["put", "--db", db, "--sync", "zeta", "last"]);
    assert_eq!(ok(&["get", "--db", db, "user:1"]), "ann\n");
    assert_eq!(ok(&["get", "--db", db, "user:2"]), "b\\tob\\n\n");
    assert_eq!(ok(&["get", "--db", db, "\\x00\\xff"]), "\\x01\\x02\n");
    assert_eq!(ok(&["get", "--db", db, "--hex", "00ff"]), "0102\n");

    // Escaped output: a tab separates key and value; bytes inside are escaped.
    let all = ok(&["scan", "--db", db]);
    assert_eq!(
        all,
        "\\x00\\xff\t\\x01\\x02\nuser:1\tann\nuser:2\tb\\tob\\n\nzeta\tlast\n"
    );
    assert_eq!(
        ok(&["scan", "--db", db, "--prefix", "user:", "--keys-only"]),
        "user:1\nuser:2\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            "--db",
            db,
            "--reverse",
            "--limit",
            "2",
            "--keys-only"
        ]),
        "zeta\nuser:2\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            "--db",
            db,
            "--from",
            "user:2",
            "--to",
            "zeta",
            "--keys-only"
        ]),
        "user:2\n"
    );
    assert_eq!(
        ok(&[
            "scan",
            "--db",
            db,
            "--prefix",
            "user:",
            "--from",
            "user:2",
            "--keys-only"
        ]),
        "user:2\n"
    );
    // A range --prefix leaves empty is no error (a backwards one is: see below).
    assert_eq!(
        ok(&["scan", "--db", db, "--prefix", "user:", "--from", "z"]),
        ""
    );
    assert_eq!(
        ok(&["scan", "--db", db, "--hex", "--limit", "1"]),
        "00ff\t0102\n"
    );

    ok(&["delete", "--db", db, "user:1"]);
    let out = wisckey(&["get", "--db", db, "user:1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not found") && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert!(ok(&["compact", "--db", db]).contains("tables per level"));
    assert_eq!(
        ok(&["scan", "--db", db, "--keys-only"]),
        "\\x00\\xff\nuser:2\nzeta\n"
    );
}

#[test]
fn bad_input_and_a_missing_database_are_one_clear_line() {
    let temp = tempfile::tempdir().expect("tempdir");
    let missing = temp.path().join("none");
    let path = missing.to_str().expect("utf-8");
    for args in [
        vec!["get", "--db", path, "k"],
        vec!["put", "--db", path, "k", "v"],
        vec!["delete", "--db", path, "k"],
        vec!["scan", "--db", path],
        vec!["compact", "--db", path],
    ] {
        let out = wisckey(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not exist"), "{args:?}: {err}");
        assert!(!missing.exists(), "{args:?} created a database");
    }
    let out = wisckey(&["put", "--db", path, "--hex", "abc", "00"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not hex"), "{err}");
    let out = wisckey(&["get", "--db", path, "bad\\q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("unknown escape"),
        "{err}"
    );
}

#[test]
fn dump_and_load_round_trip_every_byte_in_both_formats() {
    let temp = tempfile::tempdir().expect("tempdir");
    let source = temp.path().join("source");
    let mut expected = Vec::new();
    {
        let db = wisckey::Db::open(&source, wisckey::Options::default()).expect("open");
        for i in 0..300u32 {
            let key = [b"k".as_slice(), &i.to_be_bytes()].concat(); // not UTF-8 for some
            let value: Vec<u8> = (0..(i * 37 % 5000)).map(|j| (i + j) as u8).collect();
            db.put(&key, &value).expect("put");
            expected.push((key, value));
        }
        db.put("text", "plain \"quoted\" ünïcode").expect("put");
        expected.push((
            b"text".to_vec(),
            "plain \"quoted\" ünïcode".as_bytes().to_vec(),
        ));
        db.close().expect("close");
    }
    expected.sort();
    let src = source.to_str().expect("utf-8");
    for format in ["native", "jsonl"] {
        let file = temp.path().join(format!("dump.{format}"));
        let file = file.to_str().expect("utf-8");
        ok(&["dump", "--db", src, "--out", file, "--format", format]);
        // The dump file is never overwritten.
        let again = wisckey(&["dump", "--db", src, "--out", file, "--format", format]);
        assert!(!again.status.success(), "{format}: dump overwrote its file");

        let target = temp.path().join(format!("target-{format}"));
        let dst = target.to_str().expect("utf-8");
        let out = wisckey(&["load", "--db", dst, "--in", file, "--format", format]);
        assert!(
            !out.status.success(),
            "{format}: load created a database without --create"
        );
        ok(&[
            "load", "--db", dst, "--in", file, "--format", format, "--create",
        ]);
        let db = wisckey::Db::open(&target, wisckey::Options::default()).expect("open");
        let loaded: Vec<(Vec<u8>, Vec<u8>)> = db
            .range::<&[u8], _>(..)
            .expect("range")
            .collect::<Result<_, _>>()
            .expect("scan");
        assert!(loaded == expected, "{format}: loaded contents differ");
        db.close().expect("close");
        // A database that holds keys takes a load only with --merge.
        let out = wisckey(&["load", "--db", dst, "--in", file, "--format", format]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("--merge"));
        ok(&[
            "load", "--db", dst, "--in", file, "--format", format, "--merge",
        ]);
    }

    // A damaged native dump is refused at the damaged entry; a cut one at its end.
    let file = temp.path().join("dump.native");
    let mut bytes = std::fs::read(&file).expect("read");
    let damaged_path = temp.path().join("damaged");
    let mut damaged = bytes.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 0x20;
    std::fs::write(&damaged_path, &damaged).expect("write");
    let fresh = temp.path().join("fresh");
    let out = wisckey(&[
        "load",
        "--db",
        fresh.to_str().expect("utf-8"),
        "--in",
        damaged_path.to_str().expect("utf-8"),
        "--create",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("checksum") || err.contains("dump"), "{err}");
    bytes.truncate(bytes.len() - 5);
    std::fs::write(&damaged_path, &bytes).expect("write");
    let fresh = temp.path().join("fresh2");
    let out = wisckey(&[
        "load",
        "--db",
        fresh.to_str().expect("utf-8"),
        "--in",
        damaged_path.to_str().expect("utf-8"),
        "--create",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cut"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Cut inside the first entry's checksum (after the 8-byte header and its tag byte):
    // the message names the entry and what was cut.
    bytes.truncate(11);
    std::fs::write(&damaged_path, &bytes).expect("write");
    let fresh = temp.path().join("fresh3");
    let out = wisckey(&[
        "load",
        "--db",
        fresh.to_str().expect("utf-8"),
        "--in",
        damaged_path.to_str().expect("utf-8"),
        "--create",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dump cut inside entry 0's checksum"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A prefix dump holds only its keys.
    let out = wisckey(&["dump", "--db", src, "--format", "jsonl", "--prefix", "text"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("\"key\":\"text\""), "{text}");
}

#[test]
fn demo_runs_on_a_new_directory_and_refuses_an_existing_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("demo");
    let path = dir.to_str().expect("utf-8");
    let said = ok(&["demo", "--num", "2000", "--value_size", "200", "--db", path]);
    assert!(
        said.contains("fillrandom") && said.contains("summary:"),
        "{said}"
    );
    assert!(said.contains("found: as in db_bench"), "{said}");
    let again = wisckey(&["demo", "--num", "2000", "--db", path]);
    assert!(
        !again.status.success(),
        "demo wrote into an existing database"
    );
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already exists"), "{err}");
}

/// A sign is not a hex digit: `+a+b` is refused, never read as 0a 0b (in `--hex`
/// arguments, `\x` escapes and JSON lines' `key_hex`).
#[test]
fn hex_with_a_sign_is_refused() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let db = wisckey::Db::open(&dir, wisckey::Options::default()).expect("create");
    db.put([0x0a, 0x0b], "ab").expect("put");
    db.put([0x0f], "f").expect("put");
    db.close().expect("close");
    let path = dir.to_str().expect("utf-8 path");

    for args in [
        vec!["get", "--db", path, "--hex", "+a+b"],
        vec!["get", "--db", path, "\\x+f"],
        vec!["put", "--db", path, "--hex", "+a+b", "00"],
        vec!["delete", "--db", path, "--hex", "+a+b"],
    ] {
        let out = wisckey(&args);
        // A usage error (64), never 1: a script reads `get`'s 1 as "not found".
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("is not hex") || err.contains("needs two hex digits"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(ok(&["get", "--db", path, "--hex", "0a0b"]), "6162\n");

    let jsonl = temp.path().join("signed.jsonl");
    std::fs::write(&jsonl, "{\"key_hex\": \"+a+b\", \"value\": \"x\"}\n").expect("write");
    let out = wisckey(&[
        "load",
        "--db",
        path,
        "--merge",
        "--format",
        "jsonl",
        "--in",
        jsonl.to_str().expect("utf-8"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not a hex byte"), "{err}");
    assert_eq!(ok(&["get", "--db", path, "--hex", "0a0b"]), "6162\n");
}

/// The database is opened before a range --prefix leaves empty is noticed, so a wrong path
/// is reported.
#[test]
fn an_empty_scan_range_still_reports_a_missing_database() {
    let temp = tempfile::tempdir().expect("tempdir");
    let missing = temp.path().join("typo");
    let path = missing.to_str().expect("utf-8");
    let out = wisckey(&["scan", "--db", path, "--from", "b", "--prefix", "a"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    let dir = temp.path().join("db");
    let db = wisckey::Db::open(&dir, wisckey::Options::default()).expect("create");
    db.put("a1", "1").expect("put");
    db.put("b1", "2").expect("put");
    db.close().expect("close");
    let path = dir.to_str().expect("utf-8");
    // Bounds that are right, but outside the prefix: no key, no error.
    assert_eq!(
        ok(&["scan", "--db", path, "--from", "b", "--prefix", "a"]),
        ""
    );
    assert_eq!(
        ok(&["scan", "--db", path, "--to", "a", "--prefix", "b"]),
        ""
    );
    // An empty range [b, b) is not backwards.
    assert_eq!(ok(&["scan", "--db", path, "--from", "b", "--to", "b"]), "");
}

/// Defect (review): `scan --from b --to a` printed nothing and exited 0, while `cluster`
/// refuses the same range as a usage error (64) and main.rs names a backwards range one.
#[test]
fn a_backwards_scan_range_is_a_usage_error() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let db = wisckey::Db::open(&dir, wisckey::Options::default()).expect("create");
    db.put("a1", "1").expect("put");
    db.put("b1", "2").expect("put");
    db.close().expect("close");
    let path = dir.to_str().expect("utf-8");
    for args in [
        vec!["scan", "--db", path, "--from", "b", "--to", "a"],
        vec![
            "scan",
            "--db",
            path,
            "--from",
            "b",
            "--to",
            "a",
            "--reverse",
        ],
        vec![
            "scan", "--db", path, "--from", "b", "--to", "a", "--prefix", "a",
        ],
        vec!["scan", "--db", path, "--hex", "--from", "62", "--to", "61"],
    ] {
        let out = wisckey(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains("starts after it ends"), "{args:?}: {err}");
        assert!(err.contains("--reverse"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Checked before the open, as every usage error: a wrong path is not reached.
    let missing = temp.path().join("typo");
    let out = wisckey(&[
        "scan",
        "--db",
        missing.to_str().expect("utf-8"),
        "--from",
        "b",
        "--to",
        "a",
    ]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    // The same range the right way round, read from its end.
    assert_eq!(
        ok(&[
            "scan",
            "--db",
            path,
            "--from",
            "a",
            "--to",
            "c",
            "--reverse"
        ]),
        "b1\t2\na1\t1\n"
    );
}

/// A missing database is named as such, with what the operator can do: no engine option.
#[test]
fn put_and_load_on_a_missing_database_say_how_to_create_one() {
    let temp = tempfile::tempdir().expect("tempdir");
    let missing = temp.path().join("nothing-here");
    let path = missing.to_str().expect("utf-8");
    let empty = temp.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write");
    let input = empty.to_str().expect("utf-8");
    for (args, hint) in [
        (vec!["put", "--db", path, "k", "v"], "wisckey put --create"),
        (vec!["delete", "--db", path, "k"], "wisckey put --create"),
        (
            vec!["load", "--db", path, "--format", "jsonl", "--in", input],
            "pass --create",
        ),
    ] {
        let out = wisckey(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("does not exist"), "{args:?}: {err}");
        assert!(err.contains(hint), "{args:?}: {err}");
        assert!(!err.contains("create_if_missing"), "{args:?}: {err}");
        assert!(!missing.exists(), "{args:?} created a database");
    }
}

/// A native dump whose length field says more than any database holds is refused at that
/// entry, by the limit, before the load reads (and buffers) what the length claims.
#[test]
fn load_refuses_a_length_over_the_engine_maximum() {
    let temp = tempfile::tempdir().expect("tempdir");
    let put_varint = |out: &mut Vec<u8>, mut v: u64| {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    };
    for (key_len, value_len, says) in [
        (
            wisckey::MAX_KEY_SIZE as u64 + 1,
            1,
            "entry 0: key length 65537 exceeds the maximum key size of 65536 bytes",
        ),
        (
            1,
            u64::from(u32::MAX) - 1,
            "entry 0: value length 4294967294 exceeds the maximum value size of 268435456 bytes",
        ),
    ] {
        let mut dump = b"WKDUMP\x00\x01".to_vec();
        dump.push(1);
        dump.extend_from_slice(&[0; 4]); // a checksum, never reached
        put_varint(&mut dump, key_len);
        if key_len == 1 {
            dump.push(b'k');
            put_varint(&mut dump, value_len);
        }
        // Some of the bytes the length claims: enough to tell a refusal from a cut dump.
        dump.extend(std::iter::repeat_n(b'v', 70_000));
        let file = temp.path().join(format!("bad-{key_len}.dump"));
        std::fs::write(&file, &dump).expect("write");
        let db = temp.path().join(format!("db-{key_len}"));
        let out = wisckey(&[
            "load",
            "--db",
            db.to_str().expect("utf-8"),
            "--create",
            "--in",
            file.to_str().expect("utf-8"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{err}");
    }
}

/// `demo` checks --value_size and --num before it creates anything: usage errors, 64 (the
/// README's status for arguments checked before the database is opened; this test asserted
/// 1 until a review found the two disagreeing).
#[test]
fn demo_refuses_a_value_size_over_the_maximum_and_zero_keys() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("demo");
    let path = dir.to_str().expect("utf-8");
    let too_big = (wisckey::MAX_VALUE_SIZE + 1).to_string();
    for (args, says) in [
        (
            vec!["demo", "--db", path, "--value_size", &too_big],
            "exceeds the maximum value size",
        ),
        (
            vec!["demo", "--db", path, "--value_size", "18446744073709551615"],
            "exceeds the maximum value size",
        ),
        (vec!["demo", "--db", path, "--num", "0"], "--num"),
    ] {
        let out = wisckey(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} created the database");
    }
}

/// Defect (review): `put` took its value only as an argument, and Linux refuses one
/// argument over 128 KiB, so a larger value could not be put at all. `--value-file` reads
/// it from a file or (`-`) standard input, byte for byte.
#[test]
fn put_takes_a_large_value_from_a_file_or_stdin() {
    use std::io::Write as _;
    use std::process::Stdio;

    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    wisckey::Db::open(&dir, wisckey::Options::default())
        .expect("create")
        .close()
        .expect("close");
    let path = dir.to_str().expect("utf-8");
    // Every byte value, newlines and NULs included: nothing may be unescaped or trimmed.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let value: Vec<u8> = (0..300 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let file = temp.path().join("value.bin");
    std::fs::write(&file, &value).expect("write value file");
    let file_arg = file.to_str().expect("utf-8");
    ok(&["put", "--db", path, "from-file", "--value-file", file_arg]);

    let mut child = Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(["put", "--db", path, "from-stdin", "--value-file", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn put");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(&value).expect("write stdin");
    drop(stdin); // the end of the value
    let out = child.wait_with_output().expect("wait for put");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let db = wisckey::Db::open_read_only(&dir, wisckey::Options::default()).expect("open");
    for key in ["from-file", "from-stdin"] {
        let got = db.get(key).expect("get").expect("the value was put");
        assert!(
            got == value,
            "{key}: {} bytes back, not the same",
            got.len()
        );
    }
    db.close().expect("close");
    // And through `get`, as the operator reads it back.
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        ok(&["get", "--db", path, "--hex", "66726f6d2d66696c65"]),
        hex + "\n"
    );
    // ...or as it is: `get --out` to a file, and to standard output with `-`.
    let back = temp.path().join("back.bin");
    let back_arg = back.to_str().expect("utf-8");
    assert_eq!(
        ok(&["get", "--db", path, "from-stdin", "--out", back_arg]),
        ""
    );
    assert!(
        std::fs::read(&back).expect("read --out") == value,
        "--out differs"
    );
    let raw = wisckey(&["get", "--db", path, "from-file", "--out", "-"]);
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    assert!(
        raw.stdout == value,
        "--out - gave {} bytes, not the value",
        raw.stdout.len()
    );
    // Never over an existing file, nor into the database directory: refused, untouched.
    let out = wisckey(&["get", "--db", path, "from-file", "--out", back_arg]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("exists"),
        "{out:?}"
    );
    assert!(
        std::fs::read(&back).expect("read") == value,
        "--out replaced a file"
    );
    let current = dir.join("CURRENT");
    let before = std::fs::read(&current).expect("CURRENT");
    let out = wisckey(&[
        "get",
        "--db",
        path,
        "from-file",
        "--out",
        current.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert_eq!(
        std::fs::read(&current).expect("CURRENT"),
        before,
        "CURRENT replaced"
    );
    let inside = dir.join("value.bin");
    let out = wisckey(&[
        "get",
        "--db",
        path,
        "from-file",
        "--out",
        inside.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(!inside.exists(), "a file was written into the database");
    // A missing key writes no file.
    let none = temp.path().join("none.bin");
    let out = wisckey(&[
        "get",
        "--db",
        path,
        "absent",
        "--out",
        none.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!none.exists(), "--out was written for a missing key");

    // A value and --value-file, or neither: usage errors. A missing file and one over the
    // engine's maximum: one line, nothing written.
    for args in [
        vec!["put", "--db", path, "k", "v", "--value-file", file_arg],
        vec!["put", "--db", path, "k"],
    ] {
        let out = wisckey(&args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
    }
    let huge = temp.path().join("huge.bin");
    // Sparse: its size is refused before a byte of it is read.
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(wisckey::MAX_VALUE_SIZE as u64 + 1))
        .expect("make a sparse file");
    let missing = temp.path().join("missing.bin");
    for (file, says) in [
        (&huge, "more than the maximum value size"),
        (&missing, "No such file"),
    ] {
        let out = wisckey(&[
            "put",
            "--db",
            path,
            "k",
            "--value-file",
            file.to_str().expect("utf-8"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says) && err.contains("--value-file"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(wisckey(&["get", "--db", path, "k"]).status.code(), Some(1));
}

/// `put --create` makes a new database (and only with the flag); `get` of a key that is
/// not there says so, and a long key is shortened in that line.
#[test]
fn put_creates_a_database_only_when_asked() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("new-db");
    let path = dir.to_str().expect("utf-8");
    let refused = wisckey(&["put", "--db", path, "k", "v"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(!dir.exists(), "put without --create made a database");
    // A put refused for its size leaves no new database behind (review).
    let too_long = "k".repeat(wisckey::MAX_KEY_SIZE + 1);
    let refused = wisckey(&["put", "--db", path, &too_long, "v", "--create"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("maximum key size"));
    assert!(!dir.exists(), "a refused put --create made a database");
    ok(&["put", "--db", path, "k", "v", "--create"]);
    assert_eq!(ok(&["get", "--db", path, "k"]), "v\n");
    // On an existing database the flag changes nothing.
    ok(&["put", "--db", path, "k2", "v2", "--create"]);
    assert_eq!(ok(&["scan", "--db", path, "--keys-only"]), "k\nk2\n");

    let long = "x".repeat(70_000);
    let out = wisckey(&["get", "--db", path, &long]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(err.contains("(69800 more characters)"), "{err}");
    assert!(
        err.len() < 1000,
        "the whole key was echoed: {} bytes",
        err.len()
    );
}
