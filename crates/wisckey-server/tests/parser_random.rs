//! Seeded property test of the RESP decoder (runs on stable; the same checks as a fuzz
//! target would make). Valid request streams, cut at random points, decode to exactly the
//! commands encoded; mutated and random byte streams never panic, never move the read
//! position backwards or past the input, and never yield a command over the limits.
//!
//! Longer: `WISCKEY_RESP_SEED=<n> WISCKEY_RESP_CASES=200000 cargo test --release -p
//! wisckey-server --test parser_random -- --nocapture`.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey_server::resp::{Command, Decoder, Limits};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn random_command(rng: &mut SmallRng) -> Command {
    let n = rng.gen_range(1..8);
    (0..n)
        .map(|_| {
            let len = if rng.gen_bool(0.05) {
                rng.gen_range(0..5000)
            } else {
                rng.gen_range(0..20)
            };
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

fn encode(cmd: &Command, out: &mut Vec<u8>) {
    out.extend(format!("*{}\r\n", cmd.len()).into_bytes());
    for a in cmd {
        out.extend(format!("${}\r\n", a.len()).into_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Feeds `input` in random pieces; returns the commands and whether it ended in an error.
/// Checks the decoder's invariants on the way.
fn feed(rng: &mut SmallRng, input: &[u8], limits: Limits) -> (Vec<Command>, bool) {
    let mut decoder = Decoder::new(limits);
    let mut commands = Vec::new();
    let (mut buf, mut fed) = (Vec::new(), 0usize);
    while fed < input.len() {
        let step = rng.gen_range(1..=(input.len() - fed).min(300));
        buf.extend_from_slice(&input[fed..fed + step]);
        fed += step;
        let mut pos = 0;
        loop {
            let before = pos;
            match decoder.next(&buf, &mut pos) {
                Ok(Some(cmd)) => {
                    assert!(
                        pos > before && pos <= buf.len(),
                        "progress within the input"
                    );
                    assert!(cmd.len() <= limits.max_multibulk_len);
                    assert!(cmd
                        .iter()
                        .all(|a| a.len() <= limits.max_bulk_len.max(limits.max_inline_len)));
                    commands.push(cmd);
                }
                Ok(None) => {
                    assert!(pos >= before && pos <= buf.len());
                    break;
                }
                Err(_) => return (commands, true),
            }
        }
        buf.drain(..pos);
    }
    (commands, false)
}

/// Runs `f`; if it panics, panics again naming the case, so a failure can be replayed
/// (`WISCKEY_RESP_SEED`).
fn in_case<T>(what: impl std::fmt::Display, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => panic!("{what}: panicked (message above)"),
    }
}

#[test]
fn valid_streams_decode_exactly_at_any_split() {
    let seed = env_u64("WISCKEY_RESP_SEED", 16);
    let cases = env_u64("WISCKEY_RESP_CASES", 2000);
    let mut rng = SmallRng::seed_from_u64(seed);
    for case in 0..cases {
        let cmds: Vec<Command> = (0..rng.gen_range(1..10))
            .map(|_| random_command(&mut rng))
            .collect();
        let mut input = Vec::new();
        for c in &cmds {
            encode(c, &mut input);
        }
        let (got, failed) = in_case(format!("seed {seed} case {case}"), || {
            feed(&mut rng, &input, Limits::default())
        });
        assert!(!failed, "seed {seed} case {case}: valid input refused");
        assert_eq!(got, cmds, "seed {seed} case {case}");
    }
}

#[test]
fn mutated_and_random_input_never_panics_or_overruns() {
    let seed = env_u64("WISCKEY_RESP_SEED", 16);
    let cases = env_u64("WISCKEY_RESP_CASES", 2000);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9e37_79b9);
    let small = Limits {
        max_bulk_len: 64,
        max_multibulk_len: 6,
        max_inline_len: 32,
        max_query_len: 128,
    };
    for case in 0..cases {
        let mut input = Vec::new();
        for _ in 0..rng.gen_range(1..5) {
            encode(&random_command(&mut rng), &mut input);
        }
        match rng.gen_range(0..4) {
            0 => {
                for _ in 0..rng.gen_range(1..6) {
                    let at = rng.gen_range(0..input.len());
                    input[at] = rng.gen();
                }
            }
            1 => {
                let at = rng.gen_range(0..input.len());
                let junk: Vec<u8> = (0..rng.gen_range(1..40))
                    .map(|_| {
                        *[
                            b'*', b'$', b'\r', b'\n', b'-', b'9', b'0', b'"', b'\'', b' ', b'\\',
                            b'x',
                        ]
                        .get(rng.gen_range(0..12))
                        .unwrap_or(&0)
                    })
                    .collect();
                input.splice(at..at, junk);
            }
            2 => input = (0..rng.gen_range(0..400)).map(|_| rng.gen()).collect(),
            _ => input.truncate(rng.gen_range(0..input.len())),
        }
        if input.is_empty() {
            continue;
        }
        let limits = if rng.gen_bool(0.5) {
            small
        } else {
            Limits::default()
        };
        let what = format!("seed {seed} case {case}, input {input:?}");
        in_case(what, || feed(&mut rng, &input, limits));
    }
}

#[path = "../../../fuzz/resp_target.rs"]
mod resp_target;

/// The `resp_decoder` fuzz target's body on stable: every saved corpus and artifact input
/// (`cargo +nightly fuzz run resp_decoder` writes them), then seeded random inputs.
#[test]
fn fuzz_target_replays_saved_and_random_inputs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for folder in ["corpus", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder).join("resp_decoder")) else {
            continue;
        };
        for entry in entries.flatten() {
            let data = std::fs::read(entry.path()).expect("read a saved input");
            in_case(entry.path().display(), || resp_target::resp_decoder(&data));
        }
    }
    let seed = env_u64("WISCKEY_RESP_SEED", 16);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    for case in 0..env_u64("WISCKEY_RESP_CASES", 2000) {
        let mut data = vec![rng.gen::<u8>()];
        for _ in 0..rng.gen_range(1..4) {
            encode(&random_command(&mut rng), &mut data);
        }
        if rng.gen_bool(0.5) {
            let at = rng.gen_range(1..data.len());
            data[at] = rng.gen();
        }
        in_case(format!("seed {seed} case {case}, input {data:?}"), || {
            resp_target::resp_decoder(&data)
        });
    }
}
