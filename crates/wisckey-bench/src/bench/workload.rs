//! The workload definition shared, bit for bit, with the peer programs in `bench/peers/`
//! (C++ for LevelDB/RocksDB, Go for Badger): the pseudo-random generator, how a benchmark's
//! key stream is seeded, the key format and the value bytes. Any change here must be made
//! in every peer too, or the engines no longer see identical key orders.
//!
//! - Generator: splitmix64 (Steele et al.), 64-bit state.
//! - Stream seed of benchmark `name`, thread `t`: `seed ^ fnv1a64(name) ^ (t + 1) * GOLDEN`.
//! - Random key index: `next() % num`.
//! - Key: the index in decimal, zero-padded to `key_size` bytes (db_bench's format).
//! - Missing key (`readmissing`): the key of an index followed by one `.` byte, so it is
//!   `key_size + 1` bytes long and never equal to a written key (db_bench's suffix).
//! - Values: consecutive `value_size` slices of a pool of `max(1 MiB, value_size)` bytes
//!   filled from splitmix64 seeded with `VALUE_POOL_SEED` (little-endian words); the slice
//!   start wraps to 0 when the next slice would pass the end. Incompressible bytes.
//!
//! Everything here is plain data owned by one thread.

/// splitmix64's increment (2^64 / golden ratio).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Seed of the value pool ("value" in ASCII).
pub const VALUE_POOL_SEED: u64 = 0x0076_616C_7565;
/// Smallest value pool.
const VALUE_POOL_MIN: usize = 1 << 20;

/// The splitmix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// FNV-1a, 64 bit: turns a benchmark name into part of its stream seed.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
    }
    hash
}

/// The generator of benchmark `name`'s keys in thread `thread`.
pub fn key_stream(seed: u64, name: &str, thread: u64) -> SplitMix64 {
    SplitMix64::new(seed ^ fnv1a64(name.as_bytes()) ^ (thread + 1).wrapping_mul(GOLDEN))
}

/// Writes key `index` into `out` (cleared first): decimal, zero-padded to `key_size`.
pub fn format_key(index: u64, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    let digits = index.to_string();
    out.resize(key_size.saturating_sub(digits.len()), b'0');
    out.extend_from_slice(digits.as_bytes());
}

/// Writes the never-written key of `index` into `out`: its key followed by `.`.
pub fn format_missing_key(index: u64, key_size: usize, out: &mut Vec<u8>) {
    format_key(index, key_size, out);
    out.push(b'.');
}

/// Whether every index below `num` fits in `key_size` decimal digits.
pub fn key_size_fits(num: u64, key_size: usize) -> bool {
    num.saturating_sub(1).to_string().len() <= key_size
}

/// Hands out value bytes; one per thread.
#[derive(Debug)]
pub struct ValuePool {
    bytes: Vec<u8>,
    value_size: usize,
    next: usize,
}

impl ValuePool {
    pub fn new(value_size: usize) -> ValuePool {
        let len = VALUE_POOL_MIN.max(value_size);
        let mut rng = SplitMix64::new(VALUE_POOL_SEED);
        let mut bytes = Vec::with_capacity(len + 8);
        while bytes.len() < len {
            bytes.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        bytes.truncate(len);
        ValuePool {
            bytes,
            value_size,
            next: 0,
        }
    }

    /// The next value.
    pub fn next_value(&mut self) -> &[u8] {
        if self.next + self.value_size > self.bytes.len() {
            self.next = 0;
        }
        let start = self.next;
        self.next += self.value_size;
        &self.bytes[start..start + self.value_size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_reference_vector() {
        // Reference: splitmix64 seeded with 0 yields 0xE220A8397B1DCDAF first.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn fnv1a_matches_reference_vector() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn keys_are_zero_padded_decimal() {
        let mut k = Vec::new();
        format_key(42, 16, &mut k);
        assert_eq!(k, b"0000000000000042");
        format_missing_key(42, 16, &mut k);
        assert_eq!(k, b"0000000000000042.");
        assert!(key_size_fits(10_000_000_000_000_000, 16));
        assert!(!key_size_fits(10_000_000_000_000_001, 16));
    }

    #[test]
    fn value_pool_wraps_and_has_fixed_size() {
        let mut pool = ValuePool::new(1000);
        let first = pool.next_value().to_vec();
        assert_eq!(first.len(), 1000);
        for _ in 0..(VALUE_POOL_MIN / 1000) - 1 {
            assert_eq!(pool.next_value().len(), 1000);
        }
        assert_eq!(pool.next_value(), &first[..]);
    }
}
