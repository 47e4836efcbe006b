//! A Redis-protocol server (RESP2, and RESP3 after `HELLO 3`) in front of a wisckey
//! database: `wisckey serve`.
//!
//! redis-cli, Redis client libraries, redis-benchmark and proxies such as twemproxy talk to
//! it unchanged. Strings with expiry are stored in the engine with a one-byte header
//! (`format`); commands are dispatched from one table (`cmd`) over a keyspace layer
//! (`store`) that serialises read-modify-write commands per key; the network side
//! (`server`) runs each connection as a tokio task; `pipeline` batches a pipeline's (and
//! concurrent connections') writes into one engine commit, on an executor thread or, on a
//! single-threaded runtime ([`Config::threads`]), on the event loop itself.
//!
//! ```no_run
//! # fn main() -> Result<(), wisckey_server::Error> {
//! let config = wisckey_server::Config::new("/var/lib/wisckey");
//! wisckey_server::serve(config) // until SHUTDOWN, SIGINT or SIGTERM
//! # }
//! ```

mod cmd;
mod config;
mod cursor;
mod disk;
mod error;
pub mod format;
mod glob;
mod pipeline;
pub mod resp;
mod server;
mod store;
mod watch;

pub use config::{AppendFsync, Config, MAX_THREADS};
pub use error::Error;
pub use server::{runtime, serve, Server, ShutdownHandle};
pub use store::SCAN_PAGE_BYTES;
