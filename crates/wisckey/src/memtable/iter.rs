//! Iterator over a memtable. Holds an `Arc<MemTable>` so it is `'static`; the current
//! entry is copied out because skiplist entries borrow the map. Each step re-seeks from the
//! current key (O(log n)), which keeps the iterator valid while writers keep inserting.

use std::ops::Bound;
use std::sync::Arc;

use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::InternalKey;

/// Cursor over a memtable's entries in internal-key order.
#[derive(Debug)]
pub struct MemTableIterator {
    table: Arc<MemTable>,
    current: Option<(InternalKey, Vec<u8>)>,
}

impl MemTableIterator {
    pub fn new(table: Arc<MemTable>) -> MemTableIterator {
        MemTableIterator {
            table,
            current: None,
        }
    }

    fn set(&mut self, entry: Option<crossbeam_skiplist::map::Entry<'_, InternalKey, Vec<u8>>>) {
        self.current = entry.map(|e| (e.key().clone(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        let table = Arc::clone(&self.table);
        self.set(table.map.front());
    }

    fn seek_to_last(&mut self) {
        let table = Arc::clone(&self.table);
        self.set(table.map.back());
    }

    fn seek(&mut self, target: &[u8]) {
        let table = Arc::clone(&self.table);
        let probe = InternalKey::from_encoded(target);
        self.set(table.map.lower_bound(Bound::Included(&probe)));
    }

    fn next(&mut self) {
        let table = Arc::clone(&self.table);
        let next = match &self.current {
            Some((key, _)) => table.map.lower_bound(Bound::Excluded(key)),
            None => None,
        };
        self.set(next);
    }

    fn prev(&mut self) {
        let table = Arc::clone(&self.table);
        let prev = match &self.current {
            Some((key, _)) => table.map.upper_bound(Bound::Excluded(key)),
            None => None,
        };
        self.set(prev);
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
}
