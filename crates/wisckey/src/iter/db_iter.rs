//! The user-facing iterator: turns the merged stream of internal entries into the user keys
//! visible at one sequence number, newest version only, deletions hidden, within bounds.
//!
//! Positioning follows LevelDB's DBIter. Moving forward, the inner iterator sits on the
//! entry being shown. Moving backward, it sits just before all entries of the shown key,
//! whose value is kept in `saved_*`. Values behind pointers are read only when asked for.
//! The iterator pins the version it reads, so no table it needs is deleted under it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{InternalIterator, MergingIterator};
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, seek_key, user_key, SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::version::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Iterates over user keys and values; see [`crate::Db::iter`].
pub struct DbIterator {
    db: Arc<DbInner>,
    iter: MergingIterator,
    sequence: SequenceNumber,
    _version: Arc<Version>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward: scratch for the key being skipped. Reverse: the current user key.
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    saved_kind: ValueKind,
    error: Option<Error>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("sequence", &self.sequence)
            .field("valid", &self.valid)
            .finish()
    }
}

impl DbIterator {
    pub(crate) fn new(
        db: Arc<DbInner>,
        iter: MergingIterator,
        sequence: SequenceNumber,
        version: Arc<Version>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> DbIterator {
        DbIterator {
            db,
            iter,
            sequence,
            _version: version,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Deletion,
            error: None,
        }
    }

    /// True when positioned on a key. False at either end or after an error (see `status`).
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value, read from the value log if it is stored there. Requires `valid()`.
    pub fn value(&self) -> Result<Vec<u8>> {
        let (kind, stored) = match self.direction {
            Direction::Forward => {
                let parsed = parse_internal_key(self.iter.key())
                    .ok_or_else(|| Error::corruption("iterator", 0, "malformed internal key"))?;
                (parsed.kind, self.iter.value().to_vec())
            }
            Direction::Reverse => (self.saved_kind, self.saved_value.clone()),
        };
        crate::db::resolve_value(&self.db, self.key(), kind, stored)?
            .ok_or_else(|| Error::corruption("iterator", 0, "positioned on a deletion"))
    }

    /// The first error met; an iterator that hit one is not valid.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    pub fn seek_to_first(&mut self) {
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => {
                self.direction = Direction::Forward;
                self.iter.seek_to_first();
                self.find_next_user_entry(false);
            }
        }
    }

    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.saved_value.clear();
        match &self.upper {
            Some(upper) => {
                self.iter.seek(&seek_key(upper, MAX_SEQUENCE));
                if self.iter.valid() {
                    self.iter.prev();
                } else {
                    self.iter.seek_to_last();
                }
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first key `>= target` (and within bounds).
    pub fn seek(&mut self, target: &[u8]) {
        let target = match &self.lower {
            Some(lower) if lower.as_slice() > target => lower.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.iter.seek(&seek_key(&target, self.sequence));
        self.find_next_user_entry(false);
    }

    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is just before the current key's entries: step into them and
            // let the skipping below pass over them.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.check_status();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Step back until the inner iterator is before every entry of the current key.
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    self.check_status();
                    return;
                }
                if user_key(self.iter.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// Forward: advance to the newest visible, non-deleted entry; with `skipping`, entries
    /// of `saved_key` are hidden (already shown or deleted).
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.iter.valid() {
            match parse_internal_key(self.iter.key()) {
                None => {
                    self.fail(Error::corruption("iterator", 0, "malformed internal key"));
                    return;
                }
                // Everything from here on is past the bound: stop instead of skipping a long
                // run of deleted or hidden entries.
                Some(p) if self.beyond_upper(p.user_key) => break,
                Some(p) if p.sequence <= self.sequence => {
                    let hidden = skipping && p.user_key <= self.saved_key.as_slice();
                    if !hidden {
                        if p.kind == ValueKind::Deletion {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            skipping = true;
                        } else {
                            self.saved_key.clear();
                            self.valid = true;
                            self.check_status();
                            return;
                        }
                    }
                }
                Some(_) => {}
            }
            self.iter.next();
        }
        self.saved_key.clear();
        self.valid = false;
        self.check_status();
    }

    /// Reverse: collect the newest visible entry of the key before the inner iterator.
    fn find_prev_user_entry(&mut self) {
        let mut kind = ValueKind::Deletion;
        while self.iter.valid() {
            let Some(p) = parse_internal_key(self.iter.key()) else {
                self.fail(Error::corruption("iterator", 0, "malformed internal key"));
                return;
            };
            if self.below_lower(p.user_key) {
                break;
            }
            if p.sequence <= self.sequence {
                if kind != ValueKind::Deletion
                    && p.user_key.cmp(self.saved_key.as_slice()) == Ordering::Less
                {
                    break;
                }
                kind = p.kind;
                if kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.iter.value());
                    self.saved_kind = kind;
                }
            }
            self.iter.prev();
        }
        if kind == ValueKind::Deletion {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
        self.check_status();
    }

    fn beyond_upper(&self, key: &[u8]) -> bool {
        self.upper.as_deref().is_some_and(|u| key >= u)
    }

    fn below_lower(&self, key: &[u8]) -> bool {
        self.lower.as_deref().is_some_and(|l| key < l)
    }

    fn check_status(&mut self) {
        if let Err(e) = self.iter.status() {
            self.fail(e);
        }
    }

    fn fail(&mut self, e: Error) {
        self.error.get_or_insert(e);
        self.valid = false;
    }
}
