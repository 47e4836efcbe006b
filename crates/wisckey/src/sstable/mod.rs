//! Sorted string tables: immutable files of internal keys and opaque values, the on-disk
//! form of every LSM level. Layout: data blocks, one bloom filter block over user keys,
//! one index block, a fixed 56-byte footer (see `docs/FORMAT.md`).
//!
//! - [`TableBuilder`] writes a table from entries in strictly increasing internal-key
//!   order (single owner);
//! - [`Table`] reads one (immutable, `Send + Sync`, shared as `Arc<Table>`), with
//!   [`TableIterator`] for scans;
//! - [`BlockCache`] and [`TableCache`] are the thread-safe LRU caches in front of them.
//!
//! Every block carries a CRC32C; every length read from disk is checked before use, so
//! damaged files produce `Error::Corruption`, never a panic or a wild allocation.

pub mod block;
mod block_builder;
mod builder;
mod cache;
mod filter;
pub mod format;
mod iterator;
mod reader;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockIter};
pub use builder::{TableBuilder, TableOptions, MAX_ENTRY_LEN};
pub use cache::{BlockCache, TableCache};
pub use iterator::TableIterator;
pub use reader::Table;
