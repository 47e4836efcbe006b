//! wisckey: an embeddable, persistent key-value store that keeps keys and value addresses
//! in an LSM-tree and values in an append-only value log (WiscKey, FAST '16).
//!
//! See `docs/DESIGN.md` for the architecture and `docs/FORMAT.md` for the on-disk formats.

pub mod checksum;
pub mod coding;
pub mod error;
pub mod filename;
pub mod fs;
pub mod iter;
pub mod key;
pub mod position;
pub mod sstable;
pub mod version;
pub mod compaction;
pub mod vlog;

pub use error::{Error, Result};
pub mod memtable;
