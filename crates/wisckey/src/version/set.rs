//! [`VersionSet`]: the current [`Version`], the engine's persistent counters (file numbers,
//! last sequence, value-log head/tail/next segment, compact pointers, extra metadata), and
//! the manifest that makes them durable.
//!
//! Invariants:
//! - the in-memory state only changes after the manifest record describing the change is
//!   durable (`sync_data` returned Ok); on any error the state is unchanged, except that
//!   file numbers handed out (a roll-over's manifest and temp numbers) stay consumed;
//! - `CURRENT` always names a complete, synced manifest: a new manifest is fully written
//!   and synced before CURRENT is switched (temp file + sync + rename + dir sync);
//! - after a failed append the manifest may end in garbage, so the next `log_and_apply`
//!   starts a fresh manifest instead of appending after it;
//! - `next_file_number` is greater than every file number in use (tables, manifests) and
//!   every numbered file found in the directory at open, so no number is ever reused;
//! - opening reads first ([`VersionSet::load`]) and writes only once the caller has checked
//!   everything ([`VersionSet::install`]): a failed open changes nothing;
//! - from manifest format 2 on, the set of value-log segments is manifest state: a segment
//!   is added by the edit whose replay head first passes into it, and `next_vlog_segment`
//!   is above every segment ever listed, so a segment number is never reused.
//!
//! Thread-safety: NOT internally synchronized; the database holds a mutex around it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::filename::{manifest_file_name, CURRENT};
use crate::fs::FileSystem;
use crate::position::LogPosition;

use super::edit::{VersionEdit, EXTRA_TAGS};
use super::levels::{SegmentMeta, Version, VersionBuilder};
use super::manifest::{
    read_current, read_manifest, write_current, ManifestWriter, SEGMENT_ACCOUNTING_FORMAT_VERSION,
    SEGMENT_SET_FORMAT_VERSION,
};
use super::NUM_LEVELS;

/// A manifest is rolled over to a fresh snapshot once it grows past this many bytes.
pub const DEFAULT_MANIFEST_SIZE_LIMIT: u64 = 4 << 20;

/// Persistent state other than the file tree; a snapshot edit is built from it.
#[derive(Debug, Clone)]
struct Counters {
    next_file_number: u64,
    last_sequence: u64,
    vlog_head: Option<LogPosition>,
    vlog_tail: Option<LogPosition>,
    next_vlog_segment: u64,
    compact_pointers: Vec<Option<Vec<u8>>>,
    extra: BTreeMap<u32, Vec<u8>>,
}

impl Counters {
    fn new() -> Counters {
        Counters {
            next_file_number: 1,
            last_sequence: 0,
            vlog_head: None,
            vlog_tail: None,
            next_vlog_segment: 1,
            compact_pointers: vec![None; NUM_LEVELS],
            extra: BTreeMap::new(),
        }
    }

    /// Counters only move forward; positions and pointers take the edit's value.
    fn apply(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        if let Some(s) = edit.next_vlog_segment {
            self.next_vlog_segment = self.next_vlog_segment.max(s);
        }
        for &segment in &edit.vlog_segments_added {
            self.next_vlog_segment = self.next_vlog_segment.max(segment.saturating_add(1));
        }
        self.vlog_head = edit.vlog_head.or(self.vlog_head);
        self.vlog_tail = edit.vlog_tail.or(self.vlog_tail);
        for (level, ikey) in &edit.compact_pointers {
            if let Some(slot) = self.compact_pointers.get_mut(*level) {
                *slot = Some(ikey.clone());
            }
        }
        for (tag, bytes) in &edit.extra {
            self.extra.insert(*tag, bytes.clone());
        }
    }

    fn mark_used(&mut self, number: u64) {
        self.next_file_number = self.next_file_number.max(number.saturating_add(1));
    }
}

/// The persistent counters repair rebuilds a manifest with ([`VersionSet::write_rebuilt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RebuiltCounters {
    /// Above every numbered file in the directory; the new manifest takes this number.
    pub next_file_number: u64,
    /// The largest sequence number in any table entry or log record.
    pub last_sequence: u64,
    /// Replay starts here: the first record of the fresh segment new writes go to.
    pub vlog_head: LogPosition,
}

/// An edit being made durable: built by [`VersionSet::prepare_apply`] under the set's lock,
/// written by [`ManifestWrite::write`] without it.
#[derive(Debug)]
pub struct ManifestWrite {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    version: Version,
    counters: Counters,
    kind: WriteKind,
    /// A successful roll-over's new writer and snapshot length.
    rolled: Option<(ManifestWriter, u64)>,
}

#[derive(Debug)]
enum WriteKind {
    /// Append one record to the current manifest.
    Append {
        record: Vec<u8>,
        writer: Arc<Mutex<ManifestWriter>>,
    },
    /// Start manifest `number` (temp file `number + 1`) with a snapshot, switch CURRENT.
    Roll {
        number: u64,
        snapshot: Box<VersionEdit>,
        old: u64,
    },
}

impl ManifestWrite {
    /// The I/O: appends and syncs the record, or writes the new manifest and switches
    /// CURRENT. Runs without the set's lock.
    pub fn write(&mut self) -> Result<()> {
        match &self.kind {
            WriteKind::Append { record, writer } => writer.lock().add_record(record),
            WriteKind::Roll {
                number, snapshot, ..
            } => {
                let rolled = VersionSet::write_snapshot_manifest(
                    self.fs.as_ref(),
                    &self.dir,
                    *number,
                    snapshot,
                )?;
                self.rolled = Some(rolled);
                Ok(())
            }
        }
    }
}

/// A manifest's state as read by [`VersionSet::load`], before anything is written.
#[derive(Debug, Clone)]
pub struct LoadedState {
    version: Version,
    counters: Counters,
    manifest_number: u64,
    /// The next file number as the manifest's edits record it, before the files found in
    /// the directory raise it: a table numbered at or above it was written after the
    /// manifest's last edit.
    recorded_next_file_number: u64,
    /// The manifest was written in format 1, which did not record value-log segments.
    segments_untracked: bool,
    /// The manifest was written before format 3: segments have no sealed sizes and dead
    /// bytes were not counted (they start at 0).
    segments_unaccounted: bool,
}

impl LoadedState {
    /// Marks the manifest and temp-file numbers a failed [`VersionSet::install`] of this
    /// state took as used, so a retry writes its manifest under new ones: the failure may
    /// have come after CURRENT was renamed to name that manifest, which a retry under the
    /// same number would truncate and rewrite.
    pub fn skip_numbers_of_failed_install(&mut self) {
        self.counters.next_file_number = self.counters.next_file_number.saturating_add(2);
    }

    pub fn vlog_head(&self) -> Option<LogPosition> {
        self.counters.vlog_head
    }

    pub fn last_sequence(&self) -> u64 {
        self.counters.last_sequence
    }

    pub fn next_vlog_segment(&self) -> u64 {
        self.counters.next_vlog_segment
    }

    /// The value-log segments the manifest lists, or `None` for a format-1 manifest (which
    /// did not record them).
    pub fn vlog_segments(&self) -> Option<BTreeSet<u64>> {
        (!self.segments_untracked).then(|| self.version.vlog_segments().keys().copied().collect())
    }

    /// The listed segments with their accounting (empty for a format-1 manifest).
    pub fn vlog_segment_metas(&self) -> &BTreeMap<u64, SegmentMeta> {
        self.version.vlog_segments()
    }

    /// Whether the manifest predates dead-byte accounting (format 3).
    pub fn segments_unaccounted(&self) -> bool {
        self.segments_unaccounted
    }

    /// The next file number the manifest would hand out (above every numbered file found).
    pub fn next_file_number(&self) -> u64 {
        self.counters.next_file_number
    }

    /// The next file number the manifest's edits record (see the field).
    pub fn recorded_next_file_number(&self) -> u64 {
        self.recorded_next_file_number
    }

    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Number of table files in the version.
    pub fn num_tables(&self) -> usize {
        self.version.all_files().count()
    }

    /// Numbers of the table files the manifest lists.
    pub fn table_numbers(&self) -> Vec<u64> {
        self.version.all_files().map(|(_, f)| f.number).collect()
    }

    /// The table files the manifest lists, by number.
    pub fn tables(&self) -> BTreeMap<u64, Arc<super::FileMeta>> {
        (self.version.all_files())
            .map(|(_, f)| (f.number, Arc::clone(f)))
            .collect()
    }

    /// Makes `segments` the log's segment set and `next` (at least) the next segment number;
    /// becomes durable with [`VersionSet::install`].
    pub fn set_vlog_segments(&mut self, segments: BTreeMap<u64, SegmentMeta>, next: u64) {
        let above = segments.last_key_value().map_or(0, |(s, _)| s + 1);
        self.counters.next_vlog_segment = self.counters.next_vlog_segment.max(next).max(above);
        self.version = self.version.with_vlog_segments(segments);
        self.segments_untracked = false;
        self.segments_unaccounted = false;
    }

    /// Moves the replay head (salvage of a log whose head lies past its end).
    pub fn set_vlog_head(&mut self, head: LogPosition) {
        self.counters.vlog_head = Some(head);
    }

    /// Ensures `number` is never handed out again (a numbered file found in the directory).
    pub fn mark_file_number_used(&mut self, number: u64) {
        self.counters.mark_used(number);
    }

    pub fn set_last_sequence(&mut self, seq: u64) {
        self.counters.last_sequence = self.counters.last_sequence.max(seq);
    }
}

/// Current version + counters + manifest writer.
#[derive(Debug)]
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    current: Arc<Version>,
    /// Versions that were current once; those still alive pin their files.
    older: Vec<Weak<Version>>,
    counters: Counters,
    /// Shared with an in-flight [`ManifestWrite`], which appends without the set's lock.
    manifest: Arc<Mutex<ManifestWriter>>,
    /// `manifest`'s file number, readable without waiting for an append's write and sync
    /// (the obsolete-file sweep asks for it under the database's state lock).
    manifest_number: u64,
    /// Set between `prepare_apply` and `finish_apply`: the numbers a roll-over is writing
    /// (zeros for an append).
    in_flight: Option<[u64; 2]>,
    /// Set after a failed manifest write: the file may end in garbage, so roll first.
    manifest_broken: bool,
    manifest_size_limit: u64,
    /// Size of the snapshot that started the current manifest (rolling below a few times
    /// that would just rewrite the same snapshot over and over).
    snapshot_len: u64,
}

impl VersionSet {
    /// Initializes a new database in `dir`: MANIFEST-000001 with an empty snapshot, then
    /// CURRENT. `first_segment`, if given, is the value-log segment the caller already
    /// created (and synced): it is listed, and the replay head starts at its first record.
    /// Fails with `InvalidArgument` if `dir` already has a CURRENT file.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        first_segment: Option<LogPosition>,
    ) -> Result<VersionSet> {
        fs.create_dir_all(dir)?;
        if fs.exists(&dir.join(CURRENT))? {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a database",
                dir.display()
            )));
        }
        let mut counters = Counters::new();
        let mut segments = BTreeMap::new();
        if let Some(head) = first_segment {
            segments.insert(head.segment, SegmentMeta::default());
            counters.next_vlog_segment = head.segment + 1;
            counters.vlog_head = Some(head);
        }
        let version = Version::empty().with_vlog_segments(segments);
        Self::install_new_manifest(fs, dir, version, counters, None)
    }

    /// Opens the database in `dir`: [`VersionSet::load`], then [`VersionSet::install`].
    pub fn recover(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<VersionSet> {
        let loaded = Self::load(fs.as_ref(), dir)?;
        Self::install(fs, dir, loaded)
    }

    /// Reads the manifest CURRENT names and rebuilds its state. Writes nothing. Every numbered
    /// file in `dir` is marked used, so no number found on disk is handed out again.
    pub fn load(fs: &dyn FileSystem, dir: &Path) -> Result<LoadedState> {
        Self::load_manifest(fs, dir, read_current(fs, dir)?)
    }

    /// [`VersionSet::load`] of manifest `old_number`, whatever CURRENT says (repair's read
    /// of a database whose CURRENT is lost).
    pub fn load_manifest(fs: &dyn FileSystem, dir: &Path, old_number: u64) -> Result<LoadedState> {
        let name = format!("MANIFEST-{old_number:06}");
        if !fs.exists(&manifest_file_name(dir, old_number))? {
            return Err(Error::corruption(
                CURRENT,
                0,
                format!("names missing {name}"),
            ));
        }
        let contents = read_manifest(fs, dir, old_number)?;
        let edits = contents.edits;
        let mut builder = VersionBuilder::new(&Version::empty());
        let mut counters = Counters::new();
        let mut saw_next_file = false;
        let mut end = 0;
        for (offset, edit) in &edits {
            builder
                .apply(edit)
                .map_err(|why| Error::corruption(&name, *offset, why))?;
            counters.apply(edit);
            saw_next_file |= edit.next_file_number.is_some();
            end = *offset;
        }
        if !saw_next_file {
            return Err(Error::corruption(
                &name,
                end,
                "manifest never records next_file_number",
            ));
        }
        let version = builder
            .build()
            .map_err(|why| Error::corruption(&name, end, why))?;
        let recorded_next_file_number = counters.next_file_number;
        counters.mark_used(old_number);
        for (_, file) in version.all_files() {
            counters.mark_used(file.number);
        }
        for name in fs.list(dir)? {
            use crate::filename::{parse_file_name, FileKind};
            if let Some(FileKind::Table(n) | FileKind::Manifest(n) | FileKind::Temp(n)) =
                parse_file_name(&name)
            {
                counters.mark_used(n);
            }
        }
        Ok(LoadedState {
            version,
            counters,
            manifest_number: old_number,
            recorded_next_file_number,
            segments_untracked: contents.format_version < SEGMENT_SET_FORMAT_VERSION,
            segments_unaccounted: contents.format_version < SEGMENT_ACCOUNTING_FORMAT_VERSION,
        })
    }

    /// A checkpoint's last step: [`VersionSet::write_rebuilt_manifest`], then CURRENT names
    /// it ([`VersionSet::point_current_at`]). Removes nothing. Returns the manifest's number.
    pub(crate) fn write_rebuilt(
        fs: &dyn FileSystem,
        dir: &Path,
        tables: Vec<(usize, super::FileMeta)>,
        segments: BTreeMap<u64, SegmentMeta>,
        counters: RebuiltCounters,
    ) -> Result<u64> {
        let number = Self::write_rebuilt_manifest(fs, dir, tables, segments, counters)?;
        Self::point_current_at(fs, dir, number)?;
        Ok(number)
    }

    /// Points CURRENT at manifest `number` (written by
    /// [`VersionSet::write_rebuilt_manifest`], which reserved `number + 1` for the temp
    /// file), durably.
    pub(crate) fn point_current_at(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
        write_current(fs, dir, number, number + 1)
    }

    /// Writes a manifest holding exactly `tables`, `segments` and `counters`, synced with its
    /// directory entry, and leaves CURRENT as it is (repair writes it before it moves the
    /// files it replaces, and points CURRENT at it last). Returns its number.
    /// `counters.next_file_number` must be above every numbered file in `dir`; the manifest
    /// takes that number, and the next is reserved for CURRENT's temp file.
    pub(crate) fn write_rebuilt_manifest(
        fs: &dyn FileSystem,
        dir: &Path,
        tables: Vec<(usize, super::FileMeta)>,
        segments: BTreeMap<u64, SegmentMeta>,
        counters: RebuiltCounters,
    ) -> Result<u64> {
        let mut edit = VersionEdit::new();
        for (level, file) in tables {
            edit.add_file(level, file);
        }
        let version = Version::empty().apply(&edit)?.with_vlog_segments(segments);
        let number = counters.next_file_number;
        let state = Counters {
            next_file_number: number + 2,
            last_sequence: counters.last_sequence,
            vlog_head: Some(counters.vlog_head),
            vlog_tail: None,
            next_vlog_segment: counters.vlog_head.segment + 1,
            ..Counters::new()
        };
        let snapshot = snapshot_edit(&version, &state);
        ManifestWriter::create(fs, dir, number, &snapshot)?;
        Ok(number)
    }

    /// Writes `loaded` into a fresh manifest, switches CURRENT to it and removes the old one.
    pub fn install(fs: Arc<dyn FileSystem>, dir: &Path, loaded: LoadedState) -> Result<VersionSet> {
        let old = loaded.manifest_number;
        Self::install_new_manifest(fs, dir, loaded.version, loaded.counters, Some(old))
    }

    /// The state `loaded` describes, kept in memory only: no manifest is written and CURRENT
    /// is not touched (a read-only open). The manifest writer is the loaded manifest opened
    /// for appending through `fs`; a read-only database's `fs` refuses every append.
    pub fn open_read_only(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        loaded: LoadedState,
    ) -> Result<VersionSet> {
        let manifest = ManifestWriter::open_existing(fs.as_ref(), dir, loaded.manifest_number)?;
        let snapshot_len = manifest.len();
        Ok(VersionSet {
            fs,
            dir: dir.to_path_buf(),
            current: Arc::new(loaded.version),
            older: Vec::new(),
            counters: loaded.counters,
            manifest_number: manifest.number(),
            manifest: Arc::new(Mutex::new(manifest)),
            in_flight: None,
            manifest_broken: false,
            manifest_size_limit: DEFAULT_MANIFEST_SIZE_LIMIT,
            snapshot_len,
        })
    }

    /// Writes a manifest holding a snapshot of `version` + `counters`, points CURRENT at it
    /// and removes manifest `old` (best effort).
    fn install_new_manifest(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        version: Version,
        mut counters: Counters,
        old: Option<u64>,
    ) -> Result<VersionSet> {
        let number = counters.next_file_number;
        counters.next_file_number = number + 2;
        let snapshot = snapshot_edit(&version, &counters);
        let (manifest, snapshot_len) =
            Self::write_snapshot_manifest(fs.as_ref(), dir, number, &snapshot)?;
        if let Some(old) = old {
            // Best effort: CURRENT no longer names it; the obsolete-file sweep retries.
            let _ = fs.remove(&manifest_file_name(dir, old));
        }
        Ok(VersionSet {
            fs,
            dir: dir.to_path_buf(),
            current: Arc::new(version),
            older: Vec::new(),
            counters,
            manifest_number: manifest.number(),
            manifest: Arc::new(Mutex::new(manifest)),
            in_flight: None,
            manifest_broken: false,
            manifest_size_limit: DEFAULT_MANIFEST_SIZE_LIMIT,
            snapshot_len,
        })
    }

    /// New manifest `number` (synced) holding `snapshot`, then the CURRENT switch through
    /// temp file `number + 1`. The caller reserved both numbers before building the snapshot,
    /// so the snapshot's next_file_number covers them.
    fn write_snapshot_manifest(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        snapshot: &VersionEdit,
    ) -> Result<(ManifestWriter, u64)> {
        let temp_number = number + 1;
        let created = ManifestWriter::create(fs, dir, number, snapshot);
        let result = created.and_then(|writer| {
            write_current(fs, dir, number, temp_number)?;
            let len = writer.len();
            Ok((writer, len))
        });
        if result.is_err() {
            // Best effort, and only where CURRENT is read back naming another manifest: if it
            // cannot be read, the rename may have happened, and removing this one would leave
            // CURRENT naming a missing manifest. A manifest kept for nothing is swept later.
            let names_another = matches!(read_current(fs, dir), Ok(current) if current != number);
            if names_another {
                let _ = fs.remove(&manifest_file_name(dir, number));
            }
        }
        result
    }

    /// Applies `edit`, makes it durable in the manifest, then installs and returns the new
    /// version: [`VersionSet::prepare_apply`], [`ManifestWrite::write`] and
    /// [`VersionSet::finish_apply`] in one go. On error nothing in memory changes (file numbers
    /// handed out stay used); the edit may or may not have reached the disk, so the caller
    /// must latch the error and must not delete files the edit added.
    pub fn log_and_apply(&mut self, edit: VersionEdit) -> Result<Arc<Version>> {
        let mut write = self.prepare_apply(edit)?;
        let result = write.write();
        self.finish_apply(write, result)
    }

    /// First step of applying `edit`: builds the new version and the bytes that make it
    /// durable, in memory only. The caller then runs [`ManifestWrite::write`] *without* the
    /// lock that guards this set (readers and writers go on meanwhile) and hands the result to
    /// [`VersionSet::finish_apply`]. At most one write may be in flight: the caller serializes
    /// prepare → write → finish (the database's `manifest_lock`). Until finish, `current()`
    /// stays the old version; numbers a roll-over will use are reserved here and reported by
    /// [`VersionSet::files_being_written`] so no sweep removes them.
    pub fn prepare_apply(&mut self, mut edit: VersionEdit) -> Result<ManifestWrite> {
        if self.in_flight.is_some() {
            return Err(Error::Internal(
                "a manifest write is already in flight".into(),
            ));
        }
        if let Some((tag, _)) = edit.extra.iter().find(|(t, _)| !EXTRA_TAGS.contains(t)) {
            return Err(Error::InvalidArgument(format!(
                "extra tag {tag} outside the reserved range"
            )));
        }
        let version = self.current.apply(&edit)?;
        let mut counters = self.counters.clone();
        for (_, file) in &edit.new_files {
            counters.mark_used(file.number);
        }
        counters.apply(&edit);

        let roll_at = self
            .manifest_size_limit
            .max(self.snapshot_len.saturating_mul(4));
        let kind = if self.manifest_broken || self.manifest.lock().len() >= roll_at {
            // The two numbers are used on disk even if the roll fails.
            let number = counters
                .next_file_number
                .max(self.counters.next_file_number);
            counters.next_file_number = number + 2;
            self.counters.next_file_number = number + 2;
            self.in_flight = Some([number, number + 1]);
            let snapshot = Box::new(snapshot_edit(&version, &counters));
            WriteKind::Roll {
                number,
                snapshot,
                old: self.manifest_number,
            }
        } else {
            edit.next_file_number = Some(counters.next_file_number);
            edit.last_sequence = Some(counters.last_sequence);
            self.in_flight = Some([0, 0]);
            WriteKind::Append {
                record: edit.encode(),
                writer: Arc::clone(&self.manifest),
            }
        };
        Ok(ManifestWrite {
            fs: Arc::clone(&self.fs),
            dir: self.dir.clone(),
            version,
            counters,
            kind,
            rolled: None,
        })
    }

    /// Last step of applying an edit: on success installs the new version and returns it; on
    /// failure changes nothing but marks the manifest for a roll-over (it may end in garbage).
    pub fn finish_apply(
        &mut self,
        write: ManifestWrite,
        result: Result<()>,
    ) -> Result<Arc<Version>> {
        self.in_flight = None;
        if let Err(e) = result {
            self.manifest_broken = true;
            return Err(e);
        }
        let ManifestWrite {
            version,
            mut counters,
            kind,
            rolled,
            ..
        } = write;
        if let (WriteKind::Roll { old, .. }, Some((writer, snapshot_len))) = (kind, rolled) {
            self.manifest_number = writer.number();
            self.manifest = Arc::new(Mutex::new(writer));
            self.snapshot_len = snapshot_len;
            let _ = self.fs.remove(&manifest_file_name(&self.dir, old));
        }
        self.manifest_broken = false;
        // Numbers handed out and sequences recorded while the write was in flight stay.
        counters.next_file_number = counters
            .next_file_number
            .max(self.counters.next_file_number);
        counters.last_sequence = counters.last_sequence.max(self.counters.last_sequence);
        let version = Arc::new(version);
        let previous = std::mem::replace(&mut self.current, Arc::clone(&version));
        self.older.retain(|w| w.strong_count() > 0);
        self.older.push(Arc::downgrade(&previous));
        self.counters = counters;
        Ok(version)
    }

    /// File numbers (a new manifest and its CURRENT temp file) that an in-flight roll-over
    /// is writing: the obsolete-file sweep must leave them alone.
    pub fn files_being_written(&self) -> Vec<u64> {
        self.in_flight
            .map(|numbers| numbers.into_iter().filter(|&n| n != 0).collect())
            .unwrap_or_default()
    }

    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Hands out a fresh number for a table, manifest or temp file.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.counters.next_file_number;
        self.counters.next_file_number += 1;
        n
    }

    /// Ensures `number` is never handed out again.
    pub fn mark_file_number_used(&mut self, number: u64) {
        self.counters.mark_used(number);
    }

    pub fn last_sequence(&self) -> u64 {
        self.counters.last_sequence
    }

    /// Sets the last sequence in memory; it becomes durable with the next `log_and_apply`.
    pub fn set_last_sequence(&mut self, seq: u64) {
        debug_assert!(
            seq >= self.counters.last_sequence,
            "sequence went backwards"
        );
        self.counters.last_sequence = seq;
    }

    pub fn vlog_head(&self) -> Option<LogPosition> {
        self.counters.vlog_head
    }

    pub fn vlog_tail(&self) -> Option<LogPosition> {
        self.counters.vlog_tail
    }

    /// The number the next value-log segment will get (1 in a new database).
    pub fn next_vlog_segment(&self) -> u64 {
        self.counters.next_vlog_segment
    }

    /// The value-log segments the current version lists, with their accounting.
    pub fn vlog_segments(&self) -> &BTreeMap<u64, SegmentMeta> {
        self.current.vlog_segments()
    }

    /// Whether a reader of the current version or of an older version still referenced may
    /// follow a pointer into value-log segment `n`: the version lists it, or `n` is newer
    /// than every segment it lists (its reader's memtables may point there).
    pub fn vlog_segment_in_use(&self, n: u64) -> bool {
        self.current.vlog_segment_readable(n)
            || (self.older.iter().filter_map(Weak::upgrade)).any(|v| v.vlog_segment_readable(n))
    }

    pub fn compact_pointer(&self, level: usize) -> Option<&[u8]> {
        self.counters.compact_pointers.get(level)?.as_deref()
    }

    /// All compact pointers, indexed by level (the picker's input).
    pub fn compact_pointers(&self) -> &[Option<Vec<u8>>] {
        &self.counters.compact_pointers
    }

    /// Latest bytes recorded for an extra tag.
    pub fn extra(&self, tag: u32) -> Option<&[u8]> {
        self.counters.extra.get(&tag).map(Vec::as_slice)
    }

    /// Table files of the current version and of every older version still referenced.
    /// Every version older than the current one that a reader still holds.
    pub fn older_versions(&self) -> Vec<Weak<Version>> {
        (self.older.iter())
            .filter(|v| v.strong_count() > 0)
            .cloned()
            .collect()
    }

    pub fn live_table_files(&self) -> HashSet<u64> {
        let mut live: HashSet<u64> = self.current.all_files().map(|(_, f)| f.number).collect();
        for version in self.older.iter().filter_map(Weak::upgrade) {
            live.extend(version.all_files().map(|(_, f)| f.number));
        }
        live
    }

    pub fn manifest_file_number(&self) -> u64 {
        self.manifest_number
    }

    /// Overrides the size at which the manifest rolls over (tests use a tiny limit).
    pub fn set_manifest_size_limit(&mut self, bytes: u64) {
        self.manifest_size_limit = bytes;
    }
}

/// An edit that recreates `version` and `counters` from nothing.
fn snapshot_edit(version: &Version, counters: &Counters) -> VersionEdit {
    VersionEdit {
        next_file_number: Some(counters.next_file_number),
        last_sequence: Some(counters.last_sequence),
        compact_pointers: (counters.compact_pointers.iter().enumerate())
            .filter_map(|(level, p)| Some((level, p.clone()?)))
            .collect(),
        deleted_files: Vec::new(),
        new_files: version
            .all_files()
            .map(|(level, f)| (level, f.as_ref().clone()))
            .collect(),
        vlog_head: counters.vlog_head,
        vlog_tail: counters.vlog_tail,
        next_vlog_segment: Some(counters.next_vlog_segment),
        vlog_segments_added: version.vlog_segments().keys().copied().collect(),
        vlog_segments_removed: Vec::new(),
        vlog_segments_sealed: (version.vlog_segments().iter())
            .filter_map(|(&s, m)| Some((s, m.sealed_size?)))
            .collect(),
        vlog_dead_bytes: (version.vlog_segments().iter())
            .filter(|(_, m)| m.dead_bytes > 0)
            .map(|(&s, m)| (s, m.dead_bytes))
            .collect(),
        vlog_punched: (version.vlog_segments().iter())
            .flat_map(|(&s, m)| {
                m.punched
                    .iter()
                    .map(move |(&start, &end)| (s, start, end - start))
            })
            .collect(),
        extra: counters
            .extra
            .iter()
            .map(|(t, b)| (*t, b.clone()))
            .collect(),
    }
}

#[cfg(test)]
#[path = "set_tests.rs"]
mod tests;
