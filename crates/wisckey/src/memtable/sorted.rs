//! Sorted views of a memtable: its entries' indices in internal-key order, for iterators
//! and the flush.
//!
//! Owns: two cached runs, `large` and `small`, that together hold every entry of
//! `[0, covered)` exactly once, each run in internal-key order. A view asked for after more
//! entries arrived sorts just the new stretch and merges it into `small`; when `small`
//! outgrows `SMALL_RUN_MAX` it is merged into `large`. So an iterator created after a few
//! puts costs a copy of `small` (at most 16 KiB), one after many puts an occasional merge
//! into `large`, and a flush one sort of the whole table. Runs are immutable once built
//! and shared by `Arc`: an iterator keeps the view it started with, and entries that
//! arrive later are not in it (they are newer than anything that iterator may show; see
//! `iter.rs`).

use std::cmp::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::MemTable;
use crate::key::compare_internal;

/// Largest `small` run; beyond it, `small` is merged into `large`.
const SMALL_RUN_MAX: usize = 4096;

/// The entries `[0, covered)` as two sorted runs of entry indices.
#[derive(Debug, Clone)]
pub(super) struct SortedView {
    pub large: Arc<[u32]>,
    pub small: Arc<[u32]>,
}

#[derive(Debug)]
struct RunsState {
    view: SortedView,
    covered: usize,
}

/// The cached runs of one memtable.
#[derive(Debug)]
pub(super) struct SortedRuns {
    state: Mutex<RunsState>,
}

impl Default for SortedRuns {
    fn default() -> SortedRuns {
        let empty: Arc<[u32]> = Arc::from(Vec::new());
        SortedRuns {
            state: Mutex::new(RunsState {
                view: SortedView {
                    large: Arc::clone(&empty),
                    small: empty,
                },
                covered: 0,
            }),
        }
    }
}

impl MemTable {
    /// Every entry published so far, in internal-key order (as two runs).
    pub(super) fn sorted_view(&self) -> SortedView {
        let mut state = self.sorted.state.lock();
        let published = self.len();
        if state.covered < published {
            let fresh = self.sort_range(state.covered, published);
            let small = self.merge_runs(&state.view.small, &fresh);
            if small.len() > SMALL_RUN_MAX {
                let large = self.merge_runs(&state.view.large, &small);
                state.view.large = Arc::from(large);
                state.view.small = Arc::from(Vec::new());
            } else {
                state.view.small = Arc::from(small);
            }
            state.covered = published;
        }
        state.view.clone()
    }

    fn compare_entries(&self, a: u32, b: u32) -> Ordering {
        compare_internal(self.entry(a).key.as_bytes(), self.entry(b).key.as_bytes())
    }

    /// Entries `[from, to)` in internal-key order. Sorted by the user key's first 16 bytes
    /// held beside each index first, so that most comparisons touch no entry (each entry
    /// touched may be a cache miss); ties fall back to the full order.
    fn sort_range(&self, from: usize, to: usize) -> Vec<u32> {
        let mut keyed: Vec<(u128, u32)> = (from..to)
            .map(|at| {
                // `at < published`, itself below 2^32 (see `MemTable::add`).
                let at = at as u32;
                (key_prefix(self.entry(at).user_key()), at)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| self.compare_entries(a.1, b.1)));
        keyed.into_iter().map(|(_, at)| at).collect()
    }

    /// Merges `b` into `a` (both sorted, disjoint): each element of `b` finds its place in
    /// what is left of `a` by binary search, and the stretches of `a` between are copied
    /// without touching their entries — cheap when `b` is much shorter than `a`.
    fn merge_runs(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let mut rest = a;
        for &insert in b {
            let before =
                rest.partition_point(|&x| self.compare_entries(x, insert) == Ordering::Less);
            merged.extend_from_slice(&rest[..before]);
            merged.push(insert);
            rest = &rest[before..];
        }
        merged.extend_from_slice(rest);
        merged
    }
}

/// The first 16 bytes of `user_key`, zero-padded, as a big-endian number: if two keys'
/// prefixes differ, they order the keys as the bytes do (a key that ends first is a prefix
/// of the other up to there, so it is the smaller, and its padding compares smaller).
fn key_prefix(user_key: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    let n = user_key.len().min(16);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u128::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn keys_in(m: &MemTable, run: &[u32]) -> Vec<Vec<u8>> {
        run.iter()
            .map(|&at| m.entry(at).key.as_bytes().to_vec())
            .collect()
    }

    /// Prefix order agrees with byte order wherever the prefixes differ, including keys
    /// that end early, hold zero bytes, or are longer than the prefix.
    #[test]
    fn key_prefix_orders_like_the_bytes() {
        let keys: [&[u8]; 9] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"ab",
            b"0123456789abcdef",
            b"0123456789abcdefX",
            b"0123456789abcdf",
        ];
        for a in keys {
            for b in keys {
                let (pa, pb) = (key_prefix(a), key_prefix(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} vs {b:?}");
                }
            }
        }
    }

    /// Views taken between random batches of puts (short keys with shared prefixes, long
    /// keys, many versions) always list every published entry once, in internal-key order,
    /// across the small run's merges into the large one.
    #[test]
    fn views_stay_complete_and_ordered_as_entries_arrive() {
        let seed = 0x5EED_u64;
        let mut rng = SmallRng::seed_from_u64(seed);
        let m = MemTable::new();
        let mut seq = 0u64;
        for round in 0..40 {
            let puts = if round % 7 == 0 { 3000 } else { rng.gen_range(0..300) };
            for _ in 0..puts {
                seq += 1;
                let key: Vec<u8> = match rng.gen_range(0..3) {
                    0 => format!("{:016}", rng.gen_range(0..500)).into_bytes(),
                    1 => format!("user:{:020}", rng.gen_range(0..500)).into_bytes(),
                    _ => vec![0; rng.gen_range(0..4)],
                };
                m.add(seq, ValueKind::Value, &key, b"v");
            }
            let view = m.sorted_view();
            let mut all = keys_in(&m, &view.large);
            all.extend(keys_in(&m, &view.small));
            assert_eq!(all.len(), m.len(), "seed {seed} round {round}");
            for run in [&view.large, &view.small] {
                let keys = keys_in(&m, run);
                assert!(
                    keys.windows(2)
                        .all(|w| compare_internal(&w[0], &w[1]) == Ordering::Less),
                    "seed {seed} round {round}: a run out of order"
                );
            }
            all.sort_by(|a, b| compare_internal(a, b));
            all.dedup();
            assert_eq!(all.len(), m.len(), "seed {seed} round {round}: duplicates");
        }
        assert!(m.sorted_view().small.len() <= SMALL_RUN_MAX);
    }
}
