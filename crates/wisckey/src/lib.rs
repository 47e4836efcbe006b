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

// Every public item is documented; internals (public only with `testing`) are exempt.
#![cfg_attr(not(feature = "testing"), warn(missing_docs))]

/// Declares an internal module: crate-private, unless the `testing` feature (for the
/// crate's own tests, fuzz targets and tools that read the formats) makes it public.
macro_rules! internal {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "testing")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "testing"))]
        #[allow(dead_code, unused_imports, unreachable_pub)]
        pub(crate) mod $name;
    )*};
}

internal!(
    batch, checksum, coding, compaction, db, error, filename, gc, iter, key, memtable, options,
    position, safety, snapshot, sstable, version, vlog,
);
/// The file-system seam: the real one, an in-memory one that simulates power loss, and a
/// fault-injecting wrapper (see [`fs::FileSystem`]).
pub mod fs;

pub use batch::WriteBatch;
pub use db::Db;
pub use db::{
    AutoClusterTotals, CheckPhase, CheckProblem, CheckProgress, CheckReport, CheckpointReport,
    DbStats, GcOptions, GcTotals, RecoveryReport, RepairReport, SalvagedDamage, ValueLogStats,
};
pub use error::{Error, Result};
pub use gc::{ClusterOutcome, GcOutcome, SegmentState, SegmentView, VictimOrder};
pub use iter::{DbIterator, Entries, Keys, Range};
pub use options::{
    Options, ReadOptions, RecoveryMode, WriteOptions, MAX_KEY_SIZE, MAX_SCAN_LENGTH_HINT,
    MAX_VALUE_SIZE,
};
pub use position::LogPosition;
pub use snapshot::Snapshot;
