//! Runs value-log GC against this database: the [`GcIndex`] of the LSM-tree, the inputs of
//! victim choice (segment sizes, the replay head, the writer's segment, removed segments),
//! the collection loop (explicit [`crate::Db::gc`] and the `wisckey-gc` thread), and the
//! statistics that explain what GC does and does not collect.
//!
//! Order of one victim's collection, each step crash-safe (docs/DESIGN.md, "Value-log GC"):
//! relocate survivors (appended under write leadership) → sync the log and flush, so the
//! replay head passes the relocations and the writes that killed the rest (on a full disk
//! the sync alone) → one manifest edit removing the victim (`State::gc_removed` records it
//! in the same critical section) → delete the file in the obsolete-file sweep once no live
//! `Version` lists it and no snapshot older than the relocation is open. Unless GC yields
//! or the disk is short, the flush runs while the next victims are collected, and those
//! share the next one (`Leaving`); a victim on its way out is never chosen again.
//!
//! Only one collection runs at a time (`DbInner::gc_lock`).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::read::entry_points_at;
use super::{install_edit, DbInner, GcRemoval};
use crate::error::{catch_panic, Error, Result};
use crate::filename::{parse_file_name, vlog_file_name, FileKind};
use crate::gc::cluster::{ClusterOutcome, ClusterPlanner, CLUSTER_KEEP_RUN_BYTES};
use crate::gc::cycle::{collect_segment, sample_segment, SegmentSource};
use crate::gc::picker::{space_amp, VictimChoice};
use crate::gc::punch::PunchLimits;
use crate::gc::{
    next_step, pick_victims, GcIndex, GcOutcome, GcStep, JudgedIn, Relocation, SegmentState,
    SegmentView, StepsTaken,
};
use crate::gc::{VictimOrder, VictimPolicy};
use crate::key::ValueKind;
use crate::position::LogPosition;
use crate::safety::SafetyStep;
use crate::version::{AscendingGets, SegmentMeta, VersionEdit, NUM_LEVELS};
use crate::vlog::{ValuePointer, PUNCH_ALIGN};

/// Value bytes handed to the write leader per relocation batch of GC.
const RELOCATION_BATCH_BYTES: usize = 4 << 20;
/// Value bytes handed to the write leader per relocation batch of a clustering pass. Writes
/// wait while the leader appends a batch (a few ms per MiB under a memory limit: YCSB E's
/// insert p99 at 1 KiB was 12.4 ms with 4 MiB, ~1 ms with 1 MiB, 54 µs with 256 KiB), and
/// runs of 256 KiB served YCSB E's scans as fast as runs of 1 MiB (BENCHMARKS.md, 2026-11-30).
const CLUSTER_BATCH_BYTES: usize = 256 << 10;
/// Background GC looks at the log at least this often (and after every flush).
const BACKGROUND_PERIOD: Duration = Duration::from_secs(1);
/// Background GC rewrites only segments at least this dead.
const BACKGROUND_MIN_DEAD_FRACTION: f64 = 0.2;
/// While the log is over this many times the space-amplification target (the garbage of
/// the log not flushed yet counted) and GC has victims, background GC is far behind: it
/// stops yielding, and once a victim has measured what it frees, writers are paced to a
/// fraction of that (`gc::pace`); short of it, writers are paced once they have appended
/// what would take GC there ([`headroom_before_far_behind`]).
const FAR_BEHIND_FACTOR: f64 = 1.25;
/// A segment's dead fraction is estimated from this many windows of records spread over it
/// (1 MiB in all), or from all its records when they are at most twice that.
const SAMPLE_WINDOWS: (u64, u64) = (16, 64 << 10);
/// Segments sampled at most per round of victim choice.
const SAMPLES_PER_ROUND: usize = 4;

/// A sampled estimate of a segment's dead bytes (see `gc::cycle::sample_segment`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeadSample {
    pub dead_bytes: u64,
    /// The writer's segment when the sample was taken: it is taken again once the log has
    /// grown past that segment (more of it may be dead by then).
    pub active_then: u64,
}

/// What [`crate::Db::gc`] should do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcOptions {
    /// Collect until the value log's bytes on disk are at most this many times its live
    /// bytes. Default 1.0: collect every segment with at least `min_dead_fraction` dead.
    pub space_amp_target: f64,
    /// Segments less dead than this are left alone. Default 0.01.
    pub min_dead_fraction: f64,
    /// Compact the whole key index first, so that every overwritten or deleted value is
    /// known to be dead (compaction is what drops shadowed pointers). Default `true`; the
    /// key index holds only keys and pointers, so this is cheap next to the log. A
    /// compaction that finds no disk space is passed over (logged): GC goes on with what
    /// it can free without it, and `Db::gc` returns that `NoSpace` only if it then
    /// collected nothing.
    pub compact_first: bool,
    /// Victim order. Default: [`Options::gc_victim_order`](crate::Options::gc_victim_order).
    pub order: Option<VictimOrder>,
}

impl Default for GcOptions {
    fn default() -> GcOptions {
        GcOptions {
            space_amp_target: 1.0,
            min_dead_fraction: 0.01,
            compact_first: true,
            order: None,
        }
    }
}

/// Totals of value-log GC since the database was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct GcTotals {
    /// Collections that found something to do.
    pub runs: u64,
    /// What the collection did.
    #[serde(flatten)]
    pub work: GcOutcome,
    /// Bytes of disk given back by deleting segment files: their sizes less the blocks
    /// already punched out of them (those count in `bytes_punched` alone).
    pub bytes_freed: u64,
    /// Bytes of disk blocks punched out of segments (dead records of segments not
    /// collected whole).
    pub bytes_punched: u64,
    /// Bytes GC wrote per byte it freed or punched (0 before anything was freed).
    pub rewritten_per_freed: f64,
}

/// What the clustering passes that scans triggered (`Options::auto_cluster_ratio`) have
/// done since the database was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AutoClusterTotals {
    /// Ranges looked at (a keys-only estimate) because scans read them out of order.
    pub ranges_estimated: u64,
    /// Of those, ranges whose scans had paid for a pass, which then ran.
    pub passes: u64,
    /// What those passes did, summed.
    #[serde(flatten)]
    pub work: ClusterOutcome,
}

/// The value log as GC sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ValueLogStats {
    /// Every segment file, with live and dead bytes and why it is or is not collected.
    pub segments: Vec<SegmentView>,
    /// Bytes of the log on disk.
    pub log_bytes: u64,
    /// Bytes of the log still needed.
    pub live_bytes: u64,
    /// `log_bytes / live_bytes`.
    pub space_amp: f64,
    /// The background target ([`crate::Options::gc_space_amp_target`]).
    pub space_amp_target: f64,
    /// The replay head's segment: it and later segments are not collected until a flush.
    pub head_segment: u64,
    /// The segment being appended to.
    pub active_segment: u64,
}

/// Per-level figures as a sequence of any length (serde's fixed-size arrays are tuples, which
/// the Python binding would hand out as tuples, not lists).
fn per_level<S: serde::Serializer, T: Serialize>(
    values: &[T; NUM_LEVELS],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.collect_seq(values)
}

/// A database's statistics: typed, and serialisable (`serde`) for tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DbStats {
    /// Table files per level.
    #[serde(serialize_with = "per_level")]
    pub level_files: [usize; NUM_LEVELS],
    /// Table bytes per level.
    #[serde(serialize_with = "per_level")]
    pub level_bytes: [u64; NUM_LEVELS],
    /// The value log: every segment, its live and dead bytes and why it is or is not collected.
    pub value_log: ValueLogStats,
    /// What GC has done since open.
    pub gc: GcTotals,
    /// What clustering passes triggered by scans have done since open.
    pub auto_cluster: AutoClusterTotals,
    /// Bytes the disk reserve holds back now (`Options::disk_reserve_size` while its
    /// `RESERVE` file exists): 0 when it is off, spent on a full disk, or could not be
    /// made (too little free space for it; the log says why), and on a read-only open
    /// (which never makes one). On a full disk without it, flushes and deletes fail with
    /// `NoSpace` until space is freed.
    pub disk_reserve_bytes: u64,
}

/// The LSM-tree as GC's key index.
struct LsmIndex<'a> {
    inner: &'a DbInner,
    /// Background GC yields: after each batch it sleeps as long as the batch took, unless
    /// writers have spent the headroom GC gave them meanwhile (`gc::pace`).
    paced: bool,
    /// GC's relocations free space (they may spend the disk reserve); a clustering pass's
    /// do not.
    frees_space: bool,
}

impl<'a> LsmIndex<'a> {
    fn new(inner: &'a DbInner, paced: bool, frees_space: bool) -> LsmIndex<'a> {
        LsmIndex {
            inner,
            paced,
            frees_space,
        }
    }

    /// Whether to sleep after a batch: paced, and writers are not paced (they would wait
    /// for GC while it slept).
    fn yields(&self) -> bool {
        yields(self.inner, self.paced)
    }

    /// A view for a liveness judgement, and its mark: the newest memtable's number
    /// (`ReadSources::mem_number`), so the write leader checks only writes since.
    fn capture_for_judgement(&self) -> Result<(super::read::View, JudgedIn)> {
        let view = super::read::capture(self.inner, &crate::ReadOptions::default())?;
        let judged_in = JudgedIn(Some(view.mem_number()));
        Ok((view, judged_in))
    }

    /// The relocations whose key's value, in one view taken now, is still the one the pass
    /// read: a clustering pass's pointers come from its iterator's view, which may be long
    /// past. A value GC moved since (the same bytes at another pointer) is still the range's
    /// current value, so it is re-read where it is now and moved from there; otherwise GC,
    /// which collects the load's segments while a pass over them runs, would leave every
    /// value it got to first out of the pass's key order. A value written anew since is
    /// left alone (`ClusterOutcome::values_changed`), unless it is the same bytes again
    /// (indistinguishable from a move, and as good). The cost: a key overwritten during the
    /// pass with a value of the same length costs one value read here before it is dropped.
    /// (Values the planner kept in place are not looked at again: one GC moved stays where
    /// GC put it.)
    fn still_live(&self, relocations: Vec<Relocation>) -> Result<(Vec<Relocation>, JudgedIn)> {
        let (view, judged_in) = self.capture_for_judgement()?;
        let mut live = Vec::with_capacity(relocations.len());
        for mut relocation in relocations {
            let newest = super::read::newest_in_view(self.inner, &view, &relocation.key)?;
            let Some(newest) = newest else { continue };
            if entry_points_at(&newest, relocation.old) {
                live.push(relocation);
                continue;
            }
            let (ValueKind::ValuePointer, stored) = &newest else {
                continue;
            };
            // A record of another length holds another value: no need to read it.
            let moved_to = ValuePointer::decode(stored).filter(|now| now.len == relocation.old.len);
            if let Some(now) = moved_to {
                let value = view.read_pointer(self.inner, &relocation.key, stored)?;
                if value == relocation.value {
                    relocation.old = now;
                    live.push(relocation);
                }
            }
        }
        Ok((live, judged_in))
    }
}

impl GcIndex for LsmIndex<'_> {
    fn newest_pointers(&self, keys: &[&[u8]]) -> Result<(Vec<Option<ValuePointer>>, JudgedIn)> {
        let (view, judged_in) = self.capture_for_judgement()?;
        let mut newest = vec![None; keys.len()];
        // In key order, through table cursors: consecutive keys in one data block find it
        // held, with no index search or block-cache lookup.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys[i]);
        let mut gets = AscendingGets::default();
        for i in order {
            let entry =
                super::read::newest_in_view_ascending(self.inner, &view, keys[i], &mut gets)?;
            newest[i] = match entry {
                Some((ValueKind::ValuePointer, stored)) => ValuePointer::decode(&stored),
                _ => None,
            };
        }
        Ok((newest, judged_in))
    }

    fn judgement_outdated(&self, judged_in: JudgedIn) -> bool {
        // The leader's own rule (`write::still_pointed_at`), on the memtables of now.
        !(self.inner.read_sources.load()).hold_writes_since(judged_in.0)
    }

    fn relocate_if_unchanged(
        &self,
        relocations: Vec<Relocation>,
        judged_in: JudgedIn,
    ) -> Result<(u64, u64)> {
        if self.inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // Nothing left to move (a clustering batch that changed whole): no leadership, no
        // pause.
        if relocations.is_empty() {
            return Ok((0, 0));
        }
        let started = Instant::now();
        let result = super::write::relocate(self.inner, relocations, judged_in.0, self.frees_space);
        if self.yields() {
            std::thread::sleep(started.elapsed().min(Duration::from_millis(200)));
        }
        result
    }
}

/// Sets the writers' pacer for the round's next step ([`WritePacer::arm`]): `headroom`
/// before they are paced at GC's rate. Victims on their way out count as removed, so the
/// choice may find nothing to collect while their space is still on disk: writers then stay
/// as they were until those leave. Armed with "nothing to collect", they ran unpaced while
/// GC waited, and in two of ten runs of 10x 16 KiB overwrites the log reached 9.7x and 10.7x
/// its live data (docs/BENCHMARKS.md, "Victims leave the log while the next are collected").
///
/// [`WritePacer::arm`]: crate::gc::pace::WritePacer::arm
fn arm_pacer(inner: &DbInner, choice: &VictimChoice, leaving: &Leaving, headroom: Option<u64>) {
    if choice.victims.is_empty() && leaving.victims().next().is_some() {
        return;
    }
    let writers_rate = inner.gc_freeing.lock().writers_rate();
    inner.gc_pacer.arm(headroom, writers_rate);
}

/// Whether GC yields to foreground work: background GC (`paced`) whose writers are not paced
/// (they would wait for GC while it slept).
fn yields(inner: &DbInner, paced: bool) -> bool {
    paced && !inner.gc_pacer.pacing()
}

/// Sizes of the segment files present: the sealed size the manifest records; for the
/// segment being written, where its next record goes (its file runs ahead with zeros:
/// mapped write-outs and `vlog_zero_fill_size` allocate up to megabytes that hold no
/// record, and counted, they made a small database's live bytes many times its data);
/// else the file's current size. `listed`: the segments of a version taken before the call
/// (see [`choose`]).
///
/// The writer's end is read after the listing: read before, a segment the log rolled into
/// meanwhile was sized by its file, zeros ahead included, and the one it left by the stale
/// end. A segment listed but past the end read after (the writer is creating it, nothing
/// in it published) holds its header only. Returns the sizes and the writer's segment.
fn segment_sizes(
    inner: &DbInner,
    listed: &BTreeMap<u64, SegmentMeta>,
) -> Result<(BTreeMap<u64, u64>, u64)> {
    let names = inner.fs.list(&inner.dir)?;
    let end = inner.vlog.end();
    let mut sizes = BTreeMap::new();
    for name in names {
        if let Some(FileKind::ValueLog(n)) = parse_file_name(&name) {
            let size = match listed.get(&n).and_then(|m| m.sealed_size) {
                Some(size) => size,
                None if n == end.segment => end.offset,
                // (A read-only handle's writer stays on the newest replayed segment: files
                // after it, such as a torn newest segment, are left on disk as they are.)
                None if n > end.segment && !inner.read_only => crate::vlog::SEGMENT_HEADER_LEN,
                None => match inner.fs.file_size(&inner.dir.join(&name)) {
                    Ok(size) => size,
                    // Deleted since the listing.
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                },
            };
            sizes.insert(n, size);
        }
    }
    Ok((sizes, end.segment))
}

/// Victim choice over the database's current state. `leaving`: victims collected and
/// waiting for the replay head before they leave the log ([`Leaving`]); they count as
/// removed (their survivors are relocated already).
fn choose(
    inner: &DbInner,
    policy: VictimPolicy,
    leaving: impl Iterator<Item = u64>,
) -> Result<(VictimChoice, u64, u64)> {
    // The manifest's counts first, the log's sizes after. A record is counted dead by the
    // flush of the write that replaced it, once that write's record is in the log: sizes
    // read later hold every record the counts imply. Read the other way round, a thread
    // held up between the two (as under a loaded test machine) set the counts of writes
    // flushed meanwhile against a log without their records: the log looked up to twice
    // its true space amplification, and background GC collected and punched under its
    // target (docs/RELIABILITY.md, "Defects these tests found", stop 70).
    let (listed, head, removed, unreadable) = {
        let state = inner.state.lock();
        let removed: BTreeSet<u64> = (state.gc_removed.keys().copied())
            .chain(leaving)
            .collect();
        (
            state.versions.vlog_segments().clone(),
            state.versions.vlog_head(),
            removed,
            state.gc_unreadable.clone(),
        )
    };
    let estimates: BTreeMap<u64, u64> = (inner.gc_samples.lock().iter())
        .map(|(&s, sample)| (s, sample.dead_bytes))
        .collect();
    let (sizes, active) = segment_sizes(inner, &listed)?;
    let head_segment = head.map_or(active, |h| h.segment);
    let mut choice = pick_victims(
        &listed,
        &sizes,
        head_segment,
        active,
        &removed,
        &estimates,
        policy,
    );
    choice.victims.retain(|v| !unreadable.contains(v));
    for segment in &mut choice.segments {
        if unreadable.contains(&segment.segment) {
            segment.state = SegmentState::Unreadable;
        }
    }
    Ok((choice, head_segment, active))
}

/// Seals the active segment if it holds records and moves the replay head to the log's
/// end (a flush, of an empty memtable if need be), so every segment before is collectable.
fn unblock_head(inner: &DbInner) -> Result<()> {
    let (sealed, poisoned) = {
        let mut vlog = inner.vlog.lock_writer();
        let sealed = vlog.seal_active();
        inner.vlog.publish(&vlog);
        (sealed, vlog.is_poisoned())
    };
    if let Err(e) = sealed {
        // A full disk while starting the next segment leaves the log as it was: this GC
        // round fails (background GC retries), writes go on (each first retrying the roll,
        // where the failed start may have left the next segment's file). Lost buffered
        // records do not.
        return Err(if poisoned {
            super::latch_error(inner, e)
        } else {
            e
        });
    }
    super::write::force_head_forward(inner)?;
    super::background::wait_for_flushes(inner)
}

/// Samples up to `SAMPLES_PER_ROUND` sealed segments that are not collectable by their
/// counts and whose sample is missing or older than the writer's segment. Returns how many.
fn sample_stale(inner: &DbInner, choice: &VictimChoice, active: u64) -> Result<usize> {
    let stale: Vec<(u64, u64)> = {
        let samples = inner.gc_samples.lock();
        (choice.segments.iter())
            .filter(|s| {
                matches!(
                    s.state,
                    SegmentState::AllLive | SegmentState::BelowThreshold
                )
            })
            .filter(|s| {
                samples
                    .get(&s.segment)
                    .is_none_or(|x| x.active_then < active)
            })
            .map(|s| (s.segment, s.size))
            .take(SAMPLES_PER_ROUND)
            .collect()
    };
    // Sampling only reads (it relocates nothing).
    let index = LsmIndex::new(inner, false, true);
    for &(segment, size) in &stale {
        let punched = punched_ranges(inner, segment);
        let sampled = sample_segment(source(inner), segment, &punched, SAMPLE_WINDOWS, &index);
        let records = size.saturating_sub(crate::vlog::SEGMENT_HEADER_LEN);
        // Punched records were dead when punched and are never read by a sample.
        let punched_dead = (punched
            .iter()
            .map(|(&start, &end)| end - start)
            .sum::<u64>())
        .min(records);
        let estimate = match sampled {
            Ok(sample) if sample.complete => sample.dead + punched_dead,
            Ok(sample) if sample.sampled > 0 => {
                let unpunched = records - punched_dead;
                let scaled = punched_dead
                    + (unpunched as u128 * u128::from(sample.dead) / u128::from(sample.sampled))
                        as u64;
                // Windows are no proof about the bytes between them: a segment whose sampled
                // records are all dead may be live elsewhere, and a segment with nothing live
                // is collected under any target (it costs nothing), so a partial sample never
                // makes it look so.
                scaled.min(records.saturating_sub(1))
            }
            // Every window met punched ranges or found no record: what is punched is known.
            Ok(_) => punched_dead.min(records.saturating_sub(1)),
            // Deleted meanwhile (a concurrent collection), or unreadable: not sampled. An
            // earlier sample stays the estimate (a record once dead stays dead); none, and
            // the count alone stands (0 never exceeds it). Either way it is not tried again
            // before the log moves on.
            Err(e) => {
                log::debug!("wisckey: GC could not sample segment {segment}: {e}");
                (inner.gc_samples.lock().get(&segment)).map_or(0, |earlier| earlier.dead_bytes)
            }
        };
        inner.gc_samples.lock().insert(
            segment,
            DeadSample {
                dead_bytes: estimate,
                active_then: active,
            },
        );
    }
    Ok(stale.len())
}

/// The ranges punched out of `segment` (GC holds `gc_lock`, so no punch changes them).
fn punched_ranges(inner: &DbInner, segment: u64) -> Arc<BTreeMap<u64, u64>> {
    (inner.state.lock().versions.vlog_segments().get(&segment))
        .map(|m| Arc::clone(&m.punched))
        .unwrap_or_default()
}

/// Whether the file system deallocates punched blocks, found once by punching a block out
/// of a scratch file (a `.tmp` file, which open and the sweep remove if a crash leaves it).
fn probe_punch_support(inner: &DbInner) -> Result<bool> {
    let number = super::background::allocate_table_number(inner);
    let path = crate::filename::temp_file_name(&inner.dir, number);
    let probe = (|| {
        let mut file = inner.fs.create(&path)?;
        file.append(&[0xa5; 2 * PUNCH_ALIGN as usize])?;
        drop(file);
        match inner.fs.punch_hole(&path, PUNCH_ALIGN, PUNCH_ALIGN) {
            Ok(()) => Ok(true),
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::Unsupported
                    || source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    })();
    let _ = inner.fs.remove(&path);
    inner.state.lock().pending_outputs.remove(&number);
    probe
}

/// Punches out the dead records no reader can reach any more, in sealed segments before the
/// replay head (`gc::punch`): records the ranges in the manifest, then deallocates their
/// whole blocks. Returns the bytes of blocks given back. The caller holds `gc_lock` and has
/// just promoted the queue ([`punch_if_wanted`]).
fn punch_ready(inner: &DbInner) -> Result<u64> {
    if inner.state.lock().punch_supported.is_none() {
        let supported = match probe_punch_support(inner) {
            Ok(supported) => supported,
            // Not known yet (a full disk, say): nothing is punched this time.
            Err(e) => {
                log::debug!("wisckey: probing for hole punching: {e}");
                return Ok(0);
            }
        };
        if !supported {
            log::info!(
                "wisckey: {} cannot punch holes in files; GC gives space back by whole \
                 segments only",
                inner.dir.display()
            );
        }
        inner.state.lock().punch_supported = Some(supported);
    }
    // Lock order: `state` before `punches` (a flush queues under `state`).
    let (listed, head_segment, removed, supported) = {
        let state = inner.state.lock();
        let active = inner.vlog.end().segment;
        (
            state.versions.vlog_segments().clone(),
            state.versions.vlog_head().map_or(active, |h| h.segment),
            state.gc_removed.keys().copied().collect::<BTreeSet<u64>>(),
            state.punch_supported == Some(true),
        )
    };
    if !supported {
        *inner.punches.lock() = Default::default();
        return Ok(0);
    }
    let limits = PunchLimits {
        listed: &listed,
        head_segment,
        removed: &removed,
    };
    let (record, spans, retries) = {
        let mut punches = inner.punches.lock();
        let (record, spans) = punches.take(limits);
        (record, spans, punches.take_unpunched(limits))
    };
    if record.is_empty() && retries.is_empty() {
        return Ok(0);
    }
    if !record.is_empty() {
        let edit = VersionEdit {
            vlog_punched: record.clone(),
            ..VersionEdit::default()
        };
        if let Err(e) = install_edit(inner, edit, |_| ()) {
            // Not recorded, so not punched: the ranges wait for a later round.
            let mut punches = inner.punches.lock();
            punches.put_back(record);
            retries.into_iter().for_each(|s| punches.punch_failed(s));
            return Err(e);
        }
    }
    let mut freed = 0;
    let tries = (spans.into_iter().map(|s| (s, false))).chain(retries.into_iter().map(|s| (s, true)));
    for (span, retry) in tries {
        let path = vlog_file_name(&inner.dir, span.segment);
        match (inner.fs).punch_hole(&path, span.start, span.end - span.start) {
            Ok(()) => freed += span.newly_freed,
            // The records are dead and recorded as punched either way; only the space stays
            // until a later round's try goes through (punching a hole twice is harmless).
            Err(e) => {
                if retry {
                    log::debug!("wisckey: punching a hole in {} again: {e}", path.display());
                } else {
                    log::warn!("wisckey: punching a hole in {}: {e}", path.display());
                }
                inner.punches.lock().punch_failed(span);
            }
        }
    }
    inner.gc_totals.lock().bytes_punched += freed;
    Ok(freed)
}

fn source(inner: &DbInner) -> SegmentSource<'_> {
    SegmentSource {
        fs: inner.fs.as_ref(),
        dir: &inner.dir,
        reader: inner.vlog.reader(),
        options: inner.vlog.options(),
        batch_bytes: RELOCATION_BATCH_BYTES,
        judged_together: crate::gc::cycle::JUDGED_TOGETHER,
    }
}

/// Collects victims until the policy's target is met or nothing is collectable. `paced`:
/// yield to foreground work between batches (background GC).
pub(crate) fn run(inner: &DbInner, policy: VictimPolicy, paced: bool) -> Result<GcOutcome> {
    run_knowing(inner, policy, paced, None)
}

/// [`run`], for a round that already met a full disk (`full_disk`: its error, returned if
/// the round collects nothing).
fn run_knowing(
    inner: &DbInner,
    policy: VictimPolicy,
    paced: bool,
    full_disk: Option<Error>,
) -> Result<GcOutcome> {
    // A `Db::gc` asks a background round holding the lock to end at its next step, as a
    // checkpoint does: with a reader pinning segments and writes going on, that round
    // finds a new victim at every step and would keep the caller waiting while they last.
    // (Nothing asks a `Db::gc` to step aside: it is bounded by the segments at its start.)
    let _one_gc = if paced {
        inner.gc_lock.lock()
    } else {
        inner.lock_out_gc()
    };
    // Never leave writers paced when this collection ends (a snapshot may pin what GC
    // cannot collect).
    struct StopPacing<'a>(&'a DbInner);
    impl Drop for StopPacing<'_> {
        fn drop(&mut self) {
            self.0.gc_pacer.set_rate(0.0);
        }
    }
    let _stop_pacing = StopPacing(inner);
    let mut round = RoundState {
        full_disk,
        ..RoundState::default()
    };
    punch_first_if_short(inner, policy, paced, &mut round.full_disk);
    let mut leaving = Leaving::new();
    let mut taken = StepsTaken::default();
    if paced && inner.log_space_short.load(Ordering::Relaxed) {
        // Writes are refused for space, and the deletes that would give it back wait in the
        // memtable: what they make dead is counted (and queued to be punched) only when it
        // is flushed, and a memtable of deletes alone fills late or never. No other step
        // flushes while the replay head is in the active segment: with 64 MiB segments a
        // full disk stayed full after two thirds of its keys were deleted
        // (`hardening::deletes_give_space_back_on_a_full_disk_without_a_call_to_gc`).
        taken.flushed = true;
        flush_step(inner, policy, paced, &mut round.full_disk)?;
    }
    let min_seal_size = if paced {
        // Background GC seals the active segment only once it is a good part of a segment.
        inner.options.vlog_segment_size / 4
    } else {
        0
    };
    // Whether the round ended before it ran out of work (closing, a checkpoint or check
    // waiting, a failed read): then it does not punch on its way out either.
    let mut cut_short = true;
    // A `Db::gc` collects the segments there were when it began (the one being written
    // then included: its own seal may finish it), not those writers finish meanwhile:
    // with writes going on there would always be another, and the call (holding
    // `gc_lock`, so checkpoints and checks wait) never returned.
    let mut newest_victim = None;
    let mut victims_tried = 0u64;
    loop {
        if inner.shutting_down.load(Ordering::Acquire) {
            break;
        }
        if paced && inner.gc_lock_wanted.load(Ordering::Acquire) > 0 {
            // A checkpoint or check waits for `gc_lock`: the next round goes on from here.
            break;
        }
        if paced && victims_tried > 0 && clustering_due(inner) {
            // The thread clusters a range scans made due between rounds, and under
            // sustained overwrites a round finds a segment newly dead at every step: it
            // never ended, and no pass ran while the writes lasted. Once it has collected,
            // it steps aside; the next round goes on from here.
            break;
        }
        if let Some(e) = inner.state.lock().bg_error.clone() {
            return Err(e);
        }
        let (mut choice, head_segment, active) = match choose(inner, policy, leaving.victims()) {
            Ok(chosen) => chosen,
            Err(e) if ends_background_round(paced, &e) => break,
            Err(e) => return Err(e),
        };
        if !paced {
            let newest = *newest_victim.get_or_insert(active);
            choice.victims.retain(|&v| v <= newest);
        }
        if round.full_disk.is_some() {
            // On a full disk only victims with nothing live can still be collected: the
            // others need log space for their relocations.
            let nothing_live: BTreeSet<u64> = (choice.segments.iter())
                .filter(|s| s.live_bytes == 0)
                .map(|s| s.segment)
                .collect();
            choice
                .victims
                .retain(|v| nothing_live.contains(v) && !round.failed_for_space.contains(v));
        }
        // Far behind with work it can do, background GC runs flat out, and writers append
        // no faster than a fraction of what it frees (once a victim has shown that); short
        // of that, writers are paced once they have spent the headroom left.
        let headroom = if paced {
            headroom_before_far_behind(inner, policy, &choice)
        } else {
            None
        };
        arm_pacer(inner, &choice, &leaving, headroom);
        let step = next_step(
            &choice,
            policy,
            head_segment,
            active,
            inner.options.vlog_segment_size,
            min_seal_size,
            taken,
        );
        if !matches!(step, GcStep::Collect(_)) {
            leaving.finish(inner, &mut round)?;
        }
        match step {
            GcStep::Flush => {
                taken.flushed = true;
                flush_step(inner, policy, paced, &mut round.full_disk)?;
            }
            GcStep::SealAndFlush => {
                taken.sealed = true;
                match unblock_head(inner) {
                    Err(e) if e.is_no_space() => round.full_disk = Some(e),
                    // The next segment could not be made (EMFILE, EIO, ...) and the writer
                    // is intact (a poisoned one `unblock_head` latched itself): the log is
                    // as it was and writes go on, as the write path's own seal failure
                    // leaves them. Background GC tries again next round.
                    Err(e) if paced && matches!(e, Error::Io { .. }) => {
                        log::warn!(
                            "wisckey: value-log GC could not seal the active segment or move \
                             the replay head; the round ends: {e}"
                        );
                        break;
                    }
                    other => {
                        other?;
                        punch_first_if_short(inner, policy, paced, &mut round.full_disk);
                    }
                }
            }
            GcStep::Sample => {
                taken.sampled = true;
                sample_stale(inner, &choice, active)?;
            }
            GcStep::Collect(victim) => {
                victims_tried += 1;
                match collect_victim(inner, victim, paced) {
                    Ok(collected) => leaving.unasked.push(collected),
                    // No file handle left to read the victim with says nothing of the
                    // segment: not marked, the round ends (the next tries again) or the
                    // caller of `Db::gc` learns of it.
                    Err(CollectError::Unreadable(e)) if e.is_out_of_handles() => {
                        if paced {
                            log::warn!("wisckey: value-log GC ends its round: {e}");
                            break;
                        }
                        return Err(e);
                    }
                    // Kept, reported, and not tried again until the next open. A read error
                    // of the victim (EIO) is no reason to stop the database's writes either.
                    Err(CollectError::Unreadable(e)) if !e.is_corruption() => {
                        log::warn!("wisckey: value-log GC skips segment {victim}, unread: {e}");
                        inner.state.lock().gc_unreadable.insert(victim);
                    }
                    // Damage in the key index, not in the victim: the caller of `Db::gc`
                    // learns of it (and the segment's state stays true). A background
                    // round, which has no caller, skips the victim as above (logged; tried
                    // again at the next open) rather than meet the damage every round.
                    Err(CollectError::IndexDamaged(e)) if !paced => return Err(e),
                    Err(CollectError::Unreadable(e) | CollectError::IndexDamaged(e)) => {
                        log::error!("wisckey: value-log GC skips segment {victim}: {e}");
                        inner.state.lock().gc_unreadable.insert(victim);
                    }
                    Err(CollectError::IndexRead(e)) if ends_background_round(paced, &e) => break,
                    Err(CollectError::Other(e)) if e.is_no_space() => {
                        round.failed_for_space.insert(victim);
                        round.full_disk = Some(e);
                    }
                    Err(CollectError::IndexRead(e) | CollectError::Other(e)) => return Err(e),
                }
                // A yielding GC has time, and the background thread is the writers'; on a
                // disk short of space the next victim's relocations need the space these
                // free.
                let overlap = !yields(inner, paced) && !disk_short(inner);
                leaving.after_collecting(inner, &mut round, overlap)?;
            }
            GcStep::Done => {
                cut_short = false;
                break;
            }
        }
    }
    // A round cut short by closing leaves its last victims in the log: nothing would flush.
    if !inner.shutting_down.load(Ordering::Acquire) {
        leaving.finish(inner, &mut round)?;
    }
    // Not left to `_stop_pacing`: the punching below may take long, and writers wait for
    // nothing it does.
    inner.gc_pacer.set_rate(0.0);
    // The victims are gone, and with them their queued ranges: what is punched now lies in
    // segments collection left alone.
    if !cut_short {
        punch_or_go_on(inner, policy, paced, &mut round.full_disk);
    }
    if let Some(e) = round.full_disk {
        if round.total.segments_collected == 0 {
            // Nothing could be done without space: the caller learns why.
            return Err(e);
        }
    }
    match super::background::delete_obsolete_files(inner) {
        Err(e) if !ends_background_round(paced, &e) => Err(e),
        _ => Ok(round.total),
    }
}

/// A round's flush: switches the memtable and waits for the flushes, then punches first
/// if the disk is short. One that meets a full disk is passed over (`full_disk` says so):
/// what needs no space may still be collected, and the caller marks the step taken so it
/// is not tried again.
fn flush_step(
    inner: &DbInner,
    policy: VictimPolicy,
    paced: bool,
    full_disk: &mut Option<Error>,
) -> Result<()> {
    let flushed = super::write::force_memtable_switch(inner)
        .and_then(|()| super::background::wait_for_flushes(inner));
    match flushed {
        Err(e) if e.is_no_space() => *full_disk = Some(e),
        other => {
            other?;
            punch_first_if_short(inner, policy, paced, full_disk);
        }
    }
    Ok(())
}

/// Whether background clustering has a range due (`Options::auto_cluster_ratio`).
fn clustering_due(inner: &DbInner) -> bool {
    inner.options.auto_cluster_ratio > 0.0 && inner.scan_heat.lock().has_due()
}

/// The log bytes writers may append before background GC is far behind (0: it is):
/// far behind is the log over [`FAR_BEHIND_FACTOR`] times the target, counting the garbage
/// of the log not flushed yet as recent flushes found it (`gc::pace::UncountedGarbage`).
/// `None` when there is nothing to collect, or when writes alone cannot take the log there
/// (they make too little garbage). Log bytes are the writers' (relocations left out), as
/// writers spend the headroom. Judged from the counts alone, GC under sustained
/// overwrites yielded through a victim of over a second while one writer appended 720 MiB
/// unpaced (docs/BENCHMARKS.md, "Writers paced from their own bytes").
fn headroom_before_far_behind(
    inner: &DbInner,
    policy: VictimPolicy,
    choice: &VictimChoice,
) -> Option<u64> {
    if choice.victims.is_empty() {
        return None;
    }
    // Written, not relocated: relocations' new copies are live.
    let unflushed_written = {
        let state = inner.state.lock();
        // Under the state lock: a memtable switch moves its bytes into `imms` under it.
        let written = |log_bytes: u64, mem: &crate::memtable::MemTable| {
            log_bytes.saturating_sub(mem.relocated().log_bytes)
        };
        let imms: u64 = (state.imms.iter())
            .map(|imm| written(imm.log_bytes, &imm.table))
            .sum();
        imms + written(inner.log_bytes_in_mem.load(Ordering::Relaxed), &state.mem)
    };
    let garbage = *inner.uncounted_garbage.lock();
    // A segment whose dead bytes were sampled (`sample_stale`, judged against the memtables
    // too) may count some of this garbage already: the estimate then leans towards pacing.
    let (on_disk, live) = choice.gc_can_lower_counting(garbage.estimate(unflushed_written));
    let far = policy.space_amp_target * FAR_BEHIND_FACTOR;
    let (on_disk, live) = (on_disk as f64, live.max(1) as f64);
    if on_disk > far * live {
        return Some(0);
    }
    // Each byte appended adds a byte on disk and (1 - share) live: the ratio tends to
    // 1 / (1 - share), and reaches `far` after this many bytes if that is above it.
    let per_byte = 1.0 - far * (1.0 - garbage.share());
    if per_byte <= 0.0 {
        return None;
    }
    Some(((far * live - on_disk) / per_byte).ceil().max(1.0) as u64)
}

/// Punches what is ready ([`punch_ready`]) if this round wants space back: a call of
/// `Db::gc` always does; a background round only while the log is over its target or the
/// disk is short of space (a write or background job met ENOSPC, or the reserve is spent).
/// Over the target is judged as victim choice judges it, without the collected segments
/// that readers still pin (they go when the readers do; punching does not bring that
/// sooner). Below the target the space is not asked for, and punching is not free: it drops the
/// punched ranges' cached pages, and a file system mounted with online discard trims their
/// blocks at once; on our 2-core VM, loads that punched meanwhile ran at 0.3-0.65 of the
/// speed of those that did not (docs/BENCHMARKS.md, "Hole punching waits for the target").
/// Collecting whole segments already waited for the target.
fn punch_if_wanted(inner: &DbInner, policy: VictimPolicy, paced: bool) -> Result<()> {
    // Batches whose readers are gone join the ready set either way: it is bounded
    // (`MAX_READY_RANGES`), the list of waiting batches is not.
    let nothing_queued = {
        let mut punches = inner.punches.lock();
        punches.promote(inner.snapshots.oldest());
        punches.is_empty()
    };
    if nothing_queued {
        return Ok(());
    }
    let wanted = !paced
        || inner.state.lock().no_space.is_some()
        || (inner.options.disk_reserve_size > 0 && !inner.reserve_present.load(Ordering::Acquire))
        || {
            let (choice, _, _) = choose(inner, policy, std::iter::empty())?;
            choice.space_amp_gc_can_lower() > policy.space_amp_target
        };
    if wanted {
        punch_ready(inner)?;
    }
    Ok(())
}

/// [`punch_if_wanted`], whose failure (a manifest edit that did not go through, say) does
/// not fail the collection: it is logged, the ranges wait for a later round
/// ([`punch_ready`] puts them back), and collection goes on — on a full disk, where every
/// round punches first, collecting is how space comes back. Like any step that meets a full
/// disk, one that fails for space leaves only victims with nothing live to collect.
fn punch_or_go_on(
    inner: &DbInner,
    policy: VictimPolicy,
    paced: bool,
    full_disk: &mut Option<Error>,
) {
    if let Err(e) = punch_if_wanted(inner, policy, paced) {
        log::warn!("wisckey: value-log GC could not punch (ranges kept for later): {e}");
        if e.is_no_space() {
            *full_disk = Some(e);
        }
    }
}

/// [`punch_or_go_on`] before collecting, only while the disk is short of space (a write or
/// background job met ENOSPC, or the disk reserve is spent): there punching is what needs
/// no room, and it may make the room that relocations need. Otherwise a round punches after
/// its collections ([`run`]): punching a segment that is then collected whole is wasted, and
/// it is the slow way to free a mostly dead one — a system call per run of dead records
/// against one unlink, and behind a flush of small values lie a million such runs. Punching
/// first, background GC spent whole overwrite phases punching and collected nothing
/// (docs/BENCHMARKS.md, "Collect first, punch after").
fn punch_first_if_short(
    inner: &DbInner,
    policy: VictimPolicy,
    paced: bool,
    full_disk: &mut Option<Error>,
) {
    if disk_short(inner) {
        punch_or_go_on(inner, policy, paced, full_disk);
    }
}

/// Whether the disk is short of space: a write or background job met ENOSPC (or had no
/// file handle: `State::no_space` holds either, and GC then frees space first too), or the
/// disk reserve is spent or could not be made.
fn disk_short(inner: &DbInner) -> bool {
    inner.state.lock().no_space.is_some()
        || (inner.options.disk_reserve_size > 0 && !inner.reserve_present.load(Ordering::Acquire))
}

/// Whether background GC (`paced`) ends its round on `e`, a failed read of the log's
/// directory or of the key index: an I/O error there changed nothing, the next round tries
/// again, and stopping the database's writes for it (as a latched error would) is out of
/// all proportion. Logged. `Db::gc`'s caller gets the error instead.
fn ends_background_round(paced: bool, e: &Error) -> bool {
    let ends = paced && matches!(e, Error::Io { .. });
    if ends {
        log::warn!("wisckey: value-log GC ends its round on a failed read: {e}");
    }
    ends
}

/// [`LsmIndex`] for one victim's collection, noting which of its calls failed: an error of
/// the collection that came from neither came from reading the victim.
struct WatchedIndex<'a> {
    index: LsmIndex<'a>,
    lookup_failed: Cell<bool>,
    relocation_failed: Cell<bool>,
}

impl GcIndex for WatchedIndex<'_> {
    fn newest_pointers(&self, keys: &[&[u8]]) -> Result<(Vec<Option<ValuePointer>>, JudgedIn)> {
        let found = self.index.newest_pointers(keys);
        self.lookup_failed
            .set(self.lookup_failed.get() || found.is_err());
        found
    }

    fn judgement_outdated(&self, judged_in: JudgedIn) -> bool {
        self.index.judgement_outdated(judged_in)
    }

    fn relocate_if_unchanged(
        &self,
        relocations: Vec<Relocation>,
        judged_in: JudgedIn,
    ) -> Result<(u64, u64)> {
        let relocated = self.index.relocate_if_unchanged(relocations, judged_in);
        self.relocation_failed
            .set(self.relocation_failed.get() || relocated.is_err());
        relocated
    }
}

/// Why a victim's collection failed.
#[derive(Debug)]
enum CollectError {
    /// Reading the victim failed (an I/O error or damaged bytes): it is kept, reported
    /// `Unreadable` and skipped until the next open; nothing else is wrong.
    Unreadable(Error),
    /// A key-index lookup failed with an I/O error: nothing was changed.
    IndexRead(Error),
    /// A key-index lookup (or the write leader's liveness check) met damage in a table:
    /// nothing was changed; the victim is sound.
    IndexDamaged(Error),
    /// Anything else: a relocation, the sync, the manifest edit.
    Other(Error),
}

impl From<Error> for CollectError {
    fn from(e: Error) -> CollectError {
        CollectError::Other(e)
    }
}

/// A victim collected: its survivors are relocated (appended, not yet synced); it leaves
/// the log once the replay head is past them ([`Leaving`]).
struct Collected {
    victim: u64,
    outcome: GcOutcome,
    /// `State::gc_removed`'s mark: every relocation is appended with a sequence number up to
    /// this one.
    relocated_through: u64,
}

/// At most this many victims wait for the replay head before GC waits for it: each waits in
/// the log with its space not yet freed.
const MOST_VICTIMS_LEAVING: usize = 4;

/// The victims of a round on their way out of the log. A victim leaves once the replay
/// head is past its relocations and the writes that made its other records dead; the flush
/// that moves the head runs on the background thread while GC collects the next victims,
/// and the victims collected meanwhile share the next flush: flushes go at the pace of the
/// background thread (behind a compaction a flush waits), one per victim when they are
/// quick. Waiting for each flush took about as long as collecting the victim at 1 KiB
/// under overwrites, and left a small L0 table per victim for compactions to merge
/// (docs/BENCHMARKS.md, "Victims leave the log while the next are collected").
struct Leaving {
    /// Collected since the last head move was asked for.
    unasked: Vec<Collected>,
    /// Those a head move was asked for.
    asked: Vec<Collected>,
    /// The log position the head must reach before `asked` leave; None: nothing to wait
    /// for (the head was past, a full disk left the sync alone, or a test build skips the
    /// step).
    head_must_reach: Option<LogPosition>,
    /// When victims last left the log (or the round began): GC's freeing rate is what left
    /// per second of the round, waits and syncs included.
    last_left: Instant,
}

/// A round's state beyond its victims on their way out ([`Leaving`]'s steps change it too).
#[derive(Default)]
struct RoundState {
    /// Set once a step met a full disk.
    full_disk: Option<Error>,
    /// Victims that failed for space: not tried again this round.
    failed_for_space: BTreeSet<u64>,
    /// What the round collected.
    total: GcOutcome,
}

impl Leaving {
    fn new() -> Leaving {
        Leaving {
            unasked: Vec::new(),
            asked: Vec::new(),
            head_must_reach: None,
            last_left: Instant::now(),
        }
    }

    /// Every victim on its way out: victim choice counts them as removed (their survivors
    /// are relocated already).
    fn victims(&self) -> impl Iterator<Item = u64> + '_ {
        (self.asked.iter().chain(&self.unasked)).map(|c| c.victim)
    }

    /// After a victim's collection. With `overlap`: removes the victims whose head move is
    /// done (or waits for it when [`MOST_VICTIMS_LEAVING`] wait), then asks for the head to
    /// move past those collected since, if no move is under way. Without: every victim
    /// leaves now, after its own flush.
    fn after_collecting(
        &mut self,
        inner: &DbInner,
        round: &mut RoundState,
        overlap: bool,
    ) -> Result<()> {
        if !overlap {
            return self.finish(inner, round);
        }
        if !self.asked.is_empty() {
            let head = inner.state.lock().versions.vlog_head();
            let moved = (self.head_must_reach).is_none_or(|pos| head.is_some_and(|h| h >= pos));
            if moved || self.asked.len() + self.unasked.len() >= MOST_VICTIMS_LEAVING {
                self.remove_asked(inner, round)?;
            }
        }
        if self.asked.is_empty() && !self.unasked.is_empty() {
            self.ask(inner, round)?;
        }
        Ok(())
    }

    /// Removes every victim on its way out, waiting for the head to pass them.
    fn finish(&mut self, inner: &DbInner, round: &mut RoundState) -> Result<()> {
        self.remove_asked(inner, round)?;
        if !self.unasked.is_empty() {
            self.ask(inner, round)?;
            self.remove_asked(inner, round)?;
        }
        Ok(())
    }

    /// Asks for the head to move past the victims collected since the last ask
    /// ([`put_head_forward`]). Victims whose ask met a full disk stay in the log and are
    /// not tried again this round.
    fn ask(&mut self, inner: &DbInner, round: &mut RoundState) -> Result<()> {
        debug_assert!(self.asked.is_empty());
        match put_head_forward(inner, &mut round.full_disk) {
            Ok(head_must_reach) => {
                self.head_must_reach = head_must_reach;
                self.asked = std::mem::take(&mut self.unasked);
                Ok(())
            }
            Err(e) if e.is_no_space() => {
                (round.failed_for_space).extend(self.unasked.drain(..).map(|c| c.victim));
                round.full_disk = Some(e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Waits for the head to pass the asked victims (a flush that meets a full disk leaves
    /// the sync alone, see [`put_head_forward`]), then removes them from the log (one
    /// manifest edit), hands their files to the sweep and counts their collections.
    fn remove_asked(&mut self, inner: &DbInner, round: &mut RoundState) -> Result<()> {
        if self.asked.is_empty() {
            return Ok(());
        }
        if let Some(log_end) = self.head_must_reach.take() {
            let head = inner.state.lock().versions.vlog_head();
            if head.is_none_or(|head| head < log_end) {
                // The switch queued the memtable holding them: waiting for the memtables
                // queued now includes it.
                match super::background::wait_for_flushes(inner) {
                    Err(e) if e.is_no_space() => {
                        head_forward_met_full_disk(&e);
                        round.full_disk = Some(e);
                    }
                    waited => waited?,
                }
            }
        }
        let leaving = std::mem::take(&mut self.asked);
        if crate::safety::skipped(SafetyStep::ManifestEditBeforeSegmentDeletion) {
            for c in &leaving {
                inner.fs.remove(&vlog_file_name(&inner.dir, c.victim))?;
            }
        }
        // What deleting each file will free: its blocks less those already punched (counted
        // in `GcTotals::bytes_punched`, not to be counted again as freed).
        let removals: Vec<(u64, GcRemoval)> = {
            let state = inner.state.lock();
            let segments = state.versions.vlog_segments();
            (leaving.iter())
                .map(|c| {
                    let size = (segments.get(&c.victim))
                        .and_then(|m| Some(m.sealed_size?.saturating_sub(m.punched_bytes())))
                        .unwrap_or(c.outcome.bytes_read);
                    let removal = GcRemoval {
                        size,
                        relocated_through: c.relocated_through,
                    };
                    (c.victim, removal)
                })
                .collect()
        };
        let edit = VersionEdit {
            vlog_segments_removed: removals.iter().map(|(victim, _)| *victim).collect(),
            ..VersionEdit::default()
        };
        match install_edit(inner, edit, |state| state.gc_removed.extend(removals)) {
            Err(e) if e.is_no_space() => {
                (round.failed_for_space).extend(leaving.iter().map(|c| c.victim));
                round.full_disk = Some(e);
                return Ok(());
            }
            installed => installed?,
        }
        {
            let mut samples = inner.gc_samples.lock();
            for c in &leaving {
                samples.remove(&c.victim);
            }
        }
        // What left since victims last did, over that time: with victims collected while
        // others wait, a victim's own collection time would leave the flush out (or charge
        // one victim the whole wait and the next ones none) and overstate the rate writers
        // are paced to.
        let now = Instant::now();
        let (read, relocated) = (leaving.iter()).fold((0, 0), |(read, relocated), c| {
            (read + c.outcome.bytes_read, relocated + c.outcome.bytes_relocated)
        });
        (inner.gc_freeing.lock()).add_victim(read, relocated, now - self.last_left);
        self.last_left = now;
        for c in &leaving {
            // Counted per victim, so a long background run shows in `Db::stats` while it
            // is still going.
            let mut totals = inner.gc_totals.lock();
            totals.runs += u64::from(round.total.segments_collected == 0);
            totals.work.add(&c.outcome);
            round.total.add(&c.outcome);
        }
        // Free them now if nothing pins them: on a nearly full disk the next victim's
        // relocations need this space. A failure here (listing the directory, removing some
        // obsolete file) takes nothing back: the victims have left the log, and the sweep at
        // the end of the round, after a flush or at open deletes the files. So it is logged,
        // not returned: an error would count the collection as failed, and background GC
        // would latch it and stop every write.
        if let Err(e) = super::background::delete_obsolete_files(inner) {
            log::warn!("wisckey: value-log GC freed segments; deleting files failed: {e}");
        }
        Ok(())
    }
}

/// Relocates `victim`'s survivors (appended, not yet synced).
fn collect_victim(
    inner: &DbInner,
    victim: u64,
    paced: bool,
) -> std::result::Result<Collected, CollectError> {
    let index = WatchedIndex {
        index: LsmIndex::new(inner, paced, true),
        lookup_failed: Cell::new(false),
        relocation_failed: Cell::new(false),
    };
    let punched = punched_ranges(inner, victim);
    let outcome = (collect_segment(source(inner), victim, &punched, &index)).map_err(|e| {
        if index.relocation_failed.get() {
            // The write leader's liveness check reads the key index too.
            if failed_read_only(inner, &e) {
                CollectError::IndexRead(e)
            } else if e.is_corruption() {
                CollectError::IndexDamaged(e)
            } else {
                CollectError::Other(e)
            }
        } else if index.lookup_failed.get() {
            match e {
                Error::Io { .. } => CollectError::IndexRead(e),
                e if e.is_corruption() => CollectError::IndexDamaged(e),
                e => CollectError::Other(e),
            }
        } else {
            CollectError::Unreadable(e)
        }
    })?;
    Ok(Collected {
        victim,
        outcome,
        // Every relocation above returned: it is appended, with sequence numbers up to this.
        relocated_through: inner.visible_seq.load(Ordering::Acquire),
    })
}

/// Starts moving the replay head past the writes collected victims depend on: their
/// relocations (appended, not synced) and the writes and deletes that made their other
/// records dead (they may be unsynced, or only in a memtable). Synced alone they would
/// survive a power cut, but they would be the only record of those keys' values in the log
/// after the head, where a salvage open that cuts the log at damage before them loses them
/// (read as `Corruption`, their old copies gone). Flushed, the key index holds them, so
/// nothing of the victims is needed any more.
///
/// Syncs the log and switches the memtable; the flush is waited for when the victims leave
/// ([`Leaving::remove_asked`]). A switch that fails for lack of space (the disk GC is
/// freeing) falls back to the sync alone, the crash-safe minimum: refusing would leave a
/// full disk full. It is then the round's `full_disk` (logged once), and later victims of
/// the round do not try to flush. Returns the position the head must reach, if any.
fn put_head_forward(
    inner: &DbInner,
    full_disk: &mut Option<Error>,
) -> Result<Option<LogPosition>> {
    if crate::safety::skipped(SafetyStep::HeadPastGcWrites) {
        return Ok(None);
    }
    super::write::sync_log(inner)?;
    let log_end = inner.vlog.end();
    let head = inner.state.lock().versions.vlog_head();
    if head.is_some_and(|head| head >= log_end) || full_disk.is_some() {
        return Ok(None);
    }
    match super::write::force_head_forward(inner) {
        Err(e) if e.is_no_space() => {
            head_forward_met_full_disk(&e);
            *full_disk = Some(e);
            Ok(None)
        }
        Err(e) => Err(e),
        Ok(()) => Ok(Some(log_end)),
    }
}

fn head_forward_met_full_disk(e: &Error) {
    log::warn!(
        "wisckey: value-log GC removes victims whose relocations are synced but not yet \
         behind the replay head (the flush met a full disk): {e}"
    );
}

/// `Db::gc`.
pub(crate) fn gc_now(db: &crate::Db, inner: &DbInner, options: &GcOptions) -> Result<GcOutcome> {
    if options.space_amp_target.is_nan()
        || options.space_amp_target < 1.0
        || !(0.0..=1.0).contains(&options.min_dead_fraction)
    {
        return Err(Error::InvalidArgument(
            "GcOptions: space_amp_target must be at least 1 and min_dead_fraction in 0..=1".into(),
        ));
    }
    let mut full_disk = None;
    if options.compact_first {
        // On a full disk the compaction's output may find no room, while victims with
        // nothing live need none: like any GC step that meets a full disk, it is passed
        // over (the round fails with `NoSpace` only if it collects nothing).
        match db.compact_range(None, None) {
            Err(e) if e.is_no_space() => {
                log::warn!("wisckey: value-log GC goes on without its compaction: {e}");
                full_disk = Some(e);
            }
            compacted => compacted?,
        }
    }
    let policy = VictimPolicy {
        space_amp_target: options.space_amp_target,
        min_dead_fraction: options.min_dead_fraction,
        order: options.order.unwrap_or(inner.options.gc_victim_order),
    };
    run_knowing(inner, policy, false, full_disk)
}

/// `Db::cluster_values` (and, with `dry_run`, `Db::cluster_values_estimate`): walks the
/// range at a snapshot in key order (values read ahead in parallel, as any scan) and hands
/// the values the planner moves to the write leader in key-ordered batches. Runs beside
/// writers and GC: a value overwritten or deleted since the snapshot fails the relocation's
/// check and stays as it is; one GC moved is moved again from where GC put it
/// (`LsmIndex::still_live`). A dry run reads keys and
/// pointers only and counts what a pass would move.
pub(crate) fn cluster_values(
    inner: &Arc<DbInner>,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    dry_run: bool,
    background: bool,
) -> Result<ClusterOutcome> {
    let opts = crate::ReadOptions {
        lower_bound,
        upper_bound,
        keys_only: dry_run,
        ..crate::ReadOptions::default()
    };
    let index = LsmIndex::new(inner, background, false);
    let mut outcome = ClusterOutcome::default();
    let relocate = |batch: Vec<Relocation>, outcome: &mut ClusterOutcome| -> Result<()> {
        let offered = batch.len() as u64;
        let (relocated, bytes) = if dry_run {
            let bytes = batch.iter().map(|r| u64::from(r.old.len)).sum();
            (offered, bytes)
        } else {
            let (live, judged_in) = index.still_live(batch)?;
            index.relocate_if_unchanged(live, judged_in)?
        };
        outcome.values_relocated += relocated;
        outcome.bytes_relocated += bytes;
        outcome.values_changed += offered - relocated;
        Ok(())
    };
    let mut planner = ClusterPlanner::new(CLUSTER_KEEP_RUN_BYTES, CLUSTER_BATCH_BYTES);
    let mut it = super::read::iter(inner, &opts)?;
    // The pass's own reads are not a user's scan.
    it.without_scan_heat();
    it.seek_to_first();
    while it.valid() {
        if background && inner.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        outcome.keys_examined += 1;
        if it.value_in_log() {
            let ptr = it.stored_pointer().ok_or_else(|| {
                Error::corruption("key index", 0, "a value pointer that does not decode")
            })?;
            outcome.values_in_log += 1;
            let value = || if dry_run { Ok(Vec::new()) } else { it.value() };
            if let Some(batch) = planner.push(it.key(), ptr, value)? {
                relocate(batch, &mut outcome)?;
            }
        }
        it.next();
    }
    it.status()?;
    drop(it);
    if let Some(batch) = planner.finish() {
        relocate(batch, &mut outcome)?;
    }
    outcome.values_kept = planner.kept();
    Ok(outcome)
}

/// The `wisckey-gc` thread: collects whenever the log is over its space-amplification
/// target, then clusters one key range that scans have earned a pass over
/// (`Options::auto_cluster_ratio`); otherwise sleeps until a flush or compaction finishes,
/// a range becomes due, or a period passes.
pub(crate) fn run_background(inner: &Arc<DbInner>) {
    let target = inner.options.gc_space_amp_target;
    let policy = VictimPolicy {
        space_amp_target: target,
        min_dead_fraction: BACKGROUND_MIN_DEAD_FRACTION,
        order: inner.options.gc_victim_order,
    };
    let mut busy = false;
    loop {
        {
            let mut state = inner.state.lock();
            if inner.shutting_down.load(Ordering::Acquire) {
                return;
            }
            // After a round that did something, look again at once.
            if !busy {
                inner.gc_cv.wait_for(&mut state, BACKGROUND_PERIOD);
            }
            busy = false;
            if inner.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if state.bg_error.is_some() || !target.is_finite() {
                continue;
            }
        }
        // A panic becomes `Internal` and is latched (`background_failure`): a round cut
        // short may have left its relocation half done, which only a reopen sorts out.
        match catch_panic("value-log GC", || run(inner, policy, true)) {
            Ok(done) => busy = done.segments_collected > 0,
            Err(e) => background_failure(inner, "value-log GC", e),
        }
        match catch_panic("value clustering", || Ok(auto_cluster_once(inner))) {
            Ok(looked) => busy |= looked,
            Err(e) => background_failure(inner, "value clustering", e),
        }
    }
}

/// Errors of background GC and clustering: a full disk, a moment without file handles or a
/// closing database is met again on the next round (GC is how space comes back); damage is
/// logged (the data it concerns stays unreadable, the rest is served); anything else stops
/// background work. (GC's failed
/// reads do not get here: [`run`] skips a victim that does not read, and a background round
/// ends on a failed read of the key index or the directory.)
fn background_failure(inner: &DbInner, what: &str, e: Error) {
    match e {
        Error::Closed => {}
        e if e.is_no_space() => {}
        e if e.is_out_of_handles() => log::warn!("wisckey: {what} is retried: {e}"),
        e => {
            log::error!("wisckey: {what} failed: {e}");
            if !matches!(e, Error::Corruption { .. }) {
                super::latch_error(inner, e);
            }
        }
    }
}

/// Takes the next range scans made due, estimates what a pass would move and runs the pass
/// if the scans' scattered reads have paid for it. Returns whether a range was looked at.
fn auto_cluster_once(inner: &Arc<DbInner>) -> bool {
    let ratio = inner.options.auto_cluster_ratio;
    if ratio <= 0.0 {
        return false;
    }
    let Some(due) = inner.scan_heat.lock().next_due() else {
        return false;
    };
    let attempt = || -> Result<Option<ClusterOutcome>> {
        let estimate = cluster_values(inner, due.lower.clone(), due.upper.clone(), true, true)?;
        inner.auto_cluster_totals.lock().ranges_estimated += 1;
        let paid = (inner.scan_heat.lock()).estimated(due.unit, estimate.values_relocated, ratio);
        if !paid {
            return Ok(None);
        }
        let done = cluster_values(inner, due.lower.clone(), due.upper.clone(), false, true)?;
        inner.scan_heat.lock().passed(due.unit);
        Ok(Some(done))
    };
    match attempt() {
        Ok(Some(done)) => {
            let mut totals = inner.auto_cluster_totals.lock();
            totals.passes += 1;
            totals.work.add(&done);
        }
        Ok(None) => {}
        Err(e) => {
            inner.scan_heat.lock().abandoned(due.unit);
            if failed_read_only(inner, &e) {
                log::warn!("wisckey: clustering of a scanned range ends on a failed read: {e}");
            } else {
                background_failure(inner, "clustering of a scanned range", e);
            }
        }
    }
    true
}

/// Whether `e`, from a relocation or a clustering pass, changed nothing that must stop the
/// database's writes: an I/O error the write path did not latch. Such passes write only
/// through the write leader, which latches a failure that broke the log before it returns
/// (`db::write`); every other I/O error of theirs is a failed read — their iterator, their
/// liveness checks, the leader's re-check — or a log reservation refused cleanly, after
/// which the next round tries again.
fn failed_read_only(inner: &DbInner, e: &Error) -> bool {
    matches!(e, Error::Io { .. }) && inner.state.lock().bg_error.is_none()
}

/// `Db::stats`.
pub(crate) fn stats(inner: &DbInner) -> Result<DbStats> {
    let policy = VictimPolicy {
        space_amp_target: inner.options.gc_space_amp_target,
        min_dead_fraction: BACKGROUND_MIN_DEAD_FRACTION,
        order: inner.options.gc_victim_order,
    };
    let (choice, head_segment, active_segment) = choose(inner, policy, std::iter::empty())?;
    let version = inner.state.lock().versions.current();
    let mut gc = *inner.gc_totals.lock();
    gc.bytes_freed = inner.state.lock().gc_freed_bytes;
    let freed = gc.bytes_freed + gc.bytes_punched;
    gc.rewritten_per_freed = if freed == 0 {
        0.0
    } else {
        gc.work.bytes_relocated as f64 / freed as f64
    };
    Ok(DbStats {
        level_files: std::array::from_fn(|l| version.num_files(l)),
        level_bytes: std::array::from_fn(|l| version.level_bytes(l)),
        value_log: ValueLogStats {
            space_amp: space_amp(choice.log_bytes, choice.live_bytes),
            log_bytes: choice.log_bytes,
            live_bytes: choice.live_bytes,
            segments: choice.segments,
            space_amp_target: inner.options.gc_space_amp_target,
            head_segment,
            active_segment,
        },
        gc,
        auto_cluster: *inner.auto_cluster_totals.lock(),
        disk_reserve_bytes: if inner.reserve_present.load(Ordering::Acquire) {
            inner.options.disk_reserve_size
        } else {
            0
        },
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use super::{choose, run, sample_stale, LsmIndex, VictimPolicy};
    use crate::fs::{FaultFs, FaultKind, FaultOps, FsOp, MemFs};
    use crate::gc::{GcIndex, Relocation};
    use crate::key::ValueKind;
    use crate::vlog::ValuePointer;
    use crate::{Db, Options, Result};

    /// A delete and an overwrite that land after a clustering batch was judged live
    /// (`still_live`) and before the write leader relocates it are never shadowed by the
    /// relocation, nor after a reopen: while the judging view's memtable is still in memory
    /// the leader finds them there; flushed to a table in between, it looks there too. The
    /// batch's other values move.
    #[test]
    fn writes_between_a_clustering_judgement_and_its_relocation_are_never_shadowed() {
        for flush_between in [false, true] {
            let options = Options {
                gc_space_amp_target: f64::INFINITY,
                ..Options::small_for_tests(Arc::new(MemFs::new()))
            };
            let db = Db::open("/db", options.clone()).expect("open");
            let key = |i: u8| format!("key{i}").into_bytes();
            for i in 0..4u8 {
                db.put(key(i), [i; 1000]).expect("put");
            }
            // In a table, where a pass over a loaded database finds its keys.
            db.flush().expect("flush");
            let lookup = LsmIndex::new(&db.inner, false, false);
            let pointer = |i: u8| lookup.newest_pointers(&[&key(i)]).expect("lookup").0[0];
            let batch: Vec<Relocation> = (0..4u8)
                .map(|i| Relocation {
                    key: key(i),
                    value: vec![i; 1000],
                    old: pointer(i).expect("a value pointer"),
                })
                .collect();
            let before: Vec<_> = batch.iter().map(|r| r.old).collect();
            let pass = LsmIndex::new(&db.inner, false, false);
            let (live, judged_in) = pass.still_live(batch).expect("judge");
            assert_eq!(live.len(), 4, "all four judged live");
            db.delete(key(0)).expect("racing delete");
            db.put(key(1), b"newer").expect("racing overwrite");
            if flush_between {
                db.flush().expect("flush the racing writes");
            }
            let (moved, _) = pass.relocate_if_unchanged(live, judged_in).expect("relocate");
            let case = if flush_between { "flushed" } else { "in memory" };
            assert_eq!(moved, 2, "{case}: only the untouched values move");
            assert!(pointer(2) != Some(before[2]) && pointer(3) != Some(before[3]));
            db.close().expect("close");
            let db = Db::open("/db", options).expect("reopen");
            assert_eq!(db.get(key(0)).expect("get"), None, "{case}: the delete stands");
            assert_eq!(db.get(key(1)).expect("get").as_deref(), Some(&b"newer"[..]));
            for i in 2..4u8 {
                assert_eq!(db.get(key(i)).expect("get"), Some(vec![i; 1000]));
            }
            db.close().expect("close");
        }
    }

    /// GC's judgement of many keys at once (in key order, through table cursors that hold
    /// the last data block) gives each key, in the order asked, the answer a lookup of that
    /// key alone gives: keys in tables of several levels, in L0, in the memtable, deleted,
    /// stored inline, absent.
    #[test]
    fn keys_judged_together_get_the_answers_each_gets_alone() {
        use rand::{rngs::SmallRng, seq::SliceRandom, SeedableRng};

        let db = open_with_background_gc_off(Arc::new(MemFs::new()));
        let key = |i: u32| format!("key{i:05}").into_bytes();
        for i in 0..2000u32 {
            db.put(key(i), [i as u8; 200]).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        for i in (0..2000u32).step_by(3) {
            db.put(key(i), [1; 300]).expect("overwrite");
        }
        db.flush().expect("flush");
        for i in (0..2000u32).step_by(7) {
            db.delete(key(i)).expect("delete");
        }
        for i in (0..2000u32).step_by(11) {
            db.put(key(i), b"inline").expect("inline put");
        }
        let stats = db.stats().expect("stats");
        assert!(stats.level_files[0] > 0 && stats.level_files[1..].iter().any(|&n| n > 0));
        let seed = 20261130;
        let mut keys: Vec<Vec<u8>> = (0..2100).map(key).collect();
        keys.shuffle(&mut SmallRng::seed_from_u64(seed));
        let asked: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let index = LsmIndex::new(&db.inner, false, false);
        let (together, _) = index.newest_pointers(&asked).expect("judge");
        let view = super::super::read::capture(&db.inner, &crate::ReadOptions::default())
            .expect("view");
        let mut pointers = 0;
        for (k, got) in asked.iter().zip(&together) {
            let entry = super::super::read::newest_in_view(&db.inner, &view, k).expect("get");
            let alone = match entry {
                Some((ValueKind::ValuePointer, stored)) => ValuePointer::decode(&stored),
                _ => None,
            };
            assert_eq!(*got, alone, "seed {seed}, key {}", String::from_utf8_lossy(k));
            pointers += usize::from(alone.is_some());
        }
        // Every key but the deleted, inline and absent ones holds a pointer.
        let expected = (0..2000u32).filter(|i| i % 7 != 0 && i % 11 != 0).count();
        assert_eq!(pointers, expected);
        db.close().expect("close");
    }

    /// Defect: GC judged how far behind it was from the segments' dead counts alone, which
    /// take the log no flush has covered as all live, and only between victims. Under
    /// sustained overwrites that part is mostly garbage and grew by hundreds of MiB during
    /// one yielding victim, with writers unpaced. Now GC counts the share of the unflushed
    /// log that recent flushes found dead, and gives writers the headroom of log bytes
    /// that takes it to far behind: spent, they are paced.
    #[test]
    fn writers_get_the_headroom_that_takes_gc_far_behind_counting_unflushed_garbage() {
        let options = Options {
            gc_space_amp_target: f64::INFINITY,
            memtable_size: 4 << 20,
            memtable_max_log_bytes: 4 << 20,
            ..Options::small_for_tests(Arc::new(MemFs::new()))
        };
        let db = Db::open("/db", options).expect("open");
        let round_bytes = 200 * 1000;
        let put_all = |round: u8| {
            for i in 0..200u32 {
                db.put(format!("key{i:04}"), [round; 1000]).expect("put");
            }
        };
        put_all(0);
        db.flush().expect("flush");
        put_all(1);
        db.flush().expect("flush");
        let share = db.inner.uncounted_garbage.lock().share();
        // Weighted by bytes, the newest flush weighing half: (0 + 1) / (0.5 + 1).
        assert!((share - 2.0 / 3.0).abs() < 0.05, "{share}");
        // Far behind at 2.5: two rounds on disk over one live (2.0), each byte appended
        // adding a third of a byte live: 0.5 / (1 - 2.5 / 3) = 3 rounds of headroom.
        let policy = |target: f64| VictimPolicy {
            space_amp_target: target / super::FAR_BEHIND_FACTOR,
            min_dead_fraction: 0.0,
            order: Default::default(),
        };
        let headroom = |target: f64| {
            let (choice, _, _) = choose(&db.inner, policy(target), std::iter::empty()).expect("choose");
            assert!(!choice.victims.is_empty());
            super::headroom_before_far_behind(&db.inner, policy(target), &choice)
        };
        let before = headroom(2.5).expect("some headroom") as f64;
        assert!((before / round_bytes as f64 - 3.0).abs() < 0.3, "{before}");
        // A third round, all in the memtable: its garbage is in no count yet, but the
        // headroom shrinks by what it appended.
        put_all(2);
        let after = headroom(2.5).expect("some headroom") as f64;
        assert!(((before - after) / round_bytes as f64 - 1.0).abs() < 0.1, "{before} {after}");
        // The counts see three rounds on disk over two live (1.5); with two thirds of the
        // third round dead it is 3 / (2 - 2/3) = 2.25: far behind at 2.0.
        let (choice, _, _) = choose(&db.inner, policy(2.0), std::iter::empty()).expect("choose");
        assert!(choice.space_amp_gc_can_lower() < 1.6);
        assert_eq!(headroom(2.0), Some(0));
        // Writes that make no more than a third of their bytes dead never reach 4.0.
        assert_eq!(headroom(4.0), None);
        db.close().expect("close");
    }

    /// The share of the log flushes find dead is the writers' garbage: relocations (GC's,
    /// clustering's) and the old copies they replace are left out of it, or GC collecting
    /// under new-key inserts would look like overwrites and pace them.
    #[test]
    fn flushes_count_the_garbage_of_writes_not_of_relocations() {
        let db = open_with_background_gc_off(Arc::new(MemFs::new()));
        let key = |i: u32| format!("key{i:05}");
        for i in 0..400u32 {
            db.put(key(i), [0; 1000]).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..400u32).step_by(2) {
            db.put(key(i), [1; 1000]).expect("overwrite");
        }
        db.flush().expect("flush");
        let share = || db.inner.uncounted_garbage.lock().share();
        assert!(share() > 0.5, "overwrites: {}", share());
        // New keys since: flushes find nothing dead.
        for i in 400..2000u32 {
            db.put(key(i), [2; 1000]).expect("put");
        }
        db.flush().expect("flush");
        let before = share();
        assert!(before < 0.01, "new keys: {before}");
        // GC relocates the live half of the first round's segments, a clustering pass moves
        // values again: the share does not move.
        let outcome = run(&db.inner, COLLECT_ALL, false).expect("gc");
        assert!(outcome.records_relocated >= 100, "{outcome:?}");
        let clustered = db.cluster_values::<&[u8], _>(..).expect("cluster");
        assert!(clustered.values_relocated > 0, "{clustered:?}");
        db.flush().expect("flush");
        assert!((share() - before).abs() < 1e-9, "{} after, {before} before", share());
        db.close().expect("close");
    }

    /// Explicit GC lets a victim's flush run while it collects the next: none is chosen
    /// again while it waits (collected twice, it would be counted twice), every one leaves
    /// the log (the last too: nothing collectable is left), and every value reads back,
    /// before and after a reopen. (Whether a flush did overlap a collection is not
    /// observed here; the crash tests cover the order of sync, flush and removal.)
    #[test]
    fn each_victim_leaves_the_log_once_while_the_next_is_collected() {
        let fs = Arc::new(MemFs::new());
        let db = open_with_background_gc_off(fs.clone());
        let key = |i: u32| format!("key{i:05}");
        let value = |i: u32, round: u8| vec![round; 900 + (i % 200) as usize];
        let mut expected = std::collections::BTreeMap::new();
        for i in 0..600u32 {
            db.put(key(i), value(i, 0)).expect("put");
            expected.insert(key(i), value(i, 0));
        }
        for i in (0..600u32).step_by(3) {
            db.put(key(i), value(i, 1)).expect("overwrite");
            expected.insert(key(i), value(i, 1));
        }
        db.flush().expect("flush");
        let listed = |db: &Db| -> std::collections::BTreeSet<u64> {
            (db.inner.state.lock().versions.vlog_segments().keys().copied()).collect()
        };
        let before = listed(&db);
        let outcome = run(&db.inner, COLLECT_ALL, false).expect("gc");
        let removed = before.difference(&listed(&db)).count() as u64;
        assert!(outcome.segments_collected >= 4, "{outcome:?}");
        assert_eq!(outcome.segments_collected, removed, "{outcome:?}");
        assert!(outcome.records_relocated >= 300, "{outcome:?}");
        let (left, _, _) = choose(&db.inner, COLLECT_ALL, std::iter::empty()).expect("choose");
        assert_eq!(left.victims, Vec::<u64>::new(), "nothing left to collect");
        let check = |db: &Db| {
            for (k, v) in &expected {
                assert_eq!(db.get(k).expect("get").as_deref(), Some(&v[..]), "{k}");
            }
        };
        check(&db);
        db.close().expect("close");
        let db = open_with_background_gc_off(fs);
        check(&db);
        db.close().expect("close");
    }

    /// While victims wait for the replay head and the choice (which counts them as
    /// removed) finds nothing else to collect, the pacer is left as it was; with none
    /// waiting, "nothing to collect" turns pacing off.
    #[test]
    fn writers_stay_paced_while_victims_wait_and_nothing_else_is_collectable() {
        let db = open_with_background_gc_off(Arc::new(MemFs::new()));
        let nothing = crate::gc::picker::VictimChoice {
            victims: Vec::new(),
            segments: Vec::new(),
            log_bytes: 0,
            live_bytes: 0,
        };
        let mut leaving = super::Leaving::new();
        leaving.asked.push(super::Collected {
            victim: 7,
            outcome: crate::gc::GcOutcome::default(),
            relocated_through: 0,
        });
        let pacer = &db.inner.gc_pacer;
        pacer.set_rate_after(1e6, 0);
        assert!(pacer.pacing());
        super::arm_pacer(&db.inner, &nothing, &leaving, None);
        assert!(pacer.pacing(), "victim 7 still waits");
        leaving.asked.clear();
        super::arm_pacer(&db.inner, &nothing, &leaving, None);
        assert!(!pacer.is_on(), "nothing waits, nothing to collect");
        db.close().expect("close");
    }

    /// A yielding victim stops yielding once writers have spent their headroom: they
    /// would wait for GC while it slept.
    #[test]
    fn gc_yields_only_while_writers_are_not_paced() {
        // Background GC off: its rounds would set the pacer under the test.
        let db = open_with_background_gc_off(Arc::new(MemFs::new()));
        let paced = LsmIndex::new(&db.inner, true, true);
        assert!(paced.yields());
        db.inner.gc_pacer.set_rate_after(1e9, 1000);
        assert!(paced.yields(), "headroom left");
        db.inner.gc_pacer.charge(1000, Instant::now());
        assert!(!paced.yields(), "headroom spent");
        // Pacing off again (the round ended, or nothing to collect): it yields again.
        db.inner.gc_pacer.set_rate(0.0);
        assert!(paced.yields());
        // Explicit GC never yields.
        assert!(!LsmIndex::new(&db.inner, false, true).yields());
        db.close().expect("close");
    }

    /// Defect: a sample that failed (the segment did not read) was stored as an estimate of
    /// 0 dead bytes, replacing a good earlier sample until the log moved on again.
    #[test]
    fn a_failed_sample_keeps_the_previous_estimate() {
        let fault = FaultFs::new(Arc::new(MemFs::new()));
        let db = open_with_background_gc_off(Arc::new(fault.clone()));
        let key = |i: u32| format!("key{i:04}");
        for i in 0..80u32 {
            db.put(key(i), [1u8; 1000]).expect("put");
        }
        db.flush().expect("flush");
        for i in (0..80u32).step_by(2) {
            db.put(key(i), [2u8; 1000]).expect("overwrite");
        }
        db.flush().expect("flush");
        let inner = &db.inner;
        // Half dead, under this threshold: a segment that sampling looks at.
        let policy = VictimPolicy {
            space_amp_target: 100.0,
            min_dead_fraction: 0.9,
            order: Default::default(),
        };
        let (choice, _, active) = choose(inner, policy, std::iter::empty()).expect("choose");
        assert!(sample_stale(inner, &choice, active).expect("sample") > 0);
        let good = inner.gc_samples.lock()[&1];
        assert!(good.dead_bytes > 0, "{good:?}");
        // The log has moved on (the sample is stale), and the disk fails every read.
        let reads: &'static [FsOp] = &[FsOp::ReadAt, FsOp::OpenRead];
        fault.fail_at(1, FaultKind::Io, FaultOps::Only(reads), true);
        let sampled = sample_stale(inner, &choice, active + 1);
        fault.clear();
        assert!(sampled.is_ok(), "{sampled:?}");
        let after = inner.gc_samples.lock()[&1];
        assert_eq!(after.dead_bytes, good.dead_bytes, "the good estimate is kept");
        assert_eq!(after.active_then, active + 1, "and not retried before the log moves");
    }

    /// A database on `fault` whose first value-log segment is all dead (every key written
    /// again and flushed).
    fn with_a_dead_segment(fault: &FaultFs) -> Db {
        let db = open_with_background_gc_off(Arc::new(fault.clone()));
        for round in 0..2u8 {
            for i in 0..80u32 {
                db.put(format!("key{i:04}"), [round; 1000]).expect("put");
            }
            db.flush().expect("flush");
        }
        db
    }

    /// A database of `small_for_tests` on `fs` whose background GC never runs: the tests
    /// run GC themselves (a background round would collect, or set the pacer, under them).
    fn open_with_background_gc_off(fs: Arc<dyn crate::fs::FileSystem>) -> Db {
        let options = Options {
            gc_space_amp_target: f64::INFINITY,
            ..Options::small_for_tests(fs)
        };
        Db::open("/db", options).expect("open")
    }

    const COLLECT_ALL: VictimPolicy = VictimPolicy {
        space_amp_target: 1.0,
        min_dead_fraction: 0.0,
        order: crate::gc::VictimOrder::CostBenefit,
    };

    /// Defect (review): a collection whose victim had left the log failed when the sweep
    /// after it could not delete files; background GC latched that error and every write
    /// was refused until a reopen.
    #[test]
    fn a_failed_file_deletion_after_a_collection_stops_nothing() {
        let fault = FaultFs::new(Arc::new(MemFs::new()));
        let db = with_a_dead_segment(&fault);
        fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Remove]), true);
        let outcome = run(&db.inner, COLLECT_ALL, true);
        fault.clear();
        let outcome = outcome.expect("the collection stands");
        assert!(outcome.segments_collected > 0, "{outcome:?}");
        assert!(db.inner.state.lock().bg_error.is_none());
        assert!(
            db.inner.fs.exists(std::path::Path::new("/db/000001.vlog")).expect("exists"),
            "the file waits for a later sweep"
        );
        crate::db::background::delete_obsolete_files(&db.inner).expect("sweep");
        assert!(!db.inner.fs.exists(std::path::Path::new("/db/000001.vlog")).expect("exists"));
        db.put("after", "v").expect("writes go on");
        assert_eq!(db.get("key0001").expect("get").as_deref(), Some(&[1u8; 1000][..]));
    }

    /// Defect (review): background GC latched a failure to make the next segment while
    /// sealing the active one (not a full disk, writer intact), which the write path itself
    /// treats as a failure of one write.
    #[test]
    fn a_failed_seal_ends_a_background_round_without_stopping_writes() {
        let fault = FaultFs::new(Arc::new(MemFs::new()));
        let options = Options {
            gc_space_amp_target: f64::INFINITY,
            vlog_segment_size: 1 << 20,
            ..Options::small_for_tests(Arc::new(fault.clone()))
        };
        let db = Db::open("/db", options).expect("open");
        // All garbage in the active segment: GC must seal it first.
        for round in 0..3u8 {
            for i in 0..100u32 {
                db.put(format!("key{i:04}"), [round; 1000]).expect("put");
            }
        }
        db.flush().expect("flush");
        fault.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::Create]), true);
        let outcome = run(&db.inner, COLLECT_ALL, true);
        fault.clear();
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(db.inner.state.lock().bg_error.is_none());
        db.put("after", "v").expect("writes go on");
        let outcome = run(&db.inner, COLLECT_ALL, true).expect("the next round");
        assert!(outcome.segments_collected > 0, "{outcome:?}");
        assert_eq!(db.get("key0001").expect("get").as_deref(), Some(&[2u8; 1000][..]));
    }

    /// Defect (review): a background round under sustained overwrites kept `gc_lock` for as
    /// long as it found victims, so a checkpoint or check waiting for it could wait for
    /// minutes. A round now ends while one waits; `Db::gc` (asked for) goes on.
    #[test]
    fn a_background_round_ends_while_a_checkpoint_waits() {
        let fault = FaultFs::new(Arc::new(MemFs::new()));
        let db = with_a_dead_segment(&fault);
        let wanted = &db.inner.gc_lock_wanted;
        wanted.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let background = run(&db.inner, COLLECT_ALL, true).expect("background round");
        let asked = run(&db.inner, COLLECT_ALL, false).expect("Db::gc");
        wanted.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        assert_eq!(background.segments_collected, 0, "{background:?}");
        assert!(asked.segments_collected > 0, "{asked:?}");
    }

    /// The other half of the defect above: `Db::checkpoint` and `Db::check` say they wait
    /// for `gc_lock` (`DbInner::lock_out_gc`), so a round in progress knows to end.
    #[test]
    fn checkpoint_and_check_tell_gc_they_wait() {
        let fault = FaultFs::new(Arc::new(MemFs::new()));
        let db = with_a_dead_segment(&fault);
        let waits_told = |what: &str, call: &(dyn Fn() -> Result<()> + Sync)| {
            let round = db.inner.gc_lock.lock();
            std::thread::scope(|s| {
                let waiter = s.spawn(call);
                let deadline = Instant::now() + Duration::from_secs(20);
                while db.inner.gc_lock_wanted.load(Ordering::Acquire) == 0 {
                    assert!(
                        Instant::now() < deadline && !waiter.is_finished(),
                        "{what} waits for GC without saying so"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                drop(round);
                waiter.join().expect("no panic").expect(what);
            });
        };
        waits_told("checkpoint", &|| db.checkpoint("/copy").map(|_| ()));
        waits_told("check", &|| db.check().map(|_| ()));
    }
}
