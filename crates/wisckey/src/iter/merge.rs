//! Merges several sorted internal iterators into one sorted stream.
//!
//! Children are the memtable, immutable memtables, L0 tables and one iterator per deeper
//! level — a handful, so the current child is found by a linear scan rather than a heap.
//! Equal internal keys cannot occur across children (sequence numbers are unique), so the
//! order is total. Changing direction re-positions every other child around the current
//! key, as LevelDB does. If any child reports an error the merged iterator becomes invalid
//! at once and reports that error, so a scan never silently skips a failed source.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::compare_internal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A sorted union of child iterators.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
    error: Option<Error>,
}

impl std::fmt::Debug for MergingIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIterator")
            .field("children", &self.children.len())
            .field("current", &self.current)
            .finish()
    }
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
            error: None,
        }
    }

    /// Latches the first child error; returns true if there is one.
    fn check_errors(&mut self) -> bool {
        if self.error.is_none() {
            // An iterator with an error is never valid, so only invalid children need asking.
            self.error = self
                .children
                .iter()
                .filter(|c| !c.valid())
                .find_map(|c| c.status().err());
        }
        if self.error.is_some() {
            self.current = None;
            return true;
        }
        false
    }

    fn find(&mut self, want: Ordering) {
        if self.check_errors() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b) if compare_internal(child.key(), self.children[b].key()) != want => Some(b),
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn find_smallest(&mut self) {
        self.find(Ordering::Less);
    }

    fn find_largest(&mut self) {
        self.find(Ordering::Greater);
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Forward {
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key);
                if child.valid() && compare_internal(child.key(), &key) == Ordering::Equal {
                    child.next();
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        self.find_smallest();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Reverse {
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key);
                if child.valid() {
                    child.prev();
                } else {
                    child.seek_to_last();
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        self.find_largest();
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |i| self.children[i].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |i| self.children[i].value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::key::{make_internal_key, user_key, ValueKind};

    /// A sorted in-memory iterator for tests; can be told to fail on its n-th move.
    #[derive(Debug)]
    pub(crate) struct VecIterator {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        pos: Option<usize>,
        fail_after_moves: Option<usize>,
        error: Option<Error>,
    }

    impl VecIterator {
        pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIterator {
            entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
            VecIterator {
                entries,
                pos: None,
                fail_after_moves: None,
                error: None,
            }
        }

        fn moved(&mut self) {
            if let Some(n) = self.fail_after_moves.as_mut() {
                if *n == 0 {
                    self.error = Some(Error::corruption("vec", 0, "injected"));
                    self.pos = None;
                } else {
                    *n -= 1;
                }
            }
        }
    }

    impl InternalIterator for VecIterator {
        fn valid(&self) -> bool {
            self.pos.is_some()
        }
        fn seek_to_first(&mut self) {
            self.pos = (!self.entries.is_empty()).then_some(0);
            self.moved();
        }
        fn seek_to_last(&mut self) {
            self.pos = self.entries.len().checked_sub(1);
            self.moved();
        }
        fn seek(&mut self, target: &[u8]) {
            let i = self
                .entries
                .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
            self.pos = (i < self.entries.len()).then_some(i);
            self.moved();
        }
        fn next(&mut self) {
            self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
            self.moved();
        }
        fn prev(&mut self) {
            self.pos = self.pos.and_then(|p| p.checked_sub(1));
            self.moved();
        }
        fn key(&self) -> &[u8] {
            self.pos.map_or(&[], |p| &self.entries[p].0)
        }
        fn value(&self) -> &[u8] {
            self.pos.map_or(&[], |p| &self.entries[p].1)
        }
        fn status(&self) -> Result<()> {
            self.error.clone().map_or(Ok(()), Err)
        }
    }

    fn entry(k: &str, seq: u64) -> (Vec<u8>, Vec<u8>) {
        (
            make_internal_key(k.as_bytes(), seq, ValueKind::Value),
            format!("{k}{seq}").into_bytes(),
        )
    }

    fn merged() -> MergingIterator {
        MergingIterator::new(vec![
            Box::new(VecIterator::new(vec![entry("a", 1), entry("c", 3)])),
            Box::new(VecIterator::new(vec![entry("b", 2), entry("c", 5)])),
            Box::new(VecIterator::new(vec![])),
            Box::new(VecIterator::new(vec![entry("d", 4)])),
        ])
    }

    #[test]
    fn forward_backward_and_direction_changes() {
        let mut it = merged();
        it.seek_to_first();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(it.value().to_vec());
            it.next();
        }
        assert_eq!(fwd, [&b"a1"[..], b"b2", b"c5", b"c3", b"d4"]);
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.value().to_vec());
            it.prev();
        }
        fwd.reverse();
        assert_eq!(back, fwd);

        it.seek(&make_internal_key(b"c", 5, ValueKind::Value));
        assert_eq!(it.value(), b"c5");
        it.prev();
        assert_eq!(it.value(), b"b2");
        it.next();
        assert_eq!(it.value(), b"c5");
        it.next();
        assert_eq!(it.value(), b"c3");
        assert_eq!(user_key(it.key()), b"c");
        it.status().expect("no error");
    }

    #[test]
    fn child_error_stops_iteration_and_is_reported() {
        let mut failing = VecIterator::new(vec![entry("b", 2), entry("e", 9)]);
        failing.fail_after_moves = Some(1);
        let mut it = MergingIterator::new(vec![
            Box::new(VecIterator::new(vec![entry("a", 1), entry("c", 3)])),
            Box::new(failing),
        ]);
        it.seek_to_first();
        assert!(it.valid());
        it.next();
        it.next();
        assert!(!it.valid());
        assert!(it.status().is_err());
    }
}
