//! `wisckey demo`: a smoke benchmark on a temporary database. Phases: fillrandom,
//! readrandom, readseq, reopen (which replays the value log), readrandom again. Each prints
//! a db_bench-style line `name : X micros/op Y ops/sec; Z MB/s`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::{Db, Options, ReadOptions};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of keys to write.
    #[arg(long, default_value_t = 200_000)]
    num: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Database directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Random seed.
    #[arg(long, default_value_t = 301)]
    seed: u64,
}

fn key_of(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn value_of(i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in v.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x % 95) as u8 + 32;
    }
    v
}

fn report(name: &str, ops: u64, bytes: u64, started: Instant) {
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    println!(
        "{name:<12} : {:>10.3} micros/op {:>10.0} ops/sec; {:>7.1} MB/s",
        secs * 1e6 / ops.max(1) as f64,
        ops as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

pub fn run(args: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let path = match &args.db {
        Some(p) => p.clone(),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("db")
        }
    };
    println!(
        "wisckey demo: {} keys, 16-byte keys, {}-byte values, db at {}",
        args.num,
        args.value_size,
        path.display()
    );
    let entry_bytes = 16 + args.value_size as u64;
    let mut rng = SmallRng::seed_from_u64(args.seed);

    let db = Db::open(&path, Options::default())?;
    let started = Instant::now();
    for _ in 0..args.num {
        let i = rng.gen_range(0..args.num);
        db.put(key_of(i), value_of(i, args.value_size))?;
    }
    report("fillrandom", args.num, args.num * entry_bytes, started);

    let started = Instant::now();
    let mut found = 0u64;
    for _ in 0..args.num {
        let i = rng.gen_range(0..args.num);
        if let Some(v) = db.get(key_of(i))? {
            if v != value_of(i, args.value_size) {
                return Err(format!("wrong value read for key {i}").into());
            }
            found += 1;
        }
    }
    report("readrandom", args.num, found * entry_bytes, started);
    println!("  ({found} of {} found)", args.num);

    let started = Instant::now();
    let mut it = db.iter(&ReadOptions::default())?;
    it.seek_to_first();
    let mut scanned = 0u64;
    while it.valid() {
        let _ = it.value()?;
        scanned += 1;
        it.next();
    }
    it.status()?;
    drop(it);
    report("readseq", scanned, scanned * entry_bytes, started);

    let started = Instant::now();
    db.close()?;
    let db = Db::open(&path, Options::default())?;
    report("reopen", 1, 0, started);

    let started = Instant::now();
    for _ in 0..args.num {
        let i = rng.gen_range(0..args.num);
        if let Some(v) = db.get(key_of(i))? {
            if v != value_of(i, args.value_size) {
                return Err(format!("wrong value after reopen for key {i}").into());
            }
        }
    }
    report("readrandom", args.num, args.num * entry_bytes, started);
    let levels = db.level_file_counts();
    println!("  tables per level: {levels:?}");
    db.close()?;
    Ok(())
}
