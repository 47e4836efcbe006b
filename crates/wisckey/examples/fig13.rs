//! WiscKey's Figure 13 at reduced scale: random-load `keys` values, delete a percentage of
//! the keys, then random-load the same number of keys again, with background GC on or off.
//! Prints the second load's throughput (the paper: 10–35% lower with GC) and the database's
//! size afterwards. Run it through `bench/run-fig13.sh` (memory limit, all percentages).
//!
//! `fig13 DIR KEYS VALUE_SIZE DELETE_PCT on|off` (DIR must not exist).

use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn main() -> wisckey::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, keys, value_size, pct, gc] = &args[..] else {
        eprintln!("usage: fig13 DIR KEYS VALUE_SIZE DELETE_PCT on|off");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(dir);
    if dir.exists() {
        eprintln!("fig13: {} exists; name a new directory", dir.display());
        std::process::exit(2);
    }
    let keys: u64 = keys.parse().expect("KEYS");
    let value_size: usize = value_size.parse().expect("VALUE_SIZE");
    let pct: u64 = pct.parse().expect("DELETE_PCT");
    let options = wisckey::Options {
        gc_space_amp_target: if gc == "on" { 1.5 } else { f64::INFINITY },
        ..wisckey::Options::default()
    };
    let db = wisckey::Db::open(dir, options)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(13);
    let mut order: Vec<u64> = (0..keys).collect();
    let value: Vec<u8> = (0..value_size).map(|i| (i * 7 + 1) as u8).collect();
    let key = |i: u64| format!("{i:016}");

    order.shuffle(&mut rng);
    let started = Instant::now();
    for &i in &order {
        db.put(key(i), &value)?;
    }
    let first = keys as f64 / started.elapsed().as_secs_f64();

    order.shuffle(&mut rng);
    let deleted = keys * pct / 100;
    for &i in &order[..deleted as usize] {
        db.delete(key(i))?;
    }

    order.shuffle(&mut rng);
    let started = Instant::now();
    for &i in &order {
        db.put(key(i), &value)?;
    }
    let second_secs = started.elapsed().as_secs_f64();
    let stats = db.stats()?;
    db.close()?;
    let live = keys * (16 + value_size as u64);
    let size = dir_bytes(dir);
    println!(
        "fig13 gc={gc} delete_pct={pct} keys={keys} value_size={value_size} \
         first_load_ops={first:.0} second_load_ops={:.0} db_mib={:.1} live_mib={:.1} \
         space_amp={:.2} gc_segments={} gc_relocated_mib={:.1}",
        keys as f64 / second_secs,
        size as f64 / f64::from(1 << 20),
        live as f64 / f64::from(1 << 20),
        size as f64 / live as f64,
        stats.gc.work.segments_collected,
        stats.gc.work.bytes_relocated as f64 / f64::from(1 << 20),
    );
    Ok(())
}
