//! SCAN cursors: always a decimal number that fits in a `u64`, because Redis clients
//! (redis-cli `--scan`, the `redis` crate's scan iterators) parse it into one. `0` starts and
//! ends a scan. A cursor stands for the next key to return, in one of two encodings whose
//! number ranges cannot collide:
//!
//! - **Direct** (keys of up to [`DIRECT_MAX_KEY`] bytes): `1` followed by each byte as three
//!   decimal digits (`000`..`255`), at most 19 digits and below 2·10^18, so below
//!   [`TABLE_TAG`]. Nothing is remembered on the server: such a cursor stays valid across
//!   restarts. Longer direct cursors (made by servers before the cursor table) are still
//!   accepted from clients that keep cursors as strings or big integers.
//! - **Table** (longer keys): a number with the top bit ([`TABLE_TAG`]) set that indexes a
//!   bounded in-memory table of next keys. The table keeps the newest cursors (at most
//!   `capacity` entries and [`TABLE_MAX_BYTES`] of keys, the oldest evicted first); an
//!   evicted cursor, or one from before a restart, is refused with `ERR invalid cursor`
//!   rather than silently restarting the scan. Numbers are handed out from a random start
//!   per server run, so a cursor from an earlier run is not mistaken for a new one.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Mutex, PoisonError};

/// The longest key written as a direct cursor: `1` + 3 digits a byte stays within 19 digits.
pub const DIRECT_MAX_KEY: usize = 6;
/// The bit that marks a table cursor (every direct cursor is below 2·10^18 < 2^63).
pub const TABLE_TAG: u64 = 1 << 63;
/// Most key bytes the table holds (besides its newest entry, always kept).
pub const TABLE_MAX_BYTES: usize = 64 << 20;

/// The server's SCAN cursors (the table of long keys; direct cursors need no state).
#[derive(Debug)]
pub struct Cursors {
    table: Mutex<Table>,
    capacity: usize,
}

#[derive(Debug)]
struct Table {
    keys: HashMap<u64, Vec<u8>>,
    /// Cursor numbers, oldest first.
    order: VecDeque<u64>,
    bytes: usize,
    /// The low 63 bits of the next table cursor.
    next: u64,
}

impl Cursors {
    /// A table of at most `capacity` cursors (at least one is always kept).
    pub fn new(capacity: usize) -> Cursors {
        Cursors {
            table: Mutex::new(Table {
                keys: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
                next: RandomState::new().hash_one(std::time::SystemTime::now()),
            }),
            capacity: capacity.max(1),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while the lock was held can at worst leave an entry in `keys` without
        // one in `order` (or a stale byte count): a bounded leak, never a wrong key.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cursor that resumes a scan at `key`.
    pub fn encode(&self, key: &[u8]) -> String {
        if key.len() <= DIRECT_MAX_KEY {
            return encode_direct(key);
        }
        let mut t = self.table();
        let number = TABLE_TAG | (t.next & !TABLE_TAG);
        t.next = t.next.wrapping_add(1);
        t.bytes += key.len();
        // Only after 2^63 cursors could a number come round again; the newer key wins.
        if let Some(old) = t.keys.insert(number, key.to_vec()) {
            t.bytes -= old.len();
        } else {
            t.order.push_back(number);
        }
        while t.order.len() > 1 && (t.order.len() > self.capacity || t.bytes > TABLE_MAX_BYTES) {
            let Some(oldest) = t.order.pop_front() else {
                break;
            };
            if let Some(k) = t.keys.remove(&oldest) {
                t.bytes = t.bytes.saturating_sub(k.len());
            }
        }
        number.to_string()
    }

    /// The key a cursor resumes at (empty for `0`), or `None` if it is not a cursor this
    /// server run handed out (malformed, evicted, or from before a restart).
    pub fn decode(&self, cursor: &[u8]) -> Option<Vec<u8>> {
        if cursor.is_empty() || !cursor.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let number = std::str::from_utf8(cursor)
            .ok()
            .and_then(|s| s.parse::<u64>().ok());
        match number {
            Some(n) if n & TABLE_TAG != 0 => self.table().keys.get(&n).cloned(),
            _ => decode_direct(cursor),
        }
    }

    /// Table cursors held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table().keys.len()
    }
}

/// A direct cursor for `key` (any length; only short keys' fit in a `u64`).
pub fn encode_direct(key: &[u8]) -> String {
    let mut s = String::with_capacity(1 + 3 * key.len());
    s.push('1');
    for b in key {
        s.push_str(&format!("{b:03}"));
    }
    s
}

/// Decodes a direct cursor: `Some(key)`, `Some(empty)` for `0`, `None` if malformed.
pub fn decode_direct(cursor: &[u8]) -> Option<Vec<u8>> {
    if cursor == b"0" {
        return Some(Vec::new());
    }
    let digits = cursor.strip_prefix(b"1")?;
    if digits.len() % 3 != 0 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits
        .chunks_exact(3)
        .map(|d| {
            let n =
                u32::from(d[0] - b'0') * 100 + u32::from(d[1] - b'0') * 10 + u32::from(d[2] - b'0');
            u8::try_from(n).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_cursors_round_trip_and_fit_below_the_tag() {
        let c = Cursors::new(4);
        for key in [
            &b"a"[..],
            b"\x00\xff",
            b"user:1",
            b"",
            b"\xff\xff\xff\xff\xff\xff",
        ] {
            let s = c.encode(key);
            let n: u64 = s.parse().expect("fits in u64");
            assert!(n < TABLE_TAG && s.starts_with('1'), "{s}");
            assert_eq!(c.decode(s.as_bytes()).as_deref(), Some(key));
        }
        assert_eq!(c.len(), 0, "direct cursors need no table");
        assert_eq!(c.decode(b"0"), Some(vec![]));
        for bad in [&b"2"[..], b"10", b"1256", b"1abc", b"", b"00", b"+1", b"-1"] {
            assert_eq!(c.decode(bad), None);
        }
        // A long direct cursor from an older server still resumes.
        let old = encode_direct(b"a long key, 20 bytes");
        assert_eq!(
            c.decode(old.as_bytes()).as_deref(),
            Some(&b"a long key, 20 bytes"[..])
        );
    }

    #[test]
    fn table_cursors_fit_in_u64_and_the_oldest_are_evicted() {
        let c = Cursors::new(3);
        let keys: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 40]).collect();
        let cursors: Vec<String> = keys.iter().map(|k| c.encode(k)).collect();
        for s in &cursors {
            let n: u64 = s.parse().expect("fits in u64");
            assert!(n & TABLE_TAG != 0, "{s}");
        }
        assert_eq!(c.len(), 3);
        assert_eq!(c.decode(cursors[0].as_bytes()), None, "evicted");
        assert_eq!(c.decode(cursors[1].as_bytes()), None, "evicted");
        for i in 2..5 {
            assert_eq!(c.decode(cursors[i].as_bytes()).as_ref(), Some(&keys[i]));
        }
        // Still valid when used again (a retried SCAN), and unknown numbers are refused.
        assert_eq!(c.decode(cursors[4].as_bytes()).as_ref(), Some(&keys[4]));
        let last: u64 = cursors[4].parse().expect("fits in u64");
        let unissued = TABLE_TAG | (last.wrapping_add(1) & !TABLE_TAG);
        assert_eq!(
            c.decode(unissued.to_string().as_bytes()),
            None,
            "never handed out"
        );
        assert_eq!(c.decode(b"18446744073709551616"), None, "above u64");
    }
}
