//! The `wisckey` command-line tool: the operator's commands. `wisckey demo` loads and reads
//! a temporary database and prints db_bench-style report lines; `get`, `put`, `delete`,
//! `scan`, `dump`, `load`, `checkpoint`, `compact`, `gc`, `cluster`, `stats`, `check` and
//! `repair` work on an existing database; `serve` serves one over the Redis protocol.
//! Benchmarks and their reports are a separate development tool, `wisckey-bench`
//! (crates/wisckey-bench).

mod demo;
mod dump;
mod kv;
mod maint;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A command failed (the reason is one line on stderr), or `get` found no value.
const EXIT_FAILED: u8 = 1;
/// Stored bytes do not verify, for every command: `check` found damage, or an open or a
/// read (`get`, `scan`, `dump`, …) met damaged files.
const EXIT_DAMAGED: u8 = 2;
/// `repair` rebuilt the database, but keys' newest writes were lost (its report names
/// them): a script must not take such a repair for a full recovery.
const EXIT_DATA_LOST: u8 = 3;
/// The command line was wrong. clap's default for this is 2, which scripts would read as
/// "`check` found damage"; sysexits.h's EX_USAGE keeps the two apart.
const EXIT_USAGE: u8 = 64;
/// `demo` stopped on SIGINT (Ctrl-C), having closed and removed its temporary database:
/// 128 + the signal, the status a shell reports for a process SIGINT killed.
pub(crate) const EXIT_SIGINT: u8 = 130;
/// `demo` stopped on SIGTERM, as for SIGINT (128 + 15).
pub(crate) const EXIT_SIGTERM: u8 = 143;

#[derive(Debug, Parser)]
#[command(
    name = "wisckey",
    version,
    about = "wisckey: a key-value store that keeps keys in an LSM-tree and values in a value log",
    after_help = "Exit status: 0 success (also when a reader of the output, such as `head`, \
                  closes it early); 1 the command failed, or `get` found no value; 2 stored \
                  bytes do not verify (`check` found damage, or an open or a read of any \
                  command met damaged files); 3 `repair` \
                  rebuilt the database but keys' newest writes were lost; 64 a usage \
                  error (nothing was opened); 130 or 143 `demo` stopped on SIGINT or \
                  SIGTERM (its temporary database removed)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load, read, scan and reopen a temporary database; print throughput per phase.
    /// SIGINT (Ctrl-C) or SIGTERM stops it and removes its temporary database (one named
    /// with --db is closed and kept) (exit 130 or 143).
    Demo(demo::DemoArgs),
    /// Print a key's value (exit status 1 if it has none).
    Get(kv::GetArgs),
    /// Store a value under a key.
    Put(kv::PutArgs),
    /// Delete a key.
    Delete(kv::DeleteArgs),
    /// Print the entries of a key range: --from, --to, --prefix, --limit, --reverse,
    /// --keys-only; one per line, key TAB value, escaped (or --hex).
    Scan(kv::ScanArgs),
    /// Write every entry (or those under --prefix) to a file or stdout: native (checksummed,
    /// byte-exact) or JSON lines.
    Dump(dump::DumpArgs),
    /// Read a dump into a database (--create a new one, --merge into one that holds keys).
    Load(dump::LoadArgs),
    /// Copy the database into a new directory outside it (a backup that opens on its own).
    Checkpoint(maint::CheckpointArgs),
    /// Compact the whole key index (keys and pointers; values stay where they are): every
    /// level's tables into the deepest level that holds any. As LevelDB's, tables already
    /// there are merged only with what comes down onto them, not with each other
    Compact(maint::CompactArgs),
    /// Value-log garbage collection on an existing database (offline: open, collect, close).
    Gc(maint::GcArgs),
    /// Rewrite the values of a key range (--from, --to; default all) in key order, so scans
    /// of it read neighbours' values together; then collect the old records (offline).
    Cluster(maint::ClusterArgs),
    /// Levels, value-log segments with live and dead bytes and why each is or is not
    /// collected, space amplification, GC totals.
    Stats(maint::StatsArgs),
    /// Read everything (tables, every key's value, sealed value-log segments) and report
    /// what does not verify, by file and offset; exit status 2 if anything does not, or if
    /// the files are too damaged to open.
    Check(maint::CheckArgs),
    /// Rebuild the key index (tables, manifest, CURRENT) from the value log and whatever
    /// table entries still read, when they are damaged or lost. Deletes nothing: replaced
    /// files go to DIR/lost/repair-N/. The database must not be open. Exit status 3 if
    /// keys' newest writes were lost (values missing, or keys reverted to older values).
    Repair(maint::RepairArgs),
    /// Serve the database over the Redis protocol (RESP2, RESP3) until SHUTDOWN or SIGTERM:
    /// redis-cli, Redis client libraries and redis-benchmark work unchanged.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Printing fails only when stdout or stderr is gone; the status still tells.
            let _ = e.print();
            // --help and --version are "errors" clap prints on stdout; they succeed.
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Get(args) => kv::get(&args),
        Command::Put(args) => kv::put(&args),
        Command::Delete(args) => kv::delete(&args),
        Command::Scan(args) => kv::scan(&args),
        Command::Compact(args) => maint::compact(&args),
        Command::Checkpoint(args) => maint::checkpoint(&args),
        Command::Dump(args) => dump::dump(&args),
        Command::Load(args) => dump::load(&args),
        Command::Gc(args) => maint::gc(&args),
        Command::Cluster(args) => maint::cluster(&args),
        Command::Stats(args) => maint::stats(&args),
        Command::Check(args) => maint::check(&args),
        Command::Repair(args) => maint::repair(&args),
        Command::Serve(args) => serve::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output stopped reading (`| head`): it has what it wanted.
        Err(e) if stdout_closed(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) if e.is::<demo::Interrupted>() => {
            note(format_args!("wisckey: {e}"));
            let status = e
                .downcast_ref::<demo::Interrupted>()
                .map_or(EXIT_FAILED, |stopped| stopped.status);
            ExitCode::from(status)
        }
        Err(e) if e.is::<Usage>() => {
            note(format_args!("wisckey: {e}"));
            ExitCode::from(EXIT_USAGE)
        }
        // `repair` already printed its report on stdout; this line says what it means.
        Err(e) if e.is::<maint::ValuesLost>() => {
            note(format_args!("wisckey: {e}"));
            ExitCode::from(EXIT_DATA_LOST)
        }
        Err(e) => match e.downcast_ref::<maint::Damaged>() {
            // `check` already printed what it found on stdout.
            Some(maint::Damaged::Reported) => ExitCode::from(EXIT_DAMAGED),
            Some(maint::Damaged::Unreadable(e)) => {
                note(format_args!("wisckey: {e}"));
                ExitCode::from(EXIT_DAMAGED)
            }
            // Any command that met stored bytes that do not verify (at open or on a read)
            // says so as `check` does: a script's `get … || default` must not take a
            // damaged database for a missing key.
            None if is_damage(e.as_ref()) => {
                note(format_args!("wisckey: {e}"));
                ExitCode::from(EXIT_DAMAGED)
            }
            None => {
                note(format_args!("wisckey: {e}"));
                ExitCode::from(EXIT_FAILED)
            }
        },
    }
}

/// Whether `e`, or an error it wraps, says stored bytes do not verify.
fn is_damage(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(engine) = e.downcast_ref::<wisckey::Error>() {
            return engine.is_corruption();
        }
        next = e.source();
    }
    false
}

/// A command line clap accepts but that asks for something impossible, found by a command
/// before it opens anything (a checkpoint into the database it copies, a backwards range):
/// the same status as clap's own usage errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// An error with a line of context before it, keeping it as its source (so the exit status
/// can still tell damage from other failures).
#[derive(Debug)]
pub struct Context {
    pub text: String,
    pub source: Box<dyn std::error::Error>,
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Context {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Writes a line to stderr, ignoring failure: `eprintln!` panics (exit 101) when stderr is
/// a pipe nobody reads any more, which would turn a finished dump or a clean error into a
/// crash. The exit status still says how the command went.
pub fn note(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// True when `e` is a write to a pipe whose reader has closed it. Rust ignores SIGPIPE, so
/// such a write fails with EPIPE instead of ending the process as it would a C tool. Only
/// standard output is a pipe we write to (`dump --out` refuses to overwrite, so it never
/// names a FIFO that exists).
fn stdout_closed(e: &(dyn std::error::Error + 'static)) -> bool {
    let kind = match e.downcast_ref::<std::io::Error>() {
        Some(e) => Some(e.kind()),
        // `dump --format jsonl` writes through serde_json, which wraps the I/O error.
        None => e
            .downcast_ref::<serde_json::Error>()
            .and_then(serde_json::Error::io_error_kind),
    };
    kind == Some(std::io::ErrorKind::BrokenPipe)
}
