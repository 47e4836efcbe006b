//! `ValueCache`: verified values of recently read value-log records, by record address.
//!
//! Owns: a bounded, sharded map from a record's place in the log (segment, offset, length)
//! to its key and value, as read and verified by `VlogReader`. Eviction is the cache
//! crate's (S3-FIFO, weighed by bytes), so a scan's one-off values do not push out the hot
//! ones point reads keep asking for. Admission is on a record's second miss (a table of
//! the addresses missed lately, one per slot, as TinyLFU's doorkeeper): copying every missed
//! value in, only to evict it unread, cost a uniform 16 KiB read workload 15% of its CPU,
//! while a hot record comes back soon and is in from its second read.
//!
//! Invariants: an entry is inserted only after its record passed every check of
//! `VlogReader::read_value` (checksum, length, kind, key). A record's bytes never change
//! while any pointer to it can be read: segments are append-only, segment numbers are never
//! reused, a failed group's records are cut off before any pointer to them is published,
//! and GC deletes or punches a record only once no reader can reach it. So a hit needs no
//! invalidation; the caller still checks the pointer against its live range and the key
//! against the entry's, exactly as for a read from the file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::ValuePointer;

/// Bytes charged per entry on top of key and value (the entry, its `Arc`, the map slot).
const ENTRY_OVERHEAD: u64 = 80;

/// A cached record: its key (checked on every hit) followed by its value, in one
/// allocation. A hit on a record not read lately misses the CPU cache once per allocation
/// it touches: with key and value in two, that was two misses (and two reference-count
/// updates) per hit instead of one.
#[derive(Debug, Clone)]
pub struct CachedValue {
    key_then_value: Arc<[u8]>,
    key_len: u32,
}

impl CachedValue {
    fn new(key: &[u8], key_len: u32, value: &[u8]) -> CachedValue {
        CachedValue {
            // Two bulk copies and an intermediate buffer: collecting the chained bytes into
            // the `Arc` copies them one at a time, which profiled at 8% of a server's CPU
            // serving 16 KiB GETs (2026-11-30).
            key_then_value: Arc::from([key, value].concat()),
            key_len,
        }
    }

    fn key(&self) -> &[u8] {
        &self.key_then_value[..self.key_len as usize]
    }

    /// The record's value.
    pub fn value(&self) -> &[u8] {
        &self.key_then_value[self.key_len as usize..]
    }
}

#[derive(Debug, Clone, Copy)]
struct ByBytes;

impl Weighter<(u64, u64, u32), CachedValue> for ByBytes {
    fn weight(&self, _: &(u64, u64, u32), entry: &CachedValue) -> u64 {
        entry.key_then_value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// Cache of verified values, shared by every reader of the log.
#[derive(Debug)]
pub struct ValueCache {
    map: Cache<(u64, u64, u32), CachedValue, ByBytes>,
    /// Values larger than this are not cached (one would evict many small hot ones).
    max_value_len: usize,
    /// Fingerprints of the addresses missed lately, one per slot (0: none): the doorkeeper.
    recent_misses: Box<[AtomicU64]>,
}

impl ValueCache {
    /// A cache holding about `capacity_bytes` of keys and values.
    pub fn new(capacity_bytes: usize) -> ValueCache {
        let capacity = capacity_bytes as u64;
        // The estimate of items only sizes the shards' tables; 1 KiB values are typical.
        let estimated_items = (capacity / 1024).max(16) as usize;
        // One slot per 4 KiB of capacity: a record read again within about that many
        // other misses gets in; a uniform sweep over far more records than fit mostly not.
        let slots = (capacity_bytes / 4096).clamp(64, 1 << 20).next_power_of_two();
        ValueCache {
            map: Cache::with_weighter(estimated_items, capacity, ByBytes),
            max_value_len: (capacity_bytes / 64).max(1),
            recent_misses: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn address(ptr: &ValuePointer) -> (u64, u64, u32) {
        (ptr.segment, ptr.offset, ptr.len)
    }

    /// The value of the record at `ptr`, if cached and it belongs to `key`. A cached record
    /// of another key is a damaged pointer: the caller reads the file and reports it.
    pub fn get(&self, ptr: &ValuePointer, key: &[u8]) -> Option<CachedValue> {
        let entry = self.map.get(&Self::address(ptr))?;
        (entry.key() == key).then_some(entry)
    }

    /// Offers the verified value of the record at `ptr`, just read from the log: it is
    /// kept if this is the record's second miss lately (and it is not too large).
    pub fn offer(&self, ptr: &ValuePointer, key: &[u8], value: &[u8]) {
        if value.len() > self.max_value_len || !self.missed_before(ptr) {
            return;
        }
        // A record's key fits a `u32` (`MAX_KEY_LEN`); anything else is not cached.
        let Ok(key_len) = u32::try_from(key.len()) else {
            return;
        };
        self.map
            .insert(Self::address(ptr), CachedValue::new(key, key_len, value));
    }

    /// Whether `ptr`'s record was missed lately; remembers this miss otherwise. A slot holds
    /// one address, so a colliding address can push it out (the record then waits for its
    /// next two misses) or be taken for it (one extra admission): either only tunes.
    fn missed_before(&self, ptr: &ValuePointer) -> bool {
        let fingerprint = fingerprint(ptr);
        let slot = &self.recent_misses[(fingerprint >> 32) as usize & (self.recent_misses.len() - 1)];
        if slot.load(Ordering::Relaxed) == fingerprint {
            slot.store(0, Ordering::Relaxed);
            true
        } else {
            slot.store(fingerprint, Ordering::Relaxed);
            false
        }
    }

    /// Bytes held (keys, values and per-entry overhead).
    pub fn weight(&self) -> u64 {
        self.map.weight()
    }
}

/// A well-mixed, never-zero hash of a record address (murmur3's 64-bit finalizer).
fn fingerprint(ptr: &ValuePointer) -> u64 {
    let mut x = ptr.segment.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ ptr.offset
        ^ (u64::from(ptr.len) << 40);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(segment: u64, offset: u64, len: u32) -> ValuePointer {
        ValuePointer {
            segment,
            offset,
            len,
        }
    }

    #[test]
    fn a_record_gets_in_on_its_second_miss() {
        let cache = ValueCache::new(1 << 20);
        cache.offer(&ptr(3, 100, 40), b"k", b"value");
        assert!(cache.get(&ptr(3, 100, 40), b"k").is_none(), "in on its first miss");
        cache.offer(&ptr(3, 100, 40), b"k", b"value");
        assert_eq!(cache.get(&ptr(3, 100, 40), b"k").as_ref().map(CachedValue::value), Some(&b"value"[..]));
        // A sweep of many records, each missed once, adds none of them.
        for i in 0..10_000u64 {
            cache.offer(&ptr(4, 32 + i * 600, 600), &i.to_be_bytes(), &[1u8; 500]);
        }
        assert!(cache.get(&ptr(4, 32, 600), &0u64.to_be_bytes()).is_none());
        assert_eq!(cache.map.len(), 1, "only the record missed twice");
    }

    #[test]
    fn a_hit_needs_the_same_address_and_the_same_key() {
        let cache = ValueCache::new(1 << 20);
        cache.offer(&ptr(3, 100, 40), b"k", b"value");
        cache.offer(&ptr(3, 100, 40), b"k", b"value");
        assert_eq!(cache.get(&ptr(3, 100, 40), b"k").as_ref().map(CachedValue::value), Some(&b"value"[..]));
        assert!(cache.get(&ptr(3, 100, 40), b"other").is_none());
        assert!(cache.get(&ptr(3, 100, 41), b"k").is_none());
        assert!(cache.get(&ptr(4, 100, 40), b"k").is_none());
    }

    #[test]
    fn the_cache_stays_within_its_capacity_and_skips_huge_values() {
        let cache = ValueCache::new(64 << 10);
        for _ in 0..2 {
            cache.offer(&ptr(1, 32, 10_000), b"huge", &[7u8; 2000]);
        }
        assert!(cache.get(&ptr(1, 32, 10_000), b"huge").is_none());
        for i in 0..10_000u64 {
            for _ in 0..2 {
                cache.offer(&ptr(1, 32 + i * 600, 600), &i.to_be_bytes(), &[1u8; 500]);
            }
        }
        assert!(cache.weight() <= 64 << 10, "weight {}", cache.weight());
        assert!(cache.weight() > 0);
    }
}
