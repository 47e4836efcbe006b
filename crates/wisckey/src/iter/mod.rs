//! Iterators over internal keys, and the user-facing database iterator built on them.
//!
//! Every source (memtable, table, level, merge) implements [`InternalIterator`], LevelDB
//! style: positioning methods never fail directly; an error makes the iterator invalid and
//! is reported by [`InternalIterator::status`], so a scan cannot silently end early.

pub mod db_iter;
pub mod merge;

pub use db_iter::DbIterator;
pub use merge::MergingIterator;

use crate::error::Result;

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

/// An iterator over nothing (an empty level or memtable).
#[derive(Debug, Default)]
pub struct EmptyIterator;

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
        Ok(())
    }
}
