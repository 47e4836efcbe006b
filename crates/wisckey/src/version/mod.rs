//! Versions: which table files make up the LSM-tree, and the manifest that records how that
//! set changes over time.
//!
//! - [`FileMeta`] / [`Version`] (in `levels.rs`): an immutable snapshot of the tree's files,
//!   shared as `Arc<Version>` by readers, iterators and compactions;
//! - [`VersionEdit`] (in `edit.rs`): one change to the tree and the engine's persistent
//!   counters, encoded as one manifest record;
//! - [`LevelIterator`] (in `level_iter.rs`): a lazy concatenation of one sorted level;
//! - [`VersionSet`] (in `set.rs`): the current version plus the manifest writer, `CURRENT`
//!   and recovery.
//!
//! The table layer is reached only through [`TableSource`], so this module can be tested with
//! an in-memory mock and does not depend on the SSTable reader.
//!
//! Thread-safety: `FileMeta`, `Version` and `VersionEdit` are plain immutable data (`Send +
//! Sync`). `VersionSet` is not internally synchronized; the database holds a mutex around it.

mod edit;
mod level_iter;
mod levels;
mod manifest;
mod set;
#[cfg(test)]
pub(crate) mod testutil;

pub use edit::{tags, VersionEdit, EXTRA_TAGS};
pub use level_iter::LevelIterator;
pub(crate) use levels::add_range;
pub use levels::{FileMeta, SegmentMeta, Version};
pub use manifest::{is_empty_new_manifest, MANIFEST_FORMAT_VERSION, MANIFEST_MAGIC};
pub(crate) use set::RebuiltCounters;
pub use set::{LoadedState, VersionSet, DEFAULT_MANIFEST_SIZE_LIMIT};

use crate::error::Result;
use crate::iter::InternalIterator;

/// Number of LSM levels, L0 to L6.
pub const NUM_LEVELS: usize = 7;

/// What a Version needs from the table layer (implemented by `sstable::TableCache`; tests
/// use a fake).
pub trait TableSource: Send + Sync {
    /// First entry in table `number` with internal key >= ikey whose user key == user_key(ikey).
    fn get(&self, number: u64, file_size: u64, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
    /// An iterator over the whole table.
    fn iter(&self, number: u64, file_size: u64) -> Result<Box<dyn InternalIterator>>;
    /// A cursor for point lookups in table `number` in ascending key order
    /// ([`Version::get_ascending`]); `None`: the source has none, and `get` is used.
    fn cursor(&self, number: u64, file_size: u64) -> Result<Option<Box<dyn PointCursor>>> {
        let _ = (number, file_size);
        Ok(None)
    }
}

/// Point lookups in one table, answered as [`TableSource::get`] answers them, faster when
/// the keys come in ascending order (the cursor keeps what the last lookup found).
pub trait PointCursor: Send {
    fn get(&mut self, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
}

/// A cursor in one table, or `None`: the source has none for it.
type OpenCursor = (u64, Option<Box<dyn PointCursor>>);

/// The table cursors of a run of [`Version::get_ascending`] lookups: one per L0 table met,
/// and one per deeper level, for the table of that level the last lookup met (keys ascend,
/// so a level's earlier tables are not met again; if one is, it gets a new cursor). So a run
/// holds at most the L0 tables and one table per level open, whatever the database's size.
#[derive(Default)]
pub struct AscendingGets {
    level0: Vec<OpenCursor>,
    deeper: [Option<OpenCursor>; NUM_LEVELS],
}

impl std::fmt::Debug for AscendingGets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let deeper = self.deeper.iter().flatten().map(|(n, _)| n);
        f.debug_struct("AscendingGets")
            .field("level0", &self.level0.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("deeper", &deeper.collect::<Vec<_>>())
            .finish()
    }
}

impl AscendingGets {
    /// `ikey`'s lookup in table `number` of `level` through its cursor, opened on first use.
    fn get(
        &mut self,
        tables: &dyn TableSource,
        level: usize,
        number: u64,
        file_size: u64,
        ikey: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let cursor = if level == 0 {
            let i = match self.level0.iter().position(|(n, _)| *n == number) {
                Some(i) => i,
                None => {
                    self.level0.push((number, tables.cursor(number, file_size)?));
                    self.level0.len() - 1
                }
            };
            &mut self.level0[i].1
        } else {
            let slot = &mut self.deeper[level];
            match slot {
                Some((n, cursor)) if *n == number => cursor,
                _ => {
                    // The level's previous table is released before the next one is opened.
                    *slot = None;
                    &mut slot.insert((number, tables.cursor(number, file_size)?)).1
                }
            }
        };
        match cursor {
            Some(cursor) => cursor.get(ikey),
            None => tables.get(number, file_size, ikey),
        }
    }
}
