//! Data subcommands on an existing database: `get`, `put`, `delete`, `scan`. Keys and
//! values are bytes: on the command line they are read as escaped text (`\xNN`, `\\`,
//! `\n`, `\r`, `\t`, `\0`; everything else as its UTF-8 bytes) or, with `--hex`, as hex;
//! they are printed escaped the same way (so a printed key can be pasted back) or, with
//! `--hex`, as hex. Bytes are never mangled. Each command refuses a directory that holds no
//! database (it never creates one) and one another process has open for writing. `get` and
//! `scan` open it read-only: they change nothing, and run beside other read-only commands.
//! `put` and `delete` are durable once they exit 0 with or without `--sync`: they close the
//! database, and closing syncs the value log.

use std::io::{Read as _, Write as _};
use std::ops::Bound;
use std::path::PathBuf;

use clap::Args;
use wisckey::{Db, Options, WriteOptions};

/// How keys and values are written on the command line and printed.
#[derive(Debug, Args)]
pub struct Encoding {
    /// Keys and values are hex (`6b6579`), in arguments and in output.
    #[arg(long)]
    hex: bool,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The key.
    key: String,
    /// Write the value's bytes as they are (neither escaped nor hex, no newline added) to
    /// this new file (refused if it exists or lies inside the database), `-` for standard
    /// output: the counterpart of `put --value-file`.
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    #[command(flatten)]
    encoding: Encoding,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The key.
    key: String,
    /// The value (or --value-file, never both).
    #[arg(required_unless_present = "value_file", conflicts_with = "value_file")]
    value: Option<String>,
    /// Read the value from this file (`-`: standard input): its bytes as they are, neither
    /// escaped nor hex. For values too large for a command-line argument (about 128 KiB on
    /// Linux); at most the engine's maximum value size, 256 MiB.
    #[arg(long, value_name = "PATH")]
    value_file: Option<PathBuf>,
    /// Sync the write (fdatasync) as it is made, before the database is closed. Without
    /// it the write is durable too once the command exits 0 (closing the database syncs
    /// the log); --sync only keeps it if the process dies during that close.
    #[arg(long)]
    sync: bool,
    /// Create the database if it does not exist (without it, a mistyped path fails
    /// instead of starting a new, empty database).
    #[arg(long)]
    create: bool,
    /// Write even into a database `wisckey serve` created (whose values carry the server's
    /// header: a raw put there reads as damaged through the server).
    #[arg(long)]
    raw_keyspace: bool,
    #[command(flatten)]
    encoding: Encoding,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The key.
    key: String,
    /// Sync the delete (fdatasync) as it is made, before the database is closed. Without
    /// it the delete is durable too once the command exits 0 (closing the database syncs
    /// the log); --sync only keeps it if the process dies during that close.
    #[arg(long)]
    sync: bool,
    /// Delete even in a database `wisckey serve` created (see `put --raw-keyspace`).
    #[arg(long)]
    raw_keyspace: bool,
    #[command(flatten)]
    encoding: Encoding,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// First key (inclusive).
    #[arg(long)]
    from: Option<String>,
    /// End key (exclusive).
    #[arg(long)]
    to: Option<String>,
    /// Only keys that start with this (combined with --from/--to).
    #[arg(long)]
    prefix: Option<String>,
    /// At most this many entries.
    #[arg(long)]
    limit: Option<usize>,
    /// From the last key down (--from stays the lower bound, --to the upper).
    #[arg(long)]
    reverse: bool,
    /// Print keys only (no value is read).
    #[arg(long = "keys-only")]
    keys_only: bool,
    #[command(flatten)]
    encoding: Encoding,
}

type CliResult = Result<(), Box<dyn std::error::Error>>;
/// A key and its value (empty when only keys are read).
type Entry = (Vec<u8>, Vec<u8>);

/// Opens for a write; creates the database only if `create` (`put --create`).
fn open(path: &PathBuf, create: bool) -> Result<Db, Box<dyn std::error::Error>> {
    let options = Options {
        create_if_missing: create,
        ..Options::default()
    };
    Db::open(path, options).map_err(|e| {
        if create {
            // Whatever stopped the open, "does not exist" would not be it.
            return Box::new(e) as Box<dyn std::error::Error>;
        }
        missing_database(
            path,
            e,
            "check the path, or create it with `wisckey put --create` (or `wisckey load \
             --create`)",
        )
    })
}

/// The engine's "does not exist" names its option `create_if_missing`, which a command-line
/// user cannot set; `hint` says what to do instead. Any other error passes unchanged.
pub(crate) fn missing_database(
    path: &std::path::Path,
    e: wisckey::Error,
    hint: &str,
) -> Box<dyn std::error::Error> {
    // Without CURRENT, an open that refuses to create reports a missing database as
    // InvalidArgument (data files without CURRENT are Corruption, and stay so).
    if matches!(e, wisckey::Error::InvalidArgument(_)) && !path.join("CURRENT").exists() {
        format!("database {} does not exist ({hint})", path.display()).into()
    } else {
        Box::new(e)
    }
}

/// For the commands that only read: nothing in the directory changes, and other read-only
/// commands may run at the same time.
fn open_read_only(path: &PathBuf) -> Result<Db, Box<dyn std::error::Error>> {
    Ok(Db::open_read_only(path, Options::default())?)
}

impl Encoding {
    /// Bytes from a command-line argument.
    /// A malformed argument is a usage error (exit 64), checked before the database is
    /// opened: exit 1 would read as `get`'s "not found".
    pub(crate) fn parse(&self, arg: &str, what: &str) -> Result<Vec<u8>, crate::Usage> {
        let parsed = if self.hex {
            parse_hex(arg).map_err(|e| format!("{what} '{arg}' is not hex: {e}"))
        } else {
            unescape(arg).map_err(|e| format!("{what} '{arg}': {e}"))
        };
        parsed.map_err(crate::Usage)
    }

    /// Bytes as printed.
    fn show(&self, bytes: &[u8]) -> String {
        if self.hex {
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        } else {
            escape(bytes)
        }
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let text = text.strip_prefix("0x").unwrap_or(text);
    if text.len() % 2 != 0 {
        return Err("an odd number of digits".into());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            let pair = text.get(i..i + 2).ok_or("not ASCII")?;
            hex_byte(pair).ok_or_else(|| format!("'{pair}' is not a hex byte"))
        })
        .collect()
}

/// The byte two hex digits spell. Only digits: `u8::from_str_radix` alone would also take
/// a sign, reading `+a` as 0x0a.
pub(crate) fn hex_byte(pair: &str) -> Option<u8> {
    if pair.len() != 2 || !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(pair, 16).ok()
}

/// `\xNN`, `\\`, `\n`, `\r`, `\t`, `\0`; every other character as its UTF-8 bytes.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('\\') => out.push(b'\\'),
            Some('n') => out.push(b'\n'),
            Some('r') => out.push(b'\r'),
            Some('t') => out.push(b'\t'),
            Some('0') => out.push(0),
            Some('x') => {
                let pair: String = chars.by_ref().take(2).collect();
                let byte =
                    hex_byte(&pair).ok_or_else(|| format!("'\\x{pair}' needs two hex digits"))?;
                out.push(byte);
            }
            Some(other) => return Err(format!("unknown escape '\\{other}'")),
            None => return Err("ends with a lone '\\'".into()),
        }
    }
    Ok(out)
}

/// Printable ASCII as is (a backslash doubled); everything else escaped so [`unescape`]
/// gives the bytes back.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

pub fn get(args: &GetArgs) -> CliResult {
    let key = args.encoding.parse(&args.key, "key")?;
    if let Some(out) = args.out.as_ref().filter(|p| p.as_os_str() != "-") {
        crate::maint::refuse_target_inside(
            &args.db,
            out,
            "--out",
            "a file the database does not own would be replaced or left among its files; \
             write the value outside it",
        )?;
    }
    let db = open_read_only(&args.db)?;
    let value = db.get(&key)?;
    // A database `wisckey serve` made holds its keys behind a namespace byte: "not found"
    // alone would send its user looking for lost data.
    let served = value.is_none() && db.get(wisckey_server::format::META_VERSION_KEY)?.is_some();
    db.close()?;
    match (value, &args.out) {
        (Some(value), None) => {
            writeln!(std::io::stdout().lock(), "{}", args.encoding.show(&value))?;
            Ok(())
        }
        (Some(value), Some(path)) if path.as_os_str() == "-" => {
            let mut out = std::io::stdout().lock();
            out.write_all(&value)?;
            out.flush()?;
            Ok(())
        }
        (Some(value), Some(path)) => write_new_file(path, &value),
        (None, _) => {
            let mut message = format!("key '{}' not found", shortened(&args.encoding.show(&key)));
            if served {
                message.push_str(
                    " (this database was created by `wisckey serve`, which stores each key \
                     behind a namespace byte: read it through the server, e.g. `redis-cli GET`)",
                );
            }
            Err(message.into())
        }
    }
}

/// Writes `bytes` into the new file `path` (never over an existing one) and syncs it; a
/// write that fails removes the partial file, which is its own.
fn write_new_file(path: &std::path::Path, bytes: &[u8]) -> CliResult {
    let named = |e: std::io::Error| format!("--out {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(named)?;
    if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        drop(file);
        let removed = match std::fs::remove_file(path) {
            Ok(()) => "the partial file was removed".to_string(),
            Err(why) => format!("the partial file could not be removed: {why}"),
        };
        return Err(format!("{} ({removed})", named(e)).into());
    }
    Ok(())
}

/// A key as an error message shows it: at most 200 characters, then how many more.
pub(crate) fn shortened(shown: &str) -> String {
    const MAX: usize = 200;
    match shown.char_indices().nth(MAX) {
        Some((cut, _)) => format!(
            "{}... ({} more characters)",
            &shown[..cut],
            shown[cut..].chars().count()
        ),
        None => shown.to_string(),
    }
}

pub fn put(args: &PutArgs) -> CliResult {
    let key = args.encoding.parse(&args.key, "key")?;
    // Read before the database is opened: a missing or oversized file changes nothing.
    let value = match (&args.value, &args.value_file) {
        (Some(text), _) => args.encoding.parse(text, "value")?,
        (None, Some(path)) => read_value_file(path)?,
        // clap requires one of the two (`required_unless_present`).
        (None, None) => {
            return Err(crate::Usage("a value or --value-file is required".into()).into())
        }
    };
    if key.len() > wisckey::MAX_KEY_SIZE {
        // Before the open: with --create a refused put must not leave a new database.
        return Err(format!(
            "invalid argument: key of {} bytes exceeds the maximum key size of {} bytes; \
             nothing was written",
            key.len(),
            wisckey::MAX_KEY_SIZE
        )
        .into());
    }
    let db = open(&args.db, args.create)?;
    refuse_server_keyspace(&db, &args.db, args.raw_keyspace, "--raw-keyspace")?;
    db.put_opt(&key, &value, &WriteOptions { sync: args.sync })?;
    db.close()?;
    Ok(())
}

/// The bytes of `put --value-file` (`-`: standard input). Refused past the engine's
/// maximum value size before they are all in memory: a file by its size, before a byte is
/// read; standard input (or a file that grows) once one byte more than the maximum has come.
fn read_value_file(path: &std::path::Path) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let max = wisckey::MAX_VALUE_SIZE;
    let too_large = |what: String| -> Box<dyn std::error::Error> {
        format!(
            "--value-file {}: {what} the maximum value size of {max} bytes; nothing was \
             written",
            path.display()
        )
        .into()
    };
    let named = |e: std::io::Error| format!("--value-file {}: {e}", path.display());
    let source: Box<dyn std::io::Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path).map_err(named)?;
        let metadata = file.metadata().map_err(named)?;
        // Only a regular file's size is what a read gives (a FIFO or device says 0).
        if metadata.is_file() && metadata.len() > max as u64 {
            return Err(too_large(format!("{} bytes, more than", metadata.len())));
        }
        Box::new(file)
    };
    let mut value = Vec::new();
    // One byte past the maximum tells a value over it from one exactly at it.
    source
        .take(max as u64 + 1)
        .read_to_end(&mut value)
        .map_err(named)?;
    if value.len() > max {
        return Err(too_large("longer than".into()));
    }
    Ok(value)
}

pub fn delete(args: &DeleteArgs) -> CliResult {
    let key = args.encoding.parse(&args.key, "key")?;
    let db = open(&args.db, false)?;
    refuse_server_keyspace(&db, &args.db, args.raw_keyspace, "--raw-keyspace")?;
    db.delete_opt(&key, &WriteOptions { sync: args.sync })?;
    db.close()?;
    Ok(())
}

/// Refuses (the caller drops `db`, which closes it) a raw write into a database that `wisckey serve` created, unless
/// `allowed` (the flag `flag`): the server stores each value behind a header and each key
/// behind a namespace byte (docs/FORMAT.md, "Redis-protocol keyspace"), so a raw entry is
/// misread there (a GET answers a format error, DBSIZE counts it).
pub fn refuse_server_keyspace(
    db: &Db,
    path: &std::path::Path,
    allowed: bool,
    flag: &str,
) -> CliResult {
    if allowed || db.get(wisckey_server::format::META_VERSION_KEY)?.is_none() {
        return Ok(());
    }
    Err(format!(
        "{} was created by `wisckey serve` (it holds the key {:?}): its entries carry the \
         server's encoding, and a raw write would read as damaged through the server. \
         Write through the server (redis-cli), or pass {flag} to write the engine's keys as \
         given; nothing was written",
        path.display(),
        String::from_utf8_lossy(wisckey_server::format::META_VERSION_KEY),
    )
    .into())
}

/// The first key after every key that starts with `prefix` (`None`: there is none).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// One entry per line: the key, then a tab and the value unless `--keys-only` (escaping
/// turns tabs and newlines inside keys and values into `\t` and `\n`, so lines split
/// unambiguously).
pub fn scan(args: &ScanArgs) -> CliResult {
    let enc = &args.encoding;
    let parse = |arg: &Option<String>, what| arg.as_deref().map(|a| enc.parse(a, what)).transpose();
    let (from, to, prefix) = (
        parse(&args.from, "--from")?,
        parse(&args.to, "--to")?,
        parse(&args.prefix, "--prefix")?,
    );
    // A backwards range is a usage error, as `cluster`'s is (main.rs's `Usage`): it used to
    // print nothing and exit 0, which a script cannot tell from a range with no keys.
    if let (Some(from), Some(to)) = (&from, &to) {
        if from > to {
            return Err(crate::Usage(
                "the range starts after it ends (--from is past --to); --from is the lower \
                 bound also with --reverse, which only reads the range from its end"
                    .into(),
            )
            .into());
        }
    }
    // The range: from --from (or the prefix) up to --to (or past the prefix).
    let lower = [from, prefix.clone()].into_iter().flatten().max();
    let upper = [to, prefix.as_deref().and_then(prefix_successor)]
        .into_iter()
        .flatten()
        .min();
    // Opened before the range is looked at, so a wrong path is reported even when --prefix
    // leaves the range empty (a --from or --to outside the prefix is no error).
    let db = open_read_only(&args.db)?;
    if db.get(wisckey_server::format::META_VERSION_KEY)?.is_some() {
        crate::note(format_args!(
            "wisckey scan: {} was created by `wisckey serve`: entries are shown as stored, \
             each key behind the server's namespace byte and each value behind its header \
             (docs/FORMAT.md, \"Redis-protocol server keyspace\"); `redis-cli --scan` lists the keys",
            args.db.display()
        ));
    }
    if let (Some(l), Some(u)) = (&lower, &upper) {
        if l >= u {
            db.close()?;
            return Ok(()); // Nothing can be in it.
        }
    }
    let bound = |b: Option<Vec<u8>>, end: bool| match b {
        Some(k) if end => Bound::Excluded(k),
        Some(k) => Bound::Included(k),
        None => Bound::Unbounded,
    };
    {
        // A --limit is the scan's length: its value reads start at the seek, all at once.
        let options = wisckey::ReadOptions {
            scan_length_hint: args.limit,
            ..Default::default()
        };
        let range = db.range_opt((bound(lower, false), bound(upper, true)), &options)?;
        let entries: Box<dyn Iterator<Item = wisckey::Result<Entry>>> =
            match (args.keys_only, args.reverse) {
                (true, false) => Box::new(range.keys().map(|k| k.map(|k| (k, Vec::new())))),
                (true, true) => Box::new(range.keys().rev().map(|k| k.map(|k| (k, Vec::new())))),
                (false, false) => Box::new(range),
                (false, true) => Box::new(range.rev()),
            };
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for entry in entries.take(args.limit.unwrap_or(usize::MAX)) {
            let (key, value) = entry?;
            if args.keys_only {
                writeln!(out, "{}", enc.show(&key))?;
            } else {
                writeln!(out, "{}\t{}", enc.show(&key), enc.show(&value))?;
            }
        }
        out.flush()?;
    }
    db.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).collect();
        assert_eq!(unescape(&escape(&all)).expect("unescape"), all);
        assert_eq!(escape(b"a\tb\\c\xff"), "a\\tb\\\\c\\xff");
        assert_eq!(
            unescape("k\\x00\\x7f é").expect("unescape"),
            b"k\x00\x7f \xc3\xa9"
        );
        assert!(unescape("bad\\q").is_err());
        assert!(unescape("bad\\x4").is_err());
        assert!(unescape("bad\\").is_err());
        assert_eq!(parse_hex("0x6b00ff").expect("hex"), b"k\x00\xff");
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
        // A sign is not a hex digit, though `u8::from_str_radix` accepts one.
        assert!(parse_hex("+a+b").is_err());
        assert!(parse_hex("-1").is_err());
        assert!(unescape("\\x+f").is_err());
        assert_eq!(hex_byte("Ff"), Some(0xff));
        assert_eq!(hex_byte("+f"), None);
    }
}
