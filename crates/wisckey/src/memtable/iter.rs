//! Iterator over a memtable: a cursor over the two sorted runs of the view it took when it
//! was created (see `sorted.rs`), merged on the fly. Entries are read in place (they never
//! move or change), so a step copies nothing and takes no lock.
//!
//! Invariant: entries inserted after the view was taken are not shown. Every reader is at
//! a sequence number captured before it created its iterators (a `DbIterator`'s read
//! sequence; a flush reads an immutable memtable), and a write is inserted before its
//! sequence becomes visible, so such an entry is always newer than what the reader may see.
//!
//! Position: `(in_large, in_small)` split the two runs; the current entry is the smaller
//! of `large[in_large]` and `small[in_small]`, and every entry before either position is
//! smaller than it. Moving forward advances the run the current entry came from; moving
//! back takes the larger of the two entries just before the positions.

use std::cmp::Ordering;
use std::sync::Arc;

use super::sorted::SortedView;
use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;

/// Cursor over a memtable's entries in internal-key order.
#[derive(Debug)]
pub struct MemTableIterator {
    table: Arc<MemTable>,
    view: SortedView,
    in_large: usize,
    in_small: usize,
    /// The current entry and whether it came from the large run; `None`: not valid.
    current: Option<(u32, bool)>,
}

impl MemTableIterator {
    pub fn new(table: Arc<MemTable>) -> MemTableIterator {
        let view = table.sorted_view();
        MemTableIterator {
            table,
            view,
            in_large: 0,
            in_small: 0,
            current: None,
        }
    }

    fn key_of(&self, at: u32) -> &[u8] {
        self.table.entry(at).key.as_bytes()
    }

    /// Sets the current entry from the two positions.
    fn settle(&mut self) {
        let large = self.view.large.get(self.in_large).copied();
        let small = self.view.small.get(self.in_small).copied();
        self.current = match (large, small) {
            (Some(l), Some(s)) => {
                if compare_internal(self.key_of(l), self.key_of(s)) == Ordering::Less {
                    Some((l, true))
                } else {
                    Some((s, false))
                }
            }
            (Some(l), None) => Some((l, true)),
            (None, Some(s)) => Some((s, false)),
            (None, None) => None,
        };
    }

    fn first_not_less(&self, run: &[u32], target: &[u8]) -> usize {
        run.partition_point(|&at| compare_internal(self.key_of(at), target) == Ordering::Less)
    }

    /// Moves to the larger of the two entries just before the positions (invalid if there
    /// is none): every entry before the new positions is then smaller than it.
    fn step_back(&mut self) {
        let large = self.in_large.checked_sub(1).map(|at| self.view.large[at]);
        let small = self.in_small.checked_sub(1).map(|at| self.view.small[at]);
        let step_large = match (large, small) {
            (Some(l), Some(s)) => {
                compare_internal(self.key_of(l), self.key_of(s)) == Ordering::Greater
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => {
                self.current = None;
                return;
            }
        };
        if step_large {
            self.in_large -= 1;
        } else {
            self.in_small -= 1;
        }
        self.settle();
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.in_large = 0;
        self.in_small = 0;
        self.settle();
    }

    fn seek_to_last(&mut self) {
        // Past both ends: the last entry is the one just before them.
        self.in_large = self.view.large.len();
        self.in_small = self.view.small.len();
        self.step_back();
    }

    fn seek(&mut self, target: &[u8]) {
        self.in_large = self.first_not_less(&self.view.large, target);
        self.in_small = self.first_not_less(&self.view.small, target);
        self.settle();
    }

    fn next(&mut self) {
        let Some((_, from_large)) = self.current else {
            return;
        };
        if from_large {
            self.in_large += 1;
        } else {
            self.in_small += 1;
        }
        self.settle();
    }

    fn prev(&mut self) {
        if self.current.is_some() {
            self.step_back();
        }
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |(at, _)| self.key_of(at))
    }

    fn value(&self) -> &[u8] {
        self.current
            .map_or(&[], |(at, _)| self.table.entry(at).value.as_slice())
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{seek_key, user_key, ValueKind};

    #[test]
    fn iterates_both_ways_and_seeks() {
        let m = Arc::new(MemTable::new());
        m.add(1, ValueKind::Value, b"b", b"1");
        m.add(2, ValueKind::Value, b"a", b"2");
        m.add(3, ValueKind::Value, b"b", b"3");
        let mut it = MemTableIterator::new(Arc::clone(&m));
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((user_key(it.key()).to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"b".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"1".to_vec())
            ]
        );
        it.seek_to_last();
        assert_eq!(it.value(), b"1");
        it.prev();
        assert_eq!(it.value(), b"3");
        it.seek(&seek_key(b"b", 2));
        assert_eq!(it.value(), b"1");
        it.seek(&seek_key(b"c", 9));
        assert!(!it.valid());
    }

    /// Mixed with `prev` and seeks, across many entries, the iterator shows exactly the
    /// keys' order.
    #[test]
    fn forward_batches_agree_with_the_map_across_direction_changes() {
        let m = Arc::new(MemTable::new());
        for i in 0..200u32 {
            m.add(u64::from(i) + 1, ValueKind::Value, format!("k{i:04}").as_bytes(), b"v");
        }
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| format!("k{i:04}").into_bytes()).collect();
        let mut it = MemTableIterator::new(Arc::clone(&m));
        it.seek_to_first();
        let mut at = 0usize;
        // Walk forward 70 (three batches), back 5, forward 100, then past the end.
        for (forward, steps) in [(true, 70), (false, 5), (true, 100), (true, 40)] {
            for _ in 0..steps {
                if forward {
                    it.next();
                    at += 1;
                } else {
                    it.prev();
                    at -= 1;
                }
                if at < keys.len() {
                    assert_eq!(user_key(it.key()), keys[at].as_slice(), "at {at}");
                } else {
                    assert!(!it.valid());
                }
            }
        }
        it.seek(&seek_key(b"k0150", 1000));
        assert_eq!(user_key(it.key()), b"k0150");
        it.next();
        assert_eq!(user_key(it.key()), b"k0151");
    }

    /// A model check: iterators created between random batches of puts (their views split
    /// between the large and the small run), driven by random seeks and steps both ways,
    /// show exactly the entries that existed when they were created, in order; entries
    /// added after an iterator was created never show in it.
    #[test]
    fn random_walks_match_a_sorted_model() {
        use crate::key::{compare_internal, make_internal_key};
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};

        let seed = 0xC0FFEE_u64;
        let mut rng = SmallRng::seed_from_u64(seed);
        let m = Arc::new(MemTable::new());
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut seq = 0u64;
        for round in 0..30 {
            let puts = if round % 5 == 4 { 5000 } else { rng.gen_range(0..200) };
            for _ in 0..puts {
                seq += 1;
                let key = format!("{:05}", rng.gen_range(0..3000));
                m.add(seq, ValueKind::Value, key.as_bytes(), &seq.to_le_bytes());
                model.push(make_internal_key(key.as_bytes(), seq, ValueKind::Value));
            }
            model.sort_by(|a, b| compare_internal(a, b));
            let mut it = MemTableIterator::new(Arc::clone(&m));
            // Written after the iterator was created: must not show.
            seq += 1;
            m.add(seq, ValueKind::Value, b"00000", b"late");
            let late = make_internal_key(b"00000", seq, ValueKind::Value);
            let mut at: Option<usize> = None;
            for step in 0..400 {
                match rng.gen_range(0..10) {
                    0 => {
                        it.seek_to_first();
                        at = (!model.is_empty()).then_some(0);
                    }
                    1 => {
                        it.seek_to_last();
                        at = model.len().checked_sub(1);
                    }
                    2 | 3 => {
                        let probe = seek_key(format!("{:05}", rng.gen_range(0..3100)).as_bytes(), rng.gen_range(0..=seq));
                        it.seek(&probe);
                        let first = model.partition_point(|k| compare_internal(k, &probe).is_lt());
                        at = (first < model.len()).then_some(first);
                    }
                    4..=6 if at.is_some() => {
                        it.next();
                        at = at.and_then(|a| (a + 1 < model.len()).then_some(a + 1));
                    }
                    _ if at.is_some() => {
                        it.prev();
                        at = at.and_then(|a| a.checked_sub(1));
                    }
                    _ => continue,
                }
                match at {
                    Some(a) => {
                        assert!(it.valid(), "seed {seed} round {round} step {step}");
                        assert_eq!(it.key(), model[a].as_slice(), "seed {seed} round {round} step {step}");
                        assert_ne!(it.key(), late.as_slice());
                    }
                    None => assert!(!it.valid(), "seed {seed} round {round} step {step}"),
                }
            }
            model.push(late);
        }
    }
}
