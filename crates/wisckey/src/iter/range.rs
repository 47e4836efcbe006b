//! Rust iterators over the database: [`Range`] (entries of a key range, from both ends),
//! [`Keys`] (its keys only, never reading the value log) and [`Entries`] (a cursor turned
//! into an iterator). Items are `Result`s: a damaged value is reported at its entry, and
//! iteration may go on past it.
//!
//! Invariants: a `Range` reads one consistent state — both of its cursors read at one
//! snapshot (the caller's, or one it takes) — and the two ends never yield the same key:
//! each stops where the other has been.

use std::ops::{Bound, RangeBounds};

use super::DbIterator;
use crate::error::Result;
use crate::options::ReadOptions;
use crate::Db;

/// The first key after every key that starts with `prefix`, if there is one (`None`: the
/// prefix is empty or all `0xff`, so every key after it starts with it).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// `ReadOptions` bounds (`lower` inclusive, `upper` exclusive) for `range`.
pub(crate) fn bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: &R,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    // The smallest key after `k` is `k` followed by a zero byte.
    let after = |k: &K| {
        let mut next = k.as_ref().to_vec();
        next.push(0);
        next
    };
    let lower = match range.start_bound() {
        Bound::Included(k) => Some(k.as_ref().to_vec()),
        Bound::Excluded(k) => Some(after(k)),
        Bound::Unbounded => None,
    };
    let upper = match range.end_bound() {
        Bound::Included(k) => Some(after(k)),
        Bound::Excluded(k) => Some(k.as_ref().to_vec()),
        Bound::Unbounded => None,
    };
    (lower, upper)
}

/// The entries of a key range in key order, as `Result<(key, value)>`; see
/// [`Db::range`]. Iterates from either end ([`DoubleEndedIterator`]); all of it reads one
/// snapshot.
pub struct Range<'a> {
    db: &'a Db,
    options: ReadOptions,
    front: Cursor<'a>,
    back: Cursor<'a>,
    /// An end reached the other, or a cursor failed to open.
    finished: bool,
    with_values: bool,
}

/// One end of a [`Range`]: its cursor (opened on first use) and the last key it yielded.
#[derive(Default)]
struct Cursor<'a> {
    it: Option<DbIterator<'a>>,
    last: Option<Vec<u8>>,
}

impl std::fmt::Debug for Range<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Range")
            .field("lower", &self.options.lower_bound)
            .field("upper", &self.options.upper_bound)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<'a> Range<'a> {
    /// `options` bound the range; its snapshot (one is taken if it has none) is what both
    /// ends read.
    pub(crate) fn new(db: &'a Db, mut options: ReadOptions, with_values: bool) -> Range<'a> {
        if options.snapshot.is_none() {
            options.snapshot = Some(db.snapshot());
        }
        options.keys_only |= !with_values;
        Range {
            db,
            options,
            front: Cursor::default(),
            back: Cursor::default(),
            finished: false,
            with_values,
        }
    }

    /// The keys of this range only, from its start; no value is read, from the value log or
    /// elsewhere. They read the range's snapshot, or a new one if the range had finished
    /// (a finished range lets its snapshot go).
    pub fn keys(self) -> Keys<'a> {
        let mut options = self.options;
        options.keys_only = true;
        Keys {
            range: Range::new(self.db, options, false),
        }
    }

    /// Ends the range and lets go of what it holds: its cursors pin a version (tables,
    /// segments GC removed, punched ranges) and its snapshot keeps compaction from dropping
    /// old versions, for as long as a finished range is kept.
    fn finish(&mut self) {
        self.finished = true;
        self.front.it = None;
        self.back.it = None;
        self.options.snapshot = None;
    }

    /// Moves one end (`forward`: the front) and returns its entry, unless it met the
    /// other end.
    fn step(&mut self, forward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.finished {
            return None;
        }
        let (this, other) = if forward {
            (&mut self.front, &self.back)
        } else {
            (&mut self.back, &self.front)
        };
        let it = match &mut this.it {
            Some(it) => {
                if forward {
                    it.next();
                } else {
                    it.prev();
                }
                it
            }
            None => {
                let mut it = match self.db.iter(&self.options) {
                    Ok(it) => it,
                    Err(e) => {
                        self.finish();
                        return Some(Err(e));
                    }
                };
                if forward {
                    it.seek_to_first();
                } else {
                    it.seek_to_last();
                }
                this.it.insert(it)
            }
        };
        if !it.valid() {
            let failed = it.status().err();
            self.finish();
            return failed.map(Err);
        }
        let key = it.key();
        let met =
            other.last.as_deref().is_some_and(
                |seen| {
                    if forward {
                        key >= seen
                    } else {
                        key <= seen
                    }
                },
            );
        if met {
            self.finish();
            return None;
        }
        let key = key.to_vec();
        let value = if self.with_values {
            match it.value() {
                Ok(value) => value,
                Err(e) => {
                    this.last = Some(key);
                    return Some(Err(e));
                }
            }
        } else {
            Vec::new()
        };
        this.last = Some(key.clone());
        Some(Ok((key, value)))
    }
}

impl Iterator for Range<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl DoubleEndedIterator for Range<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

/// The keys of a key range in key order, as `Result<key>`; see [`Db::keys`] and
/// [`Range::keys`]. Never reads a value.
#[derive(Debug)]
pub struct Keys<'a> {
    range: Range<'a>,
}

impl Iterator for Keys<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.range.step(true).map(|r| r.map(|(k, _)| k))
    }
}

impl DoubleEndedIterator for Keys<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.range.step(false).map(|r| r.map(|(k, _)| k))
    }
}

/// A [`DbIterator`] used as a Rust iterator: from its current entry on (from the first if
/// it is not positioned), forward, as `Result<(key, value)>`.
#[derive(Debug)]
pub struct Entries<'a> {
    it: DbIterator<'a>,
    started: bool,
    /// The cursor failed: nothing follows the error.
    failed: bool,
}

impl<'a> IntoIterator for DbIterator<'a> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    type IntoIter = Entries<'a>;

    fn into_iter(self) -> Entries<'a> {
        Entries {
            it: self,
            started: false,
            failed: false,
        }
    }
}

impl Iterator for Entries<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if !self.started {
            self.started = true;
            // Only a cursor never positioned starts at the first key: one that ran past the
            // end (or met an error) has nothing more to give.
            if !self.it.positioned() {
                self.it.seek_to_first();
            }
        } else {
            self.it.next();
        }
        if !self.it.valid() {
            self.failed = true;
            return self.it.status().err().map(Err);
        }
        let key = self.it.key().to_vec();
        Some(self.it.value().map(|value| (key, value)))
    }
}
