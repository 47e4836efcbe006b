//! The server's on-disk encoding inside the engine: how a Redis key maps to engine keys and
//! how a stored value carries its type and expiry. Reader and writer share this file; the
//! byte-level description is docs/FORMAT.md, "Redis-protocol server keyspace".
//!
//! Invariants (frozen: written to disk, never reused or reinterpreted):
//! - Every engine key the server writes starts with one namespace byte: [`NS_DATA`] (a
//!   user's key and its value), [`NS_EXPIRY`] (the expiry index) or [`NS_META`]
//!   (server metadata such as the format version). No other engine keys are touched.
//! - A data value starts with a tag byte: [`TAG_STRING`] (no expiry) or
//!   [`TAG_STRING_EXPIRES`] (an 8-byte big-endian Unix time in milliseconds follows).
//! - An expiry-index key is `NS_EXPIRY ++ be64(expires_at_ms) ++ user key`, value empty.
//!   It may be stale (the key was overwritten or deleted since): the data value's own
//!   expiry is the truth, the index only tells the sweeper where to look.

/// Namespace byte of a user key's data entry.
pub const NS_DATA: u8 = b'd';
/// Namespace byte of the expiry index.
pub const NS_EXPIRY: u8 = b'e';
/// Namespace byte of server metadata.
pub const NS_META: u8 = b'm';
/// The metadata key holding [`FORMAT_VERSION`] as a decimal string.
pub const META_VERSION_KEY: &[u8] = b"mformat-version";
/// The keyspace format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Tag: a string value with no expiry; the value's bytes follow.
pub const TAG_STRING: u8 = 0x00;
/// Tag: a string value with an expiry; be64 Unix milliseconds, then the value's bytes.
pub const TAG_STRING_EXPIRES: u8 = 0x01;

/// The longest user key: the engine's limit less the expiry index's 9-byte prefix.
pub const MAX_USER_KEY: usize = wisckey::MAX_KEY_SIZE - 9;
/// The longest user value: the engine's limit less the largest header.
pub const MAX_USER_VALUE: usize = wisckey::MAX_VALUE_SIZE - 9;

/// The engine key of a user key's data entry.
pub fn data_key(user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 1);
    data_key_into(&mut k, user_key);
    k
}

/// [`data_key`] written into `out` (cleared first), so a hot path can reuse one buffer.
pub fn data_key_into(out: &mut Vec<u8>, user_key: &[u8]) {
    out.clear();
    out.push(NS_DATA);
    out.extend_from_slice(user_key);
}

/// The expiry-index key for `user_key` expiring at `at_ms`.
pub fn expiry_key(at_ms: u64, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 9);
    k.push(NS_EXPIRY);
    k.extend_from_slice(&at_ms.to_be_bytes());
    k.extend_from_slice(user_key);
    k
}

/// Splits an expiry-index key into (expires_at_ms, user key); `None` if it is not one.
pub fn parse_expiry_key(key: &[u8]) -> Option<(u64, &[u8])> {
    let rest = key.strip_prefix(&[NS_EXPIRY])?;
    let (at, user) = rest.split_at_checked(8)?;
    Some((u64::from_be_bytes(at.try_into().ok()?), user))
}

/// A decoded data value: the string and its expiry, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The user's bytes.
    pub data: Vec<u8>,
    /// Unix time in milliseconds at which the key stops existing.
    pub expires_at_ms: Option<u64>,
}

impl Stored {
    /// Whether the value no longer exists at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// Encodes a data value.
pub fn encode_value(data: &[u8], expires_at_ms: Option<u64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len() + 9);
    encode_value_into(&mut v, data, expires_at_ms);
    v
}

/// [`encode_value`] written into `out` (cleared first), so a hot path can reuse one buffer.
pub fn encode_value_into(out: &mut Vec<u8>, data: &[u8], expires_at_ms: Option<u64>) {
    out.clear();
    match expires_at_ms {
        None => out.push(TAG_STRING),
        Some(at) => {
            out.push(TAG_STRING_EXPIRES);
            out.extend_from_slice(&at.to_be_bytes());
        }
    }
    out.extend_from_slice(data);
}

/// Decodes a data value read from the engine (consuming it, so the common case does not
/// copy the payload twice). An unknown tag or a short header is an error naming it.
/// Where the user's bytes start in a stored value, and its expiry (what [`decode_value`]
/// reads, without copying).
pub fn value_header(raw: &[u8]) -> Result<(usize, Option<u64>), String> {
    match raw.first().copied() {
        Some(TAG_STRING) => Ok((1, None)),
        Some(TAG_STRING_EXPIRES) if raw.len() >= 9 => {
            let mut at = [0u8; 8];
            at.copy_from_slice(&raw[1..9]);
            Ok((9, Some(u64::from_be_bytes(at))))
        }
        Some(TAG_STRING_EXPIRES) => Err(format!("expiry header of {} bytes", raw.len())),
        Some(tag) => Err(format!("unknown value tag 0x{tag:02x}")),
        None => Err("empty value (no tag byte)".to_string()),
    }
}

pub fn decode_value(mut raw: Vec<u8>) -> Result<Stored, String> {
    match raw.first().copied() {
        Some(TAG_STRING) => {
            raw.remove(0);
            Ok(Stored {
                data: raw,
                expires_at_ms: None,
            })
        }
        Some(TAG_STRING_EXPIRES) if raw.len() >= 9 => {
            let mut at = [0u8; 8];
            at.copy_from_slice(&raw[1..9]);
            raw.drain(..9);
            Ok(Stored {
                data: raw,
                expires_at_ms: Some(u64::from_be_bytes(at)),
            })
        }
        Some(TAG_STRING_EXPIRES) => Err(format!("expiry header of {} bytes", raw.len())),
        Some(tag) => Err(format!("unknown value tag 0x{tag:02x}")),
        None => Err("empty value (no tag byte)".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_round_trips_with_and_without_expiry() {
        for at in [None, Some(0), Some(1_700_000_000_123)] {
            for data in [&b""[..], b"x", &[0u8, 1, 255, b'\r', b'\n']] {
                let back = decode_value(encode_value(data, at));
                assert_eq!(
                    back,
                    Ok(Stored {
                        data: data.to_vec(),
                        expires_at_ms: at
                    })
                );
            }
        }
    }

    #[test]
    fn pinned_bytes() {
        assert_eq!(encode_value(b"ab", None), b"\x00ab");
        assert_eq!(
            encode_value(b"ab", Some(0x0102)),
            b"\x01\x00\x00\x00\x00\x00\x00\x01\x02ab"
        );
        assert_eq!(data_key(b"k"), b"dk");
        assert_eq!(
            expiry_key(0x0102, b"k"),
            b"e\x00\x00\x00\x00\x00\x00\x01\x02k"
        );
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(decode_value(vec![]).is_err());
        assert!(decode_value(vec![7, 1, 2]).is_err());
        assert!(decode_value(vec![TAG_STRING_EXPIRES, 1, 2]).is_err());
    }

    #[test]
    fn expiry_key_parses_back() {
        assert_eq!(
            parse_expiry_key(&expiry_key(42, b"user")),
            Some((42, &b"user"[..]))
        );
        assert_eq!(parse_expiry_key(b"e\x00\x01"), None);
        assert_eq!(parse_expiry_key(b"dkey"), None);
    }
}
