//! Measures `Db::prefetch_keys`: random point reads of keys that are all in the memtable,
//! in batches, each batch read key by key as it is, then (the same number of other random
//! batches) touched first with `prefetch_keys`. Prints nanoseconds per get for both.
//!
//! `cargo run --release -p wisckey --example prefetch_probe -- [keys] [value_size] [batch] [rounds]`
//! (defaults 1000000 16 16 3; docs/BENCHMARKS.md, "Memtable lookups of a batch, touched first").

use std::time::Instant;

use rand::{rngs::SmallRng, Rng, SeedableRng};

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("argument {n} is not a number: {s}"))
        })
        .unwrap_or(default)
}

fn main() -> wisckey::Result<()> {
    let (keys, value_size, batch, rounds) = (arg(1, 1_000_000), arg(2, 16), arg(3, 16), arg(4, 3));
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A memtable large enough that nothing is flushed: every read is a memtable lookup
    // (and, for values above `value_threshold`, a value-log read).
    let opts = wisckey::Options {
        memtable_size: 1 << 30,
        ..Default::default()
    };
    let db = wisckey::Db::open(dir.path(), opts)?;
    let key = |i: usize| format!("key:{i:012}").into_bytes();
    let value = vec![7u8; value_size];
    for i in 0..keys {
        db.put(key(i), &value)?;
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let gets = 2_000_000;
    let mut scratch = Vec::new();
    for round in 0..rounds {
        for prefetch in [false, true] {
            let sample: Vec<Vec<u8>> = (0..gets).map(|_| key(rng.gen_range(0..keys))).collect();
            let began = Instant::now();
            let mut bytes = 0usize;
            for chunk in sample.chunks(batch.max(1)) {
                if prefetch {
                    db.prefetch_keys(chunk);
                }
                for k in chunk {
                    bytes += db.get_with(k, &mut scratch, <[u8]>::len)?.unwrap_or(0);
                }
            }
            let ns = began.elapsed().as_nanos() as f64 / gets as f64;
            assert_eq!(bytes, gets * value_size, "every key is present");
            println!(
                "round {round} keys={keys} value_size={value_size} batch={batch} \
                 prefetch={prefetch}: {ns:.0} ns/get"
            );
        }
    }
    Ok(())
}
