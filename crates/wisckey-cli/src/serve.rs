//! `wisckey serve`: the Redis-protocol server (crates/wisckey-server) from the command
//! line. Only flag parsing lives here; the server is the library's.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use wisckey_server::{AppendFsync, Config};

/// Flags of `wisckey serve`, named after redis.conf's directives.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The database directory. Created if missing, but only inside an existing directory
    /// (a mistyped path fails instead of serving a new, empty database).
    #[arg(long)]
    db: PathBuf,
    /// Address to listen on. Loopback by default: anything else exposes the database to
    /// the network (set --requirepass).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// TCP port (0: any free port).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// always: each write synced before its reply (group-committed across connections);
    /// everysec: synced once a second; no: never synced explicitly.
    #[arg(long, default_value = "everysec")]
    appendfsync: AppendFsync,
    /// Require AUTH with this password before any other command. Other local users can
    /// read a command line: prefer --requirepass-file.
    #[arg(long, conflicts_with = "requirepass_file")]
    requirepass: Option<String>,
    /// Read the password from this file (its first line).
    #[arg(long)]
    requirepass_file: Option<PathBuf>,
    /// Largest bulk string in a request, in bytes (proto-max-bulk-len).
    #[arg(long, default_value_t = 512 << 20)]
    max_bulk_len: usize,
    /// Most elements in one request.
    #[arg(long, default_value_t = 1024 * 1024)]
    max_multibulk_len: usize,
    /// Most argument bytes in one request (client-query-buffer-limit).
    #[arg(long, default_value_t = 1 << 30)]
    max_query_len: usize,
    /// Most simultaneous clients (lowered at start, with the table cache, where the
    /// open-file limit cannot hold them beside the database's handles).
    #[arg(long, default_value_t = 10_000)]
    maxclients: usize,
    /// Close a client idle (not sending, not reading) for this many seconds; 0 never.
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// Reply bytes a client may leave unread before the server stops reading its requests.
    #[arg(long, default_value_t = 32 << 20)]
    output_buffer_limit: usize,
    /// Allow FLUSHDB and FLUSHALL (refused otherwise).
    #[arg(long)]
    enable_flushdb: bool,
    /// Threads serving connections. 1: one event loop that also commits writes (Redis's
    /// model, no hand-offs: faster small request/response writes when clients share the
    /// server's few cores); more: that many workers plus an executor thread for writes.
    /// 0: one per core.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Write the value log with O_DIRECT (the engine's `Options::vlog_direct_writes`):
    /// values bypass the page cache on their way to the device. Off by default. Under
    /// everysec and no, acknowledged writes then wait in the log's buffer for up to 10 ms
    /// (or two 1 MiB buffers), which a killed server loses; without this flag a reply
    /// leaves only once its write is in the OS's hands, as with Redis's AOF. (Handing each
    /// write to the OS here would mean waiting for the device, as under always.)
    #[arg(long)]
    vlog_direct_writes: bool,
}

/// Runs the server until SHUTDOWN, SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    if !args.db.exists() {
        // `Config::new`'s open would create every missing level of the path: one typo in a
        // parent and clients would write into a new, empty database beside the real one.
        let parent = match args.db.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        if !parent.is_dir() {
            return Err(format!(
                "--db {}: {} is not a directory; refusing to create a database there (a \
                 mistyped path?). Create the parent directory first",
                args.db.display(),
                parent.display()
            )
            .into());
        }
        // Said as a plan: the port is bound before the database is created, and a start
        // that fails there creates nothing.
        crate::note(format_args!(
            "wisckey serve: {} does not exist; a new, empty database is created there once \
             the port is bound",
            args.db.display()
        ));
    }
    let mut config = Config::new(&args.db);
    config.bind = SocketAddr::new(args.bind, args.port);
    config.appendfsync = args.appendfsync;
    config.requirepass = match (&args.requirepass, &args.requirepass_file) {
        (Some(p), _) => Some(p.as_bytes().to_vec()),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("--requirepass-file {}: {e}", file.display()))?;
            Some(text.lines().next().unwrap_or("").as_bytes().to_vec())
        }
        (None, None) => None,
    };
    config.limits.max_bulk_len = args.max_bulk_len;
    config.limits.max_multibulk_len = args.max_multibulk_len;
    config.limits.max_query_len = args.max_query_len;
    config.max_clients = args.maxclients;
    config.idle_timeout = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    config.output_buffer_limit = args.output_buffer_limit;
    config.enable_flushdb = args.enable_flushdb;
    config.engine.vlog_direct_writes = args.vlog_direct_writes;
    // The server hands every write to the OS before its reply; with O_DIRECT that would
    // be a device write per commit group, `always` without the fdatasync (the flag's help
    // says what is given up instead).
    config.engine.write_through_to_os = !args.vlog_direct_writes;
    config.threads = args.threads;
    // The server checks these too; checked here, a bad value is a usage error (exit 64),
    // as the README promises for arguments checked before the database is opened.
    config.validate().map_err(crate::Usage)?;
    Ok(wisckey_server::serve(config)?)
}
