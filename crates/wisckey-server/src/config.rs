//! The server's configuration: where it listens, how writes reach the disk, and the limits
//! that keep one client from hurting the others. Plain data with documented defaults;
//! [`Config::validate`] is called once before the server starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::resp::Limits;

/// When acknowledged writes reach stable storage (Redis's `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendFsync {
    /// No reply leaves before the writes it acknowledges or shows are synced: one sync per
    /// batch of pipelined requests, shared across connections by the engine's group commit.
    Always,
    /// Writes are acknowledged once they are handed to the OS; a background task syncs the
    /// log every second, so a crash of the machine loses at most about a second of
    /// acknowledged writes, and a crash of the process alone loses none (as Redis's AOF,
    /// which writes its buffer before it replies). That last holds with the engine's
    /// [`write_through_to_os`](wisckey::Options::write_through_to_os), which
    /// [`Config::new`] sets.
    #[default]
    Everysec,
    /// Never sync explicitly: writes are handed to the OS before their replies (so a crash
    /// of the process loses none, as with `everysec`) and the OS writes them back when it
    /// chooses.
    No,
}

impl AppendFsync {
    /// The name as Redis spells it (`CONFIG GET appendfsync`).
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

impl std::str::FromStr for AppendFsync {
    type Err = String;
    fn from_str(s: &str) -> Result<AppendFsync, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(AppendFsync::Always),
            "everysec" => Ok(AppendFsync::Everysec),
            "no" => Ok(AppendFsync::No),
            other => Err(format!(
                "appendfsync must be always, everysec or no, not {other:?}"
            )),
        }
    }
}

/// Most threads [`Config::threads`] may ask for.
pub const MAX_THREADS: usize = 1024;

/// Everything `wisckey serve` can be told.
#[derive(Debug, Clone)]
pub struct Config {
    /// The database directory (created if missing).
    pub db_dir: PathBuf,
    /// Where to listen. Default `127.0.0.1:6380`: loopback only, next to Redis's 6379.
    pub bind: SocketAddr,
    /// Durability of acknowledged writes. Default [`AppendFsync::Everysec`], as Redis's AOF.
    pub appendfsync: AppendFsync,
    /// When set, every connection must AUTH with it (compared in constant time) before any
    /// other command. Default none.
    pub requirepass: Option<Vec<u8>>,
    /// Request size limits (bulk, multibulk, inline, query buffer).
    pub limits: Limits,
    /// Most simultaneous clients; the next gets `ERR max number of clients reached` and is
    /// closed. Default 10,000 (Redis's default). [`crate::Server::bind`] raises the soft
    /// open-file limit to the hard one and, where it cannot hold these clients and the
    /// database's handles, lowers this and `engine.max_open_tables`, as Redis lowers
    /// `maxclients`.
    pub max_clients: usize,
    /// Close a client that sends nothing, and reads nothing we send, for this long. `None`
    /// (default, as Redis's `timeout 0`) never closes an idle client.
    pub idle_timeout: Option<Duration>,
    /// Reply bytes a client may leave unread before the server stops reading its further
    /// requests (it resumes when the client catches up). Bounds a slow reader's memory to
    /// this plus one reply and one request. Default 32 MiB.
    pub output_buffer_limit: usize,
    /// FLUSHDB/FLUSHALL delete every key; refused unless this is set. Default off.
    pub enable_flushdb: bool,
    /// How often the expiry sweeper looks for expired keys. Default 100 ms.
    pub sweep_interval: Duration,
    /// Most SCAN cursors for keys longer than 6 bytes the server remembers (the oldest
    /// are evicted; an evicted cursor gets `ERR invalid cursor`). Shorter keys' cursors
    /// need no memory. Default 100,000.
    pub scan_cursor_table: usize,
    /// Threads that serve connections ([`serve`](crate::serve) builds its runtime from
    /// this; an embedder's own runtime decides for itself). `1`: one event loop that also
    /// commits the batched writes itself, syncs included, as Redis's event loop does: no
    /// hand-off between threads per request. More: a multi-threaded runtime with that many
    /// workers, the batched writes committed on a separate executor thread while the
    /// workers go on reading and answering. `0` (default): one worker per core. Measured on
    /// two cores shared with the clients (docs/BENCHMARKS.md), one loop served 1.1-1.7x the
    /// unpipelined small writes of two workers, and 0.4-1.0x the pipelined 16 KiB writes
    /// and the pipelined reads: it does all the network work on one core.
    pub threads: usize,
    /// How long INFO's keyspace counts are reused. They come from a scan of every key
    /// (O(keys): about a minute at 100 million), and some clients send INFO on every
    /// connect (ioredis's ready check): one scan at a time, its result shared for this long.
    /// DBSIZE stays exact. Default 5 s.
    pub info_keyspace_refresh: Duration,
    /// The engine's options: its defaults, except
    /// [`write_through_to_os`](wisckey::Options::write_through_to_os), which is on, so that
    /// under `everysec` and `no` a reply leaves only once its write is in the OS's hands, as
    /// with Redis's AOF. With the engine's default a killed server lost up to the last
    /// ~10 ms of acknowledged writes (the log buffer's flush interval). Turning it off
    /// brings that window back. With `vlog_direct_writes` also on, every commit group
    /// waits for the device instead (as under `always`, without the sync); `wisckey serve
    /// --vlog-direct-writes` therefore turns write-through off.
    pub engine: wisckey::Options,
}

impl Config {
    /// The defaults for a database in `db_dir`.
    pub fn new(db_dir: impl Into<PathBuf>) -> Config {
        Config {
            db_dir: db_dir.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 6380)),
            appendfsync: AppendFsync::default(),
            requirepass: None,
            limits: Limits::default(),
            max_clients: 10_000,
            idle_timeout: None,
            output_buffer_limit: 32 << 20,
            enable_flushdb: false,
            sweep_interval: Duration::from_millis(100),
            scan_cursor_table: 100_000,
            threads: 0,
            info_keyspace_refresh: Duration::from_secs(5),
            engine: wisckey::Options {
                write_through_to_os: true,
                ..wisckey::Options::default()
            },
        }
    }

    /// Checks the limits are usable.
    pub fn validate(&self) -> Result<(), String> {
        let l = &self.limits;
        if l.max_bulk_len == 0 || l.max_multibulk_len == 0 || l.max_inline_len < 16 {
            return Err("limits: bulk and multibulk must be > 0, inline at least 16".into());
        }
        if l.max_query_len < l.max_bulk_len {
            return Err("limits: the query buffer limit must be at least the bulk limit".into());
        }
        if self.max_clients == 0 || self.output_buffer_limit == 0 || self.scan_cursor_table == 0 {
            return Err(
                "max clients, the output-buffer limit and the SCAN cursor table must be > 0".into(),
            );
        }
        if self.threads > MAX_THREADS {
            return Err(format!(
                "threads must be at most {MAX_THREADS} (0: one per core)"
            ));
        }
        if self.requirepass.as_ref().is_some_and(|p| p.is_empty()) {
            return Err("requirepass must not be empty".into());
        }
        Ok(())
    }

    /// [`Config::threads`] with `0` resolved for this machine.
    pub fn serving_threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_default_to_one_per_core_and_are_bounded() {
        let mut config = Config::new("db");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(config.serving_threads(), cores);
        config.threads = 1;
        assert_eq!(config.serving_threads(), 1);
        config.threads = MAX_THREADS;
        assert!(config.validate().is_ok());
        config.threads = MAX_THREADS + 1;
        let err = config.validate().expect_err("too many threads");
        assert!(err.contains("threads must be at most"), "{err}");
    }
}
