//! The manifest file (header + checksummed records, each one encoded [`VersionEdit`]) and the
//! `CURRENT` file that names the live manifest. Byte layout: `docs/FORMAT.md`.
//!
//! ```text
//! header: magic(8) = "WKMANFST" | format_version u32 LE
//! record: masked crc32c(payload) u32 LE | payload length u32 LE | payload
//! ```
//!
//! Reading rules: a record that is cut short, or whose checksum fails while being the last
//! thing in the file (or followed only by zero bytes), is a torn append that was never
//! acknowledged and is ignored; a bad record followed by more data is `Corruption`. Record
//! lengths are checked against the bytes remaining before anything is sliced.
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
/// Newest manifest format this build reads and the one it writes.
pub const MANIFEST_FORMAT_VERSION: u32 = 1;

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
    /// Creates `MANIFEST-<number>` holding the header and `snapshot`, synced.
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

/// Reads every intact edit of manifest `number`, with the file offset of each payload.
pub(crate) fn read_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
) -> Result<Vec<(u64, VersionEdit)>> {
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
        return Err(Error::UnsupportedVersion {
            file: name,
            found: version,
            supported: MANIFEST_FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(Error::corruption(&name, 8, "manifest format version 0"));
    }

    let mut edits = Vec::new();
    let mut pos = HEADER_LEN;
    while pos < data.len() {
        let rest = &data[pos..];
        let (Some(masked), Some(len)) = (
            decode_fixed32(rest),
            decode_fixed32(rest.get(4..).unwrap_or(&[])),
        ) else {
            break; // Torn: the record header itself is incomplete.
        };
        let Some(payload) = usize::try_from(len)
            .ok()
            .and_then(|len| rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN.checked_add(len)?))
        else {
            break; // Torn: the payload runs past the end of the file.
        };
        let end = pos + RECORD_HEADER_LEN + payload.len();
        if crc32c(payload) != unmask(masked) {
            // Every edit is synced before the next is appended, so at most the last record
            // can be unsynced, and only it can be torn — even when a crash persisted its
            // later bytes but not its earlier ones, or garbled its length. A bad record
            // followed by a record that checks out was synced: that is real corruption.
            if !valid_record_at(&data, end) {
                break;
            }
            return Err(Error::corruption(
                &name,
                pos as u64,
                "manifest record checksum mismatch",
            ));
        }
        let offset = (pos + RECORD_HEADER_LEN) as u64;
        edits.push((offset, VersionEdit::decode(payload, &name, offset)?));
        pos = end;
    }
    Ok(edits)
}

/// Whether a complete record with a matching checksum starts at `pos`.
fn valid_record_at(data: &[u8], pos: usize) -> bool {
    let Some(rest) = data.get(pos..) else {
        return false;
    };
    let (Some(masked), Some(len)) = (
        decode_fixed32(rest),
        decode_fixed32(rest.get(4..).unwrap_or(&[])),
    ) else {
        return false;
    };
    usize::try_from(len)
        .ok()
        .and_then(|len| rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN.checked_add(len)?))
        .is_some_and(|payload| crc32c(payload) == unmask(masked))
}

/// Number of the manifest `CURRENT` names. Anything but `MANIFEST-<digits>\n` (or a missing
/// CURRENT) is `NotADatabase`.
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
    let garbage = || Error::NotADatabase(format!("{} does not name a manifest", path.display()));
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
