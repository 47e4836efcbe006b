//! On-disk framing shared by the table writer and reader: block handles, the 5-byte block
//! trailer (type + masked CRC32C) and the fixed-size footer.
//!
//! Invariants: every block written to a table is followed by a trailer whose checksum
//! covers the block contents and the type byte; the footer is the last `FOOTER_LEN` bytes
//! of the file and keeps `version` and `magic` at fixed distances from the end in every
//! format version, so a reader can tell "newer table" from "not a table".
//! Everything here is plain data and stateless; thread safety is not a concern.

use crate::checksum;
use crate::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64, Decoder};
use crate::error::{Error, Result};

/// Identifies an sstable: the last 8 bytes of every table file.
pub const TABLE_MAGIC: u64 = 0x5749_5343_4b53_5354; // "WISCKSST" read as big-endian ASCII
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the footer at the end of every table.
pub const FOOTER_LEN: usize = 56;
/// Size of the trailer following every block: type byte + masked CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;
/// The only block type so far: contents stored as-is.
pub const BLOCK_TYPE_UNCOMPRESSED: u8 = 0;

/// Where a block lives in the file: `size` excludes the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (the form stored in index entries).
    pub fn encode_varint_to(&self, dst: &mut Vec<u8>) {
        crate::coding::put_varint64(dst, self.offset);
        crate::coding::put_varint64(dst, self.size);
    }

    /// Decodes a varint handle that must fill `src` exactly.
    pub fn decode_varint(src: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(src);
        let offset = d.varint64()?;
        let size = d.varint64()?;
        d.is_empty().then_some(BlockHandle { offset, size })
    }

    /// Offset one past the block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Computes the trailer for `contents` of block type `block_type`.
pub fn block_trailer(contents: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = checksum::crc32c_extend(checksum::crc32c(contents), &[block_type]);
    let masked = checksum::mask(crc).to_le_bytes();
    [block_type, masked[0], masked[1], masked[2], masked[3]]
}

/// Checks the trailer at the end of `raw` (contents + trailer) and returns the contents
/// length. `offset` is the block's file offset, used in error reports.
pub fn verify_block(raw: &[u8], file: &str, offset: u64) -> Result<usize> {
    let Some(len) = raw.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return Err(Error::corruption(
            file,
            offset,
            "block shorter than trailer",
        ));
    };
    let (contents, trailer) = raw.split_at(len);
    let block_type = trailer[0];
    let stored = decode_fixed32(&trailer[1..]).map(checksum::unmask);
    let actual = checksum::crc32c_extend(checksum::crc32c(contents), &[block_type]);
    if stored != Some(actual) {
        return Err(Error::corruption(file, offset, "block checksum mismatch"));
    }
    if block_type != BLOCK_TYPE_UNCOMPRESSED {
        return Err(Error::corruption(
            file,
            offset,
            format!("unknown block type {block_type}"),
        ));
    }
    Ok(len)
}

/// The decoded footer. A filter handle of size 0 means the table has no filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub filter: BlockHandle,
    pub index: BlockHandle,
    pub num_entries: u64,
}

impl Footer {
    /// Serializes to exactly `FOOTER_LEN` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        put_fixed64(&mut out, self.filter.offset);
        put_fixed64(&mut out, self.filter.size);
        put_fixed64(&mut out, self.index.offset);
        put_fixed64(&mut out, self.index.size);
        put_fixed64(&mut out, self.num_entries);
        put_fixed32(&mut out, FORMAT_VERSION);
        let crc = checksum::mask(checksum::crc32c(&out));
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, TABLE_MAGIC);
        debug_assert_eq!(out.len(), FOOTER_LEN);
        out
    }

    /// Decodes the last `FOOTER_LEN` bytes of a file. `offset` is where they start.
    /// Order of checks: magic (not a table), version (newer table), checksum (damaged).
    pub fn decode(src: &[u8], file: &str, offset: u64) -> Result<Footer> {
        if src.len() != FOOTER_LEN {
            return Err(Error::corruption(file, offset, "footer has wrong length"));
        }
        let magic = decode_fixed64(&src[48..]);
        if magic != Some(TABLE_MAGIC) {
            return Err(Error::corruption(file, offset + 48, "bad magic"));
        }
        let version = decode_fixed32(&src[40..]).unwrap_or(0);
        let stored = decode_fixed32(&src[44..]).map(checksum::unmask);
        if version > FORMAT_VERSION {
            // The checksum covers the version: if it holds for a version this build writes,
            // the field is damaged rather than newer.
            if stored.is_some_and(|crc| {
                checksum::holds_with_known_version(&src[..44], 40, crc, FORMAT_VERSION)
            }) {
                return Err(Error::corruption(
                    file,
                    offset + 40,
                    "footer format version damaged (the checksum holds for a version this \
                     build writes)",
                ));
            }
            return Err(Error::newer_version(
                file,
                offset + 40,
                version,
                FORMAT_VERSION,
            ));
        }
        if stored != Some(checksum::crc32c(&src[..44])) {
            return Err(Error::corruption(file, offset, "footer checksum mismatch"));
        }
        if version == 0 {
            return Err(Error::corruption(file, offset + 40, "format version 0"));
        }
        let mut d = Decoder::new(src);
        let mut next = || d.fixed64().unwrap_or(0);
        Ok(Footer {
            filter: BlockHandle {
                offset: next(),
                size: next(),
            },
            index: BlockHandle {
                offset: next(),
                size: next(),
            },
            num_entries: next(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        Footer {
            filter: BlockHandle {
                offset: 100,
                size: 20,
            },
            index: BlockHandle {
                offset: 125,
                size: 7,
            },
            num_entries: 42,
        }
    }

    #[test]
    fn footer_round_trips() {
        let f = sample();
        let bytes = f.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&bytes, "t", 0).expect("valid footer"), f);
    }

    #[test]
    fn footer_tells_newer_version_from_garbage() {
        // A newer build's footer: its version, checksummed with it.
        let mut bytes = sample().encode();
        bytes[40..44].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let crc = checksum::mask(checksum::crc32c(&bytes[..44]));
        bytes[44..48].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Footer::decode(&bytes, "t", 0),
            Err(Error::UnsupportedVersion { found: 2, .. })
        ));
        // A low bit flipped in the version: the checksum holds for version 1.
        let mut low = sample().encode();
        low[40] ^= 0x04;
        assert!(Footer::decode(&low, "t", 0)
            .expect_err("damaged version")
            .is_corruption());
        // A version no build could have reached yet: the field is damaged.
        bytes[40..44].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert!(Footer::decode(&bytes, "t", 0)
            .expect_err("damaged version")
            .is_corruption());
        let mut bytes = sample().encode();
        bytes[50] ^= 1;
        let err = Footer::decode(&bytes, "t", 0).expect_err("bad magic");
        assert!(err.is_corruption() && err.to_string().contains("bad magic"));
        let mut bytes = sample().encode();
        bytes[3] ^= 1;
        assert!(Footer::decode(&bytes, "t", 0)
            .expect_err("crc")
            .is_corruption());
    }

    #[test]
    fn block_trailer_detects_flips() {
        let mut raw = b"hello block".to_vec();
        let trailer = block_trailer(&raw, BLOCK_TYPE_UNCOMPRESSED);
        raw.extend_from_slice(&trailer);
        assert_eq!(verify_block(&raw, "t", 0).expect("valid"), 11);
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x10;
            assert!(verify_block(&bad, "t", 0).is_err(), "flip at {i}");
        }
        assert!(verify_block(&raw[..3], "t", 0).is_err());
    }

    #[test]
    fn handle_varint_round_trip_rejects_trailing_bytes() {
        let h = BlockHandle {
            offset: 1 << 40,
            size: 4096,
        };
        let mut buf = Vec::new();
        h.encode_varint_to(&mut buf);
        assert_eq!(BlockHandle::decode_varint(&buf), Some(h));
        buf.push(0);
        assert_eq!(BlockHandle::decode_varint(&buf), None);
    }
}
