//! The manifest file (header + checksummed records, each one encoded [`VersionEdit`]) and the
//! `CURRENT` file that names the live manifest. Byte layout: `docs/FORMAT.md`.
//!
//! ```text
//! header: magic(8) = "WKMANFST" | format_version u32 LE
//! record: masked crc32c(payload) u32 LE | payload length u32 LE | payload
//! ```
//!
//! Reading rules: every edit is synced before the next is appended, so only the last record
//! can be torn. A record that is cut short or fails its checksum is a torn append (never
//! acknowledged, ignored) only if no valid record starts anywhere after it; otherwise it is
//! `Corruption` — a flipped bit in a length field must never make the rest of the manifest
//! look like a torn tail. Record lengths are checked against the bytes remaining before
//! anything is sliced.
//!
//! Thread-safety: `ManifestWriter` has a single owner (the `VersionSet`).

use std::path::Path;

use crate::checksum::{crc32c, mask, unmask};
use crate::coding::{decode_fixed32, put_fixed32};
use crate::error::{Error, Result};
use crate::filename::{manifest_file_name, parse_file_name, temp_file_name, FileKind, CURRENT};
use crate::fs::{FileSystem, WritableFile};

use super::edit::VersionEdit;

/// First 8 bytes of every manifest.
pub const MANIFEST_MAGIC: [u8; 8] = *b"WKMANFST";
/// Newest manifest format this build reads and the one it writes. Version 2 added the
/// value-log segment set (edit tags 9 and 10), version 3 the segments' sealed sizes and dead
/// bytes (tags 11 and 12, written for GC), version 4 the record ranges GC punched out of
/// segments (tag 13); versions 1 to 3 are still read (and rewritten as 4 on open).
pub const MANIFEST_FORMAT_VERSION: u32 = 4;
/// The first format that records segments' sealed sizes and dead bytes.
pub const SEGMENT_ACCOUNTING_FORMAT_VERSION: u32 = 3;
/// The first format that records the value-log segment set.
pub const SEGMENT_SET_FORMAT_VERSION: u32 = 2;

const HEADER_LEN: usize = 12;
const RECORD_HEADER_LEN: usize = 8;
/// CURRENT holds one short line; anything longer is not ours and is not read into memory.
const MAX_CURRENT_LEN: u64 = 256;

/// Appends records to one manifest file.
#[derive(Debug)]
pub(crate) struct ManifestWriter {
    file: Box<dyn WritableFile>,
    number: u64,
}

impl ManifestWriter {
    /// Creates `MANIFEST-<number>` holding the header and `snapshot`, synced, with its
    /// directory entry.
    pub(crate) fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        snapshot: &VersionEdit,
    ) -> Result<ManifestWriter> {
        let mut file = fs.create(&manifest_file_name(dir, number))?;
        let mut bytes = Vec::with_capacity(HEADER_LEN);
        bytes.extend_from_slice(&MANIFEST_MAGIC);
        put_fixed32(&mut bytes, MANIFEST_FORMAT_VERSION);
        frame_record(&mut bytes, &snapshot.encode())?;
        file.append(&bytes)?;
        file.sync_data()?;
        // CURRENT will name this file: its directory entry must be durable first (a file
        // system may persist the rename of CURRENT and lose this creation).
        fs.sync_dir(dir)?;
        Ok(ManifestWriter { file, number })
    }

    /// Opens the existing `MANIFEST-<number>` for appending, writing nothing (a read-only
    /// database opens it through a file system that refuses the appends).
    pub(crate) fn open_existing(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
    ) -> Result<ManifestWriter> {
        let file = fs.open_append(&manifest_file_name(dir, number))?;
        Ok(ManifestWriter { file, number })
    }

    /// Appends one record and makes it durable.
    pub(crate) fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        let mut bytes = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
        frame_record(&mut bytes, payload)?;
        self.file.append(&bytes)?;
        self.file.sync_data()
    }

    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    pub(crate) fn len(&self) -> u64 {
        self.file.len()
    }
}

fn frame_record(dst: &mut Vec<u8>, payload: &[u8]) -> Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        Error::InvalidArgument(format!(
            "manifest record of {} bytes is too large",
            payload.len()
        ))
    })?;
    put_fixed32(dst, mask(crc32c(payload)));
    put_fixed32(dst, len);
    dst.extend_from_slice(payload);
    Ok(())
}

/// What a manifest holds.
#[derive(Debug)]
pub(crate) struct ManifestContents {
    pub format_version: u32,
    /// Every intact edit, with the file offset of its payload.
    pub edits: Vec<(u64, VersionEdit)>,
}

/// Reads every intact edit of manifest `number`, with the file offset of each payload.
pub(crate) fn read_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
) -> Result<ManifestContents> {
    let path = manifest_file_name(dir, number);
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let file = fs.open_read(&path)?;
    let size = usize::try_from(file.len()?)
        .map_err(|_| Error::corruption(&name, 0, "manifest larger than memory"))?;
    let mut data = vec![0u8; size];
    file.read_exact_at(0, &mut data, &name)?;

    if data.len() < MANIFEST_MAGIC.len() || data[..MANIFEST_MAGIC.len()] != MANIFEST_MAGIC {
        return Err(Error::NotADatabase(format!("{name} has no manifest magic")));
    }
    let version = decode_fixed32(&data[MANIFEST_MAGIC.len()..])
        .ok_or_else(|| Error::corruption(&name, 8, "manifest header cut short"))?;
    if version > MANIFEST_FORMAT_VERSION {
        return Err(Error::newer_version(
            &name,
            8,
            version,
            MANIFEST_FORMAT_VERSION,
        ));
    }
    if version == 0 {
        return Err(Error::corruption(&name, 8, "manifest format version 0"));
    }

    let mut edits = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < data.len() {
        let Some((payload, end)) = record_at(&data, pos) else {
            // Cut short, garbled length or bad checksum. Every edit is synced before the
            // next is appended, so only the last record can be torn; a valid record anywhere
            // after this one proves this one was synced, and then it is damage.
            if let Some(next) = (pos + 1..data.len()).find(|&p| record_at(&data, p).is_some()) {
                return Err(Error::corruption(
                    &name,
                    pos as u64,
                    format!(
                        "manifest record fails its checks but a valid record follows at offset \
                         {next}: the manifest is damaged, not torn. Nothing was changed"
                    ),
                ));
            }
            break;
        };
        let offset = (pos + RECORD_HEADER_LEN) as u64;
        edits.push((offset, VersionEdit::decode(payload, &name, offset)?));
        pos = end;
    }
    Ok(ManifestContents {
        format_version: version,
        edits,
    })
}

/// Whether manifest `number` is what an interrupted creation leaves: unreadable as a
/// manifest (torn while being written) or one snapshot of an empty database (no tables, no
/// replay head past the first segment's header, no sequence numbers used). Reads only.
pub fn is_empty_new_manifest(fs: &dyn FileSystem, dir: &Path, number: u64) -> bool {
    let Ok(contents) = read_manifest(fs, dir, number) else {
        // Creation syncs the manifest before CURRENT; an unreadable one is a torn creation
        // only if it is tiny (header plus at most one short record).
        return fs
            .file_size(&manifest_file_name(dir, number))
            .is_ok_and(|len| len <= 4096);
    };
    contents.edits.len() <= 1
        && contents.edits.iter().all(|(_, e)| {
            e.new_files.is_empty()
                && e.last_sequence.unwrap_or(0) == 0
                && e.vlog_head
                    .is_none_or(|h| h.segment == 1 && h.offset <= crate::vlog::SEGMENT_HEADER_LEN)
        })
}

/// The payload and end offset of the complete, checksum-valid record starting at `pos`.
/// An empty payload never counts: zero-filled bytes must not look like records.
fn record_at(data: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let rest = data.get(pos..)?;
    let masked = decode_fixed32(rest)?;
    let len = usize::try_from(decode_fixed32(rest.get(4..)?)?).ok()?;
    if len == 0 {
        return None;
    }
    let payload = rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN.checked_add(len)?)?;
    (crc32c(payload) == unmask(masked)).then_some((payload, pos + RECORD_HEADER_LEN + len))
}

/// Number of the manifest `CURRENT` names. A missing CURRENT is `NotADatabase`; anything
/// but `MANIFEST-<digits>\n` in it is `Corruption` (CURRENT is ours and was damaged).
pub(crate) fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let path = dir.join(CURRENT);
    if !fs.exists(&path)? {
        return Err(Error::NotADatabase(format!(
            "{} does not exist",
            path.display()
        )));
    }
    let file = fs.open_read(&path)?;
    let len = file.len()?;
    let garbage = || {
        Error::corruption(
            CURRENT,
            0,
            "does not hold 'MANIFEST-<number>\\n'; it was damaged. Nothing was changed: write \
             the name of the newest MANIFEST file into it, or repair the database",
        )
    };
    if len > MAX_CURRENT_LEN {
        return Err(garbage());
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(0, &mut buf, CURRENT)?;
    let text = std::str::from_utf8(&buf).map_err(|_| garbage())?;
    let name = text.strip_suffix('\n').ok_or_else(garbage)?;
    match parse_file_name(name) {
        Some(FileKind::Manifest(number)) => Ok(number),
        _ => Err(garbage()),
    }
}

/// Points `CURRENT` at manifest `number`, crash-safely: the new contents go to temp file
/// `temp_number`, are synced, renamed over CURRENT, and the directory is synced.
pub(crate) fn write_current(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    temp_number: u64,
) -> Result<()> {
    let temp = temp_file_name(dir, temp_number);
    let manifest = manifest_file_name(dir, number);
    let name = manifest
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let result = (|| {
        let mut file = fs.create(&temp)?;
        file.append(format!("{name}\n").as_bytes())?;
        file.sync_data()?;
        drop(file);
        fs.rename(&temp, &dir.join(CURRENT))?;
        fs.sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: a leftover temp file is harmless and swept by the obsolete-file scan.
        let _ = fs.remove(&temp);
    }
    result
}
