//! Stub: merged iterator, written by the db core.
pub struct MergingIterator;
