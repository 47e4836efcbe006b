//! Clustering a key range's values: rewriting them at the log's head in key order, so that
//! a later scan reads neighbouring keys' values as one run of back-to-back records instead
//! of one random read each. Values arrive in the log in write order; a randomly loaded
//! database makes every small value of a scan its own page read (WiscKey §3.3.1 and
//! Fig. 12: range queries of small values are where an LSM-tree beats key-value
//! separation). GC relocates in key order, but only within one victim's survivors.
//!
//! Owns: the choice of which values move ([`ClusterPlanner`], a pure function of the
//! pointers met in key order). A value stays where it is if its record is back to back with
//! a key-order neighbour's (a run of two or more: a scan already reads them with one read,
//! and a second pass over clustered data rewrites almost nothing), or if its record alone
//! is at least `keep_run_bytes` (a read that long is bandwidth-bound anyway, so large values
//! never move); every other value is handed over for relocation, in key order, through the
//! same path as GC's survivors ([`super::GcIndex::relocate_if_unchanged`]).
//!
//! Invariants: the planner never decides liveness — the relocation's check under write
//! leadership does, exactly as for GC, so a write racing the pass is never undone; a value
//! is handed over at most once per pass; batches, and the values within them, are in key
//! order; at most one value beyond a batch is held at once.

use serde::Serialize;

use super::Relocation;
use crate::error::Result;
use crate::vlog::ValuePointer;

/// `Db::cluster_values` leaves a value in place whose record alone is this long: a 64 KiB
/// read costs the device about what three 4 KiB random reads do (fio on our VM: 32K vs 88K
/// reads/s), so putting such values side by side gains a scan little.
pub(crate) const CLUSTER_KEEP_RUN_BYTES: u64 = 64 << 10;

/// What a clustering pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ClusterOutcome {
    /// Keys of the range seen (at the pass's snapshot).
    pub keys_examined: u64,
    /// Of those, keys whose value is stored in the value log (the rest are inline).
    pub values_in_log: u64,
    /// Values left where they were: already in a long enough run of key-order neighbours.
    pub values_kept: u64,
    /// Values appended again at the log's head, in key order, and their record bytes.
    pub values_relocated: u64,
    /// Record bytes of the relocated values.
    pub bytes_relocated: u64,
    /// Values handed over but not relocated: overwritten or deleted during the pass (a value
    /// GC moved meanwhile is relocated from where GC put it).
    pub values_changed: u64,
}

impl ClusterOutcome {
    /// Adds `other`'s counts to these (totals over several passes).
    pub fn add(&mut self, other: &ClusterOutcome) {
        self.keys_examined += other.keys_examined;
        self.values_in_log += other.values_in_log;
        self.values_kept += other.values_kept;
        self.values_relocated += other.values_relocated;
        self.bytes_relocated += other.bytes_relocated;
        self.values_changed += other.values_changed;
    }
}

/// Decides, value by value in key order, what a clustering pass relocates.
#[derive(Debug)]
pub struct ClusterPlanner {
    keep_run_bytes: u64,
    batch_bytes: usize,
    /// The current run's first value, until the next key shows whether it is alone.
    run: Vec<Relocation>,
    run_bytes: u64,
    /// The last pointer of the current run.
    run_last: Option<ValuePointer>,
    /// The current run has two records, or one of `keep_run_bytes`: it stays in place.
    run_kept: bool,
    batch: Vec<Relocation>,
    batch_value_bytes: usize,
    kept: u64,
}

impl ClusterPlanner {
    /// Records of at least `keep_run_bytes` stay, as do runs of two or more; relocations are
    /// handed over in batches of about `batch_bytes` of keys and values.
    pub fn new(keep_run_bytes: u64, batch_bytes: usize) -> ClusterPlanner {
        ClusterPlanner {
            keep_run_bytes,
            batch_bytes,
            run: Vec::new(),
            run_bytes: 0,
            run_last: None,
            run_kept: false,
            batch: Vec::new(),
            batch_value_bytes: 0,
            kept: 0,
        }
    }

    /// The next key in key order, whose newest value is the record at `ptr`. `value` reads
    /// that value; it is called only if the value may have to move. Returns a batch to
    /// relocate once one is full.
    pub fn push(
        &mut self,
        key: &[u8],
        ptr: ValuePointer,
        value: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Option<Vec<Relocation>>> {
        let follows = self
            .run_last
            .is_some_and(|last| last.segment == ptr.segment && last.end() == ptr.offset);
        self.run_last = Some(ptr);
        if follows && self.run_kept {
            self.kept += 1;
            return Ok(None);
        }
        if !follows {
            self.end_run();
        }
        self.run.push(Relocation {
            key: key.to_vec(),
            value: value()?,
            old: ptr,
        });
        self.run_bytes += u64::from(ptr.len);
        if self.run.len() >= 2 || self.run_bytes >= self.keep_run_bytes {
            self.kept += self.run.len() as u64;
            self.run.clear();
            self.run_kept = true;
        }
        Ok(self.take_batch_if_full())
    }

    /// The last batch, once every key has been pushed.
    pub fn finish(&mut self) -> Option<Vec<Relocation>> {
        self.end_run();
        self.run_last = None;
        (!self.batch.is_empty()).then(|| self.take_batch())
    }

    /// Values left in place so far.
    pub fn kept(&self) -> u64 {
        self.kept
    }

    /// The current run ended as one short record: it moves.
    fn end_run(&mut self) {
        for relocation in self.run.drain(..) {
            self.batch_value_bytes += relocation.key.len() + relocation.value.len();
            self.batch.push(relocation);
        }
        self.run_bytes = 0;
        self.run_kept = false;
    }

    fn take_batch_if_full(&mut self) -> Option<Vec<Relocation>> {
        (self.batch_value_bytes >= self.batch_bytes).then(|| self.take_batch())
    }

    fn take_batch(&mut self) -> Vec<Relocation> {
        self.batch_value_bytes = 0;
        std::mem::take(&mut self.batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(segment: u64, offset: u64, len: u32) -> ValuePointer {
        ValuePointer {
            segment,
            offset,
            len,
        }
    }

    /// Pushes `(key, pointer)`s, values `key` repeated to the record's length; returns the
    /// keys of every batch handed over (the last from `finish`) and how many values were read.
    fn plan(
        planner: &mut ClusterPlanner,
        entries: &[(&str, ValuePointer)],
    ) -> (Vec<Vec<String>>, usize) {
        let mut batches = Vec::new();
        let mut reads = 0;
        let keys = |batch: Vec<Relocation>| -> Vec<String> {
            batch
                .into_iter()
                .map(|r| String::from_utf8(r.key).expect("test keys are text"))
                .collect()
        };
        for (key, p) in entries {
            let got = planner
                .push(key.as_bytes(), *p, || {
                    reads += 1;
                    Ok(key.as_bytes().repeat(p.len as usize / key.len()))
                })
                .expect("test values read without error");
            if let Some(batch) = got {
                batches.push(keys(batch));
            }
        }
        if let Some(batch) = planner.finish() {
            batches.push(keys(batch));
        }
        (batches, reads)
    }

    #[test]
    fn scattered_values_move_in_key_order_and_runs_stay() {
        let mut planner = ClusterPlanner::new(65536, 1 << 20);
        let (batches, reads) = plan(
            &mut planner,
            &[
                ("a", ptr(7, 5000, 1000)),
                ("b", ptr(3, 0, 1000)),
                // c, d: back to back: kept.
                ("c", ptr(4, 100, 1000)),
                ("d", ptr(4, 1100, 1000)),
                // e continues the kept run: not even read.
                ("e", ptr(4, 2100, 1000)),
                ("f", ptr(9, 0, 1000)),
                // g follows f's bytes, but in another segment: not a neighbour.
                ("g", ptr(10, 1000, 1000)),
                // h starts where a ended, but a is not h's key-order neighbour.
                ("h", ptr(7, 6000, 1000)),
            ],
        );
        assert_eq!(batches, vec![vec!["a", "b", "f", "g", "h"]]);
        assert_eq!(planner.kept(), 3);
        assert_eq!(reads, 7, "e continued a kept run and was not read");
    }

    #[test]
    fn a_record_as_long_as_the_run_threshold_stays_alone() {
        let mut planner = ClusterPlanner::new(65536, 1 << 20);
        let (batches, reads) = plan(
            &mut planner,
            &[("a", ptr(1, 0, 70000)), ("b", ptr(2, 0, 70000)), ("c", ptr(1, 900, 10))],
        );
        assert_eq!(batches, vec![vec!["c"]]);
        assert_eq!(planner.kept(), 2);
        assert_eq!(reads, 3);
    }

    #[test]
    fn full_batches_are_handed_over_as_they_fill_in_key_order() {
        let mut planner = ClusterPlanner::new(1 << 20, 2500);
        let entries: Vec<(String, ValuePointer)> = (0..7)
            .map(|i| (format!("k{i}"), ptr(1, (6 - i) * 5000, 1000)))
            .collect();
        let refs: Vec<(&str, ValuePointer)> = entries.iter().map(|(k, p)| (k.as_str(), *p)).collect();
        let (batches, _) = plan(&mut planner, &refs);
        // A value joins the batch when the run after it starts (at the next key), so each
        // batch is handed over one key late: ~1,000 bytes per value, full at 2,500.
        assert_eq!(
            batches,
            vec![vec!["k0", "k1", "k2"], vec!["k3", "k4", "k5"], vec!["k6"]]
        );
        assert_eq!(planner.kept(), 0);
    }

    #[test]
    fn a_failed_read_is_returned_and_nothing_is_handed_over_for_it() {
        let mut planner = ClusterPlanner::new(1 << 20, 1 << 20);
        let failed = planner.push(b"a", ptr(1, 0, 10), || {
            Err(crate::Error::corruption("test", 0, "bad record"))
        });
        assert!(failed.is_err());
        assert_eq!(planner.finish(), None);
    }
}
