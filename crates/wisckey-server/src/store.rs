//! The keyspace on top of the engine: user keys with string values and expiry, encoded per
//! `format.rs`. Owns the `Db`, the write options the durability mode asks for, and the
//! striped key locks.
//!
//! Thread-safety and invariants:
//! - Every method blocks (engine I/O); call it from a blocking thread, never a reactor.
//! - Every write to a user key happens while holding that key's stripe lock
//!   ([`Store::lock`]), and a read-modify-write command (INCR, APPEND, SET NX/XX/GET/
//!   KEEPTTL, GETDEL, EXPIRE, PERSIST) holds it across its read and its write. So two
//!   INCRs of one key never both read the same value, and a plain SET cannot land between
//!   an INCR's read and write (which would lose the SET). Keys in different stripes never
//!   wait for each other; locks for several keys are taken in stripe order (no deadlock).
//!   Before writing a key, a writer raises its WATCH version ([`Store::touch`],
//!   `watch.rs`) under that lock; DEL and FLUSHDB raise only the keys that were live.
//! - A key whose expiry has passed does not exist for any reader: reads check the value's
//!   header. The sweeper ([`Store::sweep`]) deletes such keys later so compaction and
//!   value-log GC can reclaim them.
//! - With `appendfsync always` ([`Durability::BeforeReply`]), writes go to the engine
//!   unsynced and [`Store::make_durable`] syncs once before a batch's replies leave: every
//!   write a reply acknowledges, and every write a reply could have read (another
//!   connection's, visible in the memtable before it is synced), is on stable storage
//!   first, as Redis's `always` fsyncs before it sends an event-loop iteration's replies.
//!   A pipeline of N writes costs one sync, not N, and concurrent connections' syncs share
//!   the engine's group commit. The accounting: a write raises `inflight` before the engine
//!   call and, after it, raises `written` and then lowers `inflight`; `make_durable` reads
//!   `inflight` then `written` (that order), and skips the sync only if nothing is in flight
//!   and a sync that began after `written` was read has completed.
//! - Shortcut: a batch of one command runs inside [`Store::last_in_batch`], which makes
//!   this thread's writes synced ones. A synced write returns only once the log is synced
//!   through it, so everything appended before it is durable too: every write the batch
//!   made, and every write it read (a write is appended before it becomes visible). Then
//!   `make_durable` is not needed, which saves a second trip through the commit queue for a
//!   lone SET or INCR from each of many clients.
//! - Transactions (EXEC, `cmd/transaction.rs`): [`Store::begin_transaction`] takes every
//!   stripe the transaction's keys need (in stripe order, as [`Store::lock`]) and marks
//!   this thread as inside it. Until the [`Transaction`] is committed or dropped, this
//!   thread's [`Store::lock`] skips the stripes it holds, [`Store::put`], [`Store::put_many`] and
//!   [`Store::delete`] only record the key's new state in the transaction's overlay, and
//!   every read (`get`, `read_with`, `live`, `multi_get_within`, `keys_from`,
//!   `count_keys`) sees the overlay over the engine. [`Transaction::commit`] writes the
//!   overlay as one `WriteBatch` (all or nothing after a crash; visible to other readers
//!   at once), then the stripes are released: other connections never see part of a
//!   transaction, and no writer changes its keys between two of its commands. Two
//!   exceptions write what is pending first and then go on (documented in DESIGN.md):
//!   FLUSHDB inside a transaction ([`Store::flush_all`], not atomic itself) and a write of
//!   a caller-built batch ([`Store::write`]; no command does that inside a transaction:
//!   MSET writes through [`Store::put_many`]). Outside a transaction the cost is one
//!   thread-local flag read per call.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use wisckey::{Db, ReadOptions, WriteBatch, WriteOptions};

/// When acknowledged writes must be on stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before the reply that acknowledges them (or shows them) is sent (`always`).
    BeforeReply,
    /// Whenever the engine or a periodic sync gets to it (`everysec`, `no`).
    Eventually,
}

use crate::error::Error;
use crate::format::{self, Stored};
use crate::watch::Watches;

/// How many key locks there are.
pub const STRIPES: usize = 1024;

/// How long the sweeper waits before it reads again a due key whose value the engine could
/// not return: an I/O error may pass, and a file put back or repaired reads again.
const RETRY_UNREADABLE_MS: u64 = 60_000;

/// Most due entries the sweeper keeps waiting for a retry ([`RETRY_UNREADABLE_MS`]). More
/// unreadable values than this means the engine is failing broadly, not one value: the
/// sweep then stops with the error, as for any engine failure, and keeps the entries.
const MAX_RETRY_UNREADABLE: usize = 4096;

thread_local! {
    /// Inside [`Store::last_in_batch`]: this thread's writes are synced.
    static SYNC_WRITES: Cell<bool> = const { Cell::new(false) };
    /// Whether a synced write succeeded since [`Store::last_in_batch`] began.
    static SYNCED_WRITE: Cell<bool> = const { Cell::new(false) };
    /// Inside [`Store::begin_transaction`] (the cheap check before [`TXN`] is looked at).
    static IN_TXN: Cell<bool> = const { Cell::new(false) };
    /// The transaction this thread is running, while [`IN_TXN`].
    static TXN: RefCell<Option<TxnState>> = const { RefCell::new(None) };
}

/// What a transaction holds and has written so far (see the module docs).
struct TxnState {
    /// The stripes it holds (a bit per stripe).
    held: [u64; STRIPES / 64],
    /// The state each of its writes leaves: the value, or `None` for deleted.
    overlay: BTreeMap<Vec<u8>, Option<Stored>>,
    /// The engine bytes the overlay would write ([`pending_size`]).
    bytes: usize,
    /// The most `bytes` may reach: the engine's `max_batch_size`, which would refuse more.
    limit: usize,
    /// `bytes` passed `limit`: the overlay was dropped and the transaction will fail.
    too_large: bool,
}

impl TxnState {
    fn holds(&self, i: usize) -> bool {
        self.held[i / 64] & (1 << (i % 64)) != 0
    }
}

/// About what `key`'s pending state adds to the commit's batch: the engine key and value
/// with their headers, and an expiry-index entry.
fn pending_size(key: &[u8], state: &Option<Stored>) -> usize {
    match state {
        None => key.len() + 1,
        Some(s) => {
            let expiry = if s.expires_at_ms.is_some() {
                key.len() + 9
            } else {
                0
            };
            key.len() + 1 + s.data.len() + 9 + expiry
        }
    }
}

/// The pending state of `key` in this thread's transaction: `None` if there is no
/// transaction or it has not written `key`; `Some(None)` if it deleted it.
fn txn_pending(key: &[u8]) -> Option<Option<Stored>> {
    if !IN_TXN.get() {
        return None;
    }
    TXN.with_borrow(|t| t.as_ref().and_then(|t| t.overlay.get(key).cloned()))
}

/// Records `key`'s new state in this thread's transaction; `false` if there is none.
fn txn_record(key: &[u8], state: Option<Stored>) -> bool {
    if !IN_TXN.get() {
        return false;
    }
    TXN.with_borrow_mut(|t| match t {
        Some(t) if t.too_large => true,
        Some(t) => {
            let added = pending_size(key, &state);
            if let Some(old) = t.overlay.insert(key.to_vec(), state) {
                t.bytes -= pending_size(key, &old);
            }
            t.bytes += added;
            if t.bytes > t.limit {
                // The engine would refuse the commit: give the memory back now.
                t.too_large = true;
                t.overlay = BTreeMap::new();
                t.bytes = 0;
            }
            true
        }
        None => false,
    })
}

/// A transaction's hold on its keys (see the module docs): made by
/// [`Store::begin_transaction`]; [`Transaction::commit`] applies its writes. Dropped
/// without a commit, it applies nothing (what [`Store::flush_all`] or [`Store::write`]
/// wrote inside it stays). The stripes are released when it is dropped.
pub struct Transaction<'s> {
    store: &'s Store,
    _held: Vec<MutexGuard<'s, ()>>,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").finish_non_exhaustive()
    }
}

impl Transaction<'_> {
    /// Whether the transaction's writes passed the engine's `max_batch_size`: it can only
    /// fail now (its pending writes were dropped), so the caller may stop running it.
    pub fn too_large(&self) -> bool {
        TXN.with_borrow(|t| t.as_ref().is_some_and(|t| t.too_large))
    }

    /// Writes everything the transaction wrote as one engine batch (synced inside
    /// [`Store::last_in_batch`]), still holding its stripes, then releases them. The error
    /// says why nothing was written.
    pub fn commit(self) -> Result<(), String> {
        if self.too_large() {
            return Err(format!(
                "its writes pass the engine's max_batch_size ({} bytes)",
                self.store.max_batch_size
            ));
        }
        self.store.txn_write_pending().map_err(|e| e.to_string())
        // `self` drops here: the thread leaves the transaction, then the stripes go.
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        TXN.with_borrow_mut(|t| *t = None);
        IN_TXN.set(false);
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The keyspace. `Send + Sync`.
#[derive(Debug)]
pub struct Store {
    db: Db,
    durability: Durability,
    /// The engine's `Options::max_batch_size`.
    max_batch_size: usize,
    stripes: Vec<Mutex<()>>,
    /// Picks a key's stripe; randomly keyed per process so that clients cannot choose keys
    /// that all share one lock.
    stripe_hasher: ahash::RandomState,
    /// Engine writes begun and not yet returned (`BeforeReply` only).
    inflight: AtomicU64,
    /// Engine writes returned (`BeforeReply` only).
    written: AtomicU64,
    /// A value of `written` read before a sync that has since completed.
    synced_upto: AtomicU64,
    /// Keys the sweeper deleted because they expired.
    pub expired_keys: AtomicU64,
    /// Raised after every write that may have added an expiry-index entry returns
    /// ([`Store::note_expiry_written`]).
    expiry_writes: AtomicU64,
    /// A value of `expiry_writes` read before a sweep that found the expiry index empty:
    /// while the two are equal, no entry can exist and a sweep reads nothing. (A sweep
    /// builds a sorted view of the memtable, which under a write load without expiries
    /// was ~3% of the server's CPU at 10 sweeps a second.)
    expiry_empty_at: AtomicU64,
    /// Sweeps that looked at the expiry index.
    sweep_scans: AtomicU64,
    /// Due expiry-index entries whose key's value the engine could not return, and when
    /// (Unix ms) the sweeper reads them again. Skipped until then, so an unreadable value
    /// neither stops the sweep nor takes a place in every sweep's batch. Locked only while
    /// no stripe is held or after one is taken (never the other way round), as
    /// [`Store::flush_all`] clears it holding every stripe.
    retry_unreadable: Mutex<BTreeMap<Vec<u8>, u64>>,
    /// The keys connections WATCH; every write of one raises its version.
    watches: Arc<Watches>,
}

/// Key bytes at which a SCAN page stops, whatever its COUNT (a hint, in Redis too): with
/// keys up to 64 KiB, COUNT 100000 would otherwise gather ~6.5 GB of keys for one reply.
pub const SCAN_PAGE_BYTES: usize = 4 << 20;

/// A page of user keys and the key after them, if any.
pub type KeyPage = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// What one [`Store::sweep`] did.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// Index entries it examined (those waiting for a retry not counted); fewer than the
    /// `max` asked for means no other entry is due now, or the sweep stopped early (the
    /// engine failing broadly): either way the next sweep can wait for its interval.
    pub examined: usize,
    /// One line per due key whose value could not be read or decoded, saying what was done
    /// with it (for the server's log).
    pub unreadable: Vec<String>,
}

/// Held stripe locks; writes to the keys they cover are exclusive until dropped.
#[derive(Debug)]
pub struct KeyGuard<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

impl Store {
    /// Wraps an open database, checking (or writing, if it is empty) the keyspace format
    /// version. A database that holds keys but no version was written by something else
    /// (an application, `wisckey load`) and is refused, nothing written: serving it would
    /// read its `d` keys as damaged values and let the sweeper delete `e` keys that parse as
    /// past expiries. `max_batch_size` is the engine's (`Options::max_batch_size`): the
    /// batched write path keeps its pending batches well under it.
    pub fn new(db: Db, durability: Durability, max_batch_size: usize) -> Result<Store, Error> {
        match db.get(format::META_VERSION_KEY)? {
            None => {
                if let Some(first) = db.keys::<&[u8], _>(..)?.next() {
                    let first = first?;
                    return Err(Error::Format(format!(
                        "the database holds keys (the first is {:?}) but no {:?} key, so \
                         wisckey serve did not create it; refusing to serve it, since the \
                         server would read and delete keys it does not own. Serve an empty \
                         or new directory (copy the data in through the server), or one \
                         that wisckey serve created",
                        String::from_utf8_lossy(&first[..first.len().min(64)]),
                        String::from_utf8_lossy(format::META_VERSION_KEY),
                    )));
                }
                db.put_opt(
                    format::META_VERSION_KEY,
                    format::FORMAT_VERSION.to_string(),
                    &WriteOptions { sync: true },
                )?
            }
            Some(v) if v == format::FORMAT_VERSION.to_string().as_bytes() => {}
            Some(v) => {
                return Err(Error::Format(format!(
                    "keyspace format version {} (this build reads {})",
                    String::from_utf8_lossy(&v),
                    format::FORMAT_VERSION
                )))
            }
        }
        Ok(Store {
            db,
            durability,
            max_batch_size,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            stripe_hasher: ahash::RandomState::new(),
            inflight: AtomicU64::new(0),
            written: AtomicU64::new(0),
            synced_upto: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            // Unequal: the first sweep looks (entries may exist from an earlier run).
            expiry_writes: AtomicU64::new(1),
            expiry_empty_at: AtomicU64::new(0),
            sweep_scans: AtomicU64::new(0),
            retry_unreadable: Mutex::new(BTreeMap::new()),
            watches: Arc::new(Watches::new(STRIPES)),
        })
    }

    /// The engine's largest write batch (key and value bytes).
    pub fn max_batch_size(&self) -> usize {
        self.max_batch_size
    }

    /// The engine (for INFO, sync, flush and close).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Gives the engine back (for a clean close).
    pub fn into_db(self) -> Db {
        self.db
    }

    /// The registry of watched keys (WATCH, `watch.rs`).
    pub fn watches(&self) -> &Arc<Watches> {
        &self.watches
    }

    /// Notes a write of `key` for WATCH; the caller holds the key's stripe and has not
    /// written it yet. Every write of a user key outside this module calls it.
    pub fn touch(&self, key: &[u8]) {
        if self.watches.any() {
            self.watches.touch(self.stripe_of(key), key);
        }
    }

    /// The stripe (lock index, below [`STRIPES`]) that guards `key`.
    pub fn stripe_of(&self, key: &[u8]) -> usize {
        // The modulo keeps the value below STRIPES, so the cast cannot truncate.
        (self.stripe_hasher.hash_one(key) % STRIPES as u64) as usize
    }

    /// Stripe `i`'s lock if it is free now; `None` if another thread holds it. Never waits,
    /// so it may be called while holding other stripes in any order.
    pub fn try_lock_stripe(&self, i: usize) -> Option<MutexGuard<'_, ()>> {
        match self.stripes[i % STRIPES].try_lock() {
            Ok(g) => Some(g),
            // See `lock`: the guarded data is (), a poisoned lock is still usable.
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Stripe `i`'s lock, waiting for it. Deadlock-free only if the caller holds no stripe,
    /// or only stripes below `i`.
    pub fn lock_stripe(&self, i: usize) -> MutexGuard<'_, ()> {
        self.stripes[i % STRIPES]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the stripes of `keys` (in stripe order, each once). Inside a transaction the
    /// stripes it holds are skipped (its keys are already exclusive to this thread).
    pub fn lock<K: AsRef<[u8]>>(&self, keys: &[K]) -> KeyGuard<'_> {
        let mut idx: Vec<usize> = keys.iter().map(|k| self.stripe_of(k.as_ref())).collect();
        idx.sort_unstable();
        idx.dedup();
        self.lock_stripes(idx)
    }

    /// Locks every stripe (those a transaction of this thread holds skipped): no other
    /// writer or transaction runs until the guard is dropped.
    pub fn lock_all(&self) -> KeyGuard<'_> {
        self.lock_stripes((0..STRIPES).collect())
    }

    /// Locks the stripes `idx` (sorted, each once), skipping those this thread's
    /// transaction holds.
    fn lock_stripes(&self, mut idx: Vec<usize>) -> KeyGuard<'_> {
        if IN_TXN.get() {
            // EXEC takes the stripes of every key its commands name (the command table's
            // key positions), so nothing is left to take here.
            TXN.with_borrow(|t| {
                if let Some(t) = t {
                    idx.retain(|&i| !t.holds(i));
                }
            });
        }
        // The guarded data is (), so a poisoned lock (a panic while held) protects nothing
        // that could be inconsistent: take it anyway.
        let held = idx
            .into_iter()
            .map(|i| self.stripes[i].lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        KeyGuard { _held: held }
    }

    /// The live value of `key`, or `None` if absent or expired.
    pub fn get(&self, key: &[u8]) -> Result<Option<Stored>, Error> {
        self.get_at(key, now_ms())
    }

    fn get_at(&self, key: &[u8], now: u64) -> Result<Option<Stored>, Error> {
        if let Some(pending) = txn_pending(key) {
            return Ok(pending.filter(|s| !s.is_expired(now)));
        }
        match self.db.get(format::data_key(key))? {
            None => Ok(None),
            Some(raw) => {
                let stored = decode(key, raw)?;
                Ok((!stored.is_expired(now)).then_some(stored))
            }
        }
    }

    /// Lends `key`'s live value (the user's bytes) to `use_value` and returns what it
    /// returns, or `None` if absent or expired. A hot value is lent from the engine's value
    /// cache, so it is copied only where `use_value` puts it. `ekey` (the engine key) and
    /// `scratch` (a read from the value log) are scratch space, reused across calls.
    pub fn get_with<R>(
        &self,
        key: &[u8],
        ekey: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Error> {
        self.read_with(key, now_ms(), ekey, scratch, |data, _| use_value(data))
    }

    /// [`Store::get_with`] at time `now`, lending the expiry too (for a read-modify-write
    /// that keeps it).
    pub fn read_with<R>(
        &self,
        key: &[u8],
        now: u64,
        ekey: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8], Option<u64>) -> R,
    ) -> Result<Option<R>, Error> {
        self.read_with_opt(key, now, &ReadOptions::default(), ekey, scratch, use_value)
    }

    /// [`Store::read_with`] as of `opts` (a snapshot, or now).
    fn read_with_opt<R>(
        &self,
        key: &[u8],
        now: u64,
        opts: &ReadOptions,
        ekey: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        use_value: impl FnOnce(&[u8], Option<u64>) -> R,
    ) -> Result<Option<R>, Error> {
        if let Some(pending) = txn_pending(key) {
            return Ok(pending
                .filter(|s| !s.is_expired(now))
                .map(|s| use_value(&s.data, s.expires_at_ms)));
        }
        format::data_key_into(ekey, key);
        let lent = self
            .db
            .get_with_opt(ekey.as_slice(), opts, scratch, |stored| {
                let (start, expires) = format::value_header(stored).map_err(|reason| {
                    Error::Format(format!(
                        "value of key {:?}: {reason}",
                        String::from_utf8_lossy(&key[..key.len().min(64)])
                    ))
                })?;
                let expired = expires.is_some_and(|at| at <= now);
                Ok((!expired).then(|| use_value(&stored[start..], expires)))
            })?;
        lent.transpose().map(Option::flatten)
    }

    /// A hint before a batch reads `keys`: see [`Db::prefetch_keys`]. Skipped for fewer
    /// than two keys (nothing to overlap).
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let mut encoded = Vec::new();
        let mut ends = Vec::new();
        for key in keys {
            encoded.push(format::NS_DATA);
            encoded.extend_from_slice(key);
            ends.push(encoded.len());
        }
        if ends.len() < 2 {
            return;
        }
        let mut start = 0;
        let engine_keys: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let k = &encoded[start..end];
                start = end;
                k
            })
            .collect();
        self.db.prefetch_keys(&engine_keys);
    }

    /// Whether each of `keys` exists (is present and not expired), all at one snapshot (an
    /// MSET is never seen half done). Reads one value at a time into one scratch buffer:
    /// asking about a large value many times costs its reads, never its size in memory per
    /// key (as reading them all at once would).
    pub fn live<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>, Error> {
        self.live_else(keys, |_, e| Err(e))
    }

    /// [`Store::live`], except that a key whose value cannot be read or decoded counts as
    /// live if the engine holds it. For commands that never need the value (DEL, whose
    /// count and WATCH raise then include it, as it existed; SCAN), so that one damaged
    /// value does not fail them, as Redis's DEL never reads values: its expiry is unknown,
    /// and existing is the answer that deletes it and never hides it. The engine's
    /// keys-only lookup reads no value (it answers at the time of the call, not at the
    /// snapshot: only for keys the snapshot could not read); if it fails too, so does this.
    pub fn live_or_unreadable<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>, Error> {
        self.live_else(keys, |key, _| {
            Ok(self.db.contains_key(format::data_key(key))?)
        })
    }

    /// [`Store::live`], answering through `unreadable(key, error)` for a key whose value
    /// could not be read or decoded.
    fn live_else<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        unreadable: impl Fn(&[u8], Error) -> Result<bool, Error>,
    ) -> Result<Vec<bool>, Error> {
        self.prefetch(keys.iter().map(AsRef::as_ref));
        let opts = ReadOptions {
            snapshot: (keys.len() > 1).then(|| self.db.snapshot()),
            ..ReadOptions::default()
        };
        let (now, mut ekey, mut scratch) = (now_ms(), Vec::new(), Vec::new());
        keys.iter()
            .map(|k| {
                let k = k.as_ref();
                match self.read_with_opt(k, now, &opts, &mut ekey, &mut scratch, |_, _| ()) {
                    Ok(found) => Ok(found.is_some()),
                    Err(e) => unreadable(k, e),
                }
            })
            .collect()
    }

    /// The live values of `keys`, read in parallel by the engine at one view (an MSET is
    /// never seen half done), or `None` if the values add up to more than `budget` bytes:
    /// the engine knows each value's length before it reads it, so a client's list of keys
    /// never makes it hold more than `budget` plus one value (a stored value's expiry
    /// header counts against the budget too).
    pub fn multi_get_within<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        budget: usize,
    ) -> Result<Option<Vec<Option<Stored>>>, Error> {
        if !IN_TXN.get() {
            return self.multi_get_engine(keys, budget);
        }
        // Inside a transaction: its pending values count against the budget as read ones.
        let now = now_ms();
        let pending: Vec<Option<Option<Stored>>> =
            keys.iter().map(|k| txn_pending(k.as_ref())).collect();
        let held: usize = pending
            .iter()
            .flatten()
            .flatten()
            .map(|s| s.data.len())
            .sum();
        let Some(budget) = budget.checked_sub(held) else {
            return Ok(None);
        };
        let rest: Vec<&[u8]> = (keys.iter().zip(&pending))
            .filter(|(_, p)| p.is_none())
            .map(|(k, _)| k.as_ref())
            .collect();
        let read = if rest.is_empty() {
            Vec::new()
        } else {
            match self.multi_get_engine(&rest, budget)? {
                Some(read) => read,
                None => return Ok(None),
            }
        };
        let mut read = read.into_iter();
        Ok(Some(
            pending
                .into_iter()
                .map(|p| match p {
                    Some(state) => state.filter(|s| !s.is_expired(now)),
                    None => read.next().flatten(),
                })
                .collect(),
        ))
    }

    /// [`Store::multi_get_within`] from the engine alone.
    fn multi_get_engine<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        budget: usize,
    ) -> Result<Option<Vec<Option<Stored>>>, Error> {
        let engine_keys: Vec<Vec<u8>> = keys.iter().map(|k| format::data_key(k.as_ref())).collect();
        let now = now_ms();
        let Some(raws) = self
            .db
            .multi_get_within(&engine_keys, &ReadOptions::default(), budget)?
        else {
            return Ok(None);
        };
        let values = raws
            .into_iter()
            .zip(keys)
            .map(|(raw, key)| match raw {
                None => Ok(None),
                Some(raw) => {
                    let s = decode(key.as_ref(), raw)?;
                    Ok((!s.is_expired(now)).then_some(s))
                }
            })
            .collect::<Result<_, Error>>()?;
        Ok(Some(values))
    }

    /// Adds `key = data` (with its expiry-index entry) to `batch`. With an expiry, call
    /// [`Store::note_expiry_written`] once the batch's write has returned.
    pub fn batch_put(batch: &mut WriteBatch, key: &[u8], data: &[u8], expires_at_ms: Option<u64>) {
        Store::batch_put_via(
            batch,
            key,
            data,
            expires_at_ms,
            &mut Vec::new(),
            &mut Vec::new(),
        );
    }

    /// [`Store::batch_put`] encoding through two scratch buffers that a hot path reuses.
    pub fn batch_put_via(
        batch: &mut WriteBatch,
        key: &[u8],
        data: &[u8],
        expires_at_ms: Option<u64>,
        ekey: &mut Vec<u8>,
        evalue: &mut Vec<u8>,
    ) {
        format::data_key_into(ekey, key);
        format::encode_value_into(evalue, data, expires_at_ms);
        batch.put(&ekey[..], &evalue[..]);
        if let Some(at) = expires_at_ms {
            batch.put(format::expiry_key(at, key), b"");
        }
    }

    /// Stores `key = data` with an optional expiry. The caller holds the key's lock.
    pub fn put(
        &self,
        _guard: &KeyGuard<'_>,
        key: &[u8],
        data: &[u8],
        expires_at_ms: Option<u64>,
    ) -> Result<(), Error> {
        if IN_TXN.get() {
            let pending = Stored {
                data: data.to_vec(),
                expires_at_ms,
            };
            if txn_record(key, Some(pending)) {
                return Ok(());
            }
        }
        self.touch(key);
        let mut batch = WriteBatch::new();
        Store::batch_put(&mut batch, key, data, expires_at_ms);
        let result = self.write(batch);
        if expires_at_ms.is_some() {
            self.note_expiry_written();
        }
        result
    }

    /// Writes every `(key, data)` pair without an expiry as one batch (MSET: all or
    /// nothing); inside a transaction, into its overlay like [`Store::put`], so they join
    /// its batch. The caller holds the keys' stripes.
    pub fn put_many<'p>(
        &self,
        _guard: &KeyGuard<'_>,
        pairs: impl Iterator<Item = (&'p [u8], &'p [u8])>,
    ) -> Result<(), Error> {
        if IN_TXN.get() {
            for (key, data) in pairs {
                let pending = Stored {
                    data: data.to_vec(),
                    expires_at_ms: None,
                };
                txn_record(key, Some(pending));
            }
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for (key, data) in pairs {
            self.touch(key);
            Store::batch_put(&mut batch, key, data, None);
        }
        self.write(batch)
    }

    /// Tells the sweeper that a write which may have added an expiry-index entry has
    /// returned (succeeded or not), so its entry is visible to the next sweep. Raised after
    /// the write, not before: a sweep that read the counter before this call and then found
    /// the index empty cannot mark it empty for good, since the counter moved on.
    pub fn note_expiry_written(&self) {
        self.expiry_writes.fetch_add(1, SeqCst);
    }

    /// Deletes `keys`, live ones. The caller holds their locks.
    pub fn delete<K: AsRef<[u8]>>(&self, _guard: &KeyGuard<'_>, keys: &[K]) -> Result<(), Error> {
        self.delete_raising(keys, |_| true)
    }

    /// Deletes `keys`, of which those with `live[i]` false are absent or expired: they
    /// raise no WATCH version (Redis 7 raises only keys that existed, so a watcher of a key
    /// that stays absent is not aborted). Outside a transaction expired ones are deleted
    /// all the same (they are garbage either way); inside one, only live ones are recorded.
    /// The caller holds their locks.
    pub fn delete_where_live<K: AsRef<[u8]>>(
        &self,
        _guard: &KeyGuard<'_>,
        keys: &[K],
        live: &[bool],
    ) -> Result<(), Error> {
        self.delete_raising(keys, |i| live.get(i).copied().unwrap_or(true))
    }

    /// Deletes `keys`; `live(i)` says whether the i-th exists (see
    /// [`Store::delete_where_live`]).
    fn delete_raising<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        live: impl Fn(usize) -> bool,
    ) -> Result<(), Error> {
        if IN_TXN.get() {
            for (i, k) in keys.iter().enumerate() {
                if live(i) {
                    txn_record(k.as_ref(), None);
                }
            }
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for (i, k) in keys.iter().enumerate() {
            if live(i) {
                self.touch(k.as_ref());
            }
            batch.delete(format::data_key(k.as_ref()));
        }
        self.write(batch)
    }

    /// Applies a batch (unsynced: see [`Store::make_durable`]). Inside a transaction the
    /// transaction's pending writes are written first (its batch is opaque here, so it
    /// cannot join them): see the module docs.
    pub fn write(&self, batch: WriteBatch) -> Result<(), Error> {
        if IN_TXN.get() {
            self.txn_write_pending()?;
        }
        self.write_with(batch, SYNC_WRITES.get())
    }

    /// Whether this thread is running a transaction (its reads see writes not committed).
    pub fn in_transaction(&self) -> bool {
        IN_TXN.get()
    }

    /// Takes the stripes in `stripes` (any order, repeats allowed; each below [`STRIPES`])
    /// in stripe order, waiting for each, and makes this thread run a transaction over the
    /// keyspace until the returned [`Transaction`] is committed or dropped (see the module
    /// docs). The caller holds no stripe. Every key the transaction's commands lock must
    /// be in one of `stripes`.
    pub fn begin_transaction(&self, mut stripes: Vec<usize>) -> Transaction<'_> {
        debug_assert!(!IN_TXN.get(), "transactions do not nest");
        stripes.sort_unstable();
        stripes.dedup();
        let mut held = [0u64; STRIPES / 64];
        let guards = stripes
            .iter()
            .map(|&i| {
                held[i / 64] |= 1 << (i % 64);
                self.lock_stripe(i)
            })
            .collect();
        TXN.with_borrow_mut(|t| {
            *t = Some(TxnState {
                held,
                overlay: BTreeMap::new(),
                bytes: 0,
                limit: self.max_batch_size,
                too_large: false,
            })
        });
        IN_TXN.set(true);
        Transaction {
            store: self,
            _held: guards,
        }
    }

    /// Writes this thread's transaction's pending writes as one batch (each key's last
    /// state only) and empties its overlay; nothing to do outside a transaction.
    fn txn_write_pending(&self) -> Result<(), Error> {
        if !IN_TXN.get() {
            return Ok(());
        }
        let overlay = TXN.with_borrow_mut(|t| {
            t.as_mut().map(|t| {
                t.bytes = 0;
                std::mem::take(&mut t.overlay)
            })
        });
        let Some(overlay) = overlay.filter(|o| !o.is_empty()) else {
            return Ok(());
        };
        let mut batch = WriteBatch::new();
        let (mut ekey, mut evalue) = (Vec::new(), Vec::new());
        let mut expiring = false;
        // Consumed as it goes: each value is freed once copied into the batch.
        for (key, state) in overlay {
            self.touch(&key);
            match state {
                Some(s) => {
                    expiring |= s.expires_at_ms.is_some();
                    Store::batch_put_via(
                        &mut batch,
                        &key,
                        &s.data,
                        s.expires_at_ms,
                        &mut ekey,
                        &mut evalue,
                    );
                }
                None => {
                    format::data_key_into(&mut ekey, &key);
                    batch.delete(&ekey);
                }
            }
        }
        let result = self.write_with(batch, SYNC_WRITES.get());
        if expiring {
            self.note_expiry_written();
        }
        result
    }

    /// Applies a batch whose keys' stripes the caller holds; with `sync` (and
    /// [`Durability::BeforeReply`]) it returns once the log is synced through it, which
    /// also covers every write appended before it (see the module docs' shortcut).
    pub fn write_with(&self, batch: WriteBatch, sync: bool) -> Result<(), Error> {
        if self.durability == Durability::Eventually {
            return Ok(self.db.write(batch)?);
        }
        self.inflight.fetch_add(1, SeqCst);
        let result = self.db.write_opt(batch, &WriteOptions { sync });
        self.written.fetch_add(1, SeqCst);
        self.inflight.fetch_sub(1, SeqCst);
        if sync && result.is_ok() {
            SYNCED_WRITE.set(true);
        }
        Ok(result?)
    }

    /// Runs a batch's last (only) command with its writes synced (see the module docs). Returns
    /// its result and whether it made a synced write, in which case the batch's replies
    /// need no [`Store::make_durable`].
    pub fn last_in_batch<T>(&self, command: impl FnOnce() -> T) -> (T, bool) {
        if self.durability == Durability::Eventually {
            return (command(), false);
        }
        SYNCED_WRITE.set(false);
        SYNC_WRITES.set(true);
        let result = command();
        SYNC_WRITES.set(false);
        (result, SYNCED_WRITE.replace(false))
    }

    /// Whether [`Store::make_durable`] would sync if called now (a cheap check, no I/O).
    pub fn needs_sync(&self) -> bool {
        if self.durability == Durability::Eventually {
            return false;
        }
        let busy = self.inflight.load(SeqCst) > 0;
        let written = self.written.load(SeqCst);
        busy || self.synced_upto.load(SeqCst) < written
    }

    /// Whether writes must be durable before their replies are sent (`always`).
    pub fn durable_before_reply(&self) -> bool {
        self.durability == Durability::BeforeReply
    }

    /// Call before sending replies: with [`Durability::BeforeReply`], returns once every
    /// write that returned before this call, or was visible to a read before it, is synced.
    pub fn make_durable(&self) -> Result<(), Error> {
        if self.durability == Durability::Eventually {
            return Ok(());
        }
        // Order matters (see the module docs): in flight first, then written.
        let busy = self.inflight.load(SeqCst) > 0;
        let written = self.written.load(SeqCst);
        if !busy && self.synced_upto.load(SeqCst) >= written {
            return Ok(());
        }
        self.db.sync()?;
        self.synced_upto.fetch_max(written, SeqCst);
        Ok(())
    }

    /// Up to `count` user keys from `start` on (inclusive), in order, and the key after them
    /// if there is one (the next cursor). A page stops early once its keys reach
    /// [`SCAN_PAGE_BYTES`] (it always holds one key).
    pub fn keys_from(&self, start: &[u8], count: usize) -> Result<KeyPage, Error> {
        if IN_TXN.get() {
            return self.keys_from_txn(start, count);
        }
        let from = format::data_key(start);
        let to = vec![format::NS_DATA + 1];
        let mut keys = Vec::with_capacity(count.min(4096));
        let mut bytes = 0usize;
        let mut next = None;
        for k in self.db.keys(from..to)? {
            let mut k = k?;
            k.remove(0);
            if keys.len() == count || bytes >= SCAN_PAGE_BYTES {
                next = Some(k);
                break;
            }
            bytes += k.len();
            keys.push(k);
        }
        Ok((keys, next))
    }

    /// [`Store::keys_from`] inside a transaction: the engine's keys merged with the
    /// transaction's pending ones (its deletes left out).
    fn keys_from_txn(&self, start: &[u8], count: usize) -> Result<KeyPage, Error> {
        // (key, whether it exists after the pending write)
        let pending: Vec<(Vec<u8>, bool)> = TXN.with_borrow(|t| {
            t.as_ref().map_or_else(Vec::new, |t| {
                (t.overlay.range(start.to_vec()..))
                    .map(|(k, v)| (k.clone(), v.is_some()))
                    .collect()
            })
        });
        let mut pending = pending.into_iter().peekable();
        let from = format::data_key(start);
        let to = vec![format::NS_DATA + 1];
        let mut engine = self.db.keys(from..to)?;
        let mut engine_next: Option<Vec<u8>> = None;
        let mut keys = Vec::with_capacity(count.min(4096));
        let mut bytes = 0usize;
        loop {
            if engine_next.is_none() {
                if let Some(k) = engine.next() {
                    let mut k = k?;
                    k.remove(0);
                    engine_next = Some(k);
                }
            }
            let order = match (&engine_next, pending.peek()) {
                (None, None) => return Ok((keys, None)),
                (Some(e), Some((p, _))) => e.cmp(p),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
            };
            if order == std::cmp::Ordering::Equal {
                engine_next = None; // the pending state decides
            }
            let take_pending = order != std::cmp::Ordering::Less;
            let (key, exists) = if take_pending {
                match pending.next() {
                    Some(p) => p,
                    None => return Ok((keys, None)),
                }
            } else {
                match engine_next.take() {
                    Some(k) => (k, true),
                    None => return Ok((keys, None)),
                }
            };
            if !exists {
                continue;
            }
            if keys.len() == count || bytes >= SCAN_PAGE_BYTES {
                return Ok((keys, Some(key)));
            }
            bytes += key.len();
            keys.push(key);
        }
    }

    /// How many user keys exist (including expired ones the sweeper has not yet deleted,
    /// as Redis's DBSIZE). A keys-only scan: O(keys). Inside a transaction, counting its
    /// pending writes and deletes.
    pub fn count_keys(&self) -> Result<u64, Error> {
        let mut n = 0u64;
        for k in self
            .db
            .keys(vec![format::NS_DATA]..vec![format::NS_DATA + 1])?
        {
            k?;
            n += 1;
        }
        if IN_TXN.get() {
            let pending: Vec<(Vec<u8>, bool)> = TXN.with_borrow(|t| {
                t.as_ref().map_or_else(Vec::new, |t| {
                    (t.overlay.iter())
                        .map(|(k, v)| (k.clone(), v.is_some()))
                        .collect()
                })
            });
            for (key, exists) in pending {
                let stored = self.db.contains_key(format::data_key(&key))?;
                match (stored, exists) {
                    (false, true) => n += 1,
                    (true, false) => n = n.saturating_sub(1),
                    _ => {}
                }
            }
        }
        Ok(n)
    }

    /// How many expiry-index entries exist (an upper bound on keys with an expiry).
    pub fn count_expiry_entries(&self) -> Result<u64, Error> {
        let mut n = 0u64;
        for k in self
            .db
            .keys(vec![format::NS_EXPIRY]..vec![format::NS_EXPIRY + 1])?
        {
            k?;
            n += 1;
        }
        Ok(n)
    }

    /// Deletes every user key and expiry entry, in batches of at most `max_keys` keys and a
    /// quarter of the engine's `max_batch_size` in key bytes, holding every stripe: no write
    /// or transaction interleaves with it (readers, which take no lock, may see part of it;
    /// a crash may leave part of it). Returns how many it deleted.
    pub fn flush_all(&self, max_keys: usize) -> Result<u64, Error> {
        // Inside a transaction its pending writes go first, so the flush deletes them too.
        self.txn_write_pending()?;
        let _everything = self.lock_all();
        // Only watched keys that exist are raised (Redis 7): note them before they go.
        let watched = if self.watches.any() {
            self.watches.watched_keys()
        } else {
            Vec::new()
        };
        let live = self.live(&watched.iter().map(|(_, k)| k).collect::<Vec<_>>());
        let result = self.delete_everything(max_keys);
        // The index entries waiting for a retry are gone (or, if the flush failed part way,
        // are read again at once: harmless).
        lock_ignoring_poison(&self.retry_unreadable).clear();
        // After the deletes, also if one failed (some keys are gone). Were the liveness
        // reads refused, every watched key is raised: a false conflict, never a missed one.
        let live = live.unwrap_or_else(|_| vec![true; watched.len()]);
        for ((stripe, key), live) in watched.iter().zip(live) {
            if live {
                self.watches.touch(*stripe, key);
            }
        }
        result
    }

    fn delete_everything(&self, max_keys: usize) -> Result<u64, Error> {
        // Keys run up to 64 KiB, so a count alone can pass `max_batch_size` (10,000 such
        // keys are 640 MiB against 512): the engine would refuse that batch, and every
        // retry would meet the same first keys. A quarter leaves room for one more key.
        let max_bytes = self.max_batch_size / 4;
        let mut total = 0u64;
        for ns in [format::NS_DATA, format::NS_EXPIRY] {
            loop {
                let mut batch = WriteBatch::new();
                let mut n = 0usize;
                for k in self.db.keys(vec![ns]..vec![ns + 1])? {
                    batch.delete(k?);
                    n += 1;
                    if n >= max_keys || batch.payload_bytes() >= max_bytes {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
                self.write(batch)?;
                total += n as u64;
            }
        }
        Ok(total)
    }

    /// Deletes up to `max` keys whose expiry has passed, and the index entries that pointed
    /// at them (or at keys since overwritten: stale entries). Reads nothing while no write
    /// with an expiry came since a sweep found the index empty.
    ///
    /// A due key whose value cannot be read or decoded is kept (its own header is the
    /// truth about its expiry and cannot be checked: deleting it could destroy a live
    /// value, or the evidence of damage; reads of it keep failing, DEL removes it), and the
    /// sweep goes on with the other entries, saying what it did in the report:
    /// - the value was read but does not decode (damage, or a newer format): the same bytes
    ///   would come back every time, so the entry is dropped and the key never looked at
    ///   again; one report line per key;
    /// - the engine could not return it (an I/O error, a damaged log record): that may
    ///   pass, so the entry stays and is read again after [`RETRY_UNREADABLE_MS`], skipped
    ///   until then; one report line per key per try. Past [`MAX_RETRY_UNREADABLE`] such
    ///   entries the engine is failing broadly: the sweep stops there (one report line),
    ///   keeping the entry, as for any engine failure.
    pub fn sweep(&self, max: usize) -> Result<SweepReport, Error> {
        let mut report = SweepReport::default();
        let generation = self.expiry_writes.load(SeqCst);
        if self.expiry_empty_at.load(SeqCst) == generation {
            return Ok(report);
        }
        self.sweep_scans.fetch_add(1, Relaxed);
        let now = now_ms();
        let due_before = format::expiry_key(now.saturating_add(1), b"");
        let mut due: Vec<Vec<u8>> = Vec::new();
        let mut index_empty = true;
        {
            // No stripe is held here (see the field's docs).
            let retry = lock_ignoring_poison(&self.retry_unreadable);
            for index_key in self
                .db
                .keys(vec![format::NS_EXPIRY]..vec![format::NS_EXPIRY + 1])?
            {
                let index_key = index_key?;
                index_empty = false;
                if index_key >= due_before || due.len() == max {
                    break;
                }
                if retry.get(&index_key).is_some_and(|&at| at > now) {
                    continue;
                }
                due.push(index_key);
            }
        }
        if index_empty {
            self.expiry_empty_at.fetch_max(generation, SeqCst);
            return Ok(report);
        }
        report.examined = due.len();
        for (i, index_key) in due.iter().enumerate() {
            let Some((at, user_key)) = format::parse_expiry_key(index_key) else {
                continue;
            };
            let guard = self.lock(&[user_key]);
            let mut batch = WriteBatch::new();
            batch.delete(index_key);
            match self.db.get(format::data_key(user_key)) {
                Ok(None) => {}
                Ok(Some(raw)) => match decode(user_key, raw) {
                    Ok(stored) => {
                        if stored.expires_at_ms == Some(at) && stored.is_expired(now) {
                            batch.delete(format::data_key(user_key));
                            self.expired_keys.fetch_add(1, Relaxed);
                        }
                    }
                    Err(e) => report.unreadable.push(format!(
                        "{e}; its expiry cannot be checked, so the key is kept (reads of it \
                         fail, DEL removes it) and no longer swept"
                    )),
                },
                Err(e) => {
                    // The stripe is held: taking this lock now is the allowed order.
                    let mut retry = lock_ignoring_poison(&self.retry_unreadable);
                    if retry.len() >= MAX_RETRY_UNREADABLE && !retry.contains_key(index_key) {
                        // Not an error return: the lines already reported must reach the
                        // log (a dropped entry's line is its only one). Fewer than `max`
                        // examined, so the sweeper waits for its interval.
                        report.examined = i;
                        report.unreadable.push(format!(
                            "stopped: {MAX_RETRY_UNREADABLE} values already wait for a \
                             retry and the engine cannot read another ({e}); the engine is \
                             failing broadly, entries are kept and swept later"
                        ));
                        return Ok(report);
                    }
                    retry.insert(index_key.clone(), now.saturating_add(RETRY_UNREADABLE_MS));
                    let shown = String::from_utf8_lossy(&user_key[..user_key.len().min(64)]);
                    report.unreadable.push(format!(
                        "the value of key {shown:?} could not be read (engine: {e}); the key \
                         and its expiry are kept, read again in {} s",
                        RETRY_UNREADABLE_MS / 1000
                    ));
                    continue;
                }
            }
            // The sweeper's deletes need not be synced: if they are lost, the keys are
            // still expired on read and the next sweep deletes them again.
            self.db.write(batch)?;
            lock_ignoring_poison(&self.retry_unreadable).remove(index_key);
            drop(guard);
        }
        Ok(report)
    }

    /// Sweeps that read the expiry index (the others found nothing could be there).
    pub fn sweep_scans(&self) -> u64 {
        self.sweep_scans.load(Relaxed)
    }
}

/// `mutex`'s guard, also if a thread panicked holding it: the sweeper's retry times are
/// hints, never inconsistent in a way that matters (a wrong one only moves a retry).
fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn decode(key: &[u8], raw: Vec<u8>) -> Result<Stored, Error> {
    format::decode_value(raw).map_err(|reason| {
        Error::Format(format!(
            "value of key {:?}: {reason}",
            String::from_utf8_lossy(&key[..key.len().min(64)])
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_store(dir: &std::path::Path) -> Store {
        let db = Db::open(dir, wisckey::Options::default()).expect("open");
        Store::new(
            db,
            Durability::Eventually,
            wisckey::Options::default().max_batch_size,
        )
        .expect("store")
    }

    /// Sweeps read the expiry index only while an entry may be there: once after open,
    /// then again only after a write with an expiry; and an expired key is still deleted.
    #[test]
    fn sweeps_read_the_index_only_while_an_expiry_may_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open_store(dir.path());
        assert_eq!(store.sweep(100).expect("sweep").examined, 0);
        assert_eq!(store.sweep_scans(), 1, "the first sweep looks");
        let plain = store.lock(&[b"plain"]);
        store.put(&plain, b"plain", b"v", None).expect("put");
        drop(plain);
        assert_eq!(store.sweep(100).expect("sweep").examined, 0);
        assert_eq!(
            store.sweep_scans(),
            1,
            "a write without expiry needs no sweep"
        );

        let soon = now_ms() + 1_000;
        let guard = store.lock(&[b"brief"]);
        store.put(&guard, b"brief", b"v", Some(soon)).expect("put");
        drop(guard);
        assert_eq!(
            store.sweep(100).expect("sweep").examined,
            0,
            "nothing due yet"
        );
        assert_eq!(store.sweep_scans(), 2);
        assert_eq!(store.sweep(100).expect("sweep").examined, 0);
        assert_eq!(store.sweep_scans(), 3, "an entry is pending: keep looking");

        std::thread::sleep(std::time::Duration::from_millis(1_100));
        assert_eq!(store.sweep(100).expect("sweep").examined, 1);
        assert_eq!(store.expired_keys.load(Relaxed), 1);
        assert_eq!(
            store.count_keys().expect("count"),
            1,
            "only `plain` is left"
        );
        assert_eq!(store.sweep(100).expect("sweep").examined, 0);
        assert_eq!(
            store.sweep_scans(),
            5,
            "the sweep that finds the index empty"
        );
        assert_eq!(store.sweep(100).expect("sweep").examined, 0);
        assert_eq!(store.sweep_scans(), 5, "then sweeps read nothing");
    }

    /// A database in `dir` where `bad` (a value that does not decode) and `torn` (a value
    /// whose log record is damaged, so the engine cannot return it) are due for sweeping
    /// before `later1` and `later2` (expired, readable). Returns when the first two are due.
    fn with_damaged_values(dir: &std::path::Path) -> u64 {
        let due = now_ms() - 10_000;
        let torn = [b'T'; 100];
        {
            let store = open_store(dir);
            let db = store.db();
            db.put(format::data_key(b"bad"), [0x07, 1, 2, 3])
                .expect("put");
            db.put(format::expiry_key(due, b"bad"), "").expect("put");
            db.put(
                format::data_key(b"torn"),
                format::encode_value(&torn, Some(due)),
            )
            .expect("put");
            db.put(format::expiry_key(due, b"torn"), "").expect("put");
            for key in [&b"later1"[..], b"later2"] {
                db.put(
                    format::data_key(key),
                    format::encode_value(b"v", Some(due + 1)),
                )
                .expect("put");
                db.put(format::expiry_key(due + 1, key), "").expect("put");
            }
            db.flush().expect("flush");
            store.into_db().close().expect("close");
        }
        // Damage `torn`'s record in the value log: the engine's checksum refuses it.
        let (log, mut bytes, at) = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
            .find_map(|p| {
                let bytes = std::fs::read(&p).expect("read");
                let at = bytes.windows(torn.len()).position(|w| w == torn)?;
                Some((p, bytes, at))
            })
            .expect("a value-log segment holds torn's record");
        bytes[at + 50] ^= 0x20;
        std::fs::write(&log, bytes).expect("write");
        due
    }

    /// A due key whose value does not decode (`bad`), or whose log record the engine
    /// cannot return (`torn`), is kept and reported, and the sweep goes on to the expired
    /// keys behind it. `bad`'s entry is dropped (the same bytes would come back every
    /// time); `torn`'s stays, skipped until its retry, and once the record reads again
    /// (here: rewritten, as a repair or a restored file would) the key is swept.
    #[test]
    fn an_unreadable_value_is_kept_and_does_not_stop_the_sweep() {
        let dir = tempfile::tempdir().expect("tempdir");
        let due = with_damaged_values(dir.path());

        let store = open_store(dir.path());
        let report = store
            .sweep(100)
            .expect("an unreadable value does not fail the sweep");
        assert_eq!(report.examined, 4);
        assert_eq!(report.unreadable.len(), 2, "{:?}", report.unreadable);
        assert!(
            report.unreadable[0].contains("unknown value tag 0x07")
                && report.unreadable[0].contains("no longer swept"),
            "{:?}",
            report.unreadable
        );
        assert!(
            report.unreadable[1].contains("\"torn\" could not be read")
                && report.unreadable[1].contains("read again in 60 s"),
            "{:?}",
            report.unreadable
        );
        assert_eq!(store.expired_keys.load(Relaxed), 2, "later1 and later2");
        assert_eq!(store.count_keys().expect("count"), 2, "bad and torn kept");
        assert_eq!(
            store.count_expiry_entries().expect("count"),
            1,
            "torn's entry kept, bad's dropped"
        );
        assert!(store.get(b"bad").is_err() && store.get(b"torn").is_err());
        assert!(store.live(&[b"bad"]).is_err());
        assert_eq!(
            store
                .live_or_unreadable(&[&b"bad"[..], b"torn", b"later1"])
                .expect("live"),
            [true, true, false]
        );

        // Until its retry, torn's entry is skipped: not read, not reported, not counted.
        let report = store.sweep(100).expect("sweep");
        assert_eq!((report.examined, report.unreadable.len()), (0, 0));
        // Its retry comes: still unreadable, reported again, kept again.
        for at in lock_ignoring_poison(&store.retry_unreadable).values_mut() {
            *at = 0;
        }
        let report = store.sweep(100).expect("sweep");
        assert_eq!((report.examined, report.unreadable.len()), (1, 1));
        assert_eq!(store.count_expiry_entries().expect("count"), 1);
        // The record reads again: at its next retry torn is swept like any expired key.
        store
            .db()
            .put(
                format::data_key(b"torn"),
                format::encode_value(b"repaired", Some(due)),
            )
            .expect("put");
        for at in lock_ignoring_poison(&store.retry_unreadable).values_mut() {
            *at = 0;
        }
        let report = store.sweep(100).expect("sweep");
        assert_eq!((report.examined, report.unreadable.len()), (1, 0));
        assert_eq!(store.expired_keys.load(Relaxed), 3);
        assert_eq!(store.count_keys().expect("count"), 1, "only bad is left");
        assert_eq!(store.count_expiry_entries().expect("count"), 0);
        assert!(lock_ignoring_poison(&store.retry_unreadable).is_empty());
    }

    /// With [`MAX_RETRY_UNREADABLE`] entries already waiting, another value the engine
    /// cannot read means it is failing broadly: the sweep stops there (keeping the entry,
    /// reporting why, and the line of the entry it dropped before), examining fewer than
    /// asked so that the sweeper waits for its interval.
    #[test]
    fn a_sweep_stops_once_too_many_values_are_unreadable() {
        let dir = tempfile::tempdir().expect("tempdir");
        with_damaged_values(dir.path());
        let store = open_store(dir.path());
        lock_ignoring_poison(&store.retry_unreadable).extend(
            (0..MAX_RETRY_UNREADABLE as u64).map(|i| (format::expiry_key(i, b"gone"), u64::MAX)),
        );
        let report = store.sweep(100).expect("sweep");
        assert_eq!(report.examined, 1, "bad; stopped at torn");
        assert_eq!(report.unreadable.len(), 2, "{:?}", report.unreadable);
        assert!(report.unreadable[0].contains("unknown value tag 0x07"));
        assert!(
            report.unreadable[1].starts_with("stopped: 4096 values already wait"),
            "{:?}",
            report.unreadable
        );
        assert_eq!(store.expired_keys.load(Relaxed), 0, "later1, later2 wait");
        assert_eq!(store.count_expiry_entries().expect("count"), 3);
    }

    /// An expiry entry left by an earlier run is swept after a reopen.
    #[test]
    fn an_expiry_from_before_a_reopen_is_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = open_store(dir.path());
            let guard = store.lock(&[b"k"]);
            store
                .put(&guard, b"k", b"v", Some(now_ms() + 20))
                .expect("put");
            drop(guard);
            store.into_db().close().expect("close");
        }
        std::thread::sleep(std::time::Duration::from_millis(40));
        let store = open_store(dir.path());
        assert_eq!(store.sweep(100).expect("sweep").examined, 1);
        assert_eq!(store.count_keys().expect("count"), 0);
    }
}
