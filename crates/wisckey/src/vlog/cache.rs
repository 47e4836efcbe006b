//! `ValueCache`: verified values of recently read value-log records, by record address.
//!
//! Owns: a bounded, sharded map from a record's place in the log (segment, offset, length)
//! to its key and value, as read and verified by `VlogReader`. Eviction is the cache
//! crate's (S3-FIFO, weighed by bytes), so a scan's one-off values do not push out the hot
//! ones point reads keep asking for.
//!
//! Invariants: an entry is inserted only after its record passed every check of
//! `VlogReader::read_value` (checksum, length, kind, key). A record's bytes never change
//! while any pointer to it can be read: segments are append-only, segment numbers are never
//! reused, a failed group's records are cut off before any pointer to them is published,
//! and GC deletes or punches a record only once no reader can reach it. So a hit needs no
//! invalidation; the caller still checks the pointer against its live range and the key
//! against the entry's, exactly as for a read from the file.

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::ValuePointer;

/// Bytes charged per entry on top of key and value (the entry, its `Arc`s, the map slot).
const ENTRY_OVERHEAD: u64 = 96;

/// A cached record: its key (checked on every hit) and value.
#[derive(Debug, Clone)]
struct CachedValue {
    key: Arc<[u8]>,
    value: Arc<[u8]>,
}

#[derive(Debug, Clone, Copy)]
struct ByBytes;

impl Weighter<(u64, u64, u32), CachedValue> for ByBytes {
    fn weight(&self, _: &(u64, u64, u32), entry: &CachedValue) -> u64 {
        entry.key.len() as u64 + entry.value.len() as u64 + ENTRY_OVERHEAD
    }
}

/// Cache of verified values, shared by every reader of the log.
#[derive(Debug)]
pub struct ValueCache {
    map: Cache<(u64, u64, u32), CachedValue, ByBytes>,
    /// Values larger than this are not cached (one would evict many small hot ones).
    max_value_len: usize,
}

impl ValueCache {
    /// A cache holding about `capacity_bytes` of keys and values.
    pub fn new(capacity_bytes: usize) -> ValueCache {
        let capacity = capacity_bytes as u64;
        // The estimate of items only sizes the shards' tables; 1 KiB values are typical.
        let estimated_items = (capacity / 1024).max(16) as usize;
        ValueCache {
            map: Cache::with_weighter(estimated_items, capacity, ByBytes),
            max_value_len: (capacity_bytes / 64).max(1),
        }
    }

    fn address(ptr: &ValuePointer) -> (u64, u64, u32) {
        (ptr.segment, ptr.offset, ptr.len)
    }

    /// The value of the record at `ptr`, if cached and it belongs to `key`. A cached record
    /// of another key is a damaged pointer: the caller reads the file and reports it.
    pub fn get(&self, ptr: &ValuePointer, key: &[u8]) -> Option<Arc<[u8]>> {
        let entry = self.map.get(&Self::address(ptr))?;
        (*entry.key == *key).then_some(entry.value)
    }

    /// Remembers the verified value of the record at `ptr`.
    pub fn insert(&self, ptr: &ValuePointer, key: &[u8], value: &[u8]) {
        if value.len() > self.max_value_len {
            return;
        }
        self.map.insert(
            Self::address(ptr),
            CachedValue {
                key: Arc::from(key),
                value: Arc::from(value),
            },
        );
    }

    /// Bytes held (keys, values and per-entry overhead).
    pub fn weight(&self) -> u64 {
        self.map.weight()
    }
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
    fn a_hit_needs_the_same_address_and_the_same_key() {
        let cache = ValueCache::new(1 << 20);
        cache.insert(&ptr(3, 100, 40), b"k", b"value");
        assert_eq!(cache.get(&ptr(3, 100, 40), b"k").as_deref(), Some(&b"value"[..]));
        assert!(cache.get(&ptr(3, 100, 40), b"other").is_none());
        assert!(cache.get(&ptr(3, 100, 41), b"k").is_none());
        assert!(cache.get(&ptr(4, 100, 40), b"k").is_none());
    }

    #[test]
    fn the_cache_stays_within_its_capacity_and_skips_huge_values() {
        let cache = ValueCache::new(64 << 10);
        cache.insert(&ptr(1, 32, 10_000), b"huge", &[7u8; 2000]);
        assert!(cache.get(&ptr(1, 32, 10_000), b"huge").is_none());
        for i in 0..10_000u64 {
            cache.insert(&ptr(1, 32 + i * 600, 600), &i.to_be_bytes(), &[1u8; 500]);
        }
        assert!(cache.weight() <= 64 << 10, "weight {}", cache.weight());
        assert!(cache.weight() > 0);
    }
}
