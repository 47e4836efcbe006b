//! One collection of one victim segment: read it sequentially, keep what the index still
//! points to, hand the survivors to the index for relocation in key-ordered batches.
//!
//! The segment is scanned record by record for keys and pointers (values are checked, not
//! copied); the records are judged in key order, many in one view; only survivors' values
//! are read (one positional read each, in file order within a batch). The victim's file is
//! not touched: removing it from the log and deleting it is the caller's next step, once
//! every relocation returned and the log is synced.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{GcIndex, JudgedIn};
use crate::error::Result;
use crate::filename::vlog_file_name;
use crate::fs::FileSystem;
use crate::key::ValueKind;
use crate::position::LogPosition;
use crate::vlog::{self, LiveRange, ValuePointer, VlogOptions, VlogReader};

/// A record to relocate: the key's newest value is still the record at `old`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub old: ValuePointer,
}

/// What collecting segments did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GcOutcome {
    /// Victim segments whose records were all relocated or found dead.
    pub segments_collected: u64,
    /// Bytes of victim segments read: their files' lengths less their punched ranges (dead
    /// records, stepped over).
    pub bytes_read: u64,
    /// Records appended again at the log's head, and their bytes.
    pub records_relocated: u64,
    /// Bytes of the relocated records.
    pub bytes_relocated: u64,
    /// Records found dead (not relocated).
    pub records_dropped: u64,
}

impl GcOutcome {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &GcOutcome) {
        self.segments_collected += other.segments_collected;
        self.bytes_read += other.bytes_read;
        self.records_relocated += other.records_relocated;
        self.bytes_relocated += other.bytes_relocated;
        self.records_dropped += other.records_dropped;
    }
}

/// Where a cycle reads from.
#[derive(Debug, Clone, Copy)]
pub struct SegmentSource<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub reader: &'a VlogReader,
    pub options: &'a VlogOptions,
    /// Survivors are handed over in batches of about this many bytes of records.
    pub batch_bytes: usize,
    /// Records judged in one view, at most ([`JUDGED_TOGETHER`]).
    pub judged_together: usize,
}

/// At most this many records are judged in one view (one call to
/// [`GcIndex::newest_pointers`]; `SegmentSource::judged_together`): a 64 MiB segment of
/// 1 KiB values is about 62,000, so one judgement; a segment of tiny records is judged in
/// parts, holding no more keys at once.
pub const JUDGED_TOGETHER: usize = 1 << 16;

/// A put record of the victim, waiting for its judgement.
struct Candidate {
    key: Vec<u8>,
    ptr: ValuePointer,
}

/// Relocates every live record of sealed segment `victim`, stepping over its `punched`
/// ranges. Fails (and the victim must then be kept) if the segment does not read cleanly to
/// its end.
///
/// The victim is read sequentially for its keys and pointers; up to `src.judged_together`
/// of them are judged at once, in key order, then the survivors' values are read (one
/// positional read each, in file order within a relocation batch) and handed over in key
/// order. Judged one by one as the scan met them, in the log's (random) order, each lookup
/// missed the CPU cache on its way through the tables; about 70% of GC's time at 1 KiB
/// (docs/BENCHMARKS.md, "Where GC's time goes").
pub fn collect_segment(
    src: SegmentSource<'_>,
    victim: u64,
    punched: &BTreeMap<u64, u64>,
    index: &dyn GcIndex,
) -> Result<GcOutcome> {
    let file_len = src.fs.file_size(&vlog_file_name(src.dir, victim))?;
    // Punched ranges are stepped over, not read.
    let punched_len: u64 = (punched.iter())
        .map(|(&start, &end)| end.min(file_len).saturating_sub(start))
        .sum();
    let mut outcome = GcOutcome {
        bytes_read: file_len.saturating_sub(punched_len),
        ..GcOutcome::default()
    };
    let end = LogPosition::new(victim, file_len);
    let mut candidates: Vec<Candidate> = Vec::new();
    vlog::scan_sealed_segment(
        src.fs,
        src.dir,
        victim,
        punched,
        src.options,
        // Values are read again for the survivors only.
        0,
        &mut |batch| {
            for record in batch {
                if record.kind != ValueKind::Value {
                    outcome.records_dropped += 1;
                    continue;
                }
                candidates.push(Candidate {
                    key: record.key.clone(),
                    ptr: record.ptr,
                });
                if candidates.len() >= src.judged_together {
                    let part = std::mem::take(&mut candidates);
                    relocate_survivors(src, end, part, index, &mut outcome)?;
                }
            }
            Ok(())
        },
    )?;
    relocate_survivors(src, end, candidates, index, &mut outcome)?;
    outcome.segments_collected = 1;
    Ok(outcome)
}

/// Judges `candidates` in one view and relocates those the index still points to, in
/// key-ordered batches of about `src.batch_bytes`.
fn relocate_survivors(
    src: SegmentSource<'_>,
    end: LogPosition,
    mut candidates: Vec<Candidate>,
    index: &dyn GcIndex,
    outcome: &mut GcOutcome,
) -> Result<()> {
    if candidates.is_empty() {
        return Ok(());
    }
    candidates.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let keys: Vec<&[u8]> = candidates.iter().map(|c| c.key.as_slice()).collect();
    let (newest, judged_in) = index.newest_pointers(&keys)?;
    drop(keys);
    let mut batch: Vec<Candidate> = Vec::new();
    let mut batch_bytes = 0usize;
    for (candidate, newest) in candidates.into_iter().zip(newest) {
        if newest != Some(candidate.ptr) {
            outcome.records_dropped += 1;
            continue;
        }
        batch_bytes += candidate.ptr.len as usize;
        batch.push(candidate);
        if batch_bytes >= src.batch_bytes {
            batch_bytes = 0;
            relocate_batch(src, end, std::mem::take(&mut batch), index, judged_in, outcome)?;
        }
    }
    relocate_batch(src, end, batch, index, judged_in, outcome)
}

/// Reads a batch of survivors' values (in file order) and hands them over in key order,
/// judged again first if their judgement is outdated (`GcIndex::judgement_outdated`).
/// `batch` comes in key order.
fn relocate_batch(
    src: SegmentSource<'_>,
    end: LogPosition,
    mut batch: Vec<Candidate>,
    index: &dyn GcIndex,
    mut judged_in: JudgedIn,
    outcome: &mut GcOutcome,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    if index.judgement_outdated(judged_in) {
        let keys: Vec<&[u8]> = batch.iter().map(|c| c.key.as_slice()).collect();
        let (newest, fresh) = index.newest_pointers(&keys)?;
        drop(keys);
        let judged = batch.len();
        batch = (batch.into_iter().zip(newest))
            .filter(|(candidate, newest)| *newest == Some(candidate.ptr))
            .map(|(candidate, _)| candidate)
            .collect();
        outcome.records_dropped += (judged - batch.len()) as u64;
        judged_in = fresh;
        if batch.is_empty() {
            return Ok(());
        }
    }
    batch.sort_unstable_by_key(|c| c.ptr.offset);
    let mut relocations = Vec::with_capacity(batch.len());
    for candidate in batch {
        let value = src.reader.read_value_uncached(
            &candidate.ptr,
            &candidate.key,
            LiveRange { end },
        )?;
        relocations.push(Relocation {
            key: candidate.key,
            value,
            old: candidate.ptr,
        });
    }
    // Key order within a batch: scans of relocated data read the log sequentially
    // (WiscKey §3.3.2).
    relocations.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let offered = relocations.len() as u64;
    let (relocated, bytes) = index.relocate_if_unchanged(relocations, judged_in)?;
    outcome.records_relocated += relocated;
    outcome.bytes_relocated += bytes;
    outcome.records_dropped += offered - relocated;
    Ok(())
}

/// What [`sample_segment`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSample {
    /// Bytes of the records read that are dead.
    pub dead: u64,
    /// Bytes of the records read.
    pub sampled: u64,
    /// Every record of the segment was read: `dead` is the segment's dead bytes, exactly.
    pub complete: bool,
}

/// Estimates the dead fraction of sealed segment `segment` from about `windows *
/// window_bytes` of its records, read in windows spread over the segment
/// (`vlog::sample_segment_records`): each put record is live if the index's newest pointer
/// for its key is that record (the same hint collection uses). Dead counts in the manifest
/// lag behind the truth (a pointer is counted dead only when the entry shadowing it is
/// flushed; garbage from before manifest format 4 may not be counted at all); a sample
/// does not, and a record once dead stays dead, so a sample stays a fair estimate as the
/// log grows.
pub fn sample_segment(
    src: SegmentSource<'_>,
    segment: u64,
    punched: &BTreeMap<u64, u64>,
    (windows, window_bytes): (u64, u64),
    index: &dyn GcIndex,
) -> Result<SegmentSample> {
    let mut dead = 0u64;
    let mut sampled = 0u64;
    let mut puts: Vec<Candidate> = Vec::new();
    let coverage = vlog::sample_segment_records(
        src.fs,
        src.dir,
        segment,
        punched,
        windows,
        window_bytes,
        src.options,
        &mut |record| {
            sampled += u64::from(record.ptr.len);
            if record.kind == ValueKind::Value {
                puts.push(Candidate {
                    key: record.key.clone(),
                    ptr: record.ptr,
                });
            } else {
                dead += u64::from(record.ptr.len);
            }
            Ok(())
        },
    )?;
    for part in puts.chunks(src.judged_together.max(1)) {
        let keys: Vec<&[u8]> = part.iter().map(|c| c.key.as_slice()).collect();
        let (newest, _) = index.newest_pointers(&keys)?;
        dead += (part.iter().zip(newest))
            .filter(|(put, newest)| *newest != Some(put.ptr))
            .map(|(put, _)| u64::from(put.ptr.len))
            .sum::<u64>();
    }
    Ok(SegmentSample {
        dead,
        sampled,
        complete: coverage.complete,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::fs::MemFs;
    use crate::vlog::{BatchEntry, VlogWriter};

    /// A key index that knows which record is each key's newest, and notes what GC asked
    /// and handed over.
    #[derive(Default)]
    struct NotingIndex {
        newest: RefCell<HashMap<Vec<u8>, ValuePointer>>,
        /// The keys of each judgement, in the order asked.
        judgements: RefCell<Vec<Vec<Vec<u8>>>>,
        /// Each batch handed over, with the mark it came with.
        handed: RefCell<Vec<(Vec<Relocation>, JudgedIn)>>,
        /// After the first batch handed over: every judgement made so far is outdated (its
        /// memtable flushed), and these keys are overwritten.
        after_first_batch: RefCell<Option<Vec<Vec<u8>>>>,
        /// Judgements with a number below this are outdated.
        outdated_below: Cell<u64>,
    }

    impl GcIndex for NotingIndex {
        fn newest_pointers(
            &self,
            keys: &[&[u8]],
        ) -> Result<(Vec<Option<ValuePointer>>, JudgedIn)> {
            let mut judgements = self.judgements.borrow_mut();
            judgements.push(keys.iter().map(|k| k.to_vec()).collect());
            let newest = self.newest.borrow();
            let found = keys.iter().map(|k| newest.get(*k).copied()).collect();
            // The judgement's number stands for its view.
            Ok((found, JudgedIn(Some(judgements.len() as u64))))
        }

        fn judgement_outdated(&self, judged_in: JudgedIn) -> bool {
            judged_in.0.is_none_or(|n| n < self.outdated_below.get())
        }

        fn relocate_if_unchanged(
            &self,
            relocations: Vec<Relocation>,
            judged_in: JudgedIn,
        ) -> Result<(u64, u64)> {
            assert!(!self.judgement_outdated(judged_in), "handed over with an outdated mark");
            let n = relocations.len() as u64;
            let bytes = relocations.iter().map(|r| r.value.len() as u64).sum();
            self.handed.borrow_mut().push((relocations, judged_in));
            if let Some(overwritten) = self.after_first_batch.borrow_mut().take() {
                self.outdated_below.set(self.judgements.borrow().len() as u64 + 1);
                let mut newest = self.newest.borrow_mut();
                for key in overwritten {
                    newest.remove(&key);
                }
            }
            Ok((n, bytes))
        }
    }

    fn options() -> VlogOptions {
        VlogOptions::for_tests(1 << 20, 256)
    }

    /// Collects segment 1 of `fs` at `/db` into `index` in batches of about `batch_bytes`,
    /// judging at most `judged_together` records at once.
    fn collect(
        fs: &MemFs,
        index: &NotingIndex,
        batch_bytes: usize,
        judged_together: usize,
    ) -> GcOutcome {
        let dir = PathBuf::from("/db");
        let reader = VlogReader::new(Arc::new(fs.clone()), dir.clone(), options());
        let src = SegmentSource {
            fs,
            dir: &dir,
            reader: &reader,
            options: &options(),
            batch_bytes,
            judged_together,
        };
        collect_segment(src, 1, &BTreeMap::new(), index).expect("collect")
    }

    /// Writes keys `key000`..`key049` in descending order (so the log's order is not key
    /// order) as segment 1, sealed; the index points at every key not divisible by 3 (the
    /// others were overwritten since). Returns the live keys' values.
    fn victim(fs: &MemFs, dir: &Path, index: &NotingIndex) -> HashMap<Vec<u8>, Vec<u8>> {
        let mut writer = VlogWriter::create(Arc::new(fs.clone()), dir.to_path_buf(), 1, options())
            .expect("create");
        let mut values = HashMap::new();
        for (seq, i) in (0..50u32).rev().enumerate() {
            let key = format!("key{i:03}").into_bytes();
            let value = vec![i as u8; 100 + i as usize];
            let entry = BatchEntry {
                kind: ValueKind::Value,
                key: &key,
                value: &value,
            };
            let ptr = writer.append_batch(seq as u64 + 1, &[entry]).expect("append")[0];
            if i % 3 != 0 {
                index.newest.borrow_mut().insert(key.clone(), ptr);
                values.insert(key, value);
            }
        }
        writer.sync().expect("sync");
        assert!(writer.seal_active().expect("seal"));
        values
    }

    /// A victim judged in parts (here 7 records per view) relocates exactly its live
    /// records, each once, with its own value, in key order within each batch, and each
    /// batch carries the mark of the judgement its records were judged live in.
    #[test]
    fn a_victim_judged_in_parts_relocates_each_live_record_once_with_its_judgements_mark() {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        let index = NotingIndex::default();
        let values = victim(&fs, &dir, &index);
        let outcome = collect(&fs, &index, 500, 7);
        assert_eq!(outcome.records_relocated, 33);
        assert_eq!(outcome.records_dropped, 17);
        let judgements = index.judgements.borrow();
        assert_eq!(judgements.len(), 8, "50 records, 7 at a time");
        assert!(judgements.iter().all(|keys| keys.len() <= 7));
        let mut relocated = HashMap::new();
        for (batch, judged_in) in index.handed.borrow().iter() {
            assert!(batch.windows(2).all(|w| w[0].key < w[1].key), "key order");
            let JudgedIn(Some(judgement)) = *judged_in else {
                panic!("a batch without its judgement's mark");
            };
            for relocation in batch {
                let judged = &judgements[judgement as usize - 1];
                assert!(judged.contains(&relocation.key), "judged in the view its mark names");
                assert_eq!(Some(&relocation.old), index.newest.borrow().get(&relocation.key));
                let earlier = relocated.insert(relocation.key.clone(), relocation.value.clone());
                assert!(earlier.is_none(), "relocated once");
            }
        }
        assert_eq!(relocated, values);
    }

    /// A judgement outdated before its later batches are handed over (its memtable flushed,
    /// so the write leader would have to look every key up in the tables) is made again for
    /// each such batch, in a fresh view: the batch goes with the fresh mark, and a record
    /// overwritten since is dropped there, before its value is read.
    #[test]
    fn batches_of_an_outdated_judgement_are_judged_again_before_they_are_handed_over() {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        let index = NotingIndex::default();
        let mut values = victim(&fs, &dir, &index);
        // Overwritten after the first batch: keys in later batches (key order).
        let overwritten: Vec<Vec<u8>> = [40u32, 41, 43, 44]
            .iter()
            .map(|i| format!("key{i:03}").into_bytes())
            .collect();
        for key in &overwritten {
            values.remove(key);
        }
        *index.after_first_batch.borrow_mut() = Some(overwritten.clone());
        let outcome = collect(&fs, &index, 1000, JUDGED_TOGETHER);
        assert_eq!(outcome.records_relocated, 29);
        assert_eq!(outcome.records_dropped, 21);
        let handed = index.handed.borrow();
        assert!(handed.len() >= 3, "several batches: {}", handed.len());
        // One judgement of the whole victim, then one per later batch.
        assert_eq!(index.judgements.borrow().len(), handed.len());
        let relocated: HashMap<Vec<u8>, Vec<u8>> = (handed.iter())
            .flat_map(|(batch, _)| batch.iter().map(|r| (r.key.clone(), r.value.clone())))
            .collect();
        assert_eq!(relocated, values);
        for (i, (_, judged_in)) in handed.iter().enumerate() {
            assert_eq!(*judged_in, JudgedIn(Some(i as u64 + 1)), "batch {i}");
        }
    }
}
