//! WATCH's bookkeeping: which keys connections watch, and a version per watched key that
//! every write of it raises, so EXEC can tell whether one changed since WATCH.
//!
//! Invariants:
//! - Only watched keys have an entry ([`Watches`]); an entry lives while at least one
//!   connection's [`WatchedKeys`] names it (dropping the set, at EXEC, DISCARD, UNWATCH or
//!   disconnect, gives its entries back). While nothing is watched a write costs one
//!   relaxed atomic load ([`Watches::touch`]); while anything is, a write also locks the
//!   registry's shard of its key's stripe (a shard per stripe: the caller already holds
//!   that stripe, so writers of different stripes never meet on it) and looks the key up.
//! - A write raises the version of its key while holding the key's stripe lock, before its
//!   engine write; WATCH registers a key and reads its version and expiry holding the same
//!   stripe; EXEC compares holding it again. So a write either precedes the WATCH (and is
//!   seen by its read) or raises the version WATCH recorded: a write that fails in the
//!   engine aborts a watching transaction too (a false conflict, never a missed one).
//! - DEL and FLUSHDB raise only the keys that were live (Redis 7 touches only keys that
//!   existed): FLUSHDB, holding every stripe, notes which watched keys are live before it
//!   deletes and raises them once it has deleted what it deletes (also when it fails part
//!   way).
//! - A key that was live at WATCH and has expired by EXEC counts as changed (Redis 7);
//!   one already expired or absent at WATCH does not change by being swept, so the sweeper
//!   raises nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

/// One watched key: how many connections watch it and how often it was written since the
/// first of them did.
#[derive(Debug)]
struct Entry {
    watchers: usize,
    version: u64,
}

type Shard = HashMap<Vec<u8>, Entry>;

/// The registry of watched keys, shared by every connection (one per server), in one
/// shard per stripe: a key's entry lives in the shard of the stripe that guards the key.
#[derive(Debug)]
pub struct Watches {
    shards: Vec<Mutex<Shard>>,
    /// Entries in all shards, readable without a lock: zero means no write needs one.
    watched: AtomicUsize,
}

impl Watches {
    /// A registry of `stripes` shards (the store's stripe count).
    pub fn new(stripes: usize) -> Watches {
        Watches {
            shards: (0..stripes.max(1)).map(|_| Mutex::default()).collect(),
            watched: AtomicUsize::new(0),
        }
    }

    fn shard(&self, stripe: usize) -> MutexGuard<'_, Shard> {
        // A panic while a shard was held leaves at worst a version raised or a count off by
        // one: a false conflict or an entry kept too long, never a missed write.
        let shard = &self.shards[stripe % self.shards.len()];
        shard.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any key is watched; while not, a write need not call [`Watches::touch`].
    /// Relaxed is enough: a WATCH of a key that finished before a write of it registered
    /// under the stripe lock the writer holds, which orders the two.
    pub fn any(&self) -> bool {
        self.watched.load(Relaxed) != 0
    }

    /// Notes a write of `key`, guarded by `stripe`, which the caller holds.
    pub fn touch(&self, stripe: usize, key: &[u8]) {
        if let Some(entry) = self.shard(stripe).get_mut(key) {
            entry.version += 1;
        }
    }

    /// Every watched key with its stripe (FLUSHDB raises those that exist). The caller
    /// holds every stripe, so the list stays true until it lets go.
    pub fn watched_keys(&self) -> Vec<(usize, Vec<u8>)> {
        (0..self.shards.len())
            .flat_map(|stripe| {
                let keys: Vec<Vec<u8>> = self.shard(stripe).keys().cloned().collect();
                keys.into_iter().map(move |key| (stripe, key))
            })
            .collect()
    }

    /// Adds a watcher of `key` and returns the key's version. The caller holds `stripe`.
    fn register(&self, stripe: usize, key: &[u8]) -> u64 {
        let mut shard = self.shard(stripe);
        let entry = shard.entry(key.to_vec()).or_insert_with(|| {
            self.watched.fetch_add(1, Relaxed);
            Entry {
                watchers: 0,
                version: 0,
            }
        });
        entry.watchers += 1;
        entry.version
    }

    fn unregister(&self, stripe: usize, key: &[u8]) {
        let mut shard = self.shard(stripe);
        if let Some(entry) = shard.get_mut(key) {
            entry.watchers -= 1;
            if entry.watchers == 0 {
                shard.remove(key);
                self.watched.fetch_sub(1, Relaxed);
            }
        }
    }

    fn version(&self, stripe: usize, key: &[u8]) -> Option<u64> {
        self.shard(stripe).get(key).map(|e| e.version)
    }

    /// How many keys are watched (by any connection).
    pub fn count(&self) -> usize {
        self.watched.load(Relaxed)
    }
}

/// What WATCH recorded of a key: its stripe, its version then, and its expiry if it was live
/// with one.
#[derive(Debug)]
struct Seen {
    stripe: usize,
    version: u64,
    expires_at_ms: Option<u64>,
}

/// The keys one connection watches; dropping it unwatches them.
#[derive(Debug)]
pub struct WatchedKeys {
    registry: Arc<Watches>,
    keys: HashMap<Vec<u8>, Seen>,
    /// What the keys cost, as [`WatchedKeys::cost`] counts it (bounded by the caller).
    bytes: usize,
}

impl WatchedKeys {
    pub fn new(registry: Arc<Watches>) -> WatchedKeys {
        WatchedKeys {
            registry,
            keys: HashMap::new(),
            bytes: 0,
        }
    }

    /// What watching `key` costs: two copies of it (this set's and the registry's) and two
    /// hash-map entries with their headers, about 80 bytes each.
    pub fn cost(key: &[u8]) -> usize {
        2 * (key.len() + 80)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Watches `key` (not watched yet), live until `expires_at_ms` if it has an expiry. The
    /// caller holds the key's stripe, `stripe`, and read the expiry under it.
    pub fn add(&mut self, stripe: usize, key: &[u8], expires_at_ms: Option<u64>) {
        let version = self.registry.register(stripe, key);
        self.bytes += WatchedKeys::cost(key);
        let seen = Seen {
            stripe,
            version,
            expires_at_ms,
        };
        self.keys.insert(key.to_vec(), seen);
    }

    /// The stripes of the watched keys (repeats possible).
    pub fn stripes(&self) -> impl Iterator<Item = usize> + '_ {
        self.keys.values().map(|seen| seen.stripe)
    }

    /// Whether a watched key was written since WATCH, or was live then and has expired by
    /// `now_ms`. The caller holds every watched key's stripe.
    pub fn changed(&self, now_ms: u64) -> bool {
        self.keys.iter().any(|(key, seen)| {
            seen.expires_at_ms.is_some_and(|at| at <= now_ms)
                || self.registry.version(seen.stripe, key) != Some(seen.version)
        })
    }
}

impl Drop for WatchedKeys {
    fn drop(&mut self) {
        for (key, seen) in &self.keys {
            self.registry.unregister(seen.stripe, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_of_a_watched_key_is_seen_and_others_are_not() {
        let registry = Arc::new(Watches::new(4));
        let mut mine = WatchedKeys::new(registry.clone());
        mine.add(0, b"a", None);
        registry.touch(0, b"b");
        assert!(!mine.changed(0));
        registry.touch(0, b"a");
        assert!(mine.changed(0));
    }

    #[test]
    fn entries_live_while_a_watcher_does() {
        let registry = Arc::new(Watches::new(4));
        let mut first = WatchedKeys::new(registry.clone());
        let mut second = WatchedKeys::new(registry.clone());
        first.add(1, b"k", None);
        registry.touch(1, b"k");
        second.add(1, b"k", None);
        assert_eq!(registry.count(), 1);
        drop(first);
        assert_eq!(registry.count(), 1);
        assert!(
            !second.changed(0),
            "the second watcher came after the write"
        );
        registry.touch(1, b"k");
        assert!(second.changed(0));
        drop(second);
        assert_eq!(registry.count(), 0);
        assert!(registry.shard(1).is_empty());
    }

    #[test]
    fn an_expiry_passing_counts_as_a_change_and_every_watched_key_is_listed() {
        let registry = Arc::new(Watches::new(4));
        let mut expiring = WatchedKeys::new(registry.clone());
        expiring.add(2, b"e", Some(1_000));
        assert!(!expiring.changed(999));
        assert!(expiring.changed(1_000));
        let mut flushed = WatchedKeys::new(registry.clone());
        flushed.add(0, b"x", None);
        flushed.add(3, b"y", None);
        let mut listed = registry.watched_keys();
        listed.sort();
        assert_eq!(
            listed,
            vec![(0, b"x".to_vec()), (2, b"e".to_vec()), (3, b"y".to_vec())]
        );
    }
}
