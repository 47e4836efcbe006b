//! Iterators over internal keys, and the user-facing database iterator built on them.
//!
//! Every source (memtable, table, level, merge) implements [`InternalIterator`], LevelDB
//! style: positioning methods never fail directly; an error makes the iterator invalid and
//! is reported by [`InternalIterator::status`], so a scan cannot silently end early.

pub mod db_iter;
pub mod merge;
pub mod range;
pub(crate) mod readahead;

pub use db_iter::DbIterator;
pub use merge::MergingIterator;
pub use range::{Entries, Keys, Range};

use crate::error::{Error, Result};

/// A cursor over `(internal key, value)` pairs in internal-key order.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// Internal key of the current entry. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// Value of the current entry. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any. An iterator with an error is not `valid()`.
    fn status(&self) -> Result<()>;
}

/// An iterator over nothing: an empty level or memtable, or — made by
/// [`EmptyIterator::with_error`] — a source that failed to open, whose error `status()`
/// reports so a scan over it fails instead of silently skipping it.
#[derive(Debug, Default)]
pub struct EmptyIterator {
    error: Option<Error>,
}

impl EmptyIterator {
    pub fn new() -> EmptyIterator {
        EmptyIterator::default()
    }

    /// An iterator over nothing whose `status()` is `Err(error)`.
    pub fn with_error(error: Error) -> EmptyIterator {
        EmptyIterator { error: Some(error) }
    }
}

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_iterator_is_never_valid_and_reports_its_error() {
        let mut plain = EmptyIterator::new();
        plain.seek_to_first();
        assert!(!plain.valid());
        assert!(plain.status().is_ok());

        let error = Error::corruption("000007.sst", 12, "bad block");
        let mut failed = EmptyIterator::with_error(error);
        for position in [
            |it: &mut EmptyIterator| it.seek_to_first(),
            |it: &mut EmptyIterator| it.seek_to_last(),
            |it: &mut EmptyIterator| it.seek(b"k"),
        ] {
            position(&mut failed);
            assert!(!failed.valid());
            assert!(failed.status().expect_err("error kept").is_corruption());
        }
    }
}
