//! Two-level iterator over a table: the index block iterator picks a data block, a block
//! iterator walks it. Empty data blocks are skipped in both directions.
//!
//! Invariants: the first error (I/O, checksum, bad handle, damaged entry) is latched until
//! the next positioning call (`seek`, `seek_to_first`, `seek_to_last`): until then it is
//! invalid and `status()` returns that error, so a scan can neither end silently early nor
//! step past damage. A positioning call starts over (as a level iterator's does): the
//! merged iterator above may have stepped ahead of what its caller has shown (scan
//! read-ahead) and dropped such an error; damage on the new path is met again.
//! Holds `Arc<Table>`, so it is `'static` and `Send`.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::sstable::block::BlockIter;
use crate::sstable::reader::Table;

/// Iterator over every entry of one table, in internal-key order.
#[derive(Debug)]
pub struct TableIterator {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    /// File offset of the block `data` walks, to avoid reloading it.
    data_offset: Option<u64>,
    err: Option<Error>,
}

impl TableIterator {
    pub(crate) fn new(table: Arc<Table>, index: BlockIter) -> TableIterator {
        TableIterator {
            table,
            index,
            data: None,
            data_offset: None,
            err: None,
        }
    }

    fn latch(&mut self, e: Error) {
        if self.err.is_none() {
            self.err = Some(e);
        }
        self.data = None;
        self.data_offset = None;
    }

    /// Points `data` at the block named by the current index entry (or clears it).
    fn load_data_block(&mut self) {
        if let Err(e) = self.index.status() {
            self.latch(e);
            return;
        }
        if !self.index.valid() {
            self.data = None;
            self.data_offset = None;
            return;
        }
        let handle = match self.table.decode_index_handle(&self.index) {
            Ok(h) => h,
            Err(e) => return self.latch(e),
        };
        if self.data.is_some() && self.data_offset == Some(handle.offset) {
            return;
        }
        match self.table.read_block(handle) {
            Ok(block) => {
                self.data_offset = Some(handle.offset);
                self.data = Some(block.iter());
            }
            Err(e) => self.latch(e),
        }
    }

    /// True when the data iterator is positioned; latches its error if it has one.
    fn data_positioned(&mut self) -> bool {
        let Some(data) = &self.data else {
            return false;
        };
        if data.valid() {
            return true;
        }
        if let Err(e) = data.status() {
            self.latch(e);
        }
        false
    }

    fn skip_empty_blocks_forward(&mut self) {
        while self.err.is_none() && !self.data_positioned() {
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.next();
            self.load_data_block();
            if let Some(data) = &mut self.data {
                data.seek_to_first();
            }
        }
    }

    fn skip_empty_blocks_backward(&mut self) {
        while self.err.is_none() && !self.data_positioned() {
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.prev();
            self.load_data_block();
            if let Some(data) = &mut self.data {
                data.seek_to_last();
            }
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.err.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.err = None;
        self.index.seek_to_first();
        self.load_data_block();
        if let Some(data) = &mut self.data {
            data.seek_to_first();
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_to_last(&mut self) {
        self.err = None;
        self.index.seek_to_last();
        self.load_data_block();
        if let Some(data) = &mut self.data {
            data.seek_to_last();
        }
        self.skip_empty_blocks_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.err = None;
        self.index.seek(target);
        self.load_data_block();
        if let Some(data) = &mut self.data {
            data.seek(target);
        }
        self.skip_empty_blocks_forward();
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if let Some(data) = &mut self.data {
            data.next();
        }
        self.skip_empty_blocks_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if let Some(data) = &mut self.data {
            data.prev();
        }
        self.skip_empty_blocks_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.err {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
