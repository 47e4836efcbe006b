//! SCAN with clients that keep the cursor in a `u64` (the `redis` crate's scan iterators):
//! every key of any length returned exactly once; short keys' cursors survive a restart;
//! an evicted or pre-restart table cursor is refused with `ERR invalid cursor`.

mod common;

use std::collections::BTreeSet;

use common::TestServer;
use rand::{Rng, SeedableRng};
use redis::{cmd, Commands, Value};

type R<T> = redis::RedisResult<T>;

fn err_text(r: R<Value>) -> String {
    match r {
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
            .trim()
            .to_string(),
        Ok(v) => panic!("expected an error, got {v:?}"),
    }
}

/// `n` distinct keys of 20–40 bytes starting with `prefix`, the rest random bytes (any of
/// 0..=255, so NUL, CR/LF and glob metacharacters too).
fn long_keys(rng: &mut rand::rngs::SmallRng, prefix: &[u8], n: usize) -> BTreeSet<Vec<u8>> {
    let mut keys = BTreeSet::new();
    while keys.len() < n {
        let len = rng.gen_range(20..=40);
        let mut k = prefix.to_vec();
        while k.len() < len {
            k.push(rng.gen());
        }
        keys.insert(k);
    }
    keys
}

#[test]
fn scan_iterators_return_every_long_binary_key_exactly_once() -> R<()> {
    let s = TestServer::start(|_| {});
    let mut c = s.client();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let wanted = long_keys(&mut rng, b"k:", 2000);
    let other = long_keys(&mut rng, b"o:", 300);
    let mut pipe = redis::pipe();
    for k in wanted.iter().chain(&other) {
        pipe.cmd("SET").arg(k).arg(1).ignore();
    }
    pipe.query::<()>(&mut c)?;

    // SCAN MATCH through the crate's iterator (the cursor a u64, COUNT the server's 10).
    let mut got: Vec<Vec<u8>> = c.scan_match::<_, Vec<u8>>("k:*")?.collect();
    let n = got.len();
    got.sort();
    got.dedup();
    assert_eq!(n, got.len(), "no key returned twice");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), wanted);

    // Plain SCAN: every key.
    let mut all: Vec<Vec<u8>> = c.scan::<Vec<u8>>()?.collect();
    assert_eq!(all.len(), wanted.len() + other.len(), "each key once");
    all.sort();
    let expected: Vec<Vec<u8>> = wanted.union(&other).cloned().collect();
    assert_eq!(all, expected);

    // The raw cursors: u64s, table cursors (top bit set) for these long keys.
    let (next, _): (String, Vec<Vec<u8>>) = cmd("SCAN").arg(0).query(&mut c)?;
    let n: u64 = next.parse().expect("the cursor fits in a u64");
    assert!(n >= 1 << 63, "a table cursor: {next}");
    Ok(())
}

#[test]
fn short_key_cursors_survive_a_restart_table_cursors_do_not() -> R<()> {
    let s = TestServer::start(|_| {});
    let mut c = s.client();
    for k in ["a", "b", "c", "d"] {
        cmd("SET").arg(k).arg(1).query::<()>(&mut c)?;
    }
    for k in [
        "long-key-number-1",
        "long-key-number-2",
        "long-key-number-3",
    ] {
        cmd("SET").arg(k).arg(1).query::<()>(&mut c)?;
    }
    let (short, first): (u64, Vec<String>) =
        cmd("SCAN").arg(0).arg("COUNT").arg(2).query(&mut c)?;
    assert_eq!(first, ["a", "b"]);
    assert_eq!(short, 1099, "the next key, c, written directly");
    let (long, _): (u64, Vec<String>) = cmd("SCAN").arg(short).arg("COUNT").arg(3).query(&mut c)?;
    assert!(
        long >= 1 << 63,
        "long-key-number-1 through the table: {long}"
    );
    drop(c);
    let s = TestServer::start_in(s.stop(), |_| {});
    let mut c = s.client();
    let (next, rest): (u64, Vec<String>) =
        cmd("SCAN").arg(short).arg("COUNT").arg(100).query(&mut c)?;
    assert_eq!(
        (next, rest.len()),
        (0, 5),
        "resumed at c after the restart: {rest:?}"
    );
    assert_eq!(
        err_text(cmd("SCAN").arg(long).query(&mut c)),
        "ERR invalid cursor"
    );
    Ok(())
}

#[test]
fn an_evicted_table_cursor_is_an_error_not_a_restart() -> R<()> {
    let s = TestServer::start(|config| config.scan_cursor_table = 4);
    let mut c = s.client();
    for i in 0..20 {
        cmd("SET")
            .arg(format!("a-key-longer-than-six-bytes:{i:02}"))
            .arg(i)
            .query::<()>(&mut c)?;
    }
    let scan = |c: &mut redis::Connection, cursor: u64| -> R<(u64, Vec<String>)> {
        cmd("SCAN").arg(cursor).arg("COUNT").arg(1).query(c)
    };
    let (oldest, _) = scan(&mut c, 0)?;
    // Four newer table cursors (another scan's) push the oldest out of a table of four.
    let mut newest = 0;
    for _ in 0..4 {
        newest = scan(&mut c, 0)?.0;
    }
    assert_eq!(
        err_text(cmd("SCAN").arg(oldest).arg("COUNT").arg(1).query(&mut c)),
        "ERR invalid cursor"
    );
    // The newest still resumes, as often as asked (a retried call), and a scan that keeps
    // going sees every key once however small the table.
    let (_, again) = scan(&mut c, newest)?;
    assert_eq!(scan(&mut c, newest)?.1, again);
    assert_eq!(again, ["a-key-longer-than-six-bytes:01"]);
    let all: BTreeSet<String> = c.scan::<String>()?.collect();
    assert_eq!(all.len(), 20);
    // A number never handed out is refused the same way.
    assert_eq!(
        err_text(cmd("SCAN").arg(u64::MAX).query(&mut c)),
        "ERR invalid cursor"
    );
    Ok(())
}

/// Defect: COUNT was the only bound on a SCAN page, so `SCAN 0 COUNT 100000` over keys of
/// up to 64 KiB gathered gigabytes of keys for one reply. A page now stops once its keys
/// reach `SCAN_PAGE_BYTES` (COUNT is a hint, in Redis too), and the cursor goes on from there.
#[test]
fn a_scan_page_of_long_keys_stops_at_its_byte_limit() -> R<()> {
    let s = TestServer::start(|_| {});
    let mut c = s.client();
    const KEY_LEN: usize = 60_000;
    let keys: BTreeSet<Vec<u8>> = (0..200u32)
        .map(|i| {
            let mut k = format!("k{i:05}").into_bytes();
            k.resize(KEY_LEN, b'x');
            k
        })
        .collect();
    for k in &keys {
        let () = c.set(k, "v")?;
    }
    let limit = wisckey_server::SCAN_PAGE_BYTES;
    assert!(
        keys.len() * KEY_LEN > 2 * limit,
        "the keys span several pages"
    );
    let mut seen = BTreeSet::new();
    let mut cursor: Vec<u8> = b"0".to_vec();
    let mut pages = 0;
    loop {
        let (next, page): (Vec<u8>, Vec<Vec<u8>>) = cmd("SCAN")
            .arg(&cursor)
            .arg("COUNT")
            .arg(100_000)
            .query(&mut c)?;
        pages += 1;
        let bytes: usize = page.iter().map(Vec::len).sum();
        assert!(
            bytes < limit + KEY_LEN,
            "page {pages}: {bytes} bytes of keys, over the limit"
        );
        for k in page {
            assert!(seen.insert(k), "a key returned twice");
        }
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    assert!(pages >= 3, "{pages} pages");
    assert_eq!(seen, keys, "every key once");
    Ok(())
}
