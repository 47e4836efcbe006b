//! [`LevelIterator`]: one iterator over a whole sorted, non-overlapping level (L1+), opening
//! each table only when the cursor reaches it.
//!
//! Invariant: when the level iterator is valid, `table` is the open iterator of
//! `files[index]` and is itself valid. The first error (table open failure or an inner
//! iterator's status) is latched: the iterator becomes invalid and `status()` returns it
//! until the next positioning call, so a scan can never silently skip a table.
//!
//! Thread-safety: `Send` (as `InternalIterator` requires); used by one thread at a time.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;

use super::levels::FileMeta;
use super::TableSource;

/// Concatenation of the tables of one level, in key order.
pub struct LevelIterator {
    tables: Arc<dyn TableSource>,
    files: Vec<Arc<FileMeta>>,
    /// Index into `files` of the open table; meaningful only while `table` is `Some`.
    index: usize,
    table: Option<Box<dyn InternalIterator>>,
    error: Option<Error>,
}

impl std::fmt::Debug for LevelIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelIterator")
            .field("files", &self.files.len())
            .field("index", &self.index)
            .field("error", &self.error)
            .finish()
    }
}

impl LevelIterator {
    /// `files` must be sorted by key and non-overlapping (a Version's L1+ level).
    pub fn new(tables: Arc<dyn TableSource>, files: Vec<Arc<FileMeta>>) -> LevelIterator {
        LevelIterator {
            tables,
            files,
            index: 0,
            table: None,
            error: None,
        }
    }

    /// Opens `files[index]`; on failure latches the error and leaves no table open.
    fn open(&mut self, index: usize) -> bool {
        self.table = None;
        let Some(file) = self.files.get(index) else {
            return false;
        };
        match self.tables.iter(file.number, file.file_size) {
            Ok(it) => {
                self.index = index;
                self.table = Some(it);
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// If the open table is exhausted, checks its status and moves on to following tables
    /// until one has an entry.
    fn skip_forward(&mut self) {
        while let Some(table) = &self.table {
            if table.valid() {
                return;
            }
            if let Err(e) = table.status() {
                self.error = Some(e);
                self.table = None;
                return;
            }
            if !self.open(self.index + 1) {
                return;
            }
            if let Some(t) = self.table.as_mut() {
                t.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while let Some(table) = &self.table {
            if table.valid() {
                return;
            }
            if let Err(e) = table.status() {
                self.error = Some(e);
                self.table = None;
                return;
            }
            if self.index == 0 || !self.open(self.index - 1) {
                self.table = None;
                return;
            }
            if let Some(t) = self.table.as_mut() {
                t.seek_to_last();
            }
        }
    }

    fn current(&self) -> &dyn InternalIterator {
        self.table
            .as_deref()
            .expect("key()/value() require valid(), which implies an open table")
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.table.as_ref().is_some_and(|t| t.valid())
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        if self.open(0) {
            if let Some(t) = self.table.as_mut() {
                t.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        if self.open(self.files.len().wrapping_sub(1)) {
            if let Some(t) = self.table.as_mut() {
                t.seek_to_last();
            }
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        let index = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target).is_lt());
        if self.open(index) {
            if let Some(t) = self.table.as_mut() {
                t.seek(target);
            }
            self.skip_forward();
        }
    }

    fn next(&mut self) {
        if let Some(t) = self.table.as_mut() {
            t.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(t) = self.table.as_mut() {
            t.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current().key()
    }

    fn value(&self) -> &[u8] {
        self.current().value()
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => self.table.as_ref().map_or(Ok(()), |t| t.status()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{seek_key, user_key};
    use crate::version::testutil::{meta, MockTables};

    fn level(tables: &Arc<MockTables>) -> LevelIterator {
        tables.put(1, &[(b"a", 1, b"a"), (b"b", 1, b"b")]);
        tables.put(2, &[]);
        tables.put(3, &[(b"d", 2, b"d2"), (b"d", 1, b"d1")]);
        tables.put(4, &[(b"f", 1, b"f")]);
        let files = vec![
            Arc::new(meta(1, b"a", b"b")),
            Arc::new(meta(2, b"c", b"c")),
            Arc::new(meta(3, b"d", b"d")),
            Arc::new(meta(4, b"f", b"f")),
        ];
        let source: Arc<dyn TableSource> = Arc::clone(tables) as Arc<dyn TableSource>;
        LevelIterator::new(source, files)
    }

    fn collect(it: &mut LevelIterator, forward: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(it.value().to_vec());
            if forward {
                it.next();
            } else {
                it.prev();
            }
        }
        out
    }

    #[test]
    fn forward_and_backward_across_files_skipping_empty_tables() {
        let tables = Arc::new(MockTables::default());
        let mut it = level(&tables);
        it.seek_to_first();
        let fwd = collect(&mut it, true);
        assert_eq!(
            fwd,
            vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b"d2".to_vec(),
                b"d1".to_vec(),
                b"f".to_vec()
            ]
        );
        it.status().expect("no error");
        it.seek_to_last();
        let mut back = collect(&mut it, false);
        back.reverse();
        assert_eq!(back, fwd);
    }

    #[test]
    fn seek_lands_on_first_key_at_or_after_target() {
        let tables = Arc::new(MockTables::default());
        let mut it = level(&tables);
        it.seek(&seek_key(b"c", 9));
        assert_eq!(it.value(), b"d2");
        it.seek(&seek_key(b"d", 1));
        assert_eq!(it.value(), b"d1");
        it.prev();
        assert_eq!(it.value(), b"d2");
        it.prev();
        assert_eq!(user_key(it.key()), b"b");
        it.seek(&seek_key(b"e", 9));
        assert_eq!(it.value(), b"f");
        it.seek(&seek_key(b"g", 9));
        assert!(!it.valid());
        it.status().expect("end is not an error");
    }

    #[test]
    fn table_open_failure_is_reported_not_skipped() {
        let tables = Arc::new(MockTables::default());
        let mut it = level(&tables);
        tables.fail(3);
        it.seek_to_first();
        assert_eq!(collect(&mut it, true), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(it.status().is_err());
        it.seek(&seek_key(b"f", 9));
        assert_eq!(it.value(), b"f", "a new seek clears the latched error");
    }
}
