//! `wisckey dump` piped into `wisckey load`, in both formats, of random binary keys and
//! values (empty values, 0x00, 0xff and newline bytes, values in the log and inline): the
//! loaded database holds exactly what the source held. The seed is printed on failure;
//! `WISCKEY_PIPE_SEED=<n>` replays one.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::{Db, Options};

fn random_bytes(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    const SPECIAL: [u8; 6] = [0x00, 0xff, b'\n', b'\r', b'\t', b'\\'];
    (0..len)
        .map(|_| {
            if rng.gen_bool(0.3) {
                SPECIAL[rng.gen_range(0..SPECIAL.len())]
            } else {
                rng.gen()
            }
        })
        .collect()
}

fn model(seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut entries = BTreeMap::new();
    entries.insert(vec![0x00], Vec::new());
    entries.insert(vec![0xff; 3], b"\n".to_vec());
    entries.insert(b"\n".to_vec(), vec![0x00; 10]);
    entries.insert(b"utf8 \xc3\xa9".to_vec(), "é".as_bytes().to_vec());
    for _ in 0..600 {
        let key_len = rng.gen_range(1..48);
        let value_len = match rng.gen_range(0..10) {
            0 => 0,
            1..=6 => rng.gen_range(1..200),
            _ => rng.gen_range(200..20_000),
        };
        let key = random_bytes(&mut rng, key_len);
        let value = random_bytes(&mut rng, value_len);
        entries.insert(key, value);
    }
    entries
}

fn pipe(source: &str, target: &str, format: &str) {
    let mut dump = Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(["dump", "--db", source, "--format", format])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dump");
    let dump_out = dump.stdout.take().expect("dump's stdout is piped");
    let load = Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(["load", "--db", target, "--create", "--format", format])
        .stdin(Stdio::from(dump_out))
        .output()
        .expect("run load");
    let dumped = dump.wait_with_output().expect("wait for dump");
    assert!(
        dumped.status.success(),
        "dump: {}",
        String::from_utf8_lossy(&dumped.stderr)
    );
    assert!(
        load.status.success(),
        "load: {}",
        String::from_utf8_lossy(&load.stderr)
    );
}

#[test]
fn dump_piped_into_load_round_trips_random_binary_data() {
    let seed = std::env::var("WISCKEY_PIPE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_125);
    let run = std::panic::catch_unwind(|| {
        let expected = model(seed);
        let temp = tempfile::tempdir().expect("tempdir");
        let source = temp.path().join("source");
        let db = Db::open(&source, Options::default()).expect("create");
        for (k, v) in &expected {
            db.put(k, v).expect("put");
        }
        db.close().expect("close");
        let source = source.to_str().expect("utf-8 path");
        for format in ["native", "jsonl"] {
            let target = temp.path().join(format);
            pipe(source, target.to_str().expect("utf-8 path"), format);
            let db = Db::open_read_only(&target, Options::default()).expect("open the copy");
            let loaded: BTreeMap<Vec<u8>, Vec<u8>> = db
                .range::<&[u8], _>(..)
                .expect("range")
                .collect::<Result<_, _>>()
                .expect("scan");
            assert_eq!(loaded.len(), expected.len(), "{format}: entry count");
            for (k, v) in &expected {
                assert_eq!(loaded.get(k), Some(v), "{format}: key {k:?}");
            }
        }
    });
    if let Err(panic) = run {
        eprintln!("dump | load failed with WISCKEY_PIPE_SEED={seed}");
        std::panic::resume_unwind(panic);
    }
}
