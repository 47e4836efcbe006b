//! What a file holds after a simulated power loss ([`PowerLoss`]).
//!
//! Per file, the inputs are its durable bytes, its live bytes and `dirty_from` (the lowest
//! offset where they may differ). The unsynced change is "live bytes from `dirty_from` on".
//! - `DropUnsynced`: exactly the durable bytes. An unsynced truncation is therefore undone
//!   (the longer durable content comes back), as are unsynced punched holes.
//! - `TornTail { seed }`: the durable bytes with a random-length prefix of the unsynced
//!   change written over them from `dirty_from`; the file is as long as the longer of the
//!   two. Half the time a random sub-range of that written prefix reads as zeros (the size
//!   reached the disk, the data pages did not). Then, if the file is now shorter than
//!   that (it was truncated since its last sync), half the time it is cut to its live
//!   length: the truncation reached the disk. So the result never holds a byte that was
//!   never written, never exceeds the live length or the durable length, whichever is
//!   larger, and always keeps `durable[..dirty_from]`; an unsynced truncation may be
//!   undone or kept.
//!
//! Randomness is a SplitMix64 stream seeded by `seed` and consumed in path order, so an
//! image is a pure function of (state, seed).

/// How a simulated power loss treats bytes that were written but not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Only durable bytes survive.
    DropUnsynced,
    /// Durable bytes plus a seeded-random prefix of the unsynced ones, possibly partly
    /// zeroed.
    TornTail {
        /// Picks the prefix and the zeroed bytes.
        seed: u64,
    },
}

impl PowerLoss {
    pub(super) fn seed(self) -> u64 {
        match self {
            PowerLoss::DropUnsynced => 0,
            PowerLoss::TornTail { seed } => seed,
        }
    }
}

/// Small deterministic generator (SplitMix64); the crate has no runtime `rand` dependency.
#[derive(Debug)]
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough value in `0..=max`.
    fn up_to(&mut self, max: usize) -> usize {
        let bound = max as u64 + 1;
        if bound == 0 {
            return self.next_u64() as usize;
        }
        (self.next_u64() % bound) as usize
    }
}

/// The bytes a file holds after the power loss. See the module docs for the rules.
pub(super) fn surviving_bytes(
    durable: &[u8],
    live: &[u8],
    dirty_from: usize,
    mode: PowerLoss,
    rng: &mut SplitMix64,
) -> Vec<u8> {
    let mut out = durable.to_vec();
    if mode == PowerLoss::DropUnsynced {
        return out;
    }
    if dirty_from < live.len() {
        overlay_unsynced_prefix(&mut out, &live[dirty_from..], dirty_from, rng);
    }
    // The file shrank since its last sync, and the new size may have reached the disk
    // (a journal commit for another file's sake carries it): nothing may rely on an
    // unsynced truncation being undone.
    if live.len() < out.len() && rng.next_u64() % 2 == 0 {
        out.truncate(live.len());
    }
    out
}

/// Writes a random-length prefix of `unsynced` over `out` from `dirty_from`, half the time
/// with a random sub-range of it zeroed.
fn overlay_unsynced_prefix(
    out: &mut Vec<u8>,
    unsynced: &[u8],
    dirty_from: usize,
    rng: &mut SplitMix64,
) {
    let kept = rng.up_to(unsynced.len());
    if kept == 0 {
        return;
    }
    let end = dirty_from + kept;
    if out.len() < end {
        out.resize(end, 0);
    }
    out[dirty_from..end].copy_from_slice(&unsynced[..kept]);
    if rng.next_u64() % 2 == 0 {
        let zero_start = dirty_from + rng.up_to(kept - 1);
        let zero_len = 1 + rng.up_to(end - zero_start - 1);
        out[zero_start..zero_start + zero_len].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_unsynced_returns_durable_bytes() {
        let mut rng = SplitMix64::new(1);
        let got = surviving_bytes(b"abc", b"abcdef", 3, PowerLoss::DropUnsynced, &mut rng);
        assert_eq!(got, b"abc");
    }

    #[test]
    fn torn_tail_overlays_prefix_of_unsynced_change() {
        // durable "abcdef", live truncated to "ab" then "XYZW" appended: dirty_from = 2.
        for seed in 0..200 {
            let mut rng = SplitMix64::new(seed);
            let mode = PowerLoss::TornTail { seed };
            let got = surviving_bytes(b"abcdef", b"abXYZW", 2, mode, &mut rng);
            assert_eq!(got.len(), 6, "seed {seed}");
            assert_eq!(&got[..2], b"ab", "seed {seed}");
            // Each overlaid byte is the new byte, zero, or (past the kept prefix) the old.
            let kept_new = got[2..]
                .iter()
                .zip(b"XYZW".iter().zip(b"cdef"))
                .all(|(g, (new, old))| g == new || g == old || *g == 0);
            assert!(kept_new, "seed {seed}: {got:?}");
        }
    }

    #[test]
    fn torn_tail_sometimes_keeps_an_unsynced_truncation() {
        // durable "abcdef", live truncated to "abc" (dirty_from = 3), nothing appended.
        let mut lengths = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let mut rng = SplitMix64::new(seed);
            let mode = PowerLoss::TornTail { seed };
            let got = surviving_bytes(b"abcdef", b"abc", 3, mode, &mut rng);
            assert!(got == b"abcdef" || got == b"abc", "seed {seed}: {got:?}");
            lengths.insert(got.len());
        }
        assert_eq!(lengths, [3, 6].into(), "both outcomes occur");
        // Truncated, then extended: the cut may land at the live length, never shorter,
        // and never loses the bytes before the cut.
        let mut cut = 0;
        for seed in 0..200 {
            let mut rng = SplitMix64::new(seed);
            let mode = PowerLoss::TornTail { seed };
            let got = surviving_bytes(b"abcdefgh", b"abXY", 2, mode, &mut rng);
            assert!(got.len() == 4 || got.len() == 8, "seed {seed}: {got:?}");
            assert_eq!(&got[..2], b"ab", "seed {seed}");
            cut += usize::from(got.len() == 4);
        }
        assert!(cut > 0, "some images keep the truncation");
        let mut rng = SplitMix64::new(1);
        let got = surviving_bytes(b"abcdef", b"abc", 3, PowerLoss::DropUnsynced, &mut rng);
        assert_eq!(got, b"abcdef", "only durable bytes survive");
    }
}
