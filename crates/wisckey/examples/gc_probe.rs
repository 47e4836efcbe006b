//! Watches value-log GC at work: overwrites `keys` keys with `value_size`-byte values for
//! `passes` passes and prints, about every 0.7 s, the log's size, its space amplification
//! against the true live data, and what GC has done.
//!
//! `cargo run --release -p wisckey --example gc_probe -- DIR [keys] [passes] [value_size]`
//! (DIR must not exist; it is left behind for inspection).

use std::time::Instant;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map_or(default, |a| a.parse().expect("a number"))
}

fn main() -> wisckey::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: gc_probe DIR [keys] [passes] [value_size]");
    if std::path::Path::new(&dir).exists() {
        eprintln!("gc_probe: {dir} exists; name a new directory");
        std::process::exit(2);
    }
    let (keys, passes, value_size) = (arg(2, 40_000), arg(3, 30), arg(4, 4096));
    let db = wisckey::Db::open(&dir, wisckey::Options::default())?;
    let value = vec![7u8; value_size as usize];
    let live = keys * (value_size + 14);
    let start = Instant::now();
    let mut last = Instant::now();
    println!("seconds,pass,log_mib,true_space_amp,gc_segments_collected,gc_mib_relocated");
    for pass in 0..passes {
        for i in 0..keys {
            let k = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ pass) % keys;
            db.put(format!("key{k:010}"), &value)?;
            if last.elapsed().as_millis() >= 700 {
                last = Instant::now();
                let stats = db.stats()?;
                println!(
                    "{:.1},{pass},{},{:.2},{},{}",
                    start.elapsed().as_secs_f64(),
                    stats.value_log.log_bytes >> 20,
                    stats.value_log.log_bytes as f64 / live as f64,
                    stats.gc.work.segments_collected,
                    stats.gc.work.bytes_relocated >> 20
                );
            }
        }
    }
    db.close()
}
