//! Executing a connection's decoded requests (a pipeline's worth) with as few engine round
//! trips as Redis's semantics allow.
//!
//! Consecutive plain writes — `SET key value` (no options), `MSET`, `INCR`/`DECR`/
//! `INCRBY`/`DECRBY` — are not applied one by one: each takes its keys' stripe locks and
//! adds its puts to one pending [`WriteBatch`], and an overlay remembers the value each
//! pending write leaves, so a later INCR of the same key, or a GET of it, sees it. The batch
//! is committed as one engine write (under `always` one synced write: one trip through the
//! commit queue, grouped with other connections' writes) before any reply that depends on
//! it is sent. What keeps this exactly Redis's semantics:
//!
//! - Commands execute in order and replies are encoded in order; nothing is sent before
//!   the pending batch is committed (and, under `always`, synced).
//! - Every key a pending write touches, and every key a GET read while writes were pending,
//!   stays locked until the commit, so no other connection can change it in between: the
//!   whole run behaves as if executed at the commit. Other connections' reads see the old
//!   values until then, as they would before the commands executed.
//! - Any other command (or an INCRBY whose argument is not an integer, a SET with options,
//!   ...) first commits the pending batch and releases its locks, then runs through
//!   [`cmd::execute`] as before.
//! - Locks are taken without waiting (`try_lock`) while others are held; if one is busy,
//!   the pending batch is committed and its locks released first, and only then does the
//!   thread wait — holding nothing, or (MSET) taking its keys in stripe order. So no cycle
//!   of waiters can form with each other or with [`Store::lock`]'s ordered locking.
//! - A failed commit replaces the reply of every command since the batch began with the
//!   engine's error (`ERR ...`); the connection goes on.
//! - Inside a transaction (after MULTI) nothing takes the batched path or the inline read
//!   path: every command goes through [`cmd::execute`], which queues it; EXEC runs the
//!   queue there too (`cmd/transaction.rs`), after the pending batch is committed and its
//!   locks released, like any other command.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use wisckey::WriteBatch;

use crate::cmd::{self, check_key, check_value, After, Client, Shared};
use crate::error::Error;
use crate::format::Stored;
use crate::resp::{self, parse_int, Command, Reply};
use crate::store::{now_ms, Store, STRIPES};

/// Pending values up to this size are kept in the overlay; a read of a larger one commits
/// the pending batch first (rare: a GET or INCR of a key just SET in the same round).
const OVERLAY_MAX: usize = 64;
/// A pending batch is committed once its payload passes this many bytes (or a quarter of
/// the engine's `max_batch_size`, if less: see [`pending_limit`]).
const MAX_PENDING_BYTES: usize = 8 << 20;

/// When the pending batch is committed early, and how large an MSET is committed alone: a
/// pending batch under this plus one command under it stays under the engine's
/// `max_batch_size` (a quarter of it leaves room for the keyspace's headers).
fn pending_limit(store: &Store) -> usize {
    MAX_PENDING_BYTES.min(store.max_batch_size() / 4)
}

/// What a batch of work hands back to the connection task.
pub(crate) struct Batch {
    pub client: Client,
    pub pending: VecDeque<Command>,
    pub out: Vec<u8>,
    pub after: After,
}

/// The commands with a batched path.
enum Fast {
    Get,
    Set,
    Mset,
    /// INCR, DECR, INCRBY, DECRBY with the delta.
    Add(i64),
}

fn is(name: &[u8], what: &str) -> bool {
    name.eq_ignore_ascii_case(what.as_bytes())
}

/// Whether `args` takes the batched path, and as what. Anything unusual (options, a wrong
/// argument count, a non-integer increment) goes through [`cmd::execute`], which has the
/// error texts.
fn classify(authed: bool, args: &[Vec<u8>]) -> Option<Fast> {
    if !authed {
        return None;
    }
    let name = args.first()?;
    match args.len() {
        2 if is(name, "get") => Some(Fast::Get),
        2 if is(name, "incr") => Some(Fast::Add(1)),
        2 if is(name, "decr") => Some(Fast::Add(-1)),
        3 if is(name, "set") => Some(Fast::Set),
        3 if is(name, "incrby") => parse_int(&args[2]).map(Fast::Add),
        3 if is(name, "decrby") => match parse_int(&args[2]) {
            Some(i64::MIN) | None => None,
            Some(d) => Some(Fast::Add(-d)),
        },
        n if n >= 3 && n % 2 == 1 && is(name, "mset") => Some(Fast::Mset),
        _ => None,
    }
}

/// The key a batched-path command reads from the engine (GET, INCR and its kin), if any.
fn read_key(args: &Command) -> Option<&[u8]> {
    match classify(true, args)? {
        Fast::Get | Fast::Add(_) => Some(&args[1]),
        Fast::Set | Fast::Mset => None,
    }
}

/// Whether every command in `pending` only reads keys (GET, MGET) or touches nothing: such
/// a batch may run on the connection's own thread.
pub(crate) fn read_only(client: &Client, pending: &VecDeque<Command>) -> bool {
    client.authed
        && !client.in_multi()
        && pending.iter().all(|args| match args.first() {
            Some(name) => {
                (args.len() == 2 && is(name, "get"))
                    || (args.len() >= 2 && is(name, "mget"))
                    || (args.len() <= 2 && is(name, "ping"))
            }
            None => true,
        })
}

/// How many keys a [`read_only`] batch reads (an MGET counts each of its keys), which bounds
/// how long it may hold the thread it runs on.
pub(crate) fn keys_read(pending: &VecDeque<Command>) -> usize {
    pending
        .iter()
        .map(|args| args.len().saturating_sub(1).max(1))
        .sum()
}

/// The pending writes of a run of batched commands.
struct Writes<'s> {
    store: &'s Store,
    batch: WriteBatch,
    /// The value each pending write leaves (keys only put, never deleted, here); `None`
    /// for a value too large to copy ([`OVERLAY_MAX`]): reading it commits first.
    overlay: HashMap<Vec<u8>, Option<Stored>, ahash::RandomState>,
    held: Vec<MutexGuard<'s, ()>>,
    held_bits: [u64; STRIPES / 64],
    /// A pending write carries an expiry (the sweeper is told after the commit).
    expiring: bool,
    /// Successful commits so far: one inside a command (a busy lock, a large pending value
    /// read back) covers every reply before that command.
    commits: u64,
    /// Scratch space reused by every read and put of the run: the engine key, the encoded
    /// value, a value read from the log.
    ekey: Vec<u8>,
    evalue: Vec<u8>,
    scratch: Vec<u8>,
}

impl<'s> Writes<'s> {
    fn new(store: &'s Store) -> Writes<'s> {
        Writes {
            store,
            batch: WriteBatch::new(),
            overlay: HashMap::default(),
            commits: 0,
            held: Vec::new(),
            held_bits: [0; STRIPES / 64],
            expiring: false,
            ekey: Vec::new(),
            evalue: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn holds(&self, i: usize) -> bool {
        self.held_bits[i / 64] & (1 << (i % 64)) != 0
    }

    fn hold(&mut self, i: usize, g: MutexGuard<'s, ()>) {
        self.held_bits[i / 64] |= 1 << (i % 64);
        self.held.push(g);
    }

    /// Whether there is anything to commit or any lock held.
    fn active(&self) -> bool {
        !self.held.is_empty() || !self.batch.is_empty()
    }

    /// Commits the pending batch (synced if `sync`) and releases every lock (also on
    /// failure). Returns whether it made a write.
    fn commit(&mut self, sync: bool) -> Result<bool, Error> {
        let result = if self.batch.is_empty() {
            Ok(false)
        } else {
            let batch = std::mem::take(&mut self.batch);
            self.store.write_with(batch, sync).map(|()| true)
        };
        if result.is_ok() {
            self.commits += 1;
        }
        if std::mem::take(&mut self.expiring) {
            self.store.note_expiry_written();
        }
        self.overlay.clear();
        self.held.clear();
        self.held_bits = [0; STRIPES / 64];
        result
    }

    /// Takes the stripe locks of `keys` (those not held yet). If one is busy, commits what
    /// is pending first (see the module docs); the error is that commit's.
    fn lock<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<(), Error> {
        if let [key] = keys {
            // The common case (GET, SET, INCR): no lists to build.
            let i = self.store.stripe_of(key.as_ref());
            if self.holds(i) {
                return Ok(());
            }
            if let Some(g) = self.store.try_lock_stripe(i) {
                self.hold(i, g);
                return Ok(());
            }
        }
        let mut want: Vec<usize> = keys
            .iter()
            .map(|k| self.store.stripe_of(k.as_ref()))
            .filter(|&i| !self.holds(i))
            .collect();
        want.sort_unstable();
        want.dedup();
        let mut got = Vec::with_capacity(want.len());
        for &i in &want {
            match self.store.try_lock_stripe(i) {
                Some(g) => got.push((i, g)),
                None => break,
            }
        }
        if got.len() == want.len() {
            for (i, g) in got {
                self.hold(i, g);
            }
            return Ok(());
        }
        // A busy stripe: give everything back, then wait, in stripe order, holding nothing
        // else.
        drop(got);
        let committed = self.commit(false);
        let mut want: Vec<usize> = keys
            .iter()
            .map(|k| self.store.stripe_of(k.as_ref()))
            .collect();
        want.sort_unstable();
        want.dedup();
        for i in want {
            let g = self.store.lock_stripe(i);
            self.hold(i, g);
        }
        committed.map(drop)
    }

    /// Lends the live value of `key` as the pending writes leave it (its bytes and expiry)
    /// to `use_value`; `None` if absent or expired. The caller holds its lock (and still
    /// does on return) or has nothing pending.
    fn read_with<R>(
        &mut self,
        key: &[u8],
        now: u64,
        use_value: impl FnOnce(&[u8], Option<u64>) -> R,
    ) -> Result<Option<R>, Error> {
        match self.overlay.get(key) {
            Some(Some(s)) if s.is_expired(now) => Ok(None),
            Some(Some(s)) => Ok(Some(use_value(&s.data, s.expires_at_ms))),
            // A large pending value is committed first (`commit_before_read`); without it
            // (there is none after a commit) the store has the key's value.
            Some(None) | None => {
                let (ekey, scratch) = (&mut self.ekey, &mut self.scratch);
                self.store.read_with(key, now, ekey, scratch, use_value)
            }
        }
    }

    /// Before [`Writes::read_with`] of `key`: a large pending value of it (not kept in the
    /// overlay) is committed, so the read finds it in the store; the key is locked again.
    /// `Err` is that commit's failure: the pending writes', not the read's.
    fn commit_before_read(&mut self, key: &[u8]) -> Result<(), Error> {
        if matches!(self.overlay.get(key), Some(None)) {
            self.commit(false)?;
            self.lock(&[key])?;
        }
        Ok(())
    }

    /// Adds `key = data` to the pending batch. The caller holds the key's stripe.
    fn put(&mut self, key: &[u8], data: &[u8], expires_at_ms: Option<u64>) {
        self.store.touch(key);
        let (ekey, evalue) = (&mut self.ekey, &mut self.evalue);
        Store::batch_put_via(&mut self.batch, key, data, expires_at_ms, ekey, evalue);
        self.expiring |= expires_at_ms.is_some();
        let kept = (data.len() <= OVERLAY_MAX).then(|| Stored {
            data: data.to_vec(),
            expires_at_ms,
        });
        self.overlay.insert(key.to_vec(), kept);
    }

    /// Commits a large write that was added to an empty pending batch: the engine may
    /// refuse it (over `max_batch_size`), which fails this command only.
    fn commit_alone(&mut self) -> Reply {
        match self.commit(false) {
            Ok(_) => Reply::OK,
            Err(e) => Reply::err(format!("ERR {e}")),
        }
    }

    /// Commits early once the pending batch is large.
    fn commit_if_large(&mut self) -> Result<(), Error> {
        if self.batch.payload_bytes() >= pending_limit(self.store) {
            self.commit(false)?;
        }
        Ok(())
    }
}

/// Runs one batched command. `Err` is a failed commit of the writes pending before it
/// (this command did not run); a command's own errors are error replies.
fn run_fast(w: &mut Writes<'_>, fast: Fast, args: &[Vec<u8>]) -> Result<Reply, Error> {
    Ok(match fast {
        Fast::Get => {
            let key = &args[1];
            if w.active() && !w.overlay.contains_key(key.as_slice()) {
                // Read under the key's lock so it cannot change before the commit.
                w.lock(&[key])?;
            }
            w.commit_before_read(key)?;
            match w.read_with(key, now_ms(), |data, _| data.to_vec()) {
                Ok(Some(data)) => Reply::Bulk(data),
                Ok(None) => Reply::Nil,
                Err(e) => Reply::err(format!("ERR {e}")),
            }
        }
        Fast::Set => {
            let (key, value) = (&args[1], &args[2]);
            match check_key(key).or_else(|| check_value(value)) {
                Some(e) => e,
                None => {
                    let large = key.len() + value.len() + 10 >= pending_limit(w.store);
                    if large {
                        w.commit(false)?; // as a large MSET's, below
                    }
                    w.lock(&[key])?;
                    w.put(key, value, None);
                    if large {
                        w.commit_alone()
                    } else {
                        Reply::OK
                    }
                }
            }
        }
        Fast::Mset => {
            let bad = args[1..]
                .chunks_exact(2)
                .find_map(|p| check_key(&p[0]).or_else(|| check_value(&p[1])));
            match bad {
                Some(e) => e,
                None => {
                    let keys: Vec<&Vec<u8>> = args[1..].iter().step_by(2).collect();
                    // 10 bytes a pair for the engine key's namespace and the value's header.
                    let bytes = args[1..].iter().map(|a| a.len() + 5).sum::<usize>();
                    let large = bytes >= pending_limit(w.store);
                    if large {
                        // Its own commit: the engine may refuse it (over `max_batch_size`),
                        // and that must fail this MSET only, not the writes pending before
                        // it (committed first; their failure is theirs: `Err`).
                        w.commit(false)?;
                    }
                    w.lock(&keys)?;
                    for pair in args[1..].chunks_exact(2) {
                        w.put(&pair[0], &pair[1], None);
                    }
                    if large {
                        w.commit_alone()
                    } else {
                        Reply::OK
                    }
                }
            }
        }
        Fast::Add(delta) => {
            let key = &args[1];
            if let Some(e) = check_key(key) {
                return Ok(e);
            }
            w.lock(&[key])?;
            w.commit_before_read(key)?;
            match w.read_with(key, now_ms(), |data, expires| {
                parse_int(data).map(|n| (n, expires))
            }) {
                Err(e) => Reply::err(format!("ERR {e}")),
                Ok(old) => match old.unwrap_or(Some((0, None))) {
                    None => cmd::not_integer(),
                    Some((n, expires)) => match n.checked_add(delta) {
                        None => Reply::err("ERR increment or decrement would overflow"),
                        Some(new) => {
                            w.put(key, itoa::Buffer::new().format(new).as_bytes(), expires);
                            Reply::Integer(new)
                        }
                    },
                },
            }
        }
    })
}

/// Replies since the pending batch began: where they start in the output and how many.
#[derive(Default)]
struct Since {
    at: usize,
    count: usize,
}

impl Since {
    /// Notes a reply about to be encoded at `out.len()`.
    fn note(&mut self, out: &[u8]) {
        if self.count == 0 {
            self.at = out.len();
        }
        self.count += 1;
    }

    /// A failed commit: every reply since the batch began (and `extra` more) becomes `e`.
    fn fail(&mut self, out: &mut Vec<u8>, extra: usize, e: &Error, resp3: bool) {
        if self.count == 0 {
            // Nothing was pending before: `at` is an older batch's start, whose replies
            // stand (they were committed).
            self.at = out.len();
        }
        out.truncate(self.at);
        let err = Reply::err(format!("ERR {e}"));
        for _ in 0..self.count + extra {
            err.encode_as(out, resp3);
        }
        self.count = 0;
    }
}

/// Executes `b.pending` in order until it is empty, a command ends the connection, or the
/// replies reach `limit` bytes; then makes what the replies acknowledge or show durable.
pub(crate) fn run_batch(shared: &Shared, mut b: Batch, limit: usize) -> Batch {
    let store = &shared.store;
    let always = store.durable_before_reply();
    let mut w = Writes::new(store);
    let mut since = Since::default();
    // Whether the last engine action was a synced write covering everything before it
    // (see `store.rs`), so no separate sync is needed.
    let mut covered = false;
    let lone = b.pending.len() == 1;
    while let Some(args) = b.pending.pop_front() {
        let resp3 = b.client.resp3;
        if let Some(fast) = classify(b.client.authed && !b.client.in_multi(), &args) {
            shared
                .stats
                .commands_processed
                .fetch_add(1, Ordering::Relaxed);
            covered = false;
            let commits_before = w.commits;
            let reply = run_fast(&mut w, fast, &args).and_then(|r| {
                w.commit_if_large()?;
                Ok(r)
            });
            if w.commits != commits_before {
                // A commit inside this command covered every reply before it.
                since.count = 0;
            }
            match reply {
                Ok(reply) => {
                    if w.active() {
                        since.note(&b.out);
                    } else {
                        since.count = 0;
                    }
                    reply.encode_as(&mut b.out, resp3);
                }
                Err(e) => since.fail(&mut b.out, 1, &e, resp3),
            }
        } else {
            if w.active() {
                if let Err(e) = w.commit(false) {
                    since.fail(&mut b.out, 0, &e, resp3);
                }
                since.count = 0;
            }
            let ((reply, after), synced) = if lone {
                store.last_in_batch(|| cmd::execute(shared, &mut b.client, &args))
            } else {
                (cmd::execute(shared, &mut b.client, &args), false)
            };
            covered = synced;
            if after != After::Shutdown {
                reply.encode_as(&mut b.out, b.client.resp3);
            }
            if after != After::Continue {
                b.after = after;
                b.pending.clear();
                break;
            }
        }
        if b.out.len() >= limit {
            break;
        }
    }
    if w.active() {
        // The last action: under `always` a synced write, covering everything before it.
        match w.commit(always) {
            Ok(wrote) => covered = wrote,
            Err(e) => since.fail(&mut b.out, 0, &e, b.client.resp3),
        }
    }
    if let Err(e) = durable(store, covered) {
        not_durable(&e, &mut b.out, &mut b.pending, &mut b.after);
    }
    b
}

/// Nothing the replies acknowledge or show may be lost once they are sent: unless
/// `covered` (a synced write was the last engine action), make it durable.
fn durable(store: &Store, covered: bool) -> Result<(), Error> {
    if covered {
        Ok(())
    } else {
        store.make_durable()
    }
}

/// Durability failed: the replies become one error and the connection closes.
fn not_durable(e: &Error, out: &mut Vec<u8>, pending: &mut VecDeque<Command>, after: &mut After) {
    out.clear();
    Reply::err(format!("ERR {e}")).encode(out);
    pending.clear();
    if *after == After::Continue {
        *after = After::Close;
    }
}

/// A connection's batch of batched-path commands, handed to the executor thread.
pub(crate) struct Job {
    pub resp3: bool,
    pub pending: VecDeque<Command>,
    pub out: Vec<u8>,
    pub limit: usize,
    /// Gets back the commands not run yet (the output limit was reached), the replies,
    /// and whether the connection must close (durability failed).
    pub done: tokio::sync::oneshot::Sender<(VecDeque<Command>, Vec<u8>, After)>,
}

/// Whether every command in `pending` takes the batched path (so the batch may go to the
/// executor thread): never inside a transaction, whose commands are queued.
pub(crate) fn all_fast(client: &Client, pending: &VecDeque<Command>) -> bool {
    !client.in_multi()
        && pending
            .iter()
            .all(|args| classify(client.authed, args).is_some())
}

/// Most connections' jobs one executor round takes.
const MAX_ROUND: usize = 1024;

/// Starts the executor thread: it takes every job queued at once (one per connection with
/// a batch waiting), runs them one after the other over one pending write batch and
/// commits it as one engine write (under `always`, one synced write: one sync for every
/// connection in the round, as Redis's `always` syncs once per event-loop iteration), then
/// sends each connection its replies. It ends when every sender is dropped.
pub(crate) fn spawn_executor(
    shared: std::sync::Arc<Shared>,
    rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    threads: usize,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let mut handles = Vec::new();
    for _ in 0..threads.max(1) {
        let (shared, rx) = (std::sync::Arc::clone(&shared), std::sync::Arc::clone(&rx));
        handles.push(
            std::thread::Builder::new()
                .name("wisckey-exec".into())
                .spawn(move || executor(&shared, &rx))?,
        );
    }
    Ok(handles)
}

/// Takes the next round of jobs: waits for one, then takes every one queued behind it.
/// `false` once every sender is gone.
fn next_round(
    rx: &std::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Job>>,
    jobs: &mut Vec<(Job, usize)>,
) -> bool {
    // The receiver has no invariant a panic could break: take it even if poisoned.
    let mut rx = rx.lock().unwrap_or_else(|e| e.into_inner());
    let Some(first) = rx.blocking_recv() else {
        return false;
    };
    jobs.push((first, 0));
    while jobs.len() < MAX_ROUND {
        match rx.try_recv() {
            Ok(job) => jobs.push((job, 0)),
            Err(_) => break,
        }
    }
    true
}

fn executor(shared: &Shared, rx: &std::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<Job>>) {
    let mut jobs: Vec<(Job, usize)> = Vec::new();
    while next_round(rx, &mut jobs) {
        run_round(shared, &mut jobs);
    }
}

/// The executor's work on the event-loop thread itself (a single-threaded runtime, as
/// Redis's event loop): waits for a job, lets every other connection with requests ready
/// queue its own (one yield: the runtime polls the sockets before resuming this task), then
/// runs the round right here, the sync included, blocking the loop as Redis's `always`
/// blocks its loop in `fsync`. Ends when every sender is dropped.
pub(crate) async fn commit_on_loop(
    shared: std::sync::Arc<Shared>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
) {
    let mut jobs: Vec<(Job, usize)> = Vec::new();
    while let Some(first) = rx.recv().await {
        jobs.push((first, 0));
        tokio::task::yield_now().await;
        while jobs.len() < MAX_ROUND {
            match rx.try_recv() {
                Ok(job) => jobs.push((job, 0)),
                Err(_) => break,
            }
        }
        run_round(&shared, &mut jobs);
    }
}

/// Runs one round of jobs over one pending write batch, commits it, and sends each job's
/// connection its replies; `jobs` is left empty.
fn run_round(shared: &Shared, jobs: &mut Vec<(Job, usize)>) {
    let store = &shared.store;
    let always = store.durable_before_reply();
    let mut w = Writes::new(store);
    let mut failed: Option<Error> = None;
    if jobs.len() >= 2 || jobs.first().is_some_and(|(job, _)| job.pending.len() >= 2) {
        store.prefetch(
            jobs.iter()
                .flat_map(|(job, _)| job.pending.iter())
                .filter_map(read_key),
        );
    }
    // Per job, the replies (output length, commands run) that a commit earlier in the round
    // already covered: a later failed commit must not turn them into errors (a client told
    // its INCR failed would retry it, and count it twice).
    let mut committed: Vec<(usize, usize)> = vec![(0, 0); jobs.len()];
    'round: for j in 0..jobs.len() {
        loop {
            let (job, ran) = &mut jobs[j];
            let Some(args) = job.pending.pop_front() else {
                break;
            };
            // Where this command's reply starts, for a commit inside it (see `commits`).
            let before = (job.out.len(), *ran);
            let commits_before = w.commits;
            *ran += 1;
            shared
                .stats
                .commands_processed
                .fetch_add(1, Ordering::Relaxed);
            // Only batched-path commands are sent here (`all_fast`), by authenticated
            // clients; anything else would be a bug in the sender, answered as one.
            let reply = match classify(true, &args) {
                Some(fast) => run_fast(&mut w, fast, &args).and_then(|r| {
                    w.commit_if_large()?;
                    Ok(r)
                }),
                None => Ok(Reply::err("ERR internal: not a batched command")),
            };
            if w.commits != commits_before {
                // A commit inside this command (a busy lock, a large pending value read
                // back, or the early commit after it): every reply before it stands.
                for (mark, (job, ran)) in committed.iter_mut().zip(jobs.iter()).take(j) {
                    *mark = (job.out.len(), *ran);
                }
                committed[j] = before;
            }
            let (job, _) = &mut jobs[j];
            match reply {
                Ok(reply) => reply.encode_as(&mut job.out, job.resp3),
                Err(e) => {
                    // Run nothing more this round: the connections get their unrun
                    // commands back and send them again.
                    failed = Some(e);
                    break 'round;
                }
            }
            let out_full = job.out.len() >= job.limit;
            if !w.active() {
                // Nothing pending: every reply so far stands, whatever comes later.
                for (mark, (job, ran)) in committed.iter_mut().zip(jobs.iter()).take(j + 1) {
                    *mark = (job.out.len(), *ran);
                }
            }
            if out_full {
                break;
            }
        }
    }
    let covered = match w.commit(always) {
        Ok(wrote) => wrote,
        Err(e) => {
            failed = Some(e);
            false
        }
    };
    drop(w);
    let made_durable = durable(store, covered);
    for ((mut job, ran), (out_len, ran_before)) in jobs.drain(..).zip(committed) {
        let mut after = After::Continue;
        if let Some(e) = &failed {
            // A write of this round failed: no reply since the last commit that covered
            // this job can be trusted.
            job.out.truncate(out_len);
            let err = Reply::err(format!("ERR {e}"));
            for _ in ran_before..ran {
                err.encode_as(&mut job.out, job.resp3);
            }
        }
        if let Err(e) = &made_durable {
            not_durable(e, &mut job.out, &mut job.pending, &mut after);
        }
        // The connection may be gone (shut down): nothing to tell it.
        let _ = job.done.send((job.pending, job.out, after));
    }
}

/// Executes a [`read_only`] batch on the calling thread, without the durability step:
/// the caller runs [`Store::make_durable`] before sending if [`Store::needs_sync`] says so.
/// Returns whether it ran an MGET, whose values the engine reads on its own reader threads
/// (parallel I/O): their disk reads do not show in this thread's count ([`ran_slow`]).
pub(crate) fn run_reads(shared: &Shared, b: &mut Batch, limit: usize) -> bool {
    let (mut ekey, mut scratch) = (Vec::new(), Vec::new());
    let mut ran_mget = false;
    // Counted once per batch: connections on different threads share the counter.
    let mut gets = 0;
    // A lone request (unpipelined) has nothing to overlap: not even the key list is built.
    if b.client.authed && b.pending.len() >= 2 {
        shared.store.prefetch(b.pending.iter().filter_map(read_key));
    }
    while let Some(args) = b.pending.pop_front() {
        if b.client.authed && !b.client.in_multi() && args.len() == 2 && is(&args[0], "get") {
            // GET with the value copied once, from where the engine holds it to the reply.
            gets += 1;
            let out = &mut b.out;
            match (shared.store).get_with(&args[1], &mut ekey, &mut scratch, |data| {
                resp::push_bulk(out, data)
            }) {
                Ok(Some(())) => {}
                Ok(None) => Reply::Nil.encode_as(&mut b.out, b.client.resp3),
                Err(e) => Reply::err(format!("ERR {e}")).encode_as(&mut b.out, b.client.resp3),
            }
        } else {
            ran_mget |= args.first().is_some_and(|name| is(name, "mget"));
            let (reply, _) = cmd::execute(shared, &mut b.client, &args);
            reply.encode_as(&mut b.out, b.client.resp3);
        }
        if b.out.len() >= limit {
            break;
        }
    }
    (shared.stats.commands_processed).fetch_add(gets, Ordering::Relaxed);
    ran_mget
}

/// [`run_reads`] on a blocking thread, then the durability step of [`run_batch`].
pub(crate) fn run_reads_durable(shared: &Shared, mut b: Batch, limit: usize) -> Batch {
    // On the pool already: whether it ran slow decides nothing.
    let _ = run_reads(shared, &mut b, limit);
    make_reads_durable(shared, &mut b);
    b
}

/// The durability step after [`run_reads`]: the writes the reads saw are synced before
/// the replies leave; if that fails, the batch answers with the error and closes.
fn make_reads_durable(shared: &Shared, b: &mut Batch) {
    if let Err(e) = shared.store.make_durable() {
        not_durable(&e, &mut b.out, &mut b.pending, &mut b.after);
    }
}

/// A connection's read-only batch, handed to the reader thread (single-threaded runtime).
pub(crate) struct ReadJob {
    pub batch: Batch,
    pub limit: usize,
    /// Gets the batch back with its replies, and whether it ran slow waiting on the disk
    /// or copying large values (see [`ran_slow`]).
    pub done: tokio::sync::oneshot::Sender<(Batch, bool)>,
}

/// How long the reader thread sends batches to the blocking pool after one ran slow.
const POOL_WHILE_SLOW: std::time::Duration = std::time::Duration::from_millis(100);

/// When the reader thread last saw a slow batch, so it stops running batches one after
/// another while the data is on disk.
struct SlowMark {
    origin: std::time::Instant,
    /// Microseconds after `origin` until which batches go to the blocking pool.
    until_us: std::sync::atomic::AtomicU64,
}

impl SlowMark {
    fn new() -> SlowMark {
        SlowMark {
            origin: std::time::Instant::now(),
            until_us: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn since_origin(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn mark(&self) {
        let until = self.since_origin() + POOL_WHILE_SLOW.as_micros() as u64;
        self.until_us.fetch_max(until, Ordering::Relaxed);
    }

    fn recent(&self) -> bool {
        self.since_origin() < self.until_us.load(Ordering::Relaxed)
    }
}

/// Starts the reader thread of a single-threaded server: it runs read-only batches too long
/// for the event loop ([`run_read_job`]) one after the other, as they are queued, so the
/// loop goes on serving while they run without a blocking-pool hand-off per batch. Once a
/// batch runs longer than `slow` waiting on the disk ([`ran_slow`]), and for
/// [`POOL_WHILE_SLOW`] after the last such batch, it hands batches to the blocking pool
/// instead, where they read in parallel rather than queue behind each other's disk reads.
/// Must be called on the runtime (its blocking pool). Ends when every sender is dropped.
pub(crate) fn spawn_reader(
    shared: std::sync::Arc<Shared>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<ReadJob>,
    slow: std::time::Duration,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let pool = tokio::runtime::Handle::current();
    let mark = std::sync::Arc::new(SlowMark::new());
    std::thread::Builder::new()
        .name("wisckey-sread".into()) // not the engine's `wisckey-read` pool
        .spawn(move || {
            while let Some(job) = rx.blocking_recv() {
                if !mark.recent() {
                    run_read_job(&shared, &mark, slow, job);
                    continue;
                }
                // The job waits in a slot the pool's closure takes it from: tokio panics
                // when its pool has no thread and the OS refuses a new one (a thread
                // limit), and then this thread takes the job back and runs it itself
                // rather than die and leave every connection without a reader.
                let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(job)));
                let (shared_, mark_, slot_) = (
                    std::sync::Arc::clone(&shared),
                    std::sync::Arc::clone(&mark),
                    std::sync::Arc::clone(&slot),
                );
                let handed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // Dropped, the task's handle does not cancel it.
                    pool.spawn_blocking(move || {
                        if let Some(job) = take_job(&slot_) {
                            run_read_job(&shared_, &mark_, slow, job);
                        }
                    })
                }));
                if handed.is_err() {
                    if let Some(job) = take_job(&slot) {
                        run_read_job(&shared, &mark, slow, job);
                    }
                }
            }
        })
}

/// The job in a hand-off slot, if nobody took it yet (a panic elsewhere cannot leave the
/// slot in a state worse than holding the job or not).
fn take_job(slot: &std::sync::Mutex<Option<ReadJob>>) -> Option<ReadJob> {
    slot.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
}

/// Replies of a read batch beyond which, if it also ran slow, the batch counts as heavy
/// work for an event loop even with its data in memory (see [`ran_slow`]).
const HEAVY_REPLIES: usize = 1 << 20;

/// Whether reads that began at `began` on this thread, and added `reply_bytes` of replies,
/// ran longer than `slow` for a reason that sends the next ones off the event loop: they
/// waited on the disk, or they copied large values (over [`HEAVY_REPLIES`]). A batch of
/// page-cache reads slowed only by the scheduler (two cores shared with the clients) does
/// not count: it would gain nothing from running in parallel on the blocking pool, and
/// each read there costs more CPU (see [`crate::disk`]). `ran_mget` (from [`run_reads`]):
/// some reads ran on the engine's reader threads, where this thread's disk count cannot
/// see them, so the batch counts by its wall time alone.
pub(crate) fn ran_slow(
    began: std::time::Instant,
    slow: std::time::Duration,
    reply_bytes: usize,
    ran_mget: bool,
) -> bool {
    if began.elapsed() <= slow {
        return false;
    }
    // Looked at after every slow batch, whatever else decides, so a disk read counts for
    // the batch that made it rather than for a later one on this thread.
    let read_from_disk = crate::disk::read_since_last_look();
    read_from_disk || ran_mget || reply_bytes > HEAVY_REPLIES
}

/// Runs one [`ReadJob`], marks `mark` if it ran slow ([`ran_slow`], or the sync of the
/// writes its reads saw took longer than `slow`), and sends it back.
fn run_read_job(shared: &Shared, mark: &SlowMark, slow: std::time::Duration, job: ReadJob) {
    let ReadJob {
        mut batch,
        limit,
        done,
    } = job;
    if done.is_closed() {
        return; // its connection is gone (shut down, or the client left): nobody to answer
    }
    // A panic ends only this batch's connection (its `done` is dropped), as a panic on a
    // blocking-pool thread would; the reader thread goes on for the others.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let (began, replies_before) = (std::time::Instant::now(), batch.out.len());
        let ran_mget = run_reads(shared, &mut batch, limit);
        let reads_ran_slow = ran_slow(began, slow, batch.out.len() - replies_before, ran_mget);
        // A sync shows in no read count: timed on its own.
        let syncing = std::time::Instant::now();
        make_reads_durable(shared, &mut batch);
        (batch, reads_ran_slow || syncing.elapsed() > slow)
    }));
    if let Ok((batch, was_slow)) = ran {
        if was_slow {
            mark.mark();
            (shared.stats.slow_read_batches).fetch_add(1, Ordering::Relaxed);
        }
        let _ = done.send((batch, was_slow));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own, which has read nothing from the disk.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_slow_batch_leaves_the_loop_only_for_disk_reads_or_large_replies() {
        std::thread::spawn(|| {
            let slow = std::time::Duration::from_millis(1);
            let now = std::time::Instant::now();
            let long_ago = now - std::time::Duration::from_millis(20);
            let very_slow = std::time::Duration::from_secs(10);
            assert!(
                !ran_slow(now, very_slow, 2 * HEAVY_REPLIES, true),
                "not slow at all"
            );
            // Where the kernel does not count per-thread I/O, every slow batch counts.
            assert_eq!(
                ran_slow(long_ago, slow, 16 * 1024, false),
                !crate::disk::kernel_counts_task_io(),
                "slow with small replies and no disk read: the scheduler's delay"
            );
            assert!(
                ran_slow(long_ago, slow, HEAVY_REPLIES + 1, false),
                "slow copying large values"
            );
            assert!(
                ran_slow(long_ago, slow, 16 * 1024, true),
                "slow with an MGET, whose disk reads this thread cannot count"
            );
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn a_slow_batch_sends_the_reader_threads_next_ones_to_the_pool_for_a_while() {
        // "Recent" is checked only when this thread was not held up past the window
        // between marking and asking (a busy CI machine can deschedule it that long).
        let marked_and_asked = |mark: &SlowMark| {
            let marked = std::time::Instant::now();
            mark.mark();
            (mark.recent(), marked.elapsed() < POOL_WHILE_SLOW)
        };
        let mark = SlowMark::new();
        assert!(!mark.recent(), "nothing slow yet");
        let (recent, in_time) = marked_and_asked(&mark);
        assert!(recent || !in_time, "right after a slow batch");
        std::thread::sleep(POOL_WHILE_SLOW + std::time::Duration::from_millis(50));
        assert!(!mark.recent(), "the mark wears off");
        let (recent, in_time) = marked_and_asked(&mark);
        assert!(
            recent || !in_time,
            "and comes back with the next slow batch"
        );
    }
}
