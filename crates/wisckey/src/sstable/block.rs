//! A decoded, immutable block and its bidirectional iterator.
//!
//! `Block::new` validates the restart array (count, bounds, strictly increasing, first is
//! 0) against the block size; entries are validated lazily as the iterator decodes them,
//! so a damaged entry makes the iterator invalid with a `Corruption` status naming the
//! file and the entry's file offset — never a panic or an allocation sized by disk bytes.
//! Keys are ordered by `key::compare_internal`. A `Block` is `Send + Sync` and shared via
//! `Arc` (the block cache hands out the same block to many iterators).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::coding::{decode_fixed32, Decoder};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;

/// Block contents (without trailer) plus the validated restart array.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Offset where the restart array starts == end of the entries.
    entries_end: usize,
    restarts: Vec<u32>,
    file: Arc<str>,
    file_offset: u64,
}

impl Block {
    /// Validates `data` (contents already checksummed) read from `file` at `file_offset`.
    pub fn new(data: Vec<u8>, file: Arc<str>, file_offset: u64) -> Result<Block> {
        let corrupt = |why: &str| Error::corruption(&*file, file_offset, why.to_string());
        let count_at = data
            .len()
            .checked_sub(4)
            .ok_or_else(|| corrupt("block too short for restart count"))?;
        let num_restarts = decode_fixed32(&data[count_at..]).unwrap_or(0) as usize;
        if num_restarts == 0 || num_restarts > count_at / 4 {
            return Err(corrupt("bad restart count"));
        }
        let entries_end = count_at - 4 * num_restarts;
        let mut restarts = Vec::with_capacity(num_restarts);
        for i in 0..num_restarts {
            let r = decode_fixed32(&data[entries_end + 4 * i..]).unwrap_or(u32::MAX);
            let in_bounds = (r as usize) < entries_end || (entries_end == 0 && r == 0);
            let ordered = restarts.last().map_or(r == 0, |&prev| r > prev);
            if !in_bounds || !ordered {
                return Err(corrupt("bad restart offset"));
            }
            restarts.push(r);
        }
        Ok(Block {
            data,
            entries_end,
            restarts,
            file,
            file_offset,
        })
    }

    /// Bytes this block occupies (its block-cache charge).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Where the block starts in its file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter {
            block: Arc::clone(self),
            current: self.entries_end,
            next: self.entries_end,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
            err: None,
        }
    }

    fn corruption(&self, offset_in_block: usize, why: &str) -> Error {
        Error::corruption(
            &*self.file,
            self.file_offset + offset_in_block as u64,
            why.to_string(),
        )
    }
}

/// Header of one entry, validated against the entries region.
struct Entry {
    shared: usize,
    key_delta: (usize, usize),
    value: (usize, usize),
}

impl Block {
    /// Decodes the entry at `off` given that the previous key has `prev_len` bytes.
    fn decode_entry(&self, off: usize, prev_len: usize) -> Result<Entry> {
        let region = &self.data[off..self.entries_end];
        let mut d = Decoder::new(region);
        let (Some(shared), Some(non_shared), Some(value_len)) =
            (d.varint32(), d.varint32(), d.varint32())
        else {
            return Err(self.corruption(off, "bad entry header"));
        };
        let (shared, non_shared, value_len) =
            (shared as usize, non_shared as usize, value_len as usize);
        if shared > prev_len {
            return Err(self.corruption(off, "shared key prefix longer than previous key"));
        }
        let key_start = off + d.position();
        let key_end = key_start.checked_add(non_shared);
        let value_end = key_end.and_then(|k| k.checked_add(value_len));
        match (key_end, value_end) {
            (Some(key_end), Some(value_end)) if value_end <= self.entries_end => Ok(Entry {
                shared,
                key_delta: (key_start, key_end),
                value: (key_end, value_end),
            }),
            _ => Err(self.corruption(off, "entry overruns block")),
        }
    }
}

/// Cursor over one block. Holds an `Arc<Block>`, so it is `'static` and `Send`.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `entries_end` when not positioned.
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
    /// Index of the restart interval holding `current`.
    restart_index: usize,
    key: Vec<u8>,
    value: (usize, usize),
    err: Option<Error>,
}

impl BlockIter {
    fn restart_point(&self, i: usize) -> usize {
        self.block.restarts[i] as usize
    }

    fn invalidate(&mut self) {
        self.current = self.block.entries_end;
        self.next = self.block.entries_end;
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.restart_point(i);
    }

    /// Decodes the entry at `self.next`; false at the end of the block or on corruption.
    fn parse_next(&mut self) -> bool {
        if self.err.is_some() || self.next >= self.block.entries_end {
            self.invalidate();
            return false;
        }
        let off = self.next;
        let entry = match self.block.decode_entry(off, self.key.len()) {
            Ok(e) => e,
            Err(e) => {
                self.err = Some(e);
                self.invalidate();
                return false;
            }
        };
        self.current = off;
        self.key.truncate(entry.shared);
        self.key
            .extend_from_slice(&self.block.data[entry.key_delta.0..entry.key_delta.1]);
        self.value = entry.value;
        self.next = entry.value.1;
        while self.restart_index + 1 < self.block.restarts.len()
            && self.restart_point(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        true
    }

    /// Full key stored at restart point `i` (restart entries share nothing).
    fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let off = self.restart_point(i);
        let entry = self.block.decode_entry(off, 0)?;
        Ok(&self.block.data[entry.key_delta.0..entry.key_delta.1])
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.current < self.block.entries_end
    }

    // A positioning call starts over: an error met on the old path is forgotten, damage on
    // the new one is met again (a table iterator's seek after a damaged index entry must
    // not fail for good).
    fn seek_to_first(&mut self) {
        self.err = None;
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        self.err = None;
        self.seek_to_restart(self.block.restarts.len() - 1);
        while self.parse_next() && self.next < self.block.entries_end {}
    }

    fn seek(&mut self, target: &[u8]) {
        self.err = None;
        // Binary search for the last restart whose key is < target.
        let (mut left, mut right) = (0, self.block.restarts.len() - 1);
        while left < right {
            let mid = (left + right).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) if compare_internal(k, target) == Ordering::Less => left = mid,
                Ok(_) => right = mid - 1,
                Err(e) => {
                    self.err = Some(e);
                    self.invalidate();
                    return;
                }
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if compare_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        self.parse_next();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        let original = self.current;
        let mut i = self.restart_index;
        while self.restart_point(i) >= original {
            if i == 0 {
                self.invalidate();
                return;
            }
            i -= 1;
        }
        self.seek_to_restart(i);
        while self.parse_next() && self.next < original {}
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or_default()
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "block_tests.rs"]
mod tests;
