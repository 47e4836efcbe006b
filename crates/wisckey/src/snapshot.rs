//! Snapshots: a sequence number pinned for reading, registered so that compaction keeps
//! every version a live snapshot can see.
//!
//! Invariant: while a `Snapshot` (or a clone) is alive its sequence is in the registry, and
//! compaction never drops an entry that is the newest one visible at a registered
//! sequence. Dropping the last clone unregisters it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// The set of live snapshot sequence numbers (with counts).
#[derive(Debug, Default)]
pub struct SnapshotRegistry {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotRegistry {
    /// Pins `seq` and returns a handle that unpins it on drop.
    pub fn register(self: &Arc<Self>, seq: SequenceNumber) -> Snapshot {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence: seq,
                registry: Arc::clone(self),
            }),
        }
    }

    /// Pins the current value of `visible` (read under the registry lock, so that a
    /// concurrent [`SnapshotRegistry::oldest_or_current`] sees either this snapshot or a
    /// `visible` no larger than its sequence).
    pub fn register_current(self: &Arc<Self>, visible: &AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let seq = visible.load(Ordering::Acquire);
        *live.entry(seq).or_insert(0) += 1;
        drop(live);
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence: seq,
                registry: Arc::clone(self),
            }),
        }
    }

    /// Oldest pinned sequence, if any.
    pub fn oldest(&self) -> Option<SequenceNumber> {
        self.live.lock().keys().next().copied()
    }

    /// The oldest sequence any reader may still use: the oldest snapshot, or else the
    /// current value of `visible`. Compaction may drop only what this sequence cannot see.
    pub fn oldest_or_current(&self, visible: &AtomicU64) -> SequenceNumber {
        let live = self.live.lock();
        let current = visible.load(Ordering::Acquire);
        live.keys().next().copied().unwrap_or(current).min(current)
    }

    fn unregister(&self, seq: SequenceNumber) {
        let mut live = self.live.lock();
        if let Some(count) = live.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                live.remove(&seq);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    sequence: SequenceNumber,
    registry: Arc<SnapshotRegistry>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.registry.unregister(self.sequence);
    }
}

/// A consistent point-in-time view of the database. Cheap to clone; reads through
/// `ReadOptions { snapshot: Some(s), .. }` see exactly the writes acknowledged before it was
/// taken. While a snapshot is alive, the versions it sees are kept (compaction keeps them,
/// GC keeps their values), so drop snapshots you no longer need.
///
/// ```
/// # fn main() -> wisckey::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
/// db.put("balance", "100")?;
/// let snapshot = db.snapshot();
/// db.put("balance", "50")?;
/// let then = wisckey::ReadOptions { snapshot: Some(snapshot.clone()), ..Default::default() };
/// assert_eq!(db.get_opt("balance", &then)?, Some(b"100".to_vec()));
/// assert_eq!(db.get("balance")?, Some(b"50".to_vec()));
/// assert!(snapshot.sequence() > 0);
/// drop((then, snapshot)); // what it pinned can be reclaimed
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }

    /// Whether this snapshot was taken from the database that owns `registry`.
    pub(crate) fn belongs_to(&self, registry: &Arc<SnapshotRegistry>) -> bool {
        Arc::ptr_eq(&self.inner.registry, registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_tracks_live_handles() {
        let reg = Arc::new(SnapshotRegistry::default());
        assert_eq!(reg.oldest(), None);
        let a = reg.register(5);
        let b = reg.register(9);
        let a2 = a.clone();
        assert_eq!(reg.oldest(), Some(5));
        drop(a);
        assert_eq!(reg.oldest(), Some(5), "clone still alive");
        drop(a2);
        assert_eq!(reg.oldest(), Some(9));
        drop(b);
        assert_eq!(reg.oldest(), None);
    }
}
