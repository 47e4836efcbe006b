//! The memtable: recent writes, kept in arrival order with a hash index, sorted only when
//! someone iterates.
//!
//! Owns: the entries written since the last switch, and an approximate byte count used to
//! decide when to switch. Invariants: an entry, once inserted, is never changed or removed
//! (an immutable memtable is just one that is no longer inserted into); every entry's
//! internal key is unique because sequence numbers are; entries `[0, published)` are
//! complete and reachable from the index. Thread-safety: `add` may be called concurrently
//! with readers and iterators; the write path serializes `add` calls anyway.
//!
//! Why not a sorted structure: a memtable of keys and pointers holds about a million
//! entries at 64 MiB, and an ordered insert into it searches a deep, cache-missing tree
//! (a B-tree insert was 44% of the put path's cycles on the writer thread, a skiplist's
//! more before it). WipDB (`shared/papers/wipdb.txt`) keeps its memtable unsorted and sorts
//! once when it writes it out; we do the same:
//! - `entries` is an append-only vector (element addresses never move, reads take no lock);
//!   each entry links to the previous version of its user key;
//! - `index` maps a user key's hash to its newest entry (a put is one hash probe; a point
//!   read a probe and a walk down the version chain);
//! - an iterator asks [`sorted::SortedRuns`] for the entries in internal-key order: sorted
//!   once per new stretch of entries, merged into two cached runs (see there). A flush sorts
//!   the whole table once, on the background thread, instead of the writer paying for the
//!   order on every put.
//!
//! It also counts, per value-log segment, the log bytes of records its entries do not point
//! to (inline values and tombstones): those records are garbage once the memtable is flushed
//! and the replay head passes them. Segments are opaque numbers here. And it counts the log
//! bytes of the relocations inserted into it and of the old copies they replace, so GC can
//! tell the garbage writes make from the garbage relocations make (`gc::pace`).
//!
//! Entry values are what the LSM stores: the value itself (`ValueKind::Value`), an encoded
//! value-log pointer (`ValueKind::ValuePointer`), or nothing (`ValueKind::Deletion`).

mod iter;
mod sorted;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;

pub use iter::MemTableIterator;

use crate::key::{parse_internal_key, sequence, user_key, InternalKey, SequenceNumber, ValueKind};

/// Bytes charged per entry on top of key and value: the entry's slot, its index slot.
const ENTRY_OVERHEAD: usize = 64;

/// A stored value: an encoded pointer or a small inline value fits without an allocation.
pub(crate) type StoredValue = SmallVec<[u8; 24]>;

/// Keys [`MemTable::touch`] probes per hold of the index lock.
const TOUCH_CHUNK: usize = 32;

/// No older version (the end of a version chain).
const NO_ENTRY: u32 = u32::MAX;

/// One write: its internal key, its stored value, and the previous version of its key.
#[derive(Debug)]
struct Entry {
    key: InternalKey,
    value: StoredValue,
    /// Index of the entry this one shadows (same user key, lower sequence), or `NO_ENTRY`.
    older: u32,
}

impl Entry {
    fn user_key(&self) -> &[u8] {
        user_key(self.key.as_bytes())
    }
}

/// An index slot: the user key's 32-bit hash tag in the high half, the index of its newest
/// entry in the low half. Keeping the tag in the slot lets the table grow and skip most
/// mismatches without touching the entries (each of which may be a cache miss).
type Slot = u64;

fn slot(tag: u32, index: u32) -> Slot {
    (u64::from(tag) << 32) | u64::from(index)
}

fn slot_tag(slot: Slot) -> u32 {
    (slot >> 32) as u32
}

fn slot_index(slot: Slot) -> u32 {
    slot as u32
}

/// The table's hash of a tag: the tag in both halves, so that both the bucket (low bits)
/// and hashbrown's control byte (top 7 bits) come from it.
fn tag_hash(tag: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(tag)
}

/// An in-memory buffer of writes, in arrival order, with a hash index and sorted views.
#[derive(Debug)]
pub struct MemTable {
    entries: boxcar::Vec<Entry>,
    /// Newest entry per user key. Held for one probe (reads) or one insert (writes).
    index: RwLock<HashTable<Slot>>,
    /// Randomly keyed per memtable, so that keys cannot be chosen to collide (the Redis
    /// server takes keys from the network).
    hasher: ahash::RandomState,
    /// Entries `[0, published)` are complete and indexed.
    published: AtomicUsize,
    /// Set if an entry ever arrived with a lower sequence than its key's newest one; point
    /// reads then walk whole version chains instead of stopping at the first visible entry.
    out_of_order: AtomicBool,
    sorted: sorted::SortedRuns,
    approximate_bytes: AtomicUsize,
    unreferenced_log_bytes: Mutex<BTreeMap<u64, u64>>,
    /// Log bytes of the relocations (GC's, clustering's) inserted here, and of the old
    /// copies they replace: what the flush's dead count owes to relocation, not to writes.
    relocated: Mutex<Relocated>,
}

/// See [`MemTable::add_relocated`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Relocated {
    /// Log bytes of the new copies.
    pub log_bytes: u64,
    /// Log bytes of the old copies they replace (dead once this memtable is flushed).
    pub old_bytes: u64,
}

impl Default for MemTable {
    fn default() -> MemTable {
        MemTable::new()
    }
}

impl MemTable {
    pub fn new() -> MemTable {
        MemTable {
            entries: boxcar::Vec::new(),
            index: RwLock::new(HashTable::new()),
            hasher: ahash::RandomState::new(),
            published: AtomicUsize::new(0),
            out_of_order: AtomicBool::new(false),
            sorted: sorted::SortedRuns::default(),
            approximate_bytes: AtomicUsize::new(0),
            unreferenced_log_bytes: Mutex::new(BTreeMap::new()),
            relocated: Mutex::new(Relocated::default()),
        }
    }

    fn tag(&self, user_key: &[u8]) -> u32 {
        (self.hasher.hash_one(user_key) >> 32) as u32
    }

    /// The entry at `index`; `index` comes from the index, a chain or a sorted run, all of
    /// which hold only published entries.
    fn entry(&self, index: u32) -> &Entry {
        &self.entries[index as usize]
    }

    /// Inserts one entry.
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let key = InternalKey::new(user_key, seq, kind as u8);
        let charge = key.as_bytes().len() + value.len() + ENTRY_OVERHEAD;
        let value = StoredValue::from_slice(value);
        let tag = self.tag(user_key);
        let mut index = self.index.write();
        let newest = index.find_mut(tag_hash(tag), |&s| {
            slot_tag(s) == tag && self.entry(slot_index(s)).user_key() == user_key
        });
        let older = newest.as_ref().map_or(NO_ENTRY, |s| slot_index(**s));
        if older != NO_ENTRY && sequence(self.entry(older).key.as_bytes()) > seq {
            self.out_of_order.store(true, Ordering::Relaxed);
        }
        let at = self.entries.push(Entry { key, value, older });
        // Each entry is charged at least 72 bytes and `Options::validate` caps a memtable at
        // 64 GiB (one write group more at most): fewer than 2^30 entries, far from the
        // `NO_ENTRY` marker at 2^32 - 1.
        let at32 = (u32::try_from(at).ok())
            .filter(|&at| at != NO_ENTRY)
            .expect("a memtable holds fewer than 2^32 - 1 entries");
        match newest {
            Some(newest) => *newest = slot(tag, at32),
            None => {
                index.insert_unique(tag_hash(tag), slot(tag, at32), |&s| {
                    tag_hash(slot_tag(s))
                });
            }
        }
        // Under the index lock: `published` only grows, and covers exactly what is indexed.
        self.published.store(at + 1, Ordering::Release);
        drop(index);
        self.approximate_bytes.fetch_add(charge, Ordering::Relaxed);
    }

    /// The newest entry for `user_key` with sequence `<= seq`: its kind and stored value (a
    /// pointer or small value is returned without a heap allocation).
    pub fn get(&self, user_key: &[u8], seq: SequenceNumber) -> Option<(ValueKind, StoredValue)> {
        let tag = self.tag(user_key);
        let newest = {
            let index = self.index.read();
            let found = index.find(tag_hash(tag), |&s| {
                slot_tag(s) == tag && self.entry(slot_index(s)).user_key() == user_key
            });
            slot_index(*found?)
        };
        let out_of_order = self.out_of_order.load(Ordering::Relaxed);
        let mut best: Option<(SequenceNumber, &Entry)> = None;
        let mut at = newest;
        while at != NO_ENTRY {
            let entry = self.entry(at);
            let entry_seq = sequence(entry.key.as_bytes());
            if entry_seq <= seq && best.is_none_or(|(s, _)| entry_seq > s) {
                best = Some((entry_seq, entry));
                if !out_of_order {
                    break;
                }
            }
            at = entry.older;
        }
        let (_, entry) = best?;
        let parsed = parse_internal_key(entry.key.as_bytes())?;
        Some((parsed.kind, entry.value.clone()))
    }

    /// Brings the index slots and newest entries of `user_keys` into the CPU caches and
    /// returns nothing. Each lookup costs a cache miss on its slot and another on its entry,
    /// the second waiting for the first; touching a batch's keys first lets the CPU wait for
    /// all of their misses together, so the lookups that follow find them cached. A tag
    /// match stands in for the key comparison (a collision only touches a wrong entry).
    /// The index lock is taken per [`TOUCH_CHUNK`] keys, so a long batch never holds off an
    /// insert for longer than a few lookups would.
    pub fn touch<K: AsRef<[u8]>>(&self, user_keys: &[K]) {
        for chunk in user_keys.chunks(TOUCH_CHUNK) {
            let index = self.index.read();
            for key in chunk {
                let tag = self.tag(key.as_ref());
                if let Some(&s) = index.find(tag_hash(tag), |&s| slot_tag(s) == tag) {
                    std::hint::black_box(self.entry(slot_index(s)).older);
                }
            }
        }
    }

    /// Counts `bytes` of log segment `segment` that no entry here points to.
    pub fn add_unreferenced_log_bytes(&self, segment: u64, bytes: u64) {
        *self
            .unreferenced_log_bytes
            .lock()
            .entry(segment)
            .or_insert(0) += bytes;
    }

    /// `(segment, bytes)` counted by [`MemTable::add_unreferenced_log_bytes`].
    pub fn unreferenced_log_bytes(&self) -> Vec<(u64, u64)> {
        let counts = self.unreferenced_log_bytes.lock();
        counts.iter().map(|(&s, &b)| (s, b)).collect()
    }

    /// Counts relocations inserted here: `log_bytes` of new copies replacing `old_bytes`.
    pub fn add_relocated(&self, log_bytes: u64, old_bytes: u64) {
        let mut relocated = self.relocated.lock();
        relocated.log_bytes += log_bytes;
        relocated.old_bytes += old_bytes;
    }

    /// What [`MemTable::add_relocated`] counted.
    pub fn relocated(&self) -> Relocated {
        *self.relocated.lock()
    }

    /// Approximate memory used by the entries.
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.published.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MemTable::get` with the stored value as a `Vec`, for comparisons.
    fn get(m: &MemTable, key: &[u8], seq: SequenceNumber) -> Option<(ValueKind, Vec<u8>)> {
        m.get(key, seq).map(|(kind, value)| (kind, value.into_vec()))
    }

    #[test]
    fn get_returns_newest_visible_version() {
        let m = MemTable::new();
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(5, ValueKind::Value, b"k", b"v5");
        m.add(7, ValueKind::Deletion, b"k", b"");
        m.add(3, ValueKind::Value, b"k2", b"other");
        assert_eq!(get(&m, b"k", 0), None);
        assert_eq!(get(&m, b"k", 1), Some((ValueKind::Value, b"v1".to_vec())));
        assert_eq!(get(&m, b"k", 6), Some((ValueKind::Value, b"v5".to_vec())));
        assert_eq!(get(&m, b"k", 7), Some((ValueKind::Deletion, Vec::new())));
        assert_eq!(get(&m, b"k2", 2), None);
        assert_eq!(get(&m, b"k2", 3), Some((ValueKind::Value, b"other".to_vec())));
        assert_eq!(get(&m, b"j", 100), None);
        assert_eq!(get(&m, b"", 100), None);
        assert_eq!(m.len(), 4);
        assert!(m.approximate_bytes() >= 4 * ENTRY_OVERHEAD);
    }

    #[test]
    fn empty_key_is_a_valid_key() {
        let m = MemTable::new();
        m.add(2, ValueKind::Value, b"", b"empty");
        assert_eq!(get(&m, b"", 2), Some((ValueKind::Value, b"empty".to_vec())));
        assert_eq!(get(&m, b"", 1), None);
    }

    /// Versions that arrive out of sequence order (the write path never does this, but the
    /// memtable does not rely on it) are still read by sequence, not by arrival.
    #[test]
    fn versions_added_out_of_order_are_read_by_sequence() {
        let m = MemTable::new();
        m.add(10, ValueKind::Value, b"k", b"v10");
        m.add(4, ValueKind::Value, b"k", b"v4");
        m.add(8, ValueKind::Value, b"k", b"v8");
        assert_eq!(get(&m, b"k", 3), None);
        assert_eq!(get(&m, b"k", 5), Some((ValueKind::Value, b"v4".to_vec())));
        assert_eq!(get(&m, b"k", 9), Some((ValueKind::Value, b"v8".to_vec())));
        assert_eq!(get(&m, b"k", 100), Some((ValueKind::Value, b"v10".to_vec())));
    }

    /// Many keys (the index grows and rehashes many times) and many versions of one key:
    /// every key reads back its newest version, and every version of the hot key is
    /// reachable at its own sequence.
    #[test]
    fn many_keys_and_long_version_chains_read_back() {
        let m = MemTable::new();
        let mut seq = 0;
        let mut last_hot = 0;
        for i in 0..20_000u32 {
            seq += 1;
            m.add(seq, ValueKind::Value, &i.to_be_bytes(), &seq.to_le_bytes());
            if i % 4 == 0 {
                seq += 1;
                m.add(seq, ValueKind::Value, b"hot", &seq.to_le_bytes());
                last_hot = seq;
            }
        }
        for i in 0..20_000u32 {
            let (kind, value) = get(&m, &i.to_be_bytes(), seq).expect("present");
            assert_eq!(kind, ValueKind::Value);
            assert_eq!(get(&m, &i.to_be_bytes(), 0), None);
            let written = u64::from_le_bytes(value.try_into().expect("8 bytes"));
            assert!(written <= seq);
        }
        let (_, newest) = get(&m, b"hot", seq).expect("hot key");
        assert_eq!(newest, last_hot.to_le_bytes());
        // Each hot version is visible at its own sequence and at the one just after it.
        for probe in [2u64, 3, 7, 1001, 12_345] {
            let (_, value) = get(&m, b"hot", probe).expect("hot version");
            let visible = u64::from_le_bytes(value.try_into().expect("8 bytes"));
            assert!(visible <= probe && probe - visible <= 5, "{probe} saw {visible}");
        }
        assert_eq!(m.len(), 25_000);
    }
}
