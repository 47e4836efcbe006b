// Temporary microbenchmark (not committed): ns per point read of hot 1 KiB values.
use std::time::Instant;
fn main() -> wisckey::Result<()> {
    let dir = std::env::args().nth(1).expect("dir");
    let n: u64 = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let mut opts = wisckey::Options::default();
    if let Some(c) = std::env::var("CACHE_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        opts.value_cache_size = c << 20;
    }
    let db = wisckey::Db::open(&dir, opts)?;
    let value = vec![b'x'; 1024 + 9];
    for i in 0..n {
        db.put(format!("key:{i:012}"), &value)?;
    }
    let mut buf = Vec::new();
    let with = std::env::var("WITH").is_ok();
    let mut out = Vec::with_capacity(1 << 20);
    let mut x: u64 = 88172645463325252;
    let mut keys = Vec::new();
    for _ in 0..2_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        keys.push(format!("key:{:012}", x % n));
    }
    for round in 0..5 {
        // warm both paths (the value cache admits on a second miss)
        let t = Instant::now();
        let mut total = 0usize;
        for k in &keys {
            if with {
                let _ = db.get_with(k, &mut buf, |v| {
                    out.extend_from_slice(v);
                })?;
            } else {
                if db.get_into(k, &mut buf)? {
                    out.extend_from_slice(&buf);
                }
            }
            total += out.len();
            out.clear();
        }
        let el = t.elapsed();
        println!(
            "round {round}: {:.0} ns/get ({total})",
            el.as_nanos() as f64 / keys.len() as f64
        );
    }
    Ok(())
}
