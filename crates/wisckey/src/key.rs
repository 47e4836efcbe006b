//! Internal keys: the LSM-tree's sort key.
//!
//! An internal key is `user_key ++ trailer`, where the trailer is 8 little-endian bytes
//! holding `(sequence << 8) | kind`. Ordering: user keys ascending (bytewise), then trailer
//! *descending*, so the newest version of a key comes first and a lookup for "key as of
//! sequence S" is a seek to `(key, S, KIND_FOR_SEEK)`.
//!
//! Kind numbers are written to disk and are frozen: never renumber or reuse one.

use std::cmp::Ordering;

use crate::coding::decode_fixed64;

/// Monotonic write sequence number; 56 bits are usable.
pub type SequenceNumber = u64;

/// Largest sequence number that fits the trailer.
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Size in bytes of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an LSM entry means. On-disk values; frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A deletion marker (tombstone); the entry's value is empty.
    Deletion = 0,
    /// The value is stored inline in the LSM entry.
    Value = 1,
    /// The LSM entry's value is an encoded value-log pointer.
    ValuePointer = 2,
}

/// Kind used in seek keys: the highest kind, so that with the descending trailer order a
/// seek key sorts before every real entry of the same user key and sequence.
pub const KIND_FOR_SEEK: u8 = ValueKind::ValuePointer as u8;

impl ValueKind {
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::ValuePointer),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into a trailer.
pub fn pack_trailer(seq: SequenceNumber, kind: u8) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | u64::from(kind)
}

/// Builds an internal key.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut out, user_key, seq, kind as u8);
    out
}

/// Appends `user_key ++ trailer(seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SequenceNumber, kind: u8) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// The key to seek to for "newest version of `user_key` visible at `seq`".
pub fn seek_key(user_key: &[u8], seq: SequenceNumber) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut out, user_key, seq, KIND_FOR_SEEK);
    out
}

/// A borrowed, decoded internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub sequence: SequenceNumber,
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` if it is shorter than a trailer or has an unknown kind.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let trailer = decode_fixed64(&ikey[split..])?;
    Some(ParsedKey {
        user_key: &ikey[..split],
        sequence: trailer >> 8,
        kind: ValueKind::from_u8((trailer & 0xff) as u8)?,
    })
}

/// User-key part of an internal key. Callers guarantee `ikey` is at least a trailer long
/// (every internal key the engine builds or has validated is).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// Trailer of an internal key (0 if malformed, which sorts it last among equal user keys).
pub fn trailer(ikey: &[u8]) -> u64 {
    ikey.len()
        .checked_sub(TRAILER_LEN)
        .and_then(|split| decode_fixed64(&ikey[split..]))
        .unwrap_or(0)
}

/// Sequence number of an internal key.
pub fn sequence(ikey: &[u8]) -> SequenceNumber {
    trailer(ikey) >> 8
}

/// The internal-key order: user key ascending, then trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// Internal keys up to this long are stored inline in an [`InternalKey`] (typical keys plus
/// the 8-byte trailer); longer ones spill to the heap.
const INLINE_KEY_BYTES: usize = 32;

/// An owned internal key ordered by [`compare_internal`]; used as the memtable's map key.
/// Short keys live inside the skiplist node itself, which saves a pointer chase (a cache
/// miss) on every comparison of a memtable search — the hottest loop of the write path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalKey(pub smallvec::SmallVec<[u8; INLINE_KEY_BYTES]>);

impl InternalKey {
    /// Builds `user_key ++ trailer(seq, kind)`.
    pub fn new(user_key: &[u8], seq: SequenceNumber, kind: u8) -> InternalKey {
        let mut bytes = smallvec::SmallVec::with_capacity(user_key.len() + TRAILER_LEN);
        bytes.extend_from_slice(user_key);
        bytes.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
        InternalKey(bytes)
    }

    /// Copies an encoded internal key.
    pub fn from_encoded(ikey: &[u8]) -> InternalKey {
        InternalKey(smallvec::SmallVec::from_slice(ikey))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A user key for messages: as text in quotes where it is printable ASCII, else as `0x` and
/// hex, so two different keys never print alike.
pub(crate) fn printable_key(key: &[u8]) -> String {
    if key.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("'{}'", String::from_utf8_lossy(key))
    } else {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first_and_user_keys_bytewise() {
        let a5 = make_internal_key(b"a", 5, ValueKind::Value);
        let a3 = make_internal_key(b"a", 3, ValueKind::Value);
        let ab1 = make_internal_key(b"ab", 1, ValueKind::Value);
        let empty = make_internal_key(b"", 9, ValueKind::Deletion);
        assert_eq!(compare_internal(&a5, &a3), Ordering::Less);
        assert_eq!(compare_internal(&a3, &ab1), Ordering::Less);
        assert_eq!(compare_internal(&empty, &a5), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 5), &a5), Ordering::Less);
        assert_eq!(compare_internal(&seek_key(b"a", 4), &a3), Ordering::Less);
        assert_eq!(compare_internal(&a5, &seek_key(b"a", 4)), Ordering::Less);
    }

    #[test]
    fn parse_round_trip_and_rejects_garbage() {
        let k = make_internal_key(b"key", MAX_SEQUENCE, ValueKind::ValuePointer);
        let p = parse_internal_key(&k).expect("valid key");
        assert_eq!(p.user_key, b"key");
        assert_eq!(p.sequence, MAX_SEQUENCE);
        assert_eq!(p.kind, ValueKind::ValuePointer);
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = make_internal_key(b"k", 1, ValueKind::Value);
        let n = bad.len();
        bad[n - 8] = 77;
        assert!(parse_internal_key(&bad).is_none());
    }
}
