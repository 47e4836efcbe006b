//! Caches in front of table files: [`BlockCache`] (decoded blocks, bounded by bytes) and
//! [`TableCache`] (open tables, bounded by count). Both are LRU.
//!
//! Invariants: `usage <= capacity` after every call (an item larger than its shard's share
//! of the capacity is simply not cached); blocks are cached only after their checksum was
//! verified. Thread safety: both are `Send + Sync`; each is split into shards by key, each
//! shard's LRU behind its own `parking_lot::Mutex`, held only for map updates, never across
//! I/O (with one mutex, every point read of 16 threads queued on it). Recency is per shard,
//! as in LevelDB's sharded cache. Evicted items stay alive while an `Arc` to them is held
//! elsewhere.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Result;
use crate::filename::table_file_name;
use crate::fs::FileSystem;
use crate::sstable::block::Block;
use crate::sstable::reader::Table;

/// Least-recently-used map with a per-item charge. Recency is a tick counter; `order`
/// maps tick -> key so the oldest entry is the first in the B-tree.
#[derive(Debug)]
struct Lru<K, V> {
    map: HashMap<K, (V, usize, u64), ahash::RandomState>,
    order: BTreeMap<u64, K>,
    usage: usize,
    capacity: usize,
    tick: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    fn new(capacity: usize) -> Self {
        Lru {
            map: HashMap::default(),
            order: BTreeMap::new(),
            usage: 0,
            capacity,
            tick: 0,
        }
    }

    fn get(&mut self, key: &K) -> Option<V> {
        self.tick += 1;
        let (value, _, tick) = self.map.get_mut(key)?;
        self.order.remove(tick);
        *tick = self.tick;
        self.order.insert(self.tick, key.clone());
        Some(value.clone())
    }

    fn insert(&mut self, key: K, value: V, charge: usize) {
        self.remove(&key);
        if charge > self.capacity {
            return;
        }
        while self.usage + charge > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, c, _)) = self.map.remove(&oldest) {
                self.usage -= c;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.map.insert(key, (value, charge, self.tick));
        self.usage += charge;
    }

    fn remove(&mut self, key: &K) {
        if let Some((_, charge, tick)) = self.map.remove(key) {
            self.order.remove(&tick);
            self.usage -= charge;
        }
    }
}

/// Most shards a cache is split into.
const MAX_SHARDS: usize = 16;

/// [`Lru`]s side by side, a key's shard chosen by its hash; `capacity` is divided between
/// them (the remainder to the first shards), so their sum is exactly the whole.
#[derive(Debug)]
struct ShardedLru<K, V> {
    shards: Box<[Mutex<Lru<K, V>>]>,
    /// aHash, not the standard SipHash: keys are the engine's own numbers, and SipHash for
    /// the shard on top of the map's own hash cost a point read ~4% more instructions.
    hasher: ahash::RandomState,
}

impl<K: Hash + Eq + Clone, V: Clone> ShardedLru<K, V> {
    fn new(capacity: usize, shards: usize) -> Self {
        let shards = shards.clamp(1, MAX_SHARDS);
        let (share, extra) = (capacity / shards, capacity % shards);
        ShardedLru {
            shards: (0..shards)
                .map(|i| Mutex::new(Lru::new(share + usize::from(i < extra))))
                .collect(),
            hasher: Default::default(),
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Lru<K, V>> {
        let index = (self.hasher.hash_one(key) >> 32) as usize % self.shards.len();
        &self.shards[index]
    }

    fn get(&self, key: &K) -> Option<V> {
        self.shard(key).lock().get(key)
    }

    fn insert(&self, key: K, value: V, charge: usize) {
        self.shard(&key).lock().insert(key, value, charge);
    }

    fn remove(&self, key: &K) {
        self.shard(key).lock().remove(key);
    }

    fn sum(&self, of: impl Fn(&Lru<K, V>) -> usize) -> usize {
        self.shards.iter().map(|s| of(&s.lock())).sum()
    }
}

/// Size-bounded LRU of decoded blocks keyed by (file number, block offset).
#[derive(Debug)]
pub struct BlockCache {
    inner: ShardedLru<(u64, u64), Arc<Block>>,
}

impl BlockCache {
    /// A cache of `capacity_bytes` for blocks of the default 4 KiB.
    pub fn new(capacity_bytes: usize) -> BlockCache {
        BlockCache::for_blocks_of(capacity_bytes, 4 << 10)
    }

    /// A cache of `capacity_bytes` for tables written with `block_size`. It is sharded only
    /// as far as each shard still holds at least 256 KiB and 64 blocks, so a small cache
    /// keeps whole-cache recency and no block a shard must hold is larger than its share.
    pub fn for_blocks_of(capacity_bytes: usize, block_size: usize) -> BlockCache {
        let shard_at_least = (256 << 10).max(block_size.saturating_mul(64));
        BlockCache {
            inner: ShardedLru::new(capacity_bytes, capacity_bytes / shard_at_least),
        }
    }

    /// Bytes of blocks currently cached.
    pub fn usage(&self) -> usize {
        self.inner.sum(|lru| lru.usage)
    }

    pub fn capacity(&self) -> usize {
        self.inner.sum(|lru| lru.capacity)
    }

    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        self.inner.get(&(file_number, offset))
    }

    /// Caches a verified block; its charge is its byte length.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        let charge = block.size();
        self.inner.insert((file_number, offset), block, charge);
    }
}

/// A bounded number of open tables, keyed by file number.
#[derive(Debug)]
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    block_cache: Option<Arc<BlockCache>>,
    tables: ShardedLru<u64, Arc<Table>>,
}

impl TableCache {
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        max_open_tables: usize,
        block_cache: Option<Arc<BlockCache>>,
    ) -> TableCache {
        TableCache {
            fs,
            dir,
            block_cache,
            // Sharded when each shard keeps at least 64 tables open.
            tables: ShardedLru::new(max_open_tables.max(1), max_open_tables / 64),
        }
    }

    /// The open table for `file_number`, opening `filename::table_file_name(dir, n)` if it
    /// is not cached. Opening happens outside the lock; if two threads race, both open and
    /// the later insert wins (both handles are valid).
    pub fn get(&self, file_number: u64, file_size: u64) -> Result<Arc<Table>> {
        if let Some(table) = self.tables.get(&file_number) {
            return Ok(table);
        }
        let path = table_file_name(&self.dir, file_number);
        let file = self.fs.open_read(&path)?;
        let table = Arc::new(Table::open(
            file,
            file_number,
            path.display().to_string(),
            file_size,
            self.block_cache.clone(),
        )?);
        self.tables.insert(file_number, Arc::clone(&table), 1);
        Ok(table)
    }

    /// Drops the cached handle (the file is being deleted). Readers holding the `Arc`
    /// keep using it; the next `get` reopens the file.
    pub fn evict(&self, file_number: u64) {
        self.tables.remove(&file_number);
    }

    /// Number of tables currently open through this cache.
    pub fn len(&self) -> usize {
        self.tables.sum(|lru| lru.map.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl crate::version::TableSource for TableCache {
    fn get(&self, number: u64, file_size: u64, ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        TableCache::get(self, number, file_size)?.get(ikey)
    }

    fn iter(&self, number: u64, file_size: u64) -> Result<Box<dyn crate::iter::InternalIterator>> {
        Ok(Box::new(TableCache::get(self, number, file_size)?.iter()))
    }

    fn cursor(
        &self,
        number: u64,
        file_size: u64,
    ) -> Result<Option<Box<dyn crate::version::PointCursor>>> {
        let table = TableCache::get(self, number, file_size)?;
        Ok(Some(Box::new(super::reader::TableCursor::new(table))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recently_used_and_tracks_charge() {
        let mut lru: Lru<u32, &str> = Lru::new(10);
        lru.insert(1, "a", 4);
        lru.insert(2, "b", 4);
        assert_eq!(lru.get(&1), Some("a")); // 2 is now the oldest
        lru.insert(3, "c", 4);
        assert_eq!(lru.get(&2), None);
        assert_eq!((lru.get(&1), lru.get(&3)), (Some("a"), Some("c")));
        assert_eq!(lru.usage, 8);
        lru.insert(1, "a2", 2); // replacing re-charges
        assert_eq!(lru.usage, 6);
        lru.insert(4, "too big", 11);
        assert_eq!((lru.get(&4), lru.usage), (None, 6));
        lru.remove(&3);
        lru.remove(&3);
        assert_eq!((lru.usage, lru.map.len(), lru.order.len()), (2, 1, 1));
    }

    #[test]
    fn sharded_lru_splits_capacity_exactly_and_keeps_every_shard_within_its_share() {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let sharded: ShardedLru<u32, u32> = ShardedLru::new(1003, 16);
        assert_eq!(sharded.shards.len(), 16);
        assert_eq!(sharded.sum(|lru| lru.capacity), 1003);
        assert_eq!(ShardedLru::<u32, u32>::new(10, 0).shards.len(), 1);
        assert_eq!(ShardedLru::<u32, u32>::new(10, 99).shards.len(), MAX_SHARDS);
        let seed = 43;
        let mut rng = SmallRng::seed_from_u64(seed);
        for i in 0..20_000 {
            let key = rng.gen_range(0..500);
            match rng.gen_range(0..4) {
                0 => sharded.remove(&key),
                1 => sharded.insert(key, i, rng.gen_range(1..40)),
                _ => {
                    if let Some(v) = sharded.get(&key) {
                        assert!(v < i, "seed {seed}: value {v} from the future");
                    }
                }
            }
        }
        for shard in sharded.shards.iter() {
            let lru = shard.lock();
            assert!(lru.usage <= lru.capacity, "seed {seed}");
        }
        assert!(sharded.sum(|lru| lru.usage) <= 1003);
        // A key is found where it was put, whichever shard that is.
        sharded.insert(7777, 1, 1);
        assert_eq!(sharded.get(&7777), Some(1));
        sharded.remove(&7777);
        assert_eq!(sharded.get(&7777), None);
    }

    #[test]
    fn small_caches_stay_whole_and_large_ones_are_sharded() {
        assert_eq!(BlockCache::new(2000).inner.shards.len(), 1);
        assert_eq!(BlockCache::new(64 << 20).inner.shards.len(), MAX_SHARDS);
        assert_eq!(BlockCache::new(64 << 20).capacity(), 64 << 20);
        // Large blocks: fewer, larger shards, each holding 64 of them.
        assert_eq!(BlockCache::for_blocks_of(64 << 20, 256 << 10).inner.shards.len(), 4);
        assert_eq!(BlockCache::for_blocks_of(64 << 20, 4 << 20).inner.shards.len(), 1);
        let fs: Arc<dyn FileSystem> = Arc::new(crate::fs::MemFs::new());
        let few = TableCache::new(Arc::clone(&fs), PathBuf::from("/db"), 16, None);
        assert_eq!(few.tables.shards.len(), 1);
        let many = TableCache::new(fs, PathBuf::from("/db"), 1000, None);
        assert_eq!(many.tables.shards.len(), 15);
        assert_eq!(many.tables.sum(|lru| lru.capacity), 1000);
    }

    #[test]
    fn lru_usage_never_exceeds_capacity_under_random_load() {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let seed = 42;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut lru: Lru<u32, u32> = Lru::new(1000);
        for i in 0..20_000 {
            let key = rng.gen_range(0..200);
            if rng.gen_bool(0.5) {
                lru.insert(key, i, rng.gen_range(1..300));
            } else {
                lru.get(&key);
            }
            assert!(lru.usage <= 1000, "seed {seed}: usage {}", lru.usage);
            assert_eq!(lru.map.len(), lru.order.len(), "seed {seed}");
        }
        let charged: usize = lru.map.values().map(|(_, c, _)| c).sum();
        assert_eq!(charged, lru.usage);
    }
}
