//! Replays the fuzz targets (`fuzz/targets.rs`) on stable: each target's seed inputs, every
//! file saved under `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/` (crashers found
//! by `cargo +nightly fuzz run <target>`, kept as regression inputs), and seeded mutations
//! of the seeds — truncations, bit flips, overwritten runs, random bytes. A target must not
//! panic on any of them.
//!
//! More mutations: `WISCKEY_FUZZ_MUTATIONS=20000 cargo test --release -p wisckey --test
//! fuzz_corpus -- --nocapture` (default 300 per seed). `WISCKEY_FUZZ_WRITE_SEEDS=1` also
//! writes the seeds to `fuzz/corpus/<target>/` to start a libFuzzer run from.

#[path = "../../../fuzz/targets.rs"]
mod targets;

use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn saved_inputs(target: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut inputs = Vec::new();
    for folder in ["corpus", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder).join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            inputs.push(std::fs::read(entry.path()).expect("read a saved input"));
        }
    }
    inputs
}

fn mutate(rng: &mut SmallRng, seed: &[u8]) -> Vec<u8> {
    let mut data = seed.to_vec();
    match rng.gen_range(0..5) {
        0 => data.truncate(rng.gen_range(0..=data.len())),
        1 | 2 => {
            for _ in 0..rng.gen_range(1..4) {
                if !data.is_empty() {
                    let at = rng.gen_range(0..data.len());
                    data[at] ^= 1 << rng.gen_range(0..8);
                }
            }
        }
        3 => {
            if !data.is_empty() {
                let at = rng.gen_range(0..data.len());
                let len = rng.gen_range(1..64).min(data.len() - at);
                let byte = [0u8, 0xff, rng.gen()][rng.gen_range(0..3)];
                data[at..at + len].fill(byte);
            }
        }
        _ => {
            let len = rng.gen_range(0..256);
            data = (0..len).map(|_| rng.gen()).collect();
        }
    }
    data
}

#[test]
fn fuzz_targets_survive_their_corpus_and_mutations_of_their_seeds() {
    let mutations: usize = std::env::var("WISCKEY_FUZZ_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    for (name, target) in targets::TARGETS {
        let seeds = targets::seeds(name);
        assert!(!seeds.is_empty(), "{name} has seeds");
        if std::env::var_os("WISCKEY_FUZZ_WRITE_SEEDS").is_some() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fuzz/corpus")
                .join(name);
            std::fs::create_dir_all(&dir).expect("mkdir");
            for (i, seed) in seeds.iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{i}")), seed).expect("write seed");
            }
        }
        let saved = saved_inputs(name);
        for input in seeds.iter().chain(&saved) {
            run_reporting(name, input, target);
        }
        // Shown when the test fails (libtest prints a failed test's output).
        eprintln!("{name}: mutations seeded with 0xf022, {mutations} per seed");
        let mut rng = SmallRng::seed_from_u64(0xf022);
        let mut runs = 0;
        for seed in &seeds {
            for _ in 0..mutations {
                let input = mutate(&mut rng, seed);
                run_reporting(name, &input, target);
                runs += 1;
            }
        }
        eprintln!("{name}: {} saved inputs, {runs} mutations", saved.len());
    }
}

/// Runs `target` on `input`; if it panics, saves the input where `cargo fuzz` keeps its
/// artifacts (the next run replays it) and panics again naming the file.
fn run_reporting(name: &str, input: &[u8], target: fn(&[u8])) {
    if std::panic::catch_unwind(|| target(input)).is_ok() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/artifacts")
        .join(name);
    let path = dir.join(format!("crash-corpus-test-{:016x}", fnv1a(input)));
    let saved = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input));
    panic!(
        "{name}: panicked on a {}-byte input (message above); saved to {}: {saved:?}",
        input.len(),
        path.display()
    );
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
