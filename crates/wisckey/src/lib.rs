//! wisckey: an embeddable, persistent key-value store that keeps keys and value addresses
//! in an LSM-tree and values in an append-only value log (WiscKey, FAST '16).
//!
//! ```no_run
//! use wisckey::{Db, Options};
//! let db = Db::open("/tmp/example-db", Options::default())?;
//! db.put(b"key", b"value")?;
//! assert_eq!(db.get(b"key")?, Some(b"value".to_vec()));
//! db.close()?;
//! # Ok::<(), wisckey::Error>(())
//! ```
//!
//! See `docs/DESIGN.md` for the architecture and `docs/FORMAT.md` for the on-disk formats.

pub mod batch;
pub mod checksum;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod error;
pub mod filename;
pub mod fs;
pub mod gc;
pub mod iter;
pub mod key;
pub mod memtable;
pub mod options;
pub mod position;
pub mod safety;
pub mod snapshot;
pub mod sstable;
pub mod version;
pub mod vlog;

pub use batch::WriteBatch;
pub use db::Db;
pub use db::{
    CheckProblem, CheckReport, CheckpointReport, DbStats, GcOptions, GcTotals, RecoveryReport,
    RepairReport, SalvagedDamage, ValueLogStats,
};
pub use error::{Error, Result};
pub use gc::{GcOutcome, SegmentState, SegmentView, VictimOrder};
pub use iter::{DbIterator, Entries, Keys, Range};
pub use options::{Options, ReadOptions, RecoveryMode, WriteOptions, MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use position::LogPosition;
pub use snapshot::Snapshot;
