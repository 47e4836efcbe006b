//! Scan read-ahead (WiscKey §3.3.2): a forward scan queues the value-log reads of the entries
//! ahead of it on reader threads. These tests check that the reads really overlap, that the
//! iterator shows exactly what it shows without read-ahead (every direction change, seek and
//! bound included), and that a damaged value is reported at its own entry only.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{HookFs, Hooks};
use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, Error, Options, ReadOptions};

/// Slows every value-log read down and records how many ran at once.
#[derive(Debug, Default)]
struct SlowLogReads {
    running: AtomicUsize,
    most: AtomicUsize,
    reads: AtomicUsize,
}

impl Hooks for SlowLogReads {
    fn before_read(&self, path: &Path, _offset: u64, _len: usize) -> wisckey::Result<()> {
        if path.extension().is_some_and(|e| e == "vlog") {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.reads.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }
    fn after_read(&self, path: &Path) {
        if path.extension().is_some_and(|e| e == "vlog") {
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    // Above the 64-byte threshold, so every value lives behind a pointer.
    format!("value-{i}-{round}-").repeat(12).into_bytes()
}

/// 600 keys written twice (the second round overwrites every third key and deletes every
/// seventh), flushed so that the values are read from value-log files, not the buffer.
fn fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..600 {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    for i in (0..600).step_by(3) {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    for i in (0..600).step_by(7) {
        db.delete(key(i)).expect("delete");
        model.remove(&key(i));
    }
    db.flush().expect("flush");
    model
}

fn options(fs: Arc<dyn FileSystem>, readahead: bool) -> Options {
    let mut options = Options::small_for_tests(fs);
    // Background GC reads the log too; these tests count the scan's own reads.
    options.gc_space_amp_target = f64::INFINITY;
    if !readahead {
        options.scan_readahead_entries = 0;
    }
    options
}

#[test]
fn a_forward_scan_reads_values_in_parallel_and_without_read_ahead_one_at_a_time() {
    for readahead in [true, false] {
        let fs = HookFs::new(SlowLogReads::default());
        let db =
            Db::open(Path::new("/db"), options(Arc::new(fs.clone()), readahead)).expect("open");
        let model = fill(&db);
        fs.hooks.most.store(0, Ordering::SeqCst);
        let mut it = db.iter(&ReadOptions::default()).expect("iter");
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.value().expect("value")));
            it.next();
        }
        it.status().expect("status");
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(seen, expected, "readahead={readahead}");
        let most = fs.hooks.most.load(Ordering::SeqCst);
        if readahead {
            assert!(
                most >= 4,
                "at most {most} value reads overlapped during a scan"
            );
        } else {
            assert_eq!(most, 1, "without read-ahead reads must not overlap");
        }
    }
}

/// Moves an iterator with and one without read-ahead through the same random walk (seeks,
/// runs of next, direction changes, bounds) and requires identical keys, values and validity
/// at every step.
#[test]
fn read_ahead_never_changes_what_the_iterator_shows() {
    let mem = MemFs::new();
    let db = Db::open(Path::new("/db"), options(Arc::new(mem.clone()), true)).expect("open");
    fill(&db);
    db.close().expect("close");
    // The same files are opened twice, one after the other: with read-ahead, then without.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rand = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let walk: Vec<(u64, u64)> = (0..400).map(|_| (rand(10), rand(620))).collect();
    let bounds = [
        (None, None),
        (Some(key(100)), Some(key(350))),
        (Some(key(590)), None),
    ];
    let mut traces: Vec<Vec<String>> = Vec::new();
    // Without read-ahead (the reference, first), with it, and with scan-length hints short
    // and long against the walk's runs of `next`.
    for (readahead, hint) in [
        (false, None),
        (true, None),
        (true, Some(1)),
        (true, Some(7)),
        (true, Some(60)),
    ] {
        let db =
            Db::open(Path::new("/db"), options(Arc::new(mem.clone()), readahead)).expect("reopen");
        let mut trace = Vec::new();
        for (lower, upper) in &bounds {
            let opts = ReadOptions {
                lower_bound: lower.clone(),
                upper_bound: upper.clone(),
                scan_length_hint: hint,
                ..ReadOptions::default()
            };
            let mut it = db.iter(&opts).expect("iter");
            it.seek_to_first();
            for (action, arg) in &walk {
                match action {
                    0 => it.seek(&key(*arg as u32)),
                    1 => it.seek_to_first(),
                    2 => it.seek_to_last(),
                    3 => it.prev(),
                    _ => {
                        // Runs of next, long enough to fill the read-ahead window.
                        for _ in 0..(arg % 90) {
                            it.next();
                        }
                    }
                }
                if it.valid() {
                    let v = it.value().expect("value");
                    trace.push(format!(
                        "{:?}={}",
                        String::from_utf8_lossy(it.key()),
                        v.len()
                    ));
                    // Asking twice gives the same value (the read-ahead result is handed out once).
                    assert_eq!(it.value().expect("value again"), v);
                } else {
                    trace.push("end".to_string());
                }
                it.status().expect("status");
            }
        }
        traces.push(trace);
        db.close().expect("close");
    }
    for (variant, trace) in traces.iter().enumerate().skip(1) {
        assert_eq!(trace.len(), traces[0].len());
        for (step, (with, without)) in trace.iter().zip(&traces[0]).enumerate() {
            assert_eq!(
                with, without,
                "variant {variant}, step {step}: vs without read-ahead"
            );
        }
    }
}

/// With `scan_length_hint`, every value read of a short scan is in flight before its first
/// `value()`, and a scan that stops at the hinted length reads no value beyond it; a scan
/// that goes on past the hint still sees every entry.
#[test]
fn a_hinted_scan_reads_its_values_at_once_and_none_past_the_hint() {
    let fs = HookFs::new(SlowLogReads::default());
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()), true)).expect("open");
    // Written in descending key order: no two values a forward scan reads are back to back
    // in the log, so each value is one read (no coalesced runs) and reads can be counted.
    let mut model = BTreeMap::new();
    for i in (0..300).rev() {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for hint in [1usize, 5, 40] {
        let opts = ReadOptions {
            scan_length_hint: Some(hint),
            ..ReadOptions::default()
        };
        let before = fs.hooks.reads.load(Ordering::SeqCst);
        fs.hooks.most.store(0, Ordering::SeqCst);
        let mut it = db.iter(&opts).expect("iter");
        it.seek(keys[100]);
        let mut seen = Vec::new();
        for _ in 0..hint {
            assert!(it.valid());
            seen.push((it.key().to_vec(), it.value().expect("value")));
            it.next();
        }
        // Positioned on the entry after the hinted ones, its value not read yet.
        assert!(it.valid());
        assert_eq!(it.key(), keys[100 + hint].as_slice());
        it.status().expect("status");
        let reads = fs.hooks.reads.load(Ordering::SeqCst) - before;
        assert_eq!(
            reads, hint,
            "hint {hint}: value-log reads of a scan of {hint} entries"
        );
        if hint >= 5 {
            let most = fs.hooks.most.load(Ordering::SeqCst);
            assert!(most >= 4, "hint {hint}: at most {most} reads overlapped");
        }
        let expected: Vec<_> = model
            .iter()
            .skip(100)
            .take(hint)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(seen, expected);
        // Going on past the hint: every later entry, exactly.
        let mut rest = Vec::new();
        while it.valid() {
            rest.push((it.key().to_vec(), it.value().expect("value")));
            it.next();
        }
        it.status().expect("status");
        let expected_rest: Vec<_> = model
            .iter()
            .skip(100 + hint)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(rest, expected_rest, "hint {hint}: the scan past the hint");
    }
}

#[test]
fn a_damaged_value_is_reported_at_its_entry_and_the_scan_goes_on() {
    let mem = MemFs::new();
    let db = Db::open(Path::new("/db"), options(Arc::new(mem.clone()), true)).expect("open");
    for i in 0..200 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.close().expect("close");
    // Flip one byte inside the value of key 150: find its record by content.
    let needle = value(150, 0);
    let mut damaged = 0;
    for name in mem.list(Path::new("/db")).expect("list") {
        if !name.ends_with(".vlog") {
            continue;
        }
        let path = Path::new("/db").join(&name);
        let mut bytes = mem.contents(&path).expect("contents");
        if let Some(at) = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
        {
            bytes[at + 10] ^= 0x40;
            mem.set_contents(&path, &bytes).expect("set");
            damaged += 1;
        }
    }
    assert_eq!(damaged, 1, "the value should be in exactly one segment");
    let db = Db::open(Path::new("/db"), options(Arc::new(mem.clone()), true)).expect("reopen");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut good = 0;
    let mut bad = Vec::new();
    while it.valid() {
        match it.value() {
            Ok(v) => {
                let i: u32 = String::from_utf8_lossy(&it.key()[3..])
                    .parse()
                    .expect("index");
                assert_eq!(v, value(i, 0));
                good += 1;
            }
            Err(Error::Corruption { .. }) => bad.push(it.key().to_vec()),
            Err(e) => panic!("unexpected error {e}"),
        }
        it.next();
    }
    it.status()
        .expect("a damaged value is not an iterator error");
    assert_eq!(bad, vec![key(150)]);
    assert_eq!(good, 199);
}

/// Values written in key order lie back to back in the log: a forward scan reads each run of
/// them with one positional read instead of one per value, and shows every value exactly.
#[test]
fn a_scan_of_values_written_in_key_order_reads_them_in_runs() {
    let fs = HookFs::new(SlowLogReads::default());
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()), true)).expect("open");
    for i in 0..2000 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    db.flush().expect("flush");
    let before = fs.hooks.reads.load(Ordering::SeqCst);
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut seen = 0u32;
    while it.valid() {
        assert_eq!(it.value().expect("value"), value(seen, 0));
        seen += 1;
        it.next();
    }
    it.status().expect("status");
    assert_eq!(seen, 2000);
    let reads = fs.hooks.reads.load(Ordering::SeqCst) - before;
    eprintln!("2000 values in key order: {reads} value-log reads");
    assert!(
        reads * 8 < 2000,
        "{reads} reads for 2000 back-to-back values"
    );
}

/// A hint never turns on read-ahead that `scan_readahead_entries = 0` turned off.
#[test]
fn a_hint_does_not_turn_read_ahead_on() {
    let fs = HookFs::new(SlowLogReads::default());
    let db = Db::open(Path::new("/db"), options(Arc::new(fs.clone()), false)).expect("open");
    let model = fill(&db);
    fs.hooks.most.store(0, Ordering::SeqCst);
    let before = fs.hooks.reads.load(Ordering::SeqCst);
    let opts = ReadOptions {
        scan_length_hint: Some(50),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts).expect("iter");
    it.seek_to_first();
    let mut seen = Vec::new();
    for _ in 0..50 {
        seen.push((it.key().to_vec(), it.value().expect("value")));
        it.next();
    }
    it.status().expect("status");
    let expected: Vec<_> = model.into_iter().take(50).collect();
    assert_eq!(seen, expected);
    assert_eq!(fs.hooks.most.load(Ordering::SeqCst), 1, "reads overlapped");
    assert!(fs.hooks.reads.load(Ordering::SeqCst) - before <= 50);
}

/// On the real file system (where the kernel has io_uring, a refill's reads go out as
/// batches): plain and hinted scans over values scattered across segments show exactly the
/// model, and a damaged value is reported at its own entry while the scan goes on.
#[test]
fn scans_on_the_real_file_system_show_the_model_and_report_damage_at_its_entry() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().join("db");
    let fs: Arc<dyn FileSystem> = Arc::new(wisckey::fs::PosixFs::new());
    eprintln!("batched reads: {}", fs.batches_reads());
    let open = || Db::open(&dir, options(Arc::clone(&fs), true)).expect("open");
    let db = open();
    let mut model = BTreeMap::new();
    // A scattered write order, so neighbouring keys' values are far apart in the log.
    for n in 0..1500u32 {
        let i = (n * 977) % 1500;
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    for i in (0..1500).step_by(5) {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    for i in (0..1500).step_by(11) {
        db.delete(key(i)).expect("delete");
        model.remove(&key(i));
    }
    db.flush().expect("flush");
    let scan = |db: &Db, from: &[u8], hint: Option<usize>, take: usize| {
        let opts = ReadOptions {
            scan_length_hint: hint,
            ..ReadOptions::default()
        };
        let mut it = db.iter(&opts).expect("iter");
        it.seek(from);
        let mut seen = Vec::new();
        while it.valid() && seen.len() < take {
            seen.push((it.key().to_vec(), it.value()));
            it.next();
        }
        it.status().expect("status");
        seen
    };
    let expect = |from: &[u8], take: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
        (model.range(from.to_vec()..).take(take))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let values_of = |seen: Vec<(Vec<u8>, wisckey::Result<Vec<u8>>)>| -> Vec<(Vec<u8>, Vec<u8>)> {
        seen.into_iter()
            .map(|(k, v)| {
                let v = v.unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(&k)));
                (k, v)
            })
            .collect()
    };
    assert_eq!(
        values_of(scan(&db, b"", None, usize::MAX)),
        expect(b"", usize::MAX)
    );
    for (from, hint, take) in [
        (17u32, 1, 1),
        (300, 7, 7),
        (640, 60, 60),
        (900, 100, 250),
        (1490, 100, 100),
    ] {
        let got = values_of(scan(&db, &key(from), Some(hint), take));
        assert_eq!(got, expect(&key(from), take), "from {from}, hint {hint}");
    }
    db.close().expect("close");

    // Damage the value of key 733 in whichever segment holds it.
    let needle = value(733, 0);
    let mut damaged = 0;
    for entry in std::fs::read_dir(&dir).expect("ls").flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "vlog") {
            continue;
        }
        let mut bytes = std::fs::read(&path).expect("read");
        if let Some(at) = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
        {
            bytes[at + 10] ^= 0x40;
            std::fs::write(&path, &bytes).expect("write");
            damaged += 1;
        }
    }
    assert_eq!(damaged, 1, "the value should be in exactly one segment");
    let db = open();
    for hint in [None, Some(100)] {
        let seen = scan(&db, &key(700), hint, 100);
        assert_eq!(seen.len(), 100);
        let mut corrupt = 0;
        for ((k, got), (want_key, want)) in seen.into_iter().zip(expect(&key(700), 100)) {
            assert_eq!(k, want_key);
            match got {
                Err(Error::Corruption { .. }) => {
                    assert_eq!(k, key(733), "only key 733 is damaged");
                    corrupt += 1;
                }
                Ok(v) => assert_eq!(v, want),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert_eq!(corrupt, 1, "key 733's damage is reported (hint {hint:?})");
    }
    db.close().expect("close");
}

/// Defect: a run of back-to-back records kept the log's written-out end as its first
/// pointer saw it. A later pointer of the run, written out after that (the log's write-out
/// runs every few milliseconds), lay past that end, and its healthy value was reported as
/// `Corruption` ("record extends past the end of the log"). Scans of the newest keys while
/// a writer appends keys in order hit it.
#[test]
fn scans_of_keys_being_written_never_report_healthy_values_as_damaged() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let mut options = options(Arc::clone(&fs), true);
    options.vlog_flush_interval = Duration::from_micros(200);
    let db = Arc::new(Db::open(Path::new("/db"), options).expect("open"));
    let written = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, written, stop) = (Arc::clone(&db), Arc::clone(&written), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) && i < 900_000 {
                db.put(key(i), value(i, 0)).expect("put");
                i += 1;
                written.store(i as usize, Ordering::Release);
            }
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let (mut scans, mut values) = (0u64, 0u64);
    while std::time::Instant::now() < deadline {
        let newest = written.load(Ordering::Acquire) as u32;
        let from = key(newest.saturating_sub(200));
        for entry in db.range(from..).expect("range").take(400) {
            let (k, v) = entry.unwrap_or_else(|e| panic!("scan {scans}: {e}"));
            let i: u32 = std::str::from_utf8(&k[3..])
                .expect("utf8")
                .parse()
                .expect("n");
            assert_eq!(v, value(i, 0));
            values += 1;
        }
        scans += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    eprintln!("{scans} scans, {values} values");
    assert!(scans > 10 && values > 0);
}

/// `scan_readahead_entries = usize::MAX` ("no entry limit"; the byte budget still holds):
/// the window doubled on every refill and, once the byte budget kept it from filling,
/// every `next` refilled and doubled it until it overflowed (a panic with overflow checks;
/// without, a window of 0 that stopped refilling and showed each entry twice).
#[test]
fn an_unlimited_read_ahead_window_shows_every_entry_once() {
    let mem = MemFs::new();
    let mut opts = options(Arc::new(mem), true);
    opts.scan_readahead_entries = usize::MAX;
    let db = Db::open("/db", opts).expect("open");
    const KEYS: u32 = 12_000;
    let mut batch = wisckey::WriteBatch::new();
    for i in 0..KEYS {
        batch.put(key(i), vec![(i % 251) as u8; 1024]);
        if batch.len() == 500 {
            db.write(std::mem::take(&mut batch)).expect("write");
        }
    }
    db.flush().expect("flush");
    let mut it = db.iter(&ReadOptions::default()).expect("iter");
    it.seek_to_first();
    let mut shown = 0u32;
    while it.valid() {
        assert_eq!(it.key(), key(shown).as_slice(), "entry {shown}");
        assert_eq!(it.value().expect("value"), vec![(shown % 251) as u8; 1024]);
        shown += 1;
        it.next();
    }
    it.status().expect("no error");
    assert_eq!(shown, KEYS);
}
