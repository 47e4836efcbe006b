//! Test doubles for the version and compaction modules: an in-memory [`TableSource`] and a
//! file-meta helper, so these modules can be tested without the real table reader. (File
//! system tests use `crate::fs::{MemFs, FaultFs}`.)
//!
//! Thread-safety: internally locked with `parking_lot::Mutex`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, make_internal_key, user_key, ValueKind, MAX_SEQUENCE};

use super::levels::FileMeta;
use super::{PointCursor, TableSource};

/// A file covering user keys `[lo, hi]` at every sequence, 100 bytes long.
pub(crate) fn meta(number: u64, lo: &[u8], hi: &[u8]) -> FileMeta {
    FileMeta {
        number,
        file_size: 100,
        smallest: make_internal_key(lo, MAX_SEQUENCE, ValueKind::ValuePointer),
        largest: make_internal_key(hi, 0, ValueKind::Deletion),
    }
}

type Entries = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

/// Tables held in memory, keyed by file number.
#[derive(Debug, Default)]
pub(crate) struct MockTables {
    tables: Mutex<HashMap<u64, Entries>>,
    failing: Mutex<HashSet<u64>>,
    /// Cursors handed out and not yet dropped, and the most there ever were at once.
    cursors: Arc<Mutex<(usize, usize)>>,
}

impl MockTables {
    /// Stores table `number` holding `(user key, sequence, value)` entries of kind Value.
    pub(crate) fn put(&self, number: u64, entries: &[(&[u8], u64, &[u8])]) {
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .map(|(k, s, v)| (make_internal_key(k, *s, ValueKind::Value), v.to_vec()))
            .collect();
        rows.sort_by(|a, b| compare_internal(&a.0, &b.0));
        self.tables.lock().insert(number, Arc::new(rows));
    }

    /// The most cursors that were open at once.
    pub(crate) fn most_cursors_open(&self) -> usize {
        self.cursors.lock().1
    }

    /// Makes every later access to table `number` fail with an I/O error.
    pub(crate) fn fail(&self, number: u64) {
        self.failing.lock().insert(number);
    }

    fn table(&self, number: u64) -> Result<Entries> {
        if self.failing.lock().contains(&number) {
            return Err(Error::io(
                format!("open table {number}"),
                std::io::Error::other("injected"),
            ));
        }
        self.tables.lock().get(&number).cloned().ok_or_else(|| {
            Error::io(
                format!("open table {number}"),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
        })
    }
}

/// The first row at or after `ikey`, if it has `ikey`'s user key.
fn lookup(rows: &Entries, ikey: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let idx = rows.partition_point(|(k, _)| compare_internal(k, ikey).is_lt());
    rows.get(idx)
        .filter(|(k, _)| user_key(k) == user_key(ikey))
        .cloned()
}

/// A cursor over a mock table, counted while it lives.
struct MockCursor {
    rows: Entries,
    open: Arc<Mutex<(usize, usize)>>,
}

impl PointCursor for MockCursor {
    fn get(&mut self, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(lookup(&self.rows, ikey))
    }
}

impl Drop for MockCursor {
    fn drop(&mut self) {
        self.open.lock().0 -= 1;
    }
}

impl TableSource for MockTables {
    fn get(&self, number: u64, _size: u64, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(lookup(&self.table(number)?, ikey))
    }

    fn cursor(&self, number: u64, _size: u64) -> Result<Option<Box<dyn PointCursor>>> {
        let rows = self.table(number)?;
        let mut open = self.cursors.lock();
        open.0 += 1;
        open.1 = open.1.max(open.0);
        Ok(Some(Box::new(MockCursor {
            rows,
            open: Arc::clone(&self.cursors),
        })))
    }

    fn iter(&self, number: u64, _size: u64) -> Result<Box<dyn InternalIterator>> {
        Ok(Box::new(VecIterator {
            rows: self.table(number)?,
            pos: None,
        }))
    }
}

/// Iterator over a sorted vector; `pos == None` means invalid.
struct VecIterator {
    rows: Entries,
    pos: Option<usize>,
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.rows.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.rows.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let idx = self
            .rows
            .partition_point(|(k, _)| compare_internal(k, target).is_lt());
        self.pos = (idx < self.rows.len()).then_some(idx);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.rows.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.rows[p].0)
    }
    fn value(&self) -> &[u8] {
        self.pos.map_or(&[], |p| &self.rows[p].1)
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}
