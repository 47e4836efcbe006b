//! An open, immutable table: footer, index block and filter loaded at open; data blocks
//! read on demand (one `read_exact_at` per block, checksummed on every read from the
//! file) and optionally kept in a shared [`BlockCache`]; [`TableCursor`] for point lookups
//! in ascending key order, which keeps the last data block it found.
//!
//! Invariants: every handle taken from the footer or the index is bounds-checked against
//! the data region (`file_size - FOOTER_LEN`) before any read or allocation, so a damaged
//! handle yields `Corruption`, never a huge allocation. `Table` is `Send + Sync` and is
//! shared as `Arc<Table>` by iterators and the table cache.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::ReadableFile;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, user_key};
use crate::sstable::block::{Block, BlockIter};
use crate::sstable::cache::BlockCache;
use crate::sstable::filter::BloomFilter;
use crate::sstable::format::{verify_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use crate::sstable::iterator::TableIterator;

/// Told of a block [`Table::salvage_entries`] could not read, with the internal keys that
/// bound it (after the first, up to and including the second; `None` where unknown).
pub type DamagedBlock<'a> = dyn FnMut(Error, Option<&[u8]>, Option<&[u8]>) + 'a;

/// The index positioned at a data block's entry, the block, and the block's iterator
/// positioned at an entry in it ([`Table::seek_through_index`]).
type FoundThroughIndex = (BlockIter, Arc<Block>, BlockIter);

/// The data block a [`TableCursor`] found its last key in.
#[derive(Debug)]
struct HeldBlock {
    /// The lookup key that found it: a later lookup key at or above it and at or below
    /// `index_key` lies in this block's range.
    after: Vec<u8>,
    /// The block's index key: at or above every key in the block, below the next block's.
    index_key: Vec<u8>,
    block: Arc<Block>,
}

/// Point lookups in one table in ascending key order (GC's liveness judgements: a victim's
/// keys, sorted): the last data block found is held, so the next key in it is looked up
/// without the index block's search and the block cache. On the 2-core VM, GC's judgement of
/// a 64 MiB victim of 1 KiB values looks up ~62,000 keys in a key space of ~400,000 to
/// 2,000,000, about one key in every 6 to 30 entries: several per data block.
#[derive(Debug)]
pub struct TableCursor {
    table: Arc<Table>,
    held: Option<HeldBlock>,
}

impl TableCursor {
    pub fn new(table: Arc<Table>) -> TableCursor {
        TableCursor { table, held: None }
    }
}

impl crate::version::PointCursor for TableCursor {
    /// [`Table::get`] (the same answer for any key), faster for keys in ascending order.
    fn get(&mut self, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.table.get_holding(ikey, &mut self.held)
    }
}

/// A table file opened for reads.
#[derive(Debug)]
pub struct Table {
    file: Arc<dyn ReadableFile>,
    file_number: u64,
    file_name: Arc<str>,
    file_size: u64,
    index: Arc<Block>,
    filter: Option<BloomFilter>,
    num_entries: u64,
    block_cache: Option<Arc<BlockCache>>,
}

impl Table {
    pub fn open(
        file: Arc<dyn ReadableFile>,
        file_number: u64,
        file_name: String,
        file_size: u64,
        block_cache: Option<Arc<BlockCache>>,
    ) -> Result<Table> {
        let (table, filter_damage) =
            Table::open_inner(file, file_number, file_name, file_size, block_cache, false)?;
        debug_assert!(filter_damage.is_none(), "refused above when not tolerated");
        Ok(table)
    }

    /// [`Table::open`] for salvage: a filter block that does not verify is returned as the
    /// second value and the table opens without a filter. The filter only ever says "not
    /// here", so nothing the table holds is lost with it; every other part is checked as
    /// `open` checks it. Reads refuse such a table (damage is reported where it is met);
    /// repair takes its entries.
    pub fn open_ignoring_a_damaged_filter(
        file: Arc<dyn ReadableFile>,
        file_number: u64,
        file_name: String,
        file_size: u64,
    ) -> Result<(Table, Option<Error>)> {
        Table::open_inner(file, file_number, file_name, file_size, None, true)
    }

    fn open_inner(
        file: Arc<dyn ReadableFile>,
        file_number: u64,
        file_name: String,
        file_size: u64,
        block_cache: Option<Arc<BlockCache>>,
        tolerate_filter_damage: bool,
    ) -> Result<(Table, Option<Error>)> {
        let file_name: Arc<str> = Arc::from(file_name);
        let Some(footer_offset) = file_size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(
                &*file_name,
                0,
                format!("file of {file_size} bytes is shorter than a table footer"),
            ));
        };
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(footer_offset, &mut footer_bytes, &file_name)?;
        let footer = Footer::decode(&footer_bytes, &file_name, footer_offset)?;
        let data_end = footer_offset;
        let index_contents = read_block_contents(&*file, &file_name, data_end, footer.index)?;
        let index = Arc::new(Block::new(
            index_contents,
            Arc::clone(&file_name),
            footer.index.offset,
        )?);
        let filter = (footer.filter.size > 0).then(|| {
            read_block_contents(&*file, &file_name, data_end, footer.filter).and_then(|contents| {
                BloomFilter::new(contents).ok_or_else(|| {
                    Error::corruption(&*file_name, footer.filter.offset, "bad filter block")
                })
            })
        });
        let (filter, filter_damage) = match filter {
            None => (None, None),
            Some(Ok(filter)) => (Some(filter), None),
            Some(Err(e @ Error::Corruption { .. })) if tolerate_filter_damage => (None, Some(e)),
            Some(Err(e)) => return Err(e),
        };
        let table = Table {
            file,
            file_number,
            file_name,
            file_size,
            index,
            filter,
            num_entries: footer.num_entries,
            block_cache,
        };
        Ok((table, filter_damage))
    }

    /// Asks the OS to read the whole file into its page cache in the background
    /// ([`ReadableFile::prefetch`]), so that later block misses of the block cache are
    /// memory copies.
    pub fn prefetch(&self) -> Result<()> {
        self.file.prefetch(0, self.file_size)
    }

    /// Point lookup: the first entry whose internal key is >= `ikey` IF its user key equals
    /// `user_key(ikey)`; Ok(None) if absent (bloom filter says no, or next key differs).
    pub fn get(&self, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let target_user_key = user_key(ikey);
        if !self.may_contain(target_user_key) {
            return Ok(None);
        }
        Ok(self.seek_through_index(ikey)?.and_then(|(_, _, data)| {
            (user_key(data.key()) == target_user_key)
                .then(|| (data.key().to_vec(), data.value().to_vec()))
        }))
    }

    /// The first entry at or after `ikey`, found through the index: the index positioned at
    /// its block's entry, the block, and the block's iterator positioned at it; `None` past
    /// the table's last entry.
    fn seek_through_index(&self, ikey: &[u8]) -> Result<Option<FoundThroughIndex>> {
        let mut index = self.index.iter();
        index.seek(ikey);
        while index.valid() {
            let block = self.block_for_index_entry(&index)?;
            let mut data = block.iter();
            data.seek(ikey);
            if data.valid() {
                return Ok(Some((index, block, data)));
            }
            data.status()?;
            // Only reachable if the index key was above every key of its block; the
            // answer then starts in the next block.
            index.next();
        }
        index.status()?;
        Ok(None)
    }

    /// [`Table::get`], holding the data block it found in `held` for the next lookup: a
    /// lookup of a larger key that falls in the same block needs neither the index nor the
    /// block cache. Any order of keys is answered correctly; ascending order is what the
    /// held block saves work for.
    fn get_holding(
        &self,
        ikey: &[u8],
        held: &mut Option<HeldBlock>,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let target_user_key = user_key(ikey);
        if !self.may_contain(target_user_key) {
            return Ok(None);
        }
        // The held block covers the internal keys after its predecessor's index key up to
        // its own; past the last lookup and not past its index key, `ikey` is in it.
        let in_held = |h: &&HeldBlock| {
            compare_internal(ikey, &h.after).is_ge()
                && compare_internal(ikey, &h.index_key).is_le()
        };
        if let Some(block) = held.as_ref().filter(in_held) {
            let mut data = block.block.iter();
            data.seek(ikey);
            if data.valid() {
                let hit = user_key(data.key()) == target_user_key;
                return Ok(hit.then(|| (data.key().to_vec(), data.value().to_vec())));
            }
            data.status()?;
            // Above the block's last key: not with this crate's builder (its index key is
            // the block's last key), but the index key is only promised to be a bound. The
            // next block's first entry is then the answer, found through the index below.
        }
        let Some((index, block, data)) = self.seek_through_index(ikey)? else {
            return Ok(None);
        };
        let hit = user_key(data.key()) == target_user_key;
        let found = hit.then(|| (data.key().to_vec(), data.value().to_vec()));
        *held = Some(HeldBlock {
            after: ikey.to_vec(),
            index_key: index.key().to_vec(),
            block,
        });
        Ok(found)
    }

    /// False only if no entry of this table has `user_key`.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The byte range of the data block that would hold `ikey`, from the index alone (no
    /// data block is read; LevelDB's `ApproximateOffsetOf` is its start). Past every key:
    /// an empty range at the end of the data blocks.
    pub fn approximate_block_of(&self, ikey: &[u8]) -> (u64, u64) {
        let mut index = self.index.iter();
        index.seek(ikey);
        if index.valid() {
            let block = self.decode_index_handle(&index).ok().and_then(|handle| {
                let end = handle.offset.checked_add(handle.size)?;
                (end <= self.index.file_offset()).then_some((handle.offset, end))
            });
            if let Some(range) = block {
                return range;
            }
        }
        // Past the last block (or a handle that does not decode or reaches past the data
        // blocks: an estimate does not fail).
        let end = self.index.file_offset();
        (end, end)
    }

    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Iterator over all entries; holds an `Arc` of the table, so it is `'static`.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        TableIterator::new(Arc::clone(self), self.index.iter())
    }

    /// Hands every entry of every data block that reads and verifies to `on_entry`, in file
    /// order; a block (or the rest of a block) that does not is handed to `on_damage` with
    /// the internal keys that bound it — after the previous index key, up to and including
    /// this one; `None` where unknown — and stepped over, unlike [`Table::iter`], which
    /// stops at the first error. Repair's read of a possibly damaged table. Bypasses the
    /// block cache.
    pub fn salvage_entries(
        &self,
        on_entry: &mut dyn FnMut(&[u8], &[u8]),
        on_damage: &mut DamagedBlock<'_>,
    ) {
        let mut index = self.index.iter();
        index.seek_to_first();
        let mut previous: Option<Vec<u8>> = None;
        while index.valid() {
            let block = self
                .decode_index_handle(&index)
                .and_then(|handle| self.read_block_uncached(handle));
            match block {
                Ok(block) => {
                    let mut entries = Arc::new(block).iter();
                    entries.seek_to_first();
                    while entries.valid() {
                        on_entry(entries.key(), entries.value());
                        entries.next();
                    }
                    if let Err(e) = entries.status() {
                        on_damage(e, previous.as_deref(), Some(index.key()));
                    }
                }
                Err(e) => on_damage(e, previous.as_deref(), Some(index.key())),
            }
            previous = Some(index.key().to_vec());
            index.next();
        }
        if let Err(e) = index.status() {
            on_damage(e, previous.as_deref(), None);
        }
    }

    /// Loads the data block named by the index entry the iterator is positioned on.
    fn block_for_index_entry(&self, index: &BlockIter) -> Result<Arc<Block>> {
        self.read_block(self.decode_index_handle(index)?)
    }

    /// Decodes the block handle stored as the value of the current index entry.
    pub(crate) fn decode_index_handle(&self, index: &BlockIter) -> Result<BlockHandle> {
        BlockHandle::decode_varint(index.value()).ok_or_else(|| {
            Error::corruption(
                &*self.file_name,
                self.index.file_offset(),
                "bad block handle in index",
            )
        })
    }

    fn footer_offset(&self) -> u64 {
        self.file_size.saturating_sub(FOOTER_LEN as u64)
    }

    /// A data block through the block cache (if any), read and verified on a miss.
    pub(crate) fn read_block(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        let Some(cache) = &self.block_cache else {
            return Ok(Arc::new(self.read_block_uncached(handle)?));
        };
        if let Some(block) = cache.get(self.file_number, handle.offset) {
            return Ok(block);
        }
        let block = Arc::new(self.read_block_uncached(handle)?);
        cache.insert(self.file_number, handle.offset, Arc::clone(&block));
        Ok(block)
    }

    fn read_block_uncached(&self, handle: BlockHandle) -> Result<Block> {
        let contents =
            read_block_contents(&*self.file, &self.file_name, self.footer_offset(), handle)?;
        Block::new(contents, Arc::clone(&self.file_name), handle.offset)
    }
}

/// Reads and checksums one block; returns its contents without the trailer. `data_end`
/// is where the footer starts: no block may extend past it.
fn read_block_contents(
    file: &dyn ReadableFile,
    file_name: &str,
    data_end: u64,
    handle: BlockHandle,
) -> Result<Vec<u8>> {
    let in_bounds = handle.end_with_trailer().is_some_and(|end| end <= data_end);
    if !in_bounds {
        let (offset, size) = (handle.offset, handle.size);
        return Err(Error::corruption(
            file_name,
            offset,
            format!("block handle (offset {offset}, size {size}) past the footer at {data_end}"),
        ));
    }
    // Bounded by the file size just checked, so this is not a length taken on trust.
    let mut buf = vec![0u8; handle.size as usize + BLOCK_TRAILER_LEN];
    file.read_exact_at(handle.offset, &mut buf, file_name)?;
    let len = verify_block(&buf, file_name, handle.offset)?;
    buf.truncate(len);
    Ok(buf)
}
