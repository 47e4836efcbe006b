//! WATCH's bookkeeping: which keys connections watch, and a version per watched key that
//! every write of it raises, so EXEC can tell whether one changed since WATCH.
//!
//! Invariants:
//! - Only watched keys have an entry ([`Watches`]); an entry lives while at least one
//!   connection's [`WatchedKeys`] names it (dropping the set, at EXEC, DISCARD, UNWATCH or
//!   disconnect, gives its entries back). So unwatched keys cost a write one relaxed atomic
//!   load ([`Watches::touch`]) and nothing else.
//! - A write raises the version of its key while holding the key's stripe lock, before its
//!   engine write; WATCH registers a key and reads its version and expiry holding the same
//!   stripe; EXEC compares holding it again. So a write either precedes the WATCH (and is
//!   seen by its read) or raises the version WATCH recorded: a write that fails in the
//!   engine aborts a watching transaction too (a false conflict, never a missed one).
//! - FLUSHDB, holding every stripe, raises every entry once it has deleted what it deletes
//!   (also when it fails part way).
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

/// The registry of watched keys, shared by every connection (one per server).
#[derive(Debug, Default)]
pub struct Watches {
    keys: Mutex<HashMap<Vec<u8>, Entry>>,
    /// `keys.len()`, readable without the lock: zero means no write needs the lock.
    watched: AtomicUsize,
}

impl Watches {
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Entry>> {
        // A panic while the map was held leaves at worst a version raised or a count off by
        // one: a false conflict or an entry kept too long, never a missed write.
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a write of `key`. The caller holds the key's stripe lock.
    pub fn touch(&self, key: &[u8]) {
        // Relaxed is enough: a WATCH of `key` that finished before this write registered
        // under the same stripe lock the caller holds now, which orders the two.
        if self.watched.load(Relaxed) == 0 {
            return;
        }
        if let Some(entry) = self.lock().get_mut(key) {
            entry.version += 1;
        }
    }

    /// Notes a write of every key (FLUSHDB). The caller holds every stripe.
    pub fn touch_all(&self) {
        for entry in self.lock().values_mut() {
            entry.version += 1;
        }
    }

    /// Adds a watcher of `key` and returns the key's version. The caller holds its stripe.
    fn register(&self, key: &[u8]) -> u64 {
        let mut keys = self.lock();
        let entry = keys.entry(key.to_vec()).or_insert(Entry {
            watchers: 0,
            version: 0,
        });
        entry.watchers += 1;
        let version = entry.version;
        self.watched.store(keys.len(), Relaxed);
        version
    }

    fn unregister<'k>(&self, keys: impl Iterator<Item = &'k Vec<u8>>) {
        let mut map = self.lock();
        for key in keys {
            if let Some(entry) = map.get_mut(key) {
                entry.watchers -= 1;
                if entry.watchers == 0 {
                    map.remove(key);
                }
            }
        }
        self.watched.store(map.len(), Relaxed);
    }

    /// How many keys are watched (by any connection).
    pub fn count(&self) -> usize {
        self.watched.load(Relaxed)
    }
}

/// What WATCH recorded of a key: its version then, and its expiry if it was live with one.
#[derive(Debug)]
struct Seen {
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

    /// What watching `key` costs this connection: its bytes and about a map entry's.
    pub fn cost(key: &[u8]) -> usize {
        key.len() + 64
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// Watches `key` (not watched yet), live until `expires_at_ms` if it has an expiry. The
    /// caller holds the key's stripe and read the expiry under it.
    pub fn add(&mut self, key: &[u8], expires_at_ms: Option<u64>) {
        let version = self.registry.register(key);
        self.bytes += WatchedKeys::cost(key);
        let seen = Seen {
            version,
            expires_at_ms,
        };
        self.keys.insert(key.to_vec(), seen);
    }

    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.keys().map(Vec::as_slice)
    }

    /// Whether a watched key was written since WATCH, or was live then and has expired by
    /// `now_ms`. The caller holds every watched key's stripe.
    pub fn changed(&self, now_ms: u64) -> bool {
        let registry = self.registry.lock();
        self.keys.iter().any(|(key, seen)| {
            seen.expires_at_ms.is_some_and(|at| at <= now_ms)
                || registry.get(key).map(|e| e.version) != Some(seen.version)
        })
    }
}

impl Drop for WatchedKeys {
    fn drop(&mut self) {
        self.registry.unregister(self.keys.keys());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_of_a_watched_key_is_seen_and_others_are_not() {
        let registry = Arc::new(Watches::default());
        let mut mine = WatchedKeys::new(registry.clone());
        mine.add(b"a", None);
        registry.touch(b"b");
        assert!(!mine.changed(0));
        registry.touch(b"a");
        assert!(mine.changed(0));
    }

    #[test]
    fn entries_live_while_a_watcher_does() {
        let registry = Arc::new(Watches::default());
        let mut first = WatchedKeys::new(registry.clone());
        let mut second = WatchedKeys::new(registry.clone());
        first.add(b"k", None);
        registry.touch(b"k");
        second.add(b"k", None);
        assert_eq!(registry.count(), 1);
        drop(first);
        assert_eq!(registry.count(), 1);
        assert!(
            !second.changed(0),
            "the second watcher came after the write"
        );
        registry.touch(b"k");
        assert!(second.changed(0));
        drop(second);
        assert_eq!(registry.count(), 0);
        assert!(registry.lock().is_empty());
    }

    #[test]
    fn an_expiry_passing_counts_as_a_change_and_touch_all_reaches_every_key() {
        let registry = Arc::new(Watches::default());
        let mut expiring = WatchedKeys::new(registry.clone());
        expiring.add(b"e", Some(1_000));
        assert!(!expiring.changed(999));
        assert!(expiring.changed(1_000));
        let mut flushed = WatchedKeys::new(registry.clone());
        flushed.add(b"x", None);
        flushed.add(b"y", None);
        registry.touch_all();
        assert!(flushed.changed(0));
    }
}
