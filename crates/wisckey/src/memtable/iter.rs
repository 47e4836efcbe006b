//! Iterator over a memtable. Holds an `Arc<MemTable>` so it is `'static`; entries are
//! copied out because the map's entries live behind its lock. Moving forward, one lock hold
//! and one O(log n) search copy the next `FORWARD_BATCH` entries (a flush or a scan walks
//! the map instead of searching it once per entry); every other move re-seeks from the
//! current key, which keeps the iterator valid while writers keep inserting.
//!
//! Invariant: an entry inserted after a batch was copied, between two of its entries, is not
//! shown. Every reader is at a sequence number captured before it started (a `DbIterator`'s
//! read sequence; a flush reads an immutable memtable), and a write is inserted before its
//! sequence becomes visible, so such an entry is always newer than what the reader may see.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use super::{MemTable, StoredValue};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::InternalKey;

/// Entries copied per forward refill.
const FORWARD_BATCH: usize = 32;

/// Cursor over a memtable's entries in internal-key order.
#[derive(Debug)]
pub struct MemTableIterator {
    table: Arc<MemTable>,
    current: Option<(InternalKey, StoredValue)>,
    /// The entries after `current`, copied by the last forward refill.
    ahead: VecDeque<(InternalKey, StoredValue)>,
}

impl MemTableIterator {
    pub fn new(table: Arc<MemTable>) -> MemTableIterator {
        MemTableIterator {
            table,
            current: None,
            ahead: VecDeque::new(),
        }
    }

    fn set(&mut self, entry: Option<(&InternalKey, &StoredValue)>) {
        self.ahead.clear();
        self.current = entry.map(|(k, v)| (k.clone(), v.clone()));
    }

    /// The first entry after (`forward`) or before the current one.
    fn step(&mut self, forward: bool) {
        if forward {
            if let Some(entry) = self.ahead.pop_front() {
                self.current = Some(entry);
                return;
            }
        }
        let Some((key, _)) = self.current.take() else {
            return;
        };
        let table = Arc::clone(&self.table);
        let map = table.map.read();
        if forward {
            let bounds = (Bound::Excluded(&key), Bound::Unbounded);
            self.ahead.extend(
                map.range::<InternalKey, _>(bounds)
                    .take(FORWARD_BATCH)
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            self.current = self.ahead.pop_front();
        } else {
            let found = map
                .range::<InternalKey, _>((Bound::Unbounded, Bound::Excluded(&key)))
                .next_back();
            self.set(found);
        }
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        let table = Arc::clone(&self.table);
        let map = table.map.read();
        self.set(map.iter().next());
    }

    fn seek_to_last(&mut self) {
        let table = Arc::clone(&self.table);
        let map = table.map.read();
        self.set(map.iter().next_back());
    }

    fn seek(&mut self, target: &[u8]) {
        let table = Arc::clone(&self.table);
        let probe = InternalKey::from_encoded(target);
        let map = table.map.read();
        self.set(map.range(&probe..).next());
    }

    fn next(&mut self) {
        self.step(true);
    }

    fn prev(&mut self) {
        self.step(false);
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k.as_bytes())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{seek_key, user_key, ValueKind};

    #[test]
    fn iterates_both_ways_and_seeks() {
        let m = Arc::new(MemTable::new());
        m.add(1, ValueKind::Value, b"b", b"1");
        m.add(2, ValueKind::Value, b"a", b"2");
        m.add(3, ValueKind::Value, b"b", b"3");
        let mut it = MemTableIterator::new(Arc::clone(&m));
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((user_key(it.key()).to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"b".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"1".to_vec())
            ]
        );
        it.seek_to_last();
        assert_eq!(it.value(), b"1");
        it.prev();
        assert_eq!(it.value(), b"3");
        it.seek(&seek_key(b"b", 2));
        assert_eq!(it.value(), b"1");
        it.seek(&seek_key(b"c", 9));
        assert!(!it.valid());
    }

    /// Forward steps are served from copied batches: across batch boundaries, mixed with
    /// `prev` and seeks, the iterator shows exactly the map's order.
    #[test]
    fn forward_batches_agree_with_the_map_across_direction_changes() {
        let m = Arc::new(MemTable::new());
        for i in 0..200u32 {
            m.add(u64::from(i) + 1, ValueKind::Value, format!("k{i:04}").as_bytes(), b"v");
        }
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| format!("k{i:04}").into_bytes()).collect();
        let mut it = MemTableIterator::new(Arc::clone(&m));
        it.seek_to_first();
        let mut at = 0usize;
        // Walk forward 70 (three batches), back 5, forward 100, then past the end.
        for (forward, steps) in [(true, 70), (false, 5), (true, 100), (true, 40)] {
            for _ in 0..steps {
                if forward {
                    it.next();
                    at += 1;
                } else {
                    it.prev();
                    at -= 1;
                }
                if at < keys.len() {
                    assert_eq!(user_key(it.key()), keys[at].as_slice(), "at {at}");
                } else {
                    assert!(!it.valid());
                }
            }
        }
        it.seek(&seek_key(b"k0150", 1000));
        assert_eq!(user_key(it.key()), b"k0150");
        it.next();
        assert_eq!(user_key(it.key()), b"k0151");
    }
}
