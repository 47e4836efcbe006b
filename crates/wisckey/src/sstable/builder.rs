//! Writes a table file: data blocks, then the filter block, the index block and the footer.
//!
//! Invariants: keys arrive in strictly increasing internal-key order (debug-asserted);
//! each index entry's key is the last key of its data block (>= every key in the block and
//! < the first key of the next); after the first I/O error every call returns that error.
//! Single-owner (`Send`, not shared between threads).

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{compare_internal, user_key};
use crate::sstable::block_builder::BlockBuilder;
use crate::sstable::filter::FilterBuilder;
use crate::sstable::format::{block_trailer, BlockHandle, Footer, BLOCK_TYPE_UNCOMPRESSED};

/// Largest key + value accepted in one entry: keeps every block far below the 4 GiB that
/// 32-bit restart offsets can address.
pub const MAX_ENTRY_LEN: usize = 1 << 30;

/// Largest index block a table may have: its restart offsets are 32-bit. The index holds one
/// key per data block, so a table with about 4 GiB of keys reaches it (64 KiB keys, one per
/// block, in a flush of a memtable far above the default size).
const MAX_INDEX_BLOCK_LEN: usize = u32::MAX as usize;

/// Tuning knobs of the table writer. Values are sanitized by `TableBuilder::new`:
/// `block_size` to 1..=256 MiB, `restart_interval` to at least 1, `bloom_bits_per_key`
/// to at most 100 (0 writes no filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Target size of a data block before it is cut.
    pub block_size: usize,
    /// Keys between restart points in data blocks.
    pub restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 disables the filter.
    pub bloom_bits_per_key: usize,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
        }
    }
}

/// Streams sorted entries into a new table file.
#[derive(Debug)]
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    file_name: String,
    options: TableOptions,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<FilterBuilder>,
    last_key: Vec<u8>,
    num_entries: u64,
    error: Option<Error>,
    /// `MAX_INDEX_BLOCK_LEN`, lower in tests.
    index_block_limit: usize,
}

impl TableBuilder {
    pub fn new(file: Box<dyn WritableFile>, file_name: String, options: TableOptions) -> Self {
        let options = TableOptions {
            block_size: options.block_size.clamp(1, 256 << 20),
            restart_interval: options.restart_interval.max(1),
            bloom_bits_per_key: options.bloom_bits_per_key.min(100),
        };
        let offset = file.len();
        TableBuilder {
            file,
            file_name,
            offset,
            data_block: BlockBuilder::new(options.restart_interval),
            // Restart on every index entry: seeks binary-search block keys exactly.
            index_block: BlockBuilder::new(1),
            filter: (options.bloom_bits_per_key > 0)
                .then(|| FilterBuilder::new(options.bloom_bits_per_key)),
            options,
            last_key: Vec::new(),
            num_entries: 0,
            error: None,
            index_block_limit: MAX_INDEX_BLOCK_LEN,
        }
    }

    /// Keys must be strictly increasing in internal-key order (debug_assert).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        debug_assert!(
            self.num_entries == 0 || compare_internal(&self.last_key, ikey) == Ordering::Less,
            "table keys out of order"
        );
        if ikey.len().saturating_add(value.len()) > MAX_ENTRY_LEN {
            return Err(Error::InvalidArgument(format!(
                "table entry of {} bytes exceeds the maximum of {MAX_ENTRY_LEN}",
                ikey.len().saturating_add(value.len())
            )));
        }
        if let Some(filter) = &mut self.filter {
            let uk = user_key(ikey);
            if self.num_entries == 0 || user_key(&self.last_key) != uk {
                filter.add_key(uk);
            }
        }
        self.data_block.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.num_entries += 1;
        if self.data_block.size_estimate() >= self.options.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// Bytes of the index block so far.
    pub fn index_size_estimate(&self) -> usize {
        self.index_block.size_estimate()
    }

    /// Bytes written so far plus the pending block: used to cut output files at a target size.
    pub fn estimated_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate()
        };
        self.offset + pending as u64
    }

    /// Writes the last block, filter, index and footer, then `sync_data`. Returns file size.
    pub fn finish(mut self) -> Result<u64> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush_data_block()?;
        let filter = match self.filter.take() {
            Some(f) => self.write_block(&f.finish())?,
            None => BlockHandle::default(),
        };
        let index_contents = self.index_block.finish();
        let index = self.write_block(&index_contents)?;
        let footer = Footer {
            filter,
            index,
            num_entries: self.num_entries,
        };
        self.append(&footer.encode())?;
        let sync = self.file.sync_data();
        self.latch(sync)?;
        Ok(self.offset)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        // A larger index would wrap its restart offsets: a table that reads as damaged once
        // written (and its inputs deleted). Refuse it while the inputs are intact.
        let index_after = (self.index_block.size_estimate())
            .saturating_add(self.last_key.len())
            .saturating_add(40);
        if index_after > self.index_block_limit {
            let too_large = Err(Error::InvalidArgument(format!(
                "{}: the table's index would pass {} bytes (its keys are too large for one \
                 table; a smaller memtable_size or target_file_size keeps tables below it)",
                self.file_name, self.index_block_limit
            )));
            return self.latch(too_large);
        }
        let contents = self.data_block.finish();
        let handle = self.write_block(&contents)?;
        let mut encoded = Vec::with_capacity(20);
        handle.encode_varint_to(&mut encoded);
        self.index_block.add(&self.last_key, &encoded);
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn set_index_block_limit(&mut self, limit: usize) {
        self.index_block_limit = limit;
    }

    fn write_block(&mut self, contents: &[u8]) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: contents.len() as u64,
        };
        self.append(contents)?;
        self.append(&block_trailer(contents, BLOCK_TYPE_UNCOMPRESSED))?;
        Ok(handle)
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let r = self.file.append(data);
        self.latch(r)?;
        self.offset += data.len() as u64;
        Ok(())
    }

    fn latch(&mut self, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    /// Name of the file being written (for error messages of callers).
    pub fn file_name(&self) -> &str {
        &self.file_name
    }
}
