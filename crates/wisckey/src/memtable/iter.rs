//! Iterator over a memtable. Holds an `Arc<MemTable>` so it is `'static`; the current
//! entry is copied out because the map's entries live behind its lock, which is taken for
//! one step at a time. Each step re-seeks from the current key (O(log n)), which keeps the
//! iterator valid while writers keep inserting.

use std::ops::Bound;
use std::sync::Arc;

use super::{MemTable, StoredValue};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::InternalKey;

/// Cursor over a memtable's entries in internal-key order.
#[derive(Debug)]
pub struct MemTableIterator {
    table: Arc<MemTable>,
    current: Option<(InternalKey, StoredValue)>,
}

impl MemTableIterator {
    pub fn new(table: Arc<MemTable>) -> MemTableIterator {
        MemTableIterator {
            table,
            current: None,
        }
    }

    fn set(&mut self, entry: Option<(&InternalKey, &StoredValue)>) {
        self.current = entry.map(|(k, v)| (k.clone(), v.clone()));
    }

    /// The first entry after (`forward`) or before the current one.
    fn step(&mut self, forward: bool) {
        let Some((key, _)) = self.current.take() else {
            return;
        };
        let table = Arc::clone(&self.table);
        let map = table.map.read();
        let bounds = (Bound::Excluded(&key), Bound::Unbounded);
        let found = if forward {
            map.range::<InternalKey, _>(bounds).next()
        } else {
            map.range::<InternalKey, _>((Bound::Unbounded, Bound::Excluded(&key)))
                .next_back()
        };
        self.set(found);
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
}
