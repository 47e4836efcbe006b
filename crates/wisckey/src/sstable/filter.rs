//! Bloom filter over the USER keys of a whole table, stored in its own block.
//!
//! Layout: `bits` (ceil(n * bits_per_key / 8) bytes, at least 8) followed by one byte `k`,
//! the number of probes. Probe positions use double hashing (Kirsch–Mitzenmacher) over one
//! 64-bit hash: `h1 + i * h2 (mod nbits)` with `h1`/`h2` the low/high 32 bits.
//! The hash function is part of the on-disk format: changing it needs a new format
//! version. A reader never reports a false negative for a filter built over a key.
//! `BloomFilter` is immutable after construction, hence `Send + Sync`.

/// Largest probe count written or accepted.
const MAX_PROBES: u8 = 30;

/// 64-bit hash of a user key. Frozen: written filters depend on it.
pub fn bloom_hash(data: &[u8]) -> u64 {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let mut h = (data.len() as u64).wrapping_mul(K1) ^ 0x2545_f491_4f6c_dd1d;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word).wrapping_mul(K2).rotate_left(31);
        h = (h ^ w.wrapping_mul(K1)).rotate_left(27).wrapping_mul(K1);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_le_bytes(tail).wrapping_mul(K2).rotate_left(31);
    h ^= w.wrapping_mul(K1);
    // Final avalanche so that every input bit affects both 32-bit halves.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn probe_positions(hash: u64, nbits: u64, k: u8) -> impl Iterator<Item = u64> {
    let h1 = hash & 0xffff_ffff;
    let h2 = hash >> 32;
    (0..u64::from(k)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % nbits)
}

/// Collects key hashes and produces the filter block contents.
#[derive(Debug)]
pub struct FilterBuilder {
    bits_per_key: usize,
    hashes: Vec<u64>,
}

impl FilterBuilder {
    pub fn new(bits_per_key: usize) -> FilterBuilder {
        FilterBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(bloom_hash(user_key));
    }

    pub fn finish(&self) -> Vec<u8> {
        // ln 2 * bits/key minimizes the false-positive rate.
        let k = ((self.bits_per_key as f64 * 0.69).round() as u8).clamp(1, MAX_PROBES);
        let nbits = (self.hashes.len().saturating_mul(self.bits_per_key)).max(64);
        let nbytes = nbits.div_ceil(8);
        let nbits = nbytes as u64 * 8;
        let mut out = vec![0u8; nbytes + 1];
        for &h in &self.hashes {
            for pos in probe_positions(h, nbits, k) {
                out[(pos / 8) as usize] |= 1 << (pos % 8);
            }
        }
        out[nbytes] = k;
        out
    }
}

/// A decoded filter block.
#[derive(Debug)]
pub struct BloomFilter {
    data: Vec<u8>,
}

impl BloomFilter {
    /// Validates filter block contents; `None` if they cannot be a filter we wrote.
    pub fn new(data: Vec<u8>) -> Option<BloomFilter> {
        let (&k, bits) = data.split_last()?;
        if bits.is_empty() || k == 0 || k > MAX_PROBES {
            return None;
        }
        Some(BloomFilter { data })
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let Some((&k, bits)) = self.data.split_last() else {
            return true;
        };
        let nbits = bits.len() as u64 * 8;
        probe_positions(bloom_hash(user_key), nbits, k)
            .all(|pos| bits[(pos / 8) as usize] & (1 << (pos % 8)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: usize) -> BloomFilter {
        let mut b = FilterBuilder::new(bits_per_key);
        for k in keys {
            b.add_key(&k);
        }
        BloomFilter::new(b.finish()).expect("valid filter")
    }

    #[test]
    fn empty_filter_matches_nothing() {
        let f = build(std::iter::empty(), 10);
        assert!(!f.may_contain(b"x"));
        assert!(!f.may_contain(b""));
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let key = |i: u32| format!("key{i}").into_bytes();
        let n = 10_000;
        let f = build((0..n).map(key), 10);
        for i in 0..n {
            assert!(f.may_contain(&key(i)), "false negative for key {i}");
        }
        let probes = 10_000;
        let false_positives = (n..n + probes).filter(|&i| f.may_contain(&key(i))).count();
        let rate = false_positives as f64 / f64::from(probes);
        assert!(rate < 0.02, "false positive rate {rate}");
    }

    #[test]
    fn binary_keys_of_every_length_are_found() {
        let keys: Vec<Vec<u8>> = (0..40usize)
            .map(|len| (0..len).map(|i| (i * 37 + len) as u8).collect())
            .collect();
        let f = build(keys.clone().into_iter(), 10);
        assert!(keys.iter().all(|k| f.may_contain(k)));
    }

    #[test]
    fn invalid_filter_contents_are_rejected() {
        assert!(BloomFilter::new(vec![]).is_none());
        assert!(BloomFilter::new(vec![7]).is_none());
        assert!(BloomFilter::new(vec![0xff, 0]).is_none());
        assert!(BloomFilter::new(vec![0xff, 31]).is_none());
        assert!(BloomFilter::new(vec![0xff, 6]).is_some());
    }
}
