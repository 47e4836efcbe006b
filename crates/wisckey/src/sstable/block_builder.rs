//! Builds one block (data or index): prefix-compressed entries followed by the restart
//! array. Layout is documented in `docs/FORMAT.md`.
//!
//! Invariants: keys are added in strictly increasing internal-key order (checked by the
//! table builder); the first entry and every `restart_interval`-th entry after it store
//! their key in full (shared = 0) and their offset is listed in the restart array; the
//! restart array is never empty (an empty block has the single restart 0).
//! Single-owner, not shared between threads.

use crate::coding::{put_fixed32, put_varint32};

/// Accumulates entries of one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    entries_since_restart: usize,
    num_entries: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            entries_since_restart: 0,
            num_entries: 0,
            last_key: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Size of the block `finish` would produce now.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends an entry. The caller keeps `size_estimate()` well below 4 GiB (restart
    /// offsets are 32-bit) by cutting blocks and limiting entry sizes.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.entries_since_restart >= self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.entries_since_restart = 0;
            0
        } else {
            common_prefix_len(&self.last_key, key)
        };
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.entries_since_restart += 1;
        self.num_entries += 1;
    }

    /// Returns the finished block contents and resets the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.entries_since_restart = 0;
        self.num_entries = 0;
        self.last_key.clear();
        out
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
