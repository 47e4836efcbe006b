//! Scan heat: which key ranges forward scans read out of log order, and when one of them
//! has earned a clustering pass ([`super::cluster`]) on the GC thread.
//!
//! A scan over values in write order pays one random read per small value; after a pass
//! over the range it reads them as runs of back-to-back records. The pass costs about one
//! such scan plus a sequential write, so it pays for itself once scans have spent as much
//! there — the ski-rental rule: a range is clustered once its scattered reads reach
//! `ratio` × the values a pass would move. What a pass would move takes a keys-only
//! estimate, which is itself a read of the range's keys, so it is taken only once the
//! scattered reads reach `ratio` × a low guess of the range's keys (its table's size over
//! [`TABLE_BYTES_PER_KEY`], at least [`MIN_SCATTERED_READS`]). Ranges nobody scans, or
//! scans read only once, are never rewritten.
//!
//! Owns: the per-range counters and the queue of ranges due for an estimate. The ranges
//! ("units") are the key intervals between the smallest keys of the LSM-tree's deepest
//! non-empty level's tables (that level holds most keys and its tables do not overlap), or
//! the whole key space while only level 0 has tables. A unit is named by its table's file
//! number, so a compaction that rewrites the table starts its count afresh.
//!
//! Invariants: pure bookkeeping (no I/O, no lock of its own); a unit is queued at most once
//! until the GC thread answers for it ([`ScanHeat::estimated`] or [`ScanHeat::abandoned`]);
//! counters exist only for units of a recent version (older ones are pruned), so memory is
//! bounded by the number of tables.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::version::{FileMeta, Version, NUM_LEVELS};

/// Scattered reads a unit collects at least before its first estimate: an estimate reads
/// the unit's keys, which this many random value reads outweigh.
pub(crate) const MIN_SCATTERED_READS: u64 = 4096;

/// Table bytes per key assumed when guessing a unit's keys from its table's size before the
/// first estimate: more than a key, sequence number and pointer take in a table (about 40
/// bytes for 16-byte keys), so the guess is low and the estimate comes early rather than
/// late.
pub(crate) const TABLE_BYTES_PER_KEY: u64 = 64;

/// The unit of a database whose tables are all at level 0 (or that has none).
const WHOLE_KEY_SPACE: u64 = 0;

/// A key range due for a look: `lower` inclusive, `upper` exclusive, `None` unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DueRange {
    pub unit: u64,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Unit {
    scattered: u64,
    /// Scattered reads at which the unit is queued again; 0 until an estimate said what a
    /// pass would move (the guess from its table's size applies).
    needed: u64,
    queued: bool,
}

/// The scan heat of one database (kept in memory only: a reopened database starts cold).
#[derive(Debug, Default)]
pub(crate) struct ScanHeat {
    units: HashMap<u64, Unit>,
    due: VecDeque<DueRange>,
}

impl ScanHeat {
    /// Adds `scattered` out-of-order value reads that a scan made between user keys `first`
    /// and `last` (in key order) of `version`. Returns whether a unit became due.
    pub(crate) fn record(
        &mut self,
        version: &Version,
        first: &[u8],
        last: &[u8],
        scattered: u64,
        ratio: f64,
    ) -> bool {
        let files = deepest_level_files(version);
        let (from, to) = if files.is_empty() {
            (0, 0)
        } else {
            let from = unit_index(files, first);
            (from, unit_index(files, last).max(from))
        };
        let spanned = (to - from + 1) as u64;
        let mut became_due = false;
        for (n, index) in (from..=to).enumerate() {
            let share = scattered / spanned + u64::from((n as u64) < scattered % spanned);
            let (id, table_bytes) = match files.get(index) {
                Some(f) => (f.number, f.file_size),
                None => (WHOLE_KEY_SPACE, version.level_bytes(0)),
            };
            let unit = self.units.entry(id).or_default();
            unit.scattered += share;
            let needed = match unit.needed {
                0 => times(ratio, table_bytes / TABLE_BYTES_PER_KEY),
                n => n,
            };
            if !unit.queued && unit.scattered >= needed {
                unit.queued = true;
                self.due.push_back(unit_range(files, index));
                became_due = true;
            }
        }
        if self.units.len() > files.len() + 64 {
            self.units.retain(|id, unit| {
                unit.queued || files.iter().any(|f| f.number == *id) || files.is_empty()
            });
        }
        became_due
    }

    /// Whether a range is due for an estimate.
    pub(crate) fn has_due(&self) -> bool {
        !self.due.is_empty()
    }

    /// The next range due for an estimate, oldest first.
    pub(crate) fn next_due(&mut self) -> Option<DueRange> {
        self.due.pop_front()
    }

    /// The estimate of a due unit: a pass would move `moves` values. Returns whether its
    /// scattered reads have reached `ratio` × that, i.e. whether to run the pass now; if
    /// not, the unit is queued again once they do. A unit with nothing to move starts over.
    pub(crate) fn estimated(&mut self, unit: u64, moves: u64, ratio: f64) -> bool {
        let unit = self.units.entry(unit).or_default();
        unit.queued = false;
        if moves == 0 {
            *unit = Unit::default();
            return false;
        }
        unit.needed = times(ratio, moves);
        unit.scattered >= unit.needed
    }

    /// The pass over `unit` ran: its values are in key order, its count starts over. Still
    /// queued if scans made it due again during the pass: that entry answers for it (reset
    /// too, the next scans queued it a second time).
    pub(crate) fn passed(&mut self, unit: u64) {
        let queued = self.units.get(&unit).is_some_and(|u| u.queued);
        self.units.insert(
            unit,
            Unit {
                queued,
                ..Unit::default()
            },
        );
    }

    /// The look at `unit` failed (a full disk, an error): it waits for more reads.
    pub(crate) fn abandoned(&mut self, unit: u64) {
        if let Some(unit) = self.units.get_mut(&unit) {
            unit.queued = false;
            unit.needed = unit.scattered.saturating_mul(2).max(MIN_SCATTERED_READS);
        }
    }
}

/// `ratio` × `count` scattered reads, at least [`MIN_SCATTERED_READS`]. (`as` saturates: an
/// absurd ratio means "never", which is what it says.)
fn times(ratio: f64, count: u64) -> u64 {
    ((count as f64 * ratio).ceil() as u64).max(MIN_SCATTERED_READS)
}

/// Tables of the deepest level that has any, if it is above level 0 (level 0's tables
/// overlap, so they partition nothing).
fn deepest_level_files(version: &Version) -> &[Arc<FileMeta>] {
    (1..NUM_LEVELS)
        .rev()
        .map(|level| version.files(level))
        .find(|files| !files.is_empty())
        .unwrap_or(&[])
}

/// The unit of `key`: the last table whose smallest key is at most `key` (the first table
/// for keys below every table).
fn unit_index(files: &[Arc<FileMeta>], key: &[u8]) -> usize {
    files
        .partition_point(|f| f.smallest_user_key() <= key)
        .saturating_sub(1)
}

fn unit_range(files: &[Arc<FileMeta>], index: usize) -> DueRange {
    let Some(file) = files.get(index) else {
        return DueRange {
            unit: WHOLE_KEY_SPACE,
            lower: None,
            upper: None,
        };
    };
    DueRange {
        unit: file.number,
        lower: (index > 0).then(|| file.smallest_user_key().to_vec()),
        upper: files.get(index + 1).map(|f| f.smallest_user_key().to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::version::VersionEdit;

    fn table(number: u64, smallest: &str, largest: &str) -> FileMeta {
        FileMeta {
            number,
            // Small enough that the first look comes at `MIN_SCATTERED_READS`.
            file_size: 64 << 10,
            smallest: make_internal_key(smallest.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(largest.as_bytes(), 1, ValueKind::Value),
        }
    }

    fn version_with(level: usize, tables: &[FileMeta]) -> Version {
        let mut edit = VersionEdit::default();
        for t in tables {
            edit.add_file(level, t.clone());
        }
        Version::default().apply(&edit).expect("tables fit")
    }

    /// Defect: a pass reset its unit's `queued` flag while scans during the pass had queued
    /// it again, so the next scans queued it a second time: two estimates, sometimes two
    /// passes back to back.
    #[test]
    fn a_unit_made_due_during_its_pass_is_queued_once() {
        let v = version_with(2, &[table(7, "a", "f"), table(8, "g", "m"), table(9, "n", "z")]);
        let mut heat = ScanHeat::default();
        assert!(heat.record(&v, b"h", b"k", MIN_SCATTERED_READS, 1.0));
        let due = heat.next_due().expect("due");
        assert!(heat.estimated(due.unit, 10, 1.0), "the scans paid for a pass");
        // Scans while the pass runs make the unit due again.
        assert!(heat.record(&v, b"h", b"k", MIN_SCATTERED_READS, 1.0));
        heat.passed(due.unit);
        assert!(
            !heat.record(&v, b"h", b"k", MIN_SCATTERED_READS, 1.0),
            "already queued"
        );
        assert_eq!(heat.next_due().map(|d| d.unit), Some(8));
        assert_eq!(heat.next_due(), None, "queued once");
    }

    #[test]
    fn a_unit_is_due_once_its_scattered_reads_reach_the_minimum_and_queued_once() {
        let v = version_with(2, &[table(7, "a", "f"), table(8, "g", "m"), table(9, "n", "z")]);
        let mut heat = ScanHeat::default();
        assert!(!heat.record(&v, b"h", b"k", MIN_SCATTERED_READS - 1, 1.0));
        assert!(heat.record(&v, b"h", b"k", 1, 1.0));
        assert!(!heat.record(&v, b"h", b"k", 10_000, 1.0), "already queued");
        let due = heat.next_due().expect("due");
        assert_eq!(
            due,
            DueRange {
                unit: 8,
                lower: Some(b"g".to_vec()),
                upper: Some(b"n".to_vec())
            }
        );
        assert_eq!(heat.next_due(), None);
    }

    #[test]
    fn reads_spanning_units_are_shared_and_the_ends_are_unbounded() {
        let v = version_with(1, &[table(7, "c", "f"), table(8, "g", "m"), table(9, "n", "z")]);
        let mut heat = ScanHeat::default();
        // Below the first table's smallest key counts for the first unit.
        assert!(heat.record(&v, b"a", b"zz", 3 * MIN_SCATTERED_READS, 1.0));
        let due: Vec<_> = std::iter::from_fn(|| heat.next_due()).collect();
        assert_eq!(due.len(), 3);
        assert_eq!((due[0].unit, &due[0].lower), (7, &None));
        assert_eq!((due[2].unit, &due[2].upper), (9, &None));
    }

    #[test]
    fn the_estimate_sets_the_price_and_a_pass_starts_over() {
        let v = version_with(1, &[table(7, "a", "z")]);
        let mut heat = ScanHeat::default();
        heat.record(&v, b"b", b"c", MIN_SCATTERED_READS, 1.0);
        let due = heat.next_due().expect("due");
        // A pass would move 10,000 values: 4,096 reads have not paid for it yet.
        assert!(!heat.estimated(due.unit, 10_000, 1.0));
        assert!(!heat.record(&v, b"b", b"c", 5_000, 1.0));
        assert!(heat.record(&v, b"b", b"c", 904, 1.0), "10,000 reached");
        let due = heat.next_due().expect("due again");
        assert!(heat.estimated(due.unit, 10_000, 1.0));
        heat.passed(due.unit);
        assert!(!heat.record(&v, b"b", b"c", MIN_SCATTERED_READS - 1, 1.0), "counted afresh");
        // Nothing to move: the count starts over instead of asking again at once.
        assert!(heat.record(&v, b"b", b"c", 1, 1.0));
        let due = heat.next_due().expect("due");
        assert!(!heat.estimated(due.unit, 0, 1.0));
        assert!(!heat.record(&v, b"b", b"c", MIN_SCATTERED_READS - 1, 1.0));
    }

    #[test]
    fn only_level_zero_means_one_unit_over_every_key() {
        let v = version_with(0, &[table(7, "a", "m"), table(8, "c", "z")]);
        let mut heat = ScanHeat::default();
        assert!(heat.record(&v, b"b", b"y", MIN_SCATTERED_READS, 1.0));
        let due = heat.next_due().expect("due");
        assert_eq!((due.unit, due.lower, due.upper), (WHOLE_KEY_SPACE, None, None));
        heat.abandoned(due.unit);
        assert!(!heat.record(&v, b"b", b"y", MIN_SCATTERED_READS - 1, 1.0), "waits for twice the reads");
        assert!(heat.record(&v, b"b", b"y", 1, 1.0));
    }

    #[test]
    fn the_first_look_waits_for_a_guess_of_the_range_keys_times_the_ratio() {
        let mut big = table(7, "a", "z");
        big.file_size = 8 << 20; // a guess of 131,072 keys
        let v = version_with(3, &[big]);
        let mut heat = ScanHeat::default();
        assert!(!heat.record(&v, b"b", b"c", 131_071, 1.0));
        assert!(heat.record(&v, b"b", b"c", 1, 1.0));
        let mut heat = ScanHeat::default();
        assert!(heat.record(&v, b"b", b"c", 65_536, 0.5));
    }

    #[test]
    fn counters_of_tables_gone_are_pruned() {
        let mut heat = ScanHeat::default();
        for n in 1..200u64 {
            let v = version_with(1, &[table(n, "a", "z")]);
            heat.record(&v, b"b", b"c", 1, 1.0);
        }
        assert!(heat.units.len() <= 66, "{} counters kept", heat.units.len());
    }
}
