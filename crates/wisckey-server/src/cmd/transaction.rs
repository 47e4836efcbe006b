//! Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//!
//! - **The queue** lives in the connection's [`Client`] (`Client::multi`). While it is
//!   open, [`super::execute`] checks each command as Redis 7 does before queueing it: an
//!   unknown command, a wrong argument count or a command refused inside a transaction
//!   (SHUTDOWN) gets its error and marks the transaction, so EXEC answers `EXECABORT` and
//!   runs nothing; anything else is queued and answered `QUEUED`. EXEC, DISCARD, MULTI,
//!   WATCH and QUIT run at once. Runtime errors (INCR of a non-integer) are not known
//!   until EXEC: that command's element of EXEC's reply is its error, the others run.
//! - **Bounded**: a transaction holds at most `--max-multibulk-len` commands and
//!   `--max-query-len` bytes of arguments (each argument counted with its buffer's 24-byte
//!   header, each command with 24 more): the limits of one request, as if the transaction
//!   were one. The command that would pass them gets an error, the queue is freed, every
//!   later command gets the same error and EXEC answers `EXECABORT`. While EXEC runs, its
//!   replies may add up to `--max-query-len` bytes, as MGET's (one more reply past it is
//!   the most it holds; then EXEC answers an error and applies nothing), and its pending
//!   writes to the engine's `max_batch_size`, which would refuse a larger commit (past it
//!   they are dropped at once, and EXEC answers an error and applies nothing).
//! - **Isolation**: EXEC takes the stripe locks of every key its commands name (the
//!   command table's key positions), in stripe order, waiting for each while holding only
//!   lower ones: the same order as [`crate::store::Store::lock`], so it cannot deadlock
//!   with another transaction or a command; the batched write path (`pipeline.rs`) only
//!   waits while holding nothing. A transaction with a command that reads or writes the
//!   whole keyspace (DBSIZE, SCAN, INFO, FLUSHDB, FLUSHALL) takes every stripe. Then its
//!   commands run, in order, with those locks held, their writes kept in the
//!   transaction's overlay (reads see them), and the overlay is committed as **one**
//!   engine `WriteBatch` before the locks are released (`store.rs`): no other client can
//!   write one of its keys between two of its commands, and no reader sees part of it
//!   (reads take no lock, but see the engine, which gets the whole batch at once).
//! - **Durability**: the commit is an ordinary engine write of the connection's batch of
//!   requests, so under `appendfsync always` EXEC's reply is sent only once it is synced
//!   (a synced write when EXEC is the batch's only command, `Store::make_durable`
//!   otherwise); and one `WriteBatch` is all or nothing after a crash. The exception:
//!   FLUSHDB/FLUSHALL inside a transaction first writes what the transaction wrote before
//!   it (a flush is never atomic: it deletes in batches). A commit that fails (the engine
//!   refuses it) makes EXEC answer that error with none of the writes applied; connection
//!   state that queued commands changed (AUTH, HELLO, CLIENT SETNAME) stays changed.
//! - **RESP3**: each element of EXEC's reply is in the protocol in force once its command
//!   ran, as in Redis: a HELLO inside the transaction switches from its own reply on (the
//!   array's header is the same in both).
//! - **WATCH** (optimistic locking, `watch.rs`): WATCH records each key's version (raised
//!   by every write of it, by any connection, this one included) and, if the key is live
//!   with an expiry, when it expires; under the key's stripe, so the record is exact. EXEC
//!   takes the watched keys' stripes with its own, then compares: if a watched key was
//!   written (or deleted by DEL or FLUSHDB while live, or a key live at WATCH has expired)
//!   it runs nothing and answers a null array (`*-1`; `_` in RESP3), as Redis 7. EXEC
//!   (whatever it answers),
//!   DISCARD, UNWATCH and a disconnect forget the connection's watches. A write raises the
//!   version before the engine applies it, so a write that then fails aborts a watching
//!   transaction too (a false conflict: the client retries, as after any conflict). A
//!   connection watches at most `--max-query-len` bytes, counting each key twice and 160
//!   bytes more (`WatchedKeys::cost`: the registry's copy and two map entries).

use super::{lookup, Client, Shared};
use crate::error::Error;
use crate::resp::{Command, Reply};
use crate::store::{now_ms, STRIPES};
use crate::watch::WatchedKeys;

type Args<'a> = &'a [Vec<u8>];

/// Commands whose keys are the whole keyspace: a transaction holding one takes every
/// stripe lock.
const WHOLE_KEYSPACE: &[&str] = &["dbsize", "flushall", "flushdb", "info", "scan"];

/// What a queued argument costs beyond its bytes (its `Vec` header), and a command.
const OVERHEAD: usize = std::mem::size_of::<Vec<u8>>();

/// An open transaction (between MULTI and EXEC/DISCARD).
#[derive(Debug, Default)]
pub struct Multi {
    queue: Vec<Command>,
    /// The queue's bytes as [`queue`] counts them.
    bytes: usize,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    dirty: bool,
    /// The queue passed its limits (and was freed): every later command is refused.
    full: bool,
}

impl Multi {
    /// Marks the transaction so that EXEC discards it.
    pub fn flag(&mut self) {
        self.dirty = true;
    }
}

/// `EXECABORT`: the transaction had a refused command.
fn execabort() -> Reply {
    Reply::err("EXECABORT Transaction discarded because of previous errors.")
}

fn too_large(sh: &Shared) -> Reply {
    let l = &sh.config.limits;
    Reply::err(format!(
        "ERR transaction too large: at most {} commands and {} bytes of arguments can be \
         queued (--max-multibulk-len, --max-query-len); EXEC will discard it",
        l.max_multibulk_len, l.max_query_len
    ))
}

/// Queues `args` (checked by the caller: a known command, the right argument count).
pub(super) fn queue(sh: &Shared, multi: &mut Multi, args: Args<'_>) -> Reply {
    if multi.full {
        return too_large(sh);
    }
    let cost = OVERHEAD + args.iter().map(|a| a.len() + OVERHEAD).sum::<usize>();
    let limits = &sh.config.limits;
    if multi.queue.len() >= limits.max_multibulk_len
        || multi.bytes.saturating_add(cost) > limits.max_query_len
    {
        *multi = Multi {
            dirty: true,
            full: true,
            ..Multi::default()
        };
        return too_large(sh);
    }
    multi.bytes += cost;
    multi.queue.push(args.to_vec());
    Reply::Simple("QUEUED")
}

pub(super) fn multi(_: &Shared, client: &mut Client, _: Args<'_>) -> Result<Reply, Error> {
    if client.multi.is_some() {
        return Ok(Reply::err("ERR MULTI calls can not be nested"));
    }
    client.multi = Some(Box::default());
    Ok(Reply::OK)
}

pub(super) fn discard(_: &Shared, client: &mut Client, _: Args<'_>) -> Result<Reply, Error> {
    Ok(match client.multi.take() {
        Some(_) => {
            client.watched = None;
            Reply::OK
        }
        None => Reply::err("ERR DISCARD without MULTI"),
    })
}

pub(super) fn watch(sh: &Shared, client: &mut Client, args: Args<'_>) -> Result<Reply, Error> {
    if client.multi.is_some() {
        return Ok(Reply::err("ERR WATCH inside MULTI is not allowed"));
    }
    let keys = &args[1..];
    if let Some(e) = keys.iter().find_map(|k| super::check_key(k)) {
        return Ok(e);
    }
    let watched = client
        .watched
        .get_or_insert_with(|| WatchedKeys::new(sh.store.watches().clone()));
    let budget = sh.config.limits.max_query_len;
    let adding = keys.iter().map(|k| WatchedKeys::cost(k)).sum::<usize>();
    if watched.bytes().saturating_add(adding) > budget {
        return Ok(Reply::err(format!(
            "ERR too many watched keys: a connection may watch {budget} bytes of keys \
             (--max-query-len), each key counted twice and 160 bytes more; nothing was \
             added"
        )));
    }
    // Under the keys' stripes: no write can fall between the version and the expiry read.
    let _guard = sh.store.lock(keys);
    let now = now_ms();
    let (mut ekey, mut scratch) = (Vec::new(), Vec::new());
    for key in keys {
        if watched.contains(key) {
            continue; // Redis keeps the first WATCH's view of a key
        }
        let expiry = sh
            .store
            .read_with(key, now, &mut ekey, &mut scratch, |_, expires| expires)?;
        watched.add(sh.store.stripe_of(key), key, expiry.flatten());
    }
    Ok(Reply::OK)
}

pub(super) fn unwatch(_: &Shared, client: &mut Client, _: Args<'_>) -> Result<Reply, Error> {
    client.watched = None;
    Ok(Reply::OK)
}

/// The stripes a transaction of `queue` must hold: those of every key its commands name,
/// or all of them if one touches the whole keyspace.
fn stripes(sh: &Shared, queue: &[Command]) -> Vec<usize> {
    let mut out = Vec::new();
    for args in queue {
        let Some(spec) = args.first().and_then(|name| lookup(name)) else {
            continue;
        };
        // INFO reads the keyspace only for its keyspace section (by default, or when
        // asked); its other sections read no key.
        let info_without_keyspace = spec.name == "info"
            && args.len() > 1
            && !args[1..].iter().any(|section| {
                [&b"keyspace"[..], b"all", b"everything", b"default"]
                    .iter()
                    .any(|k| section.eq_ignore_ascii_case(k))
            });
        if WHOLE_KEYSPACE.contains(&spec.name) && !info_without_keyspace {
            return (0..STRIPES).collect();
        }
        let (first, last, step) = spec.keys;
        let n = args.len() as i64;
        if first <= 0 || first >= n {
            continue;
        }
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let mut i = first;
        while i <= last {
            out.push(sh.store.stripe_of(&args[i as usize]));
            i += step.max(1);
        }
    }
    out
}

pub(super) fn exec(sh: &Shared, client: &mut Client, _: Args<'_>) -> Result<Reply, Error> {
    let Some(multi) = client.multi.take() else {
        return Ok(Reply::err("ERR EXEC without MULTI"));
    };
    // EXEC forgets the watches whatever it answers (dropped on return).
    let watched = client.watched.take();
    if multi.dirty {
        return Ok(execabort());
    }
    if multi.queue.is_empty() && watched.is_none() {
        return Ok(Reply::Array(Vec::new()));
    }
    let budget = sh.config.limits.max_query_len;
    let mut stripes = stripes(sh, &multi.queue);
    if let Some(w) = &watched {
        stripes.extend(w.stripes());
    }
    let txn = sh.store.begin_transaction(stripes);
    if watched.is_some_and(|w| w.changed(now_ms())) {
        return Ok(Reply::NilArray);
    }
    let mut replies = Vec::with_capacity(multi.queue.len());
    // The protocol each reply is in (after its command ran: HELLO's own reply is in the
    // protocol it chose).
    let mut protocols = Vec::with_capacity(multi.queue.len());
    let mut reply_bytes = 0usize;
    // A FLUSHDB/FLUSHALL that ran wrote what came before it and deleted every key: a
    // failure after it cannot say that nothing was applied.
    let mut flushed = false;
    let not_applied = |flushed: bool| {
        if flushed {
            "the FLUSHDB it ran and the writes before it were applied, the writes after it \
             were not"
        } else {
            "the transaction's writes were not applied"
        }
    };
    for args in multi.queue {
        let reply = run_queued(sh, client, &args);
        let is_flush = (args.first()).is_some_and(|name| {
            name.eq_ignore_ascii_case(b"flushdb") || name.eq_ignore_ascii_case(b"flushall")
        });
        flushed |= is_flush && !matches!(reply, Reply::Error(_));
        reply_bytes = reply_bytes.saturating_add(reply_size(&reply));
        replies.push(reply);
        protocols.push(client.resp3);
        if reply_bytes > budget {
            // As MGET: a reply no larger than the largest request. Dropping `txn` applies
            // nothing more.
            return Ok(Reply::err(format!(
                "ERR EXEC reply would exceed {budget} bytes (the query buffer limit); {}",
                not_applied(flushed)
            )));
        }
        if txn.too_large() {
            break;
        }
    }
    Ok(match txn.commit() {
        Ok(()) => Reply::Array(in_their_protocols(replies, &protocols, client.resp3)),
        Err(e) => Reply::err(format!("ERR EXEC failed, {}: {e}", not_applied(flushed))),
    })
}

/// EXEC's replies, those whose command ran under another protocol than `final_resp3` (the
/// one the whole reply is encoded in) encoded in theirs. Nothing is encoded ahead unless a
/// HELLO inside the transaction changed the protocol.
fn in_their_protocols(replies: Vec<Reply>, protocols: &[bool], final_resp3: bool) -> Vec<Reply> {
    if protocols.iter().all(|&resp3| resp3 == final_resp3) {
        return replies;
    }
    (replies.into_iter().zip(protocols))
        .map(|(reply, &resp3)| {
            if resp3 == final_resp3 {
                return reply;
            }
            let mut bytes = Vec::new();
            reply.encode_as(&mut bytes, resp3);
            Reply::Encoded(bytes)
        })
        .collect()
}

/// About how many bytes `reply` holds (its payload and a little per element).
fn reply_size(reply: &Reply) -> usize {
    match reply {
        Reply::Simple(s) => s.len() + 8,
        Reply::Error(s) => s.len() + 8,
        Reply::Integer(_) | Reply::Nil | Reply::NilArray => 8,
        Reply::Bulk(b) => b.len() + 8,
        Reply::Encoded(bytes) => bytes.len(),
        Reply::Array(items) => 8 + items.iter().map(reply_size).sum::<usize>(),
        Reply::Map(pairs) => {
            8 + (pairs.iter())
                .map(|(k, v)| reply_size(k) + reply_size(v))
                .sum::<usize>()
        }
    }
}

/// Runs one queued command inside the transaction (its writes join the transaction's
/// overlay through the store). QUIT and SHUTDOWN are never queued, so every command
/// continues the connection.
fn run_queued(sh: &Shared, client: &mut Client, args: Args<'_>) -> Reply {
    super::execute(sh, client, args).0
}
