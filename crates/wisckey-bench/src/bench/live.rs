//! Live logical bytes, for space amplification: the harness keeps one bit per key index in
//! `0..num`, set by every put of that index and cleared by every delete, so that
//! `live bytes = set bits × (key_size + value_size)` is the data a perfect store would keep
//! (distinct keys written, minus those deleted since; every value has the same size).
//! It only knows what this process wrote: with `--use_existing_db` the count starts
//! unknown and space amplification is reported as n/a. Thread-safe: atomic words.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug)]
pub struct LiveKeys {
    words: Vec<AtomicU64>,
    known: AtomicBool,
}

impl LiveKeys {
    /// A set for indexes `0..num`; `known` says whether it starts out describing the
    /// database (true for a fresh one).
    pub fn new(num: u64, known: bool) -> LiveKeys {
        let words = num.div_ceil(64) as usize;
        LiveKeys {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            known: AtomicBool::new(known),
        }
    }

    /// Forgets everything: the database was destroyed.
    pub fn reset(&self) {
        for w in &self.words {
            w.store(0, Ordering::Relaxed);
        }
        self.known.store(true, Ordering::Relaxed);
    }

    pub fn insert(&self, index: u64) {
        if let Some(word) = self.words.get((index / 64) as usize) {
            word.fetch_or(1 << (index % 64), Ordering::Relaxed);
        }
    }

    pub fn remove(&self, index: u64) {
        if let Some(word) = self.words.get((index / 64) as usize) {
            word.fetch_and(!(1 << (index % 64)), Ordering::Relaxed);
        }
    }

    /// Number of live keys, or None if this process does not know what the database holds.
    pub fn count(&self) -> Option<u64> {
        if !self.known.load(Ordering::Relaxed) {
            return None;
        }
        Some(
            self.words
                .iter()
                .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
                .sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_distinct_inserts_minus_removes() {
        let live = LiveKeys::new(130, true);
        for i in [0, 5, 5, 64, 129, 129, 129] {
            live.insert(i);
        }
        assert_eq!(live.count(), Some(4));
        live.remove(5);
        live.remove(6); // never inserted: no effect
        assert_eq!(live.count(), Some(3));
        live.insert(1000); // out of range: ignored, not a panic
        assert_eq!(live.count(), Some(3));
    }

    #[test]
    fn unknown_until_reset() {
        let live = LiveKeys::new(10, false);
        live.insert(1);
        assert_eq!(live.count(), None);
        live.reset();
        assert_eq!(live.count(), Some(0));
    }
}
