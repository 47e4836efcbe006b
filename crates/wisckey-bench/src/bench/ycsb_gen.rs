//! YCSB core-workload generators, written from the YCSB definitions so that peers can match
//! them exactly (see docs/BENCHMARKS.md, "YCSB"):
//! - uniform doubles: `(splitmix64 >> 11) × 2^-53`, in [0, 1);
//! - `fnvhash64(v)`: YCSB's FNV-1a over the 8 little-endian bytes of `v`, then the absolute
//!   value as a signed 64-bit integer (Java's `Math.abs`, so `i64::MIN` stays negative and is
//!   reinterpreted as unsigned);
//! - zipfian (Gray et al., "Quickly generating billion-record synthetic databases", as in
//!   YCSB's `ZipfianGenerator`), theta 0.99, zeta grown incrementally when the item count
//!   grows (used by `latest`);
//! - scrambled zipfian: a zipfian over YCSB's fixed 10^10 items (zeta precomputed by YCSB:
//!   26.46902820178302), then `fnvhash64(value) % item_count`;
//! - latest: `max - zipfian(max + 1)` over the inserted keys (YCSB's SkewedLatest).
//!
//! Plain data owned by one thread (`ycsb::run` builds them before its clock starts and gives
//! each thread a copy).

use super::workload::SplitMix64;

pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// YCSB's ScrambledZipfianGenerator item space and its zeta(10^10, 0.99).
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// A uniform double in [0, 1).
pub fn next_f64(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

pub fn fnvhash64(mut value: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        hash ^= value & 0xff;
        value >>= 8;
        hash = hash.wrapping_mul(1_099_511_628_211);
    }
    (hash as i64).wrapping_abs() as u64
}

fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    (from..to).fold(initial, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// Zipfian over `0..items` (item 0 the most popular).
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(items: u64) -> Zipfian {
        let zetan = zeta(0, items, ZIPFIAN_CONSTANT, 0.0);
        Zipfian::with_zeta(items, zetan)
    }

    fn with_zeta(items: u64, zetan: f64) -> Zipfian {
        let theta = ZIPFIAN_CONSTANT;
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2,
            zetan,
            eta: 0.0,
        };
        z.eta = z.eta_for(items);
        z
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// A value in `0..items`, after growing the item count to `items` if it is larger.
    pub fn next_of(&mut self, rng: &mut SplitMix64, items: u64) -> u64 {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta_for(items);
        }
        let u = next_f64(rng);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }

    pub fn next(&mut self, rng: &mut SplitMix64) -> u64 {
        let items = self.items;
        self.next_of(rng, items)
    }
}

/// YCSB's ScrambledZipfianGenerator over `0..items`.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    items: u64,
    zipf: Zipfian,
}

impl ScrambledZipfian {
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            items: items.max(1),
            zipf: Zipfian::with_zeta(SCRAMBLED_ITEMS, SCRAMBLED_ZETAN),
        }
    }

    pub fn next(&mut self, rng: &mut SplitMix64) -> u64 {
        fnvhash64(self.zipf.next(rng)) % self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_doubles_stay_in_unit_interval() {
        let mut rng = SplitMix64::new(1);
        let samples: Vec<f64> = (0..10_000).map(|_| next_f64(&mut rng)).collect();
        for &x in &samples {
            assert!((0.0..1.0).contains(&x), "{x} outside [0, 1)");
        }
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        assert!((0.48..0.52).contains(&mean), "mean {mean}");
    }

    #[test]
    fn fnvhash64_matches_ycsb() {
        // YCSB's `Utils.fnvhash64(long)` (FNV-1a over the 8 low-first bytes, then
        // `Math.abs` of the signed result); the values come from a Python port of that Java.
        for (v, want) in [
            (0u64, 6_284_781_860_667_377_211u64),
            (1, 8_517_097_267_634_966_620),
            (42, 55_488_592_825_689_361),
            (12_345_678_901, 5_686_546_334_140_306_951),
            (u64::MAX, 8_289_690_350_564_177_859),
        ] {
            assert_eq!(fnvhash64(v), want, "fnvhash64({v})");
        }
    }

    #[test]
    fn zipfian_is_skewed_like_theta_099() {
        // With theta 0.99 over 1000 items, item 0 has probability 1/zeta(1000) ≈ 0.134
        // and the top 10 items about 39%.
        let seed = 99;
        let mut rng = SplitMix64::new(seed);
        let mut z = Zipfian::new(1000);
        let n = 200_000;
        let mut counts = vec![0u32; 1000];
        for _ in 0..n {
            counts[z.next(&mut rng) as usize] += 1;
        }
        let p0 = f64::from(counts[0]) / f64::from(n);
        let top10 = counts[..10].iter().map(|&c| f64::from(c)).sum::<f64>() / f64::from(n);
        let expected0 = 1.0 / zeta(0, 1000, 0.99, 0.0);
        assert!(
            (p0 - expected0).abs() < 0.01,
            "seed {seed}: p0 {p0} vs {expected0}"
        );
        assert!((0.33..0.45).contains(&top10), "seed {seed}: top10 {top10}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[900]);
    }

    #[test]
    fn zipfian_grows_incrementally_like_a_fresh_one() {
        let mut grown = Zipfian::new(100);
        let mut rng = SplitMix64::new(5);
        grown.next_of(&mut rng, 5000);
        let fresh = Zipfian::new(5000);
        assert!((grown.zetan - fresh.zetan).abs() < 1e-9);
        assert!((grown.eta - fresh.eta).abs() < 1e-12);
    }

    #[test]
    fn a_copy_draws_what_a_fresh_generator_draws() {
        // ycsb::run builds latest's zipfian once, before the clock, and gives each thread a
        // copy: the copies must draw (and grow) exactly as per-thread fresh ones did.
        let proto = Zipfian::new(3000);
        for thread in 0..2u64 {
            let mut copy = proto.clone();
            let mut fresh = Zipfian::new(3000);
            let (mut a, mut b) = (SplitMix64::new(thread), SplitMix64::new(thread));
            for i in 0..2000u64 {
                let items = 3000 + i / 10;
                assert_eq!(copy.next_of(&mut a, items), fresh.next_of(&mut b, items));
            }
        }
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_items_and_stays_in_range() {
        let seed = 3;
        let mut rng = SplitMix64::new(seed);
        let mut z = ScrambledZipfian::new(10_000);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..100_000 {
            let v = z.next(&mut rng);
            counts[v as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        // Skewed: the hottest item is far above the mean of 10.
        assert!(sorted[0] > 1000, "seed {seed}: hottest {}", sorted[0]);
        // Scrambled: the hottest item is not item 0.
        let hottest = counts.iter().position(|&c| c == sorted[0]);
        assert_ne!(hottest, Some(0), "seed {seed}");
    }
}
