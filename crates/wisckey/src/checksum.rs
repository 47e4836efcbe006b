//! CRC32C checksums for every block and record. Stored checksums are *masked* (rotated and
//! offset, as LevelDB does) so that a checksum computed over bytes that themselves contain
//! checksums does not degenerate.

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of `a` followed by `b`, without concatenating them.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// The value stored on disk for checksum `crc`.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// Whether `body`, with the little-endian u32 at `version_at` replaced by some version in
/// `1..=newest`, has CRC32C `crc`. A header whose version is newer than the reader's, yet
/// whose checksum holds for a version the reader writes, had its version field damaged:
/// the writer checksummed it with that version.
pub fn holds_with_known_version(body: &[u8], version_at: usize, crc: u32, newest: u32) -> bool {
    let Some(field) = body.get(version_at..version_at + 4) else {
        return false;
    };
    let (before, after) = (&body[..version_at], &body[version_at + field.len()..]);
    let crc_before = crc32c(before);
    (1..=newest).any(|version| {
        let with_version = crc32c_extend(crc_before, &version.to_le_bytes());
        crc32c_extend(with_version, after) == crc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_round_trips_and_changes_value() {
        let c = crc32c(b"hello");
        assert_ne!(mask(c), c);
        assert_eq!(unmask(mask(c)), c);
        assert_eq!(crc32c_extend(crc32c(b"hel"), b"lo"), c);
    }
}
