//! Merges several sorted internal iterators into one sorted stream.
//!
//! Children are the memtable, immutable memtables, L0 tables and one iterator per deeper
//! level — a handful, so the current child is found by a linear scan rather than a heap.
//! Equal internal keys cannot occur across children (sequence numbers are unique), so the
//! order is total. Changing direction re-positions every other child around the current
//! key, as LevelDB does. If any child reports an error the merged iterator becomes invalid
//! at once and reports that error, so a scan never silently skips a failed source.
//!
//! Which errors a positioning call (`seek`, `seek_to_first`, `seek_to_last`) forgets: only
//! one met by a plain step (`next`/`prev` in the current direction). A caller may step
//! ahead of what it has shown (`DbIterator`'s read-ahead) and drop such an error as not the
//! user's; the positioning call re-positions every child, so an error a source still has
//! is met again. An error met by a positioning call or a direction change is kept:
//! `DbIterator` follows a seek that left this iterator invalid with `seek_to_last` before it
//! looks at `status()`, so forgetting it there would lose it.

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
    /// `error` was met by a plain step; the next positioning call forgets it.
    error_met_stepping: bool,
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
            error_met_stepping: false,
        }
    }

    /// Start of a positioning call: see the module docs for which error it forgets.
    fn forget_step_error(&mut self) {
        if self.error_met_stepping {
            self.error = None;
            self.error_met_stepping = false;
        }
    }

    /// Latches the first child error (`stepping`: met by a plain step); returns true if
    /// there is one.
    fn check_errors(&mut self, stepping: bool) -> bool {
        if self.error.is_none() {
            // An iterator with an error is never valid, so only invalid children need asking.
            self.error = self
                .children
                .iter()
                .filter(|c| !c.valid())
                .find_map(|c| c.status().err());
            self.error_met_stepping = stepping && self.error.is_some();
        }
        if self.error.is_some() {
            self.current = None;
            return true;
        }
        false
    }

    fn find(&mut self, want: Ordering, stepping: bool) {
        if self.check_errors(stepping) {
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

    fn find_smallest(&mut self, stepping: bool) {
        self.find(Ordering::Less, stepping);
    }

    fn find_largest(&mut self, stepping: bool) {
        self.find(Ordering::Greater, stepping);
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.forget_step_error();
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.direction = Direction::Forward;
        self.find_smallest(false);
    }

    fn seek_to_last(&mut self) {
        self.forget_step_error();
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.direction = Direction::Reverse;
        self.find_largest(false);
    }

    fn seek(&mut self, target: &[u8]) {
        self.forget_step_error();
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.direction = Direction::Forward;
        self.find_smallest(false);
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        let stepping = self.direction == Direction::Forward;
        if !stepping {
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                // A failed seek leaves the child invalid with its error, which `find`
                // latches below.
                child.seek(&key);
                if child.valid() && compare_internal(child.key(), &key) == Ordering::Equal {
                    child.next();
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        self.find_smallest(stepping);
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        let stepping = self.direction == Direction::Reverse;
        if !stepping {
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key);
                if child.valid() {
                    child.prev();
                } else if child.status().is_ok() {
                    // Everything in the child is before `key`.
                    child.seek_to_last();
                }
                // Otherwise the seek failed: falling back to `seek_to_last` would clear the
                // error (a new positioning call) and put the child on its last entry, which
                // may be after `key`. It stays invalid with its error, which `find` latches.
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        self.find_largest(stepping);
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
    use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
    use std::sync::Arc;

    use super::*;
    use crate::key::{make_internal_key, user_key, ValueKind};
    use crate::version::testutil::{meta, MockTables};
    use crate::version::{LevelIterator, TableSource};

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

    /// Tables in memory (`MockTables`) whose next open can be made to fail, once.
    #[derive(Default)]
    struct FailOnce {
        tables: MockTables,
        fail_next: AtomicBool,
    }

    impl TableSource for FailOnce {
        fn get(&self, number: u64, size: u64, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
            self.tables.get(number, size, ikey)
        }
        fn iter(&self, number: u64, size: u64) -> Result<Box<dyn InternalIterator>> {
            if self.fail_next.swap(false, AtomicOrdering::SeqCst) {
                return Err(Error::io(
                    format!("open table {number}"),
                    std::io::Error::other("injected EIO"),
                ));
            }
            self.tables.iter(number, size)
        }
    }

    fn ikey(k: &str) -> Vec<u8> {
        make_internal_key(k.as_bytes(), 2, ValueKind::Value)
    }

    /// A memtable-like child holding `a` and `m`, and a level of two tables, `b c` and
    /// `x z`, opened lazily through `tables`.
    fn memtable_and_level() -> (MergingIterator, Arc<FailOnce>) {
        let tables = Arc::new(FailOnce::default());
        tables.tables.put(1, &[(b"b", 2, b"b"), (b"c", 2, b"c")]);
        tables.tables.put(2, &[(b"x", 2, b"x"), (b"z", 2, b"z")]);
        let files = vec![Arc::new(meta(1, b"b", b"c")), Arc::new(meta(2, b"x", b"z"))];
        let source: Arc<dyn TableSource> = Arc::clone(&tables) as Arc<dyn TableSource>;
        let mem = VecIterator::new(vec![(ikey("a"), b"a".to_vec()), (ikey("m"), b"m".to_vec())]);
        let it = MergingIterator::new(vec![
            Box::new(mem),
            Box::new(LevelIterator::new(source, files)),
        ]);
        (it, tables)
    }

    fn user_keys_forward(it: &mut MergingIterator) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(user_key(it.key()).to_vec());
            it.next();
        }
        out
    }

    #[test]
    fn a_failed_seek_when_turning_backward_is_reported_not_replaced_by_the_last_entry() {
        let (mut it, tables) = memtable_and_level();
        it.seek(&ikey("m"));
        assert_eq!(
            it.value(),
            b"m",
            "on the memtable's entry; the level is at x"
        );
        // Turning back re-seeks the level to `m`, which reopens table 2: that open fails.
        tables.fail_next.store(true, AtomicOrdering::SeqCst);
        it.prev();
        assert!(
            !it.valid(),
            "prev() went on to {:?} (after m) instead of failing",
            String::from_utf8_lossy(user_key(it.key()))
        );
        let err = it.status().expect_err("the failed open is reported");
        assert!(err.to_string().contains("injected EIO"), "{err}");
    }

    #[test]
    fn a_positioning_call_forgets_an_error_met_by_a_step() {
        type Reposition = fn(&mut MergingIterator);
        let calls: [(&str, Reposition); 3] = [
            ("seek_to_first", |it| it.seek_to_first()),
            ("seek", |it| it.seek(&ikey("a"))),
            ("seek_to_last", |it| {
                it.seek_to_last();
                assert_eq!(it.value(), b"z");
                it.seek_to_first();
            }),
        ];
        for (name, reposition) in calls {
            // A step forward from `c` opens table 2: that open fails.
            let (mut it, tables) = memtable_and_level();
            it.seek(&ikey("c"));
            assert_eq!(it.value(), b"c");
            tables.fail_next.store(true, AtomicOrdering::SeqCst);
            it.next();
            assert!(!it.valid() && it.status().is_err(), "{name}: step error");
            reposition(&mut it);
            it.status().expect(name);
            let want: Vec<Vec<u8>> = ["a", "b", "c", "m", "x", "z"].map(|k| k.into()).into();
            assert_eq!(user_keys_forward(&mut it), want, "{name}");
            it.status().expect(name);
        }
        // The same for a step backward from `x` into table 1.
        let (mut it, tables) = memtable_and_level();
        it.seek_to_last();
        it.prev();
        assert_eq!(it.value(), b"x");
        tables.fail_next.store(true, AtomicOrdering::SeqCst);
        it.prev();
        assert!(!it.valid() && it.status().is_err(), "backward step error");
        it.seek(&ikey("b"));
        assert_eq!(it.value(), b"b");
        it.status().expect("seek after a backward step error");
    }

    /// `DbIterator` answers a seek that left the merged iterator invalid with `seek_to_last`
    /// before it reads `status()`: an error the seek met must survive that call.
    #[test]
    fn an_error_met_by_a_positioning_call_is_not_forgotten_by_the_next_one() {
        let (mut it, tables) = memtable_and_level();
        tables.fail_next.store(true, AtomicOrdering::SeqCst);
        it.seek(&ikey("n"));
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid(), "seek_to_last hid the seek's error");
        it.status().expect_err("the seek's error");

        // A child that still fails is met again by every positioning call.
        let mut it = MergingIterator::new(vec![
            Box::new(VecIterator::new(vec![entry("a", 1)])),
            Box::new(crate::iter::EmptyIterator::with_error(Error::corruption(
                "t", 0, "broken",
            ))),
        ]);
        it.seek_to_first();
        it.status().expect_err("a broken source");
        it.seek(&ikey("a"));
        assert!(!it.valid());
        it.status().expect_err("still a broken source");
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
