//! Command dispatch: the table of commands (name, arity, flags, key positions, handler),
//! the per-connection [`Client`] state, and the rules every command passes through before
//! its handler runs (AUTH first when a password is set, arity, Redis's error texts).
//!
//! While a transaction is open (MULTI), commands that pass those rules are queued instead
//! of run (`transaction.rs`).
//!
//! Handlers are plain blocking functions over the [`Shared`] state; the connection layer
//! runs them on a blocking thread. A handler's `Err` is an engine or format failure and
//! becomes an `ERR` reply; everything a client did wrong is an `Ok` error reply.

mod keys;
mod server;
mod strings;
mod transaction;

pub use transaction::Multi;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::config::Config;
use crate::cursor::Cursors;
use crate::error::Error;
use crate::resp::Reply;
use crate::store::Store;
use crate::watch::WatchedKeys;

/// Counters reported by INFO.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted since start.
    pub connections_received: AtomicU64,
    /// Connections refused at the client limit.
    pub rejected_connections: AtomicU64,
    /// Commands executed.
    pub commands_processed: AtomicU64,
    /// Read-only batches that ran slow waiting on the disk (or copying over 1 MiB of
    /// replies; with an MGET, slow at all; on one loop, also the reader thread's batches
    /// whose sync ran slow), each of which sent reads to the blocking pool for a while.
    pub slow_read_batches: AtomicU64,
    /// Clients connected now.
    pub connected_clients: AtomicUsize,
    /// INFO keyspace's last counts (see `Config::info_keyspace_refresh`); its lock makes
    /// one caller count at a time while the others wait for that count.
    pub keyspace: std::sync::Mutex<Option<KeyspaceCounts>>,
}

/// What INFO keyspace reports, and when it was counted.
#[derive(Debug, Clone, Copy)]
pub struct KeyspaceCounts {
    /// When the scan that made these ended.
    pub at: Instant,
    /// Keys (live or expired but not swept yet, as DBSIZE counts them).
    pub keys: u64,
    /// Expiry-index entries, at most `keys`: an upper bound on the keys with a TTL (an
    /// entry outlives a PERSIST or an overwrite until the sweeper meets it).
    pub expires: u64,
}

/// State shared by every connection.
#[derive(Debug)]
pub struct Shared {
    /// The keyspace and the engine.
    pub store: Store,
    /// The configuration the server runs with.
    pub config: Config,
    /// `config.requirepass`'s digest ([`server::password_digest`]), made once.
    pub password_digest: Option<[u8; 32]>,
    /// When the server started.
    pub started: Instant,
    /// INFO's counters.
    pub stats: Stats,
    /// Set to `true` to shut the server down (SHUTDOWN, a signal, or an embedding caller).
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// SCAN's table of cursors for long keys.
    pub cursors: Cursors,
    /// Whether the server runs on a single-threaded runtime, whose loop then commits the
    /// batched writes itself (`server.rs`).
    pub single_loop: bool,
    /// The runtime's worker threads (1 for a single loop): INFO's `serving_threads`.
    pub serving_threads: usize,
    next_client_id: AtomicU64,
}

impl Shared {
    /// Shared state for a server over `store`, served on the runtime it is called on
    /// (called from the async [`Server::bind`](crate::Server::bind), so there is one).
    pub fn new(store: Store, config: Config) -> Shared {
        let runtime = tokio::runtime::Handle::current();
        let single_loop = runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread;
        Shared {
            single_loop,
            serving_threads: runtime.metrics().num_workers(),
            store,
            cursors: Cursors::new(config.scan_cursor_table),
            password_digest: (config.requirepass.as_deref()).map(server::password_digest),
            config,
            started: Instant::now(),
            stats: Stats::default(),
            shutdown: tokio::sync::watch::channel(false).0,
            next_client_id: AtomicU64::new(1),
        }
    }

    /// A fresh client id.
    pub fn client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// One connection's state.
#[derive(Debug)]
pub struct Client {
    /// Unique per server run (CLIENT ID).
    pub id: u64,
    /// CLIENT SETNAME's name.
    pub name: Option<Vec<u8>>,
    /// Whether AUTH succeeded (always true without requirepass).
    pub authed: bool,
    /// Whether replies are RESP3 (`HELLO 3`); RESP2 otherwise.
    pub resp3: bool,
    /// The open transaction's queue, between MULTI and EXEC/DISCARD.
    pub multi: Option<Box<Multi>>,
    /// The keys WATCH named since the last EXEC, DISCARD or UNWATCH.
    pub watched: Option<WatchedKeys>,
}

impl Client {
    /// Whether a transaction is open: commands are queued, not run.
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// A refused command inside a transaction makes EXEC discard it (Redis's rule).
    fn flag_transaction(&mut self) {
        if let Some(multi) = self.multi.as_deref_mut() {
            multi.flag();
        }
    }
}

/// What the connection does after sending a command's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Read the next command.
    Continue,
    /// Close this connection (QUIT).
    Close,
    /// Close this connection, without a reply, and shut the server down (SHUTDOWN).
    Shutdown,
}

type Handler = fn(&Shared, &mut Client, &[Vec<u8>]) -> Result<Reply, Error>;

/// One row of the command table (also what COMMAND reports).
#[derive(Debug)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis's arity: `n` exactly n arguments (the name included), `-n` at least n.
    pub arity: i64,
    /// COMMAND's flags.
    pub flags: &'static [&'static str],
    /// First key argument (0: none), last (-1: the last argument), step.
    pub keys: (i64, i64, i64),
    handler: Handler,
}

const fn spec(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
    handler: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        handler,
    }
}

const W: &[&str] = &["write"];
const WD: &[&str] = &["write", "denyoom"];
const R: &[&str] = &["readonly", "fast"];
const F: &[&str] = &["fast"];
const A: &[&str] = &["noscript", "loading", "stale", "fast", "no-auth"];
const TX: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
const NONE: (i64, i64, i64) = (0, 0, 0);
const ONE: (i64, i64, i64) = (1, 1, 1);
const ALL: (i64, i64, i64) = (1, -1, 1);

/// Every command the server knows. QUIT and SHUTDOWN are handled by [`execute`] itself
/// (they change the connection, not the keyspace); their handlers are never called. The
/// key positions also say which stripe locks EXEC takes (`transaction.rs`): a command that
/// locks a key must name it there.
pub static COMMANDS: &[Spec] = &[
    spec("append", 3, WD, ONE, strings::append),
    spec("auth", -2, A, NONE, server::auth),
    spec("client", -2, F, NONE, server::client),
    spec(
        "command",
        -1,
        &["random", "loading", "stale"],
        NONE,
        server::command,
    ),
    spec(
        "config",
        -2,
        &["admin", "loading", "stale"],
        NONE,
        server::config,
    ),
    spec("dbsize", 1, &["readonly"], NONE, keys::dbsize),
    spec("decr", 2, WD, ONE, strings::decr),
    spec("decrby", 3, WD, ONE, strings::decrby),
    spec("del", -2, W, ALL, keys::del),
    spec("discard", 1, TX, NONE, transaction::discard),
    spec("echo", 2, F, NONE, server::echo),
    spec(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        NONE,
        transaction::exec,
    ),
    spec("exists", -2, R, ALL, keys::exists),
    spec("expire", -3, W, ONE, keys::expire),
    spec("expireat", -3, W, ONE, keys::expireat),
    spec("flushall", -1, W, NONE, keys::flushdb),
    spec("flushdb", -1, W, NONE, keys::flushdb),
    spec("get", 2, R, ONE, strings::get),
    spec("getdel", 2, W, ONE, strings::getdel),
    spec("hello", -1, A, NONE, server::hello),
    spec("incr", 2, WD, ONE, strings::incr),
    spec("incrby", 3, WD, ONE, strings::incrby),
    spec(
        "info",
        -1,
        &["random", "loading", "stale"],
        NONE,
        server::info,
    ),
    spec("mget", -2, R, ALL, strings::mget),
    spec("mset", -3, WD, (1, -1, 2), strings::mset),
    spec("multi", 1, TX, NONE, transaction::multi),
    spec("persist", 2, W, ONE, keys::persist),
    spec("pexpire", -3, W, ONE, keys::pexpire),
    spec("pexpireat", -3, W, ONE, keys::pexpireat),
    spec("ping", -1, F, NONE, server::ping),
    spec("pttl", 2, R, ONE, keys::pttl),
    spec("quit", -1, A, NONE, server::ping),
    spec("scan", -2, &["readonly", "random"], NONE, keys::scan),
    spec(
        "select",
        2,
        &["loading", "stale", "fast"],
        NONE,
        server::select,
    ),
    spec("set", -3, WD, ONE, strings::set),
    spec("setex", 4, WD, ONE, strings::setex),
    spec("setnx", 3, WD, ONE, strings::setnx),
    spec(
        "shutdown",
        -1,
        &["admin", "noscript", "loading", "stale"],
        NONE,
        server::ping,
    ),
    spec("strlen", 2, R, ONE, strings::strlen),
    spec("ttl", 2, R, ONE, keys::ttl),
    spec("type", 2, R, ONE, keys::type_),
    spec("unlink", -2, W, ALL, keys::del),
    spec("unwatch", 1, TX, NONE, transaction::unwatch),
    spec("watch", -2, TX, ALL, transaction::watch),
];

/// The table row for `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Runs one command for `client`: the reply to send and what to do next.
pub fn execute(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> (Reply, After) {
    shared
        .stats
        .commands_processed
        .fetch_add(1, Ordering::Relaxed);
    let Some(name) = args.first() else {
        return (Reply::err("ERR empty command"), After::Continue);
    };
    // Redis 7's order: an unknown command and a wrong argument count are reported before
    // the missing AUTH (neither runs anything).
    let Some(spec) = lookup(name) else {
        client.flag_transaction();
        return (unknown_command(args), After::Continue);
    };
    let n = args.len() as i64;
    if (spec.arity > 0 && n != spec.arity) || n < -spec.arity {
        client.flag_transaction();
        return (wrong_args(spec.name), After::Continue);
    }
    if !client.authed && !spec.flags.contains(&"no-auth") {
        client.flag_transaction();
        return (
            Reply::err("NOAUTH Authentication required."),
            After::Continue,
        );
    }
    if let Some(multi) = client.multi.as_deref_mut() {
        // Redis 7: these run at once inside a transaction; SHUTDOWN is refused (its
        // `no-multi` flag); everything else is queued.
        match spec.name {
            "exec" | "discard" | "multi" | "watch" | "quit" => {}
            "shutdown" => {
                multi.flag();
                return (
                    Reply::err("ERR Command not allowed inside a transaction"),
                    After::Continue,
                );
            }
            _ => return (transaction::queue(shared, multi, args), After::Continue),
        }
    }
    match spec.name {
        "quit" => return (Reply::OK, After::Close),
        "shutdown" => {
            return match shutdown_refused(args) {
                Some(refused) => (refused, After::Continue),
                None => (Reply::OK, After::Shutdown),
            }
        }
        _ => {}
    }
    match (spec.handler)(shared, client, args) {
        Ok(reply) => (reply, After::Continue),
        Err(e) => (Reply::err(format!("ERR {e}")), After::Continue),
    }
}

/// Why SHUTDOWN's arguments do not shut the server down, as Redis 7 checks them: each is
/// one of NOSAVE, SAVE, NOW, FORCE (accepted: there is nothing to save, close always
/// flushes) or ABORT (no shutdown is ever pending), in any case; NOSAVE with SAVE, or
/// ABORT with another, is a syntax error. A typo must not stop the server.
fn shutdown_refused(args: &[Vec<u8>]) -> Option<Reply> {
    let (mut abort, mut save, mut nosave, mut other) = (false, false, false, false);
    for arg in &args[1..] {
        match arg.to_ascii_uppercase().as_slice() {
            b"NOSAVE" => nosave = true,
            b"SAVE" => save = true,
            b"NOW" | b"FORCE" => other = true,
            b"ABORT" => abort = true,
            _ => return Some(syntax_error()),
        }
    }
    if (abort && (save || nosave || other)) || (save && nosave) {
        return Some(syntax_error());
    }
    abort.then(|| Reply::err("ERR No shutdown in progress."))
}

/// Redis's text for an unknown command, including its first arguments (up to 128 bytes).
pub fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let text = String::from_utf8_lossy(&arg[..arg.len().min(room)]).into_owned();
        listed.push_str(&format!("'{text}' "));
    }
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(128)]).into_owned();
    Reply::err(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// `ERR wrong number of arguments for 'name' command`.
pub fn wrong_args(name: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// `ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("ERR syntax error")
}

/// `ERR value is not an integer or out of range`.
pub fn not_integer() -> Reply {
    Reply::err("ERR value is not an integer or out of range")
}

/// An error reply if `key` is longer than the keyspace allows.
pub fn check_key(key: &[u8]) -> Option<Reply> {
    (key.len() > crate::format::MAX_USER_KEY).then(|| {
        Reply::err(format!(
            "ERR key too large ({} bytes; the maximum is {})",
            key.len(),
            crate::format::MAX_USER_KEY
        ))
    })
}

/// An error reply if `value` is longer than the keyspace allows.
pub fn check_value(value: &[u8]) -> Option<Reply> {
    (value.len() > crate::format::MAX_USER_VALUE).then(|| {
        Reply::err(format!(
            "ERR string exceeds maximum allowed size ({} bytes)",
            crate::format::MAX_USER_VALUE
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_command_text_matches_redis() {
        let args: Vec<Vec<u8>> = vec![b"foo".to_vec(), b"a".to_vec(), b"b c".to_vec()];
        assert_eq!(
            unknown_command(&args),
            Reply::Error("ERR unknown command 'foo', with args beginning with: 'a' 'b c' ".into())
        );
        assert_eq!(
            unknown_command(&[b"x".to_vec()]),
            Reply::Error("ERR unknown command 'x', with args beginning with: ".into())
        );
    }

    #[test]
    fn table_is_sorted_and_lower_case() {
        for w in COMMANDS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        assert!(COMMANDS
            .iter()
            .all(|s| s.name == s.name.to_ascii_lowercase()));
    }
}
