//! Byte layout of the value log: segment header, record, and the `ValuePointer` the LSM-tree
//! stores (see `docs/FORMAT.md`).
//!
//! Invariants: every decoder here checks lengths against the configured maxima and against
//! the bytes actually available *before* slicing or allocating, and never panics; a record is
//! accepted only if its masked CRC32C over everything after the checksum field matches.
//! Pure functions, no state: thread-safe.

use crate::checksum::{crc32c, crc32c_extend, mask, unmask};
use crate::coding::{
    decode_fixed32, decode_fixed64, put_fixed32, put_fixed64, put_varint64, Decoder,
};
use crate::error::{Error, Result};
use crate::key::{ValueKind, MAX_SEQUENCE};

use super::VlogOptions;

/// GC gives disk space back inside a segment in whole blocks of this many bytes (the block
/// size of every common Linux file system; a punch of a partial block only zeroes it).
pub const PUNCH_ALIGN: u64 = 4096;

/// The whole `PUNCH_ALIGN` blocks inside `[start, end)`, if there are any.
pub fn punchable(start: u64, end: u64) -> Option<(u64, u64)> {
    let first = start.div_ceil(PUNCH_ALIGN).checked_mul(PUNCH_ALIGN)?;
    let last = end / PUNCH_ALIGN * PUNCH_ALIGN;
    (first < last).then_some((first, last))
}

/// First 8 bytes of every segment (`"WKVLOG\x00\x01"` read as little endian).
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"WKVLOG\x00\x01");
/// Newest segment format this build writes and reads. Version 2 added
/// [`FLAG_SYNCED_BEFORE`]; version-1 segments are still read, never appended to.
pub const FORMAT_VERSION: u32 = 2;
/// Size of the segment header; the first record starts here.
pub const SEGMENT_HEADER_LEN: u64 = 32;
/// Fixed part of a record: crc u32, key_len u32, value_len u32, sequence u64, kind u8, flags u8.
pub const RECORD_HEADER_LEN: usize = 22;
/// Record flag: this record ends its write batch.
pub const FLAG_LAST_IN_BATCH: u8 = 0x01;
/// Record flag (format 2): every byte of this segment before this record was durable
/// (fdatasync returned) when the record was appended. Recovery uses it to tell damage in
/// synced data (a flagged valid record follows it: `Corruption`) from a torn, never-synced
/// tail (nothing flagged follows it).
pub const FLAG_SYNCED_BEFORE: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_LAST_IN_BATCH | FLAG_SYNCED_BEFORE;

/// The header at offset 0 of every segment.
///
/// `prev_segment_end` is the length of the valid part of segment `segment - 1` when this
/// segment was started (0 when unknown, e.g. the first segment of a database). Recovery uses
/// it to ignore bytes a failed write left behind in the previous segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version the segment was written in ([`FORMAT_VERSION`] for new segments).
    pub version: u32,
    pub segment: u64,
    pub prev_segment_end: u64,
}

impl SegmentHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SEGMENT_HEADER_LEN as usize);
        put_fixed64(&mut out, SEGMENT_MAGIC);
        put_fixed32(&mut out, self.version);
        put_fixed64(&mut out, self.segment);
        put_fixed64(&mut out, self.prev_segment_end);
        let crc = mask(crc32c(&out));
        put_fixed32(&mut out, crc);
        out
    }

    /// Decodes a header. Wrong magic, short input or a bad checksum => `Corruption`; a
    /// version newer than [`FORMAT_VERSION`] => `UnsupportedVersion` (checked before the
    /// checksum, because a newer version may lay the rest of the header out differently).
    pub fn decode(buf: &[u8], file: &str) -> Result<SegmentHeader> {
        let bad =
            |why: &str| Error::corruption(file, 0, format!("value-log segment header: {why}"));
        let magic = decode_fixed64(buf).ok_or_else(|| bad("truncated"))?;
        if magic != SEGMENT_MAGIC {
            return Err(bad("bad magic number"));
        }
        let version = buf
            .get(8..)
            .and_then(decode_fixed32)
            .ok_or_else(|| bad("truncated"))?;
        if version > FORMAT_VERSION {
            let crc = buf.get(28..).and_then(decode_fixed32).map(unmask);
            let damaged = match (buf.get(..28), crc) {
                (Some(body), Some(crc)) => {
                    crate::checksum::holds_with_known_version(body, 8, crc, FORMAT_VERSION)
                }
                _ => false,
            };
            if damaged {
                return Err(bad(
                    "format version damaged (the checksum holds for a version this build writes)",
                ));
            }
            return Err(Error::newer_version(file, 8, version, FORMAT_VERSION));
        }
        let body = buf.get(..28).ok_or_else(|| bad("truncated"))?;
        let stored = buf
            .get(28..)
            .and_then(decode_fixed32)
            .ok_or_else(|| bad("truncated"))?;
        if unmask(stored) != crc32c(body) {
            return Err(bad("checksum mismatch"));
        }
        let segment = decode_fixed64(&buf[12..]).ok_or_else(|| bad("truncated"))?;
        let prev_segment_end = decode_fixed64(&buf[20..]).ok_or_else(|| bad("truncated"))?;
        if version == 0 {
            return Err(bad("format version 0"));
        }
        Ok(SegmentHeader {
            version,
            segment,
            prev_segment_end,
        })
    }
}

/// Address of one record in the value log, stored in the LSM-tree instead of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValuePointer {
    pub segment: u64,
    /// Offset of the record's first byte within the segment.
    pub offset: u64,
    /// Length of the whole record (header + key + value).
    pub len: u32,
}

impl ValuePointer {
    /// Appends the pointer as three varints (segment, offset, len).
    pub fn encode(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.segment);
        put_varint64(dst, self.offset);
        put_varint64(dst, u64::from(self.len));
    }

    /// Decodes a pointer that must fill `src` exactly (the LSM value is nothing else).
    pub fn decode(src: &[u8]) -> Option<ValuePointer> {
        let mut d = Decoder::new(src);
        let ptr = ValuePointer {
            segment: d.varint64()?,
            offset: d.varint64()?,
            len: d.varint32()?,
        };
        d.is_empty().then_some(ptr)
    }

    /// Offset just past the record.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.len))
    }
}

/// A decoded record borrowing its key and value from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub sequence: u64,
    pub kind: ValueKind,
    pub last_in_batch: bool,
    /// [`FLAG_SYNCED_BEFORE`] was set.
    pub synced_before: bool,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Encoded size of a record with these key and value sizes.
pub fn record_len(key_len: usize, value_len: usize) -> usize {
    RECORD_HEADER_LEN + key_len + value_len
}

/// Appends one record. The caller has checked the sizes against [`VlogOptions`], so they
/// fit the u32 length fields.
pub fn encode_record(
    dst: &mut Vec<u8>,
    sequence: u64,
    kind: ValueKind,
    flags: u8,
    key: &[u8],
    value: &[u8],
) {
    let start = dst.len();
    put_fixed32(dst, 0);
    put_fixed32(dst, key.len() as u32);
    put_fixed32(dst, value.len() as u32);
    put_fixed64(dst, sequence);
    dst.push(kind as u8);
    dst.push(flags);
    let crc = crc32c_extend(crc32c_extend(crc32c(&dst[start + 4..]), key), value);
    dst[start..start + 4].copy_from_slice(&mask(crc).to_le_bytes());
    dst.extend_from_slice(key);
    dst.extend_from_slice(value);
}

/// Reads the two length fields of a record header and returns the whole record's length,
/// or why it is impossible: lengths over the configured maxima, or `available` bytes (what
/// is left in the segment) too few to hold the header or the record.
pub fn record_len_from_header(
    header: &[u8],
    available: u64,
    opts: &VlogOptions,
) -> std::result::Result<usize, &'static str> {
    if (available as u128) < RECORD_HEADER_LEN as u128 || header.len() < RECORD_HEADER_LEN {
        return Err("truncated record header");
    }
    let key_len = decode_fixed32(&header[4..]).ok_or("truncated record header")? as usize;
    let value_len = decode_fixed32(&header[8..]).ok_or("truncated record header")? as usize;
    if key_len > opts.max_key_size {
        return Err("key length exceeds max_key_size");
    }
    if value_len > opts.max_value_size {
        return Err("value length exceeds max_value_size");
    }
    let total = record_len(key_len, value_len);
    if total as u64 > available {
        return Err("record extends past the end of the data");
    }
    Ok(total)
}

/// Whether a record header's one-byte fields and its length pairing could be valid (kind 0
/// or 1, no unknown flag, a deletion without a value): the checks of [`decode_record`] that
/// need no more than the header, for searches that try every byte offset and should not
/// checksum a candidate's body when its header already rules it out.
pub fn header_fields_valid(header: &[u8]) -> bool {
    if header.len() < RECORD_HEADER_LEN {
        return false;
    }
    let flags_known = header[21] & !KNOWN_FLAGS == 0;
    let value_len = decode_fixed32(&header[8..]).unwrap_or(u32::MAX);
    match ValueKind::from_u8(header[20]) {
        Some(ValueKind::Value) => flags_known,
        Some(ValueKind::Deletion) => flags_known && value_len == 0,
        _ => false,
    }
}

/// Decodes the record at the start of `buf`; returns it and its length. Every failure (short
/// input, impossible length, checksum, a sequence number above the maximum, unknown kind or
/// flags) is an `Err(reason)` that the caller turns into `Error::Corruption` with its file
/// and offset.
pub fn decode_record<'a>(
    buf: &'a [u8],
    opts: &VlogOptions,
) -> std::result::Result<(RecordRef<'a>, usize), &'static str> {
    let total = record_len_from_header(buf, buf.len() as u64, opts)?;
    let stored = decode_fixed32(buf).ok_or("truncated record header")?;
    if unmask(stored) != crc32c(&buf[4..total]) {
        return Err("record checksum mismatch");
    }
    let key_len = decode_fixed32(&buf[4..]).ok_or("truncated record header")? as usize;
    let sequence = decode_fixed64(&buf[12..]).ok_or("truncated record header")?;
    // No writer gives out more (`VlogWriter` refuses): the internal key keeps 56 bits, so
    // a larger one would sort wrongly and end every later write.
    if sequence > MAX_SEQUENCE {
        return Err("sequence number above the maximum");
    }
    let kind = match ValueKind::from_u8(buf[20]) {
        Some(kind @ (ValueKind::Value | ValueKind::Deletion)) => kind,
        _ => return Err("invalid record kind"),
    };
    let flags = buf[21];
    if flags & !KNOWN_FLAGS != 0 {
        return Err("unknown record flags");
    }
    let key = &buf[RECORD_HEADER_LEN..RECORD_HEADER_LEN + key_len];
    let value = &buf[RECORD_HEADER_LEN + key_len..total];
    if kind == ValueKind::Deletion && !value.is_empty() {
        return Err("deletion record carries a value");
    }
    let record = RecordRef {
        sequence,
        kind,
        last_in_batch: flags & FLAG_LAST_IN_BATCH != 0,
        synced_before: flags & FLAG_SYNCED_BEFORE != 0,
        key,
        value,
    };
    Ok((record, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> VlogOptions {
        VlogOptions {
            segment_size: 1 << 20,
            buffer_size: 4096,
            max_key_size: 1024,
            max_value_size: 2 << 20,
            preallocate_size: 0,
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
        }
    }

    fn encoded(seq: u64, kind: ValueKind, last: bool, key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        let flags = if last { FLAG_LAST_IN_BATCH } else { 0 };
        encode_record(&mut buf, seq, kind, flags, key, value);
        buf
    }

    /// A record only a crafted file could hold (its checksum valid): a sequence number no
    /// writer gives out. Found by a read-only review of replay.
    #[test]
    fn a_sequence_number_above_the_maximum_does_not_decode() {
        let top = encoded(MAX_SEQUENCE, ValueKind::Value, true, b"k", b"v");
        assert_eq!(decode_record(&top, &opts()).expect("the maximum").0.sequence, MAX_SEQUENCE);
        let over = encoded(MAX_SEQUENCE + 1, ValueKind::Value, true, b"k", b"v");
        assert_eq!(
            decode_record(&over, &opts()).err(),
            Some("sequence number above the maximum")
        );
    }

    /// The scan's search for records after the log's end steps over runs of zeros on the
    /// strength of this: zeros never decode as a record, whatever follows them.
    #[test]
    fn an_all_zero_header_never_decodes() {
        let zeros = [0u8; RECORD_HEADER_LEN + 64];
        assert_eq!(
            record_len_from_header(&zeros, zeros.len() as u64, &opts()),
            Ok(RECORD_HEADER_LEN),
            "zero lengths describe a header-only record"
        );
        assert!(decode_record(&zeros, &opts()).is_err());
        assert!(decode_record(&zeros[..RECORD_HEADER_LEN], &opts()).is_err());
    }

    #[test]
    fn record_round_trips_edge_sizes() {
        let big = vec![0xabu8; 1 << 20];
        let cases: [(&[u8], &[u8], ValueKind, bool); 4] = [
            (b"", b"v", ValueKind::Value, true),
            (b"k", b"", ValueKind::Value, false),
            (b"key", &big, ValueKind::Value, true),
            (b"gone", b"", ValueKind::Deletion, true),
        ];
        for (i, (key, value, kind, last)) in cases.into_iter().enumerate() {
            let buf = encoded(7 + i as u64, kind, last, key, value);
            assert_eq!(buf.len(), record_len(key.len(), value.len()));
            let (rec, len) = decode_record(&buf, &opts()).expect("valid record");
            assert_eq!(len, buf.len());
            assert_eq!(rec.sequence, 7 + i as u64);
            assert_eq!((rec.kind, rec.last_in_batch), (kind, last));
            assert_eq!((rec.key, rec.value), (key, value));
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_rejected() {
        let buf = encoded(42, ValueKind::Value, true, b"some-key", b"some value bytes");
        for cut in 0..buf.len() {
            assert!(decode_record(&buf[..cut], &opts()).is_err(), "cut at {cut}");
        }
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(decode_record(&bad, &opts()).is_err(), "flip {byte}:{bit}");
            }
        }
    }

    #[test]
    fn lengths_over_limits_or_bad_semantics_are_rejected() {
        let small = VlogOptions {
            max_key_size: 3,
            max_value_size: 3,
            preallocate_size: 0,
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
            ..opts()
        };
        let long_key = encoded(1, ValueKind::Value, true, b"abcd", b"v");
        assert!(decode_record(&long_key, &small).is_err());
        let long_value = encoded(1, ValueKind::Value, true, b"k", b"abcd");
        assert!(decode_record(&long_value, &small).is_err());
        // Checksum-valid but meaningless: a deletion that carries a value, a pointer kind.
        let del_with_value = encoded(1, ValueKind::Deletion, true, b"k", b"v");
        assert!(decode_record(&del_with_value, &opts()).is_err());
        let pointer_kind = encoded(1, ValueKind::ValuePointer, true, b"k", b"v");
        assert!(decode_record(&pointer_kind, &opts()).is_err());
        // A length field of u32::MAX must not be trusted for allocation or slicing.
        let mut huge = encoded(1, ValueKind::Value, true, b"k", b"v");
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let unlimited = VlogOptions {
            max_value_size: usize::MAX / 2,
            preallocate_size: 0,
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
            ..opts()
        };
        assert!(decode_record(&huge, &unlimited).is_err());
    }

    #[test]
    fn pointer_round_trips_and_rejects_garbage() {
        for ptr in [
            ValuePointer {
                segment: 1,
                offset: 32,
                len: 22,
            },
            ValuePointer {
                segment: u64::MAX,
                offset: u64::MAX,
                len: u32::MAX,
            },
        ] {
            let mut buf = Vec::new();
            ptr.encode(&mut buf);
            assert_eq!(ValuePointer::decode(&buf), Some(ptr));
            for cut in 0..buf.len() {
                assert_eq!(ValuePointer::decode(&buf[..cut]), None);
            }
            buf.push(0);
            assert_eq!(ValuePointer::decode(&buf), None, "trailing byte");
        }
        let mut too_long_len = Vec::new();
        put_varint64(&mut too_long_len, 1);
        put_varint64(&mut too_long_len, 1);
        put_varint64(&mut too_long_len, 1 << 33);
        assert_eq!(ValuePointer::decode(&too_long_len), None);
    }

    #[test]
    fn segment_header_round_trips_and_rejects_bad_magic_version_crc() {
        let header = SegmentHeader {
            version: FORMAT_VERSION,
            segment: 9,
            prev_segment_end: 1234,
        };
        let buf = header.encode();
        assert_eq!(buf.len() as u64, SEGMENT_HEADER_LEN);
        assert_eq!(SegmentHeader::decode(&buf, "f").expect("valid"), header);
        for cut in 0..buf.len() {
            assert!(SegmentHeader::decode(&buf[..cut], "f").is_err());
        }
        let mut magic = buf.clone();
        magic[0] ^= 1;
        assert!(SegmentHeader::decode(&magic, "f")
            .expect_err("bad")
            .is_corruption());
        // A newer build's header: its version, checksummed with it.
        let mut newer = buf.clone();
        newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let crc = mask(crc32c(&newer[..28]));
        newer[28..32].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            SegmentHeader::decode(&newer, "f"),
            Err(Error::UnsupportedVersion { found, .. }) if found == FORMAT_VERSION + 1
        ));
        // A low bit flipped in the version: still within reach of a newer build, but the
        // checksum holds for the version this build wrote, so it is damage.
        let mut low = buf.clone();
        low[8] ^= 0x08;
        assert!(SegmentHeader::decode(&low, "f")
            .expect_err("damaged version")
            .is_corruption());
        let mut far = buf.clone();
        far[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert!(SegmentHeader::decode(&far, "f")
            .expect_err("damaged version")
            .is_corruption());
        let mut flipped = buf.clone();
        flipped[15] ^= 0x10;
        assert!(SegmentHeader::decode(&flipped, "f")
            .expect_err("bad")
            .is_corruption());
        assert!(SegmentHeader::decode(&[0u8; 32], "f").is_err());
    }
}
