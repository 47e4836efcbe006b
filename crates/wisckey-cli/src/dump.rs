//! `dump` and `load`: a database's entries to a file (or stdout) and back, streaming, in one
//! of two formats. Byte-exact: binary keys and values round-trip.
//!
//! `native` (the default; `docs/FORMAT.md` "Dump format"): the 8 bytes `WKDUMP\0\1`, then per
//! entry the byte `0x01`, the masked CRC32C (u32 LE) of what follows up to the next entry,
//! the key length and key, the value length and value (lengths as LEB128 varints); then the
//! byte `0x00` and the entry count (u64 LE). A reader checks each entry's checksum before it
//! uses the entry and the count at the end, so a damaged or cut file is reported, never
//! loaded as data past the damage.
//!
//! `jsonl`: one JSON object per line, `{"key": …, "value": …}` where the bytes are valid
//! UTF-8, else `"key_hex"` / `"value_hex"` with the bytes in hex (per field).
//!
//! `load` refuses a database that already holds keys unless `--merge` (loading overwrites
//! keys present in both), and creates a missing one only with `--create`. It opens its
//! input and reads and checks the first entry before it opens the database, so an input
//! that is missing, unreadable or not a dump of the chosen format creates and changes
//! nothing. Errors in JSON lines name the line (1-based). Progress bars on
//! stderr when it is a terminal. `dump` opens the database read-only (`Db::open_read_only`):
//! it writes nothing and may run beside other read-only commands.

use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use crc32c::crc32c;
use indicatif::{ProgressBar, ProgressStyle};
use wisckey::{Db, Options, WriteBatch};

/// The first 8 bytes of a native dump.
const MAGIC: &[u8; 8] = b"WKDUMP\x00\x01";
/// A load writes batches of about this many bytes of keys and values...
const LOAD_BATCH_BYTES: usize = 4 << 20;
/// ... or of this many entries, whichever comes first (entries with empty keys and values
/// add no bytes, and a batch of millions would be held whole in memory).
const LOAD_BATCH_ENTRIES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Length-prefixed, checksummed binary (see `docs/FORMAT.md`).
    Native,
    /// One JSON object per line.
    Jsonl,
}

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The file to write (default: standard output). Refused if it exists.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Native)]
    format: Format,
    /// Only keys that start with this (escaped text, as in `scan`).
    #[arg(long)]
    prefix: Option<String>,
    /// Go on past values that do not verify or whose read fails with EIO (salvage): each
    /// such key is named on stderr and left out, the dump of everything else is kept, and
    /// the command exits 2 once it has finished (0 if nothing was left out). Without it
    /// the first such value stops the dump (exit 2, the partial file removed). Damage in
    /// the key index itself still stops it, as without the flag.
    #[arg(long)]
    skip_damaged: bool,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The file to read (default: standard input).
    #[arg(long = "in")]
    input: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Native)]
    format: Format,
    /// Create the database if it does not exist.
    #[arg(long)]
    create: bool,
    /// Load into a database that already holds keys (overwriting those in the file).
    #[arg(long)]
    merge: bool,
    /// With --merge, load even into a database `wisckey serve` created (see `put
    /// --raw-keyspace`).
    #[arg(long)]
    raw_keyspace: bool,
}

type CliResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// EIO: the same number on Linux, macOS and the BSDs (libc is only a test dependency here).
const EIO: i32 = 5;

fn bar(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    let style = ProgressStyle::with_template("{prefix} {human_pos} entries ({per_sec}) {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}

/// LevelDB's checksum masking (as the value log stores CRCs): a CRC of data that embeds
/// CRCs does not look like one.
fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(0xa282_ead8).rotate_left(15)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A read of the dump that came short: "cut" where the input ended, the read's own error
/// (with `what`) where it failed.
fn cut_or_failed(e: std::io::Error, what: &str) -> Box<dyn std::error::Error> {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        format!("dump cut inside {what}").into()
    } else {
        format!("reading the dump ({what}): {e}").into()
    }
}

fn read_varint(input: &mut impl Read, what: &str) -> CliResult<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let mut byte = [0u8];
        input
            .read_exact(&mut byte)
            .map_err(|e| cut_or_failed(e, what))?;
        v |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(format!("{what}: varint longer than 64 bits").into())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> CliResult<Vec<u8>> {
    if text.len() % 2 != 0 {
        return Err(format!("'{text}' is not hex: odd length").into());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            let pair = text.get(i..i + 2).ok_or("hex is not ASCII")?;
            crate::kv::hex_byte(pair).ok_or_else(|| format!("'{pair}' is not a hex byte").into())
        })
        .collect()
}

/// One JSON field of bytes: the text where it is UTF-8, else hex under `<name>_hex`.
fn json_field(name: &str, bytes: &[u8]) -> (String, serde_json::Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (name.to_string(), serde_json::Value::from(text)),
        Err(_) => (format!("{name}_hex"), serde_json::Value::from(hex(bytes))),
    }
}

fn from_json(
    object: &serde_json::Map<String, serde_json::Value>,
    name: &str,
    line: u64,
) -> CliResult<Vec<u8>> {
    if object.contains_key(name) && object.contains_key(&format!("{name}_hex")) {
        // Which one was meant cannot be told; taking either could load the wrong bytes.
        return Err(format!("line {line}: both \"{name}\" and \"{name}_hex\"; give one").into());
    }
    if let Some(text) = object.get(name).and_then(|v| v.as_str()) {
        return Ok(text.as_bytes().to_vec());
    }
    if let Some(text) = object.get(&format!("{name}_hex")).and_then(|v| v.as_str()) {
        return unhex(text).map_err(|e| format!("line {line}: {name}_hex: {e}").into());
    }
    Err(format!("line {line}: no \"{name}\" or \"{name}_hex\" string").into())
}

pub fn dump(args: &DumpArgs) -> CliResult {
    let prefix = args
        .prefix
        .as_deref()
        .map(|text| {
            crate::kv::unescape(text).map_err(|e| crate::Usage(format!("--prefix '{text}': {e}")))
        })
        .transpose()?
        .unwrap_or_default();
    if let Some(out) = &args.out {
        crate::maint::refuse_target_inside(
            &args.db,
            out,
            "dump file",
            "a file the database does not own (repair refuses to run beside one); write the \
             dump outside it",
        )?;
    }
    // Read-only: a dump never changes the database, and runs beside other readers.
    let db = Db::open_read_only(&args.db, Options::default())?;
    let (count, left_out) = match &args.out {
        Some(path) => dump_to_file(&db, args, &prefix, path)?,
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            let written = write_dump(&db, args, &prefix, &mut out)?;
            out.flush()?;
            written
        }
    };
    db.close()?;
    if left_out > 0 {
        crate::note(format_args!(
            "dumped {count} entries; left out {left_out} whose values do not verify (named \
             above)"
        ));
        // Exit 2: the dump is whole but for them, which the operator must know.
        return Err(Box::new(crate::maint::Damaged::Reported));
    }
    crate::note(format_args!("dumped {count} entries"));
    Ok(())
}

/// Writes the dump into the new file `path` (never an existing one) and makes it durable
/// (the file, then its directory entry) before success is reported: an operator may remove
/// the source once a dump succeeded. A dump that fails removes its partial file, which is
/// its own, so it can be run again.
fn dump_to_file(db: &Db, args: &DumpArgs, prefix: &[u8], path: &Path) -> CliResult<(u64, u64)> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let written = (|| -> CliResult<(u64, u64)> {
        let mut out = BufWriter::new(file);
        let count = write_dump(db, args, prefix, &mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)?.sync_all()?;
        Ok(count)
    })();
    written.map_err(|e| {
        let removed = match std::fs::remove_file(path) {
            Ok(()) => "the partial dump was removed".to_string(),
            Err(why) => format!("the partial dump could not be removed: {why}"),
        };
        let text = format!("{}: {e} ({removed})", path.display());
        Box::new(crate::Context { text, source: e }) as Box<dyn std::error::Error>
    })
}

/// Writes every entry under `prefix` to `out` in the chosen format; returns how many, and
/// how many were left out for values that do not verify (`--skip-damaged`; else the first
/// such value is the error).
fn write_dump(
    db: &Db,
    args: &DumpArgs,
    prefix: &[u8],
    out: &mut impl Write,
) -> CliResult<(u64, u64)> {
    let progress = bar("dump");
    let (mut count, mut left_out) = (0u64, 0u64);
    if args.format == Format::Native {
        out.write_all(MAGIC)?;
    }
    let mut record = Vec::new();
    // A cursor rather than `Db::prefix`: a value that does not verify is told apart from
    // a failure of the cursor itself (which ends it), and its key is known.
    let options = wisckey::ReadOptions {
        lower_bound: Some(prefix.to_vec()),
        upper_bound: crate::kv::prefix_successor(prefix),
        ..wisckey::ReadOptions::default()
    };
    let mut cursor = db.iter(&options)?;
    cursor.seek_to_first();
    while cursor.valid() {
        let key = cursor.key().to_vec();
        let value = match cursor.value() {
            Ok(value) => value,
            // A value that does not verify, or whose read the device failed (EIO on a bad
            // sector): what salvage is for. Other errors (no file handles, a closed
            // database) say nothing about this value and stop the dump.
            Err(e)
                if args.skip_damaged
                    && (e.is_corruption()
                        || matches!(&e, wisckey::Error::Io { source, .. }
                            if source.raw_os_error() == Some(EIO))) =>
            {
                crate::note(format_args!(
                    "wisckey dump: left out key '{}': {e}",
                    crate::kv::shortened(&crate::kv::escape(&key))
                ));
                left_out += 1;
                cursor.next();
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        cursor.next();
        match args.format {
            Format::Native => {
                record.clear();
                put_varint(&mut record, key.len() as u64);
                record.extend_from_slice(&key);
                put_varint(&mut record, value.len() as u64);
                record.extend_from_slice(&value);
                out.write_all(&[1])?;
                out.write_all(&mask(crc32c(&record)).to_le_bytes())?;
                out.write_all(&record)?;
            }
            Format::Jsonl => {
                let object: serde_json::Map<String, serde_json::Value> =
                    [json_field("key", &key), json_field("value", &value)]
                        .into_iter()
                        .collect();
                serde_json::to_writer(&mut *out, &object)?;
                out.write_all(b"\n")?;
            }
        }
        count += 1;
        progress.inc(1);
    }
    cursor.status()?;
    if args.format == Format::Native {
        out.write_all(&[0])?;
        out.write_all(&count.to_le_bytes())?;
    }
    progress.finish_and_clear();
    Ok((count, left_out))
}

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

/// The entries of a dump, read one at a time, each checked before it is handed out (so
/// `load` can check the first before it opens the database).
enum Entries<R> {
    Native {
        input: R,
        /// Entries handed out so far.
        count: u64,
    },
    Jsonl {
        input: R,
        /// The number of the line read last (1-based).
        line: u64,
    },
}

impl<R: BufRead> Entries<R> {
    /// Reads a native dump's header; JSON lines have none.
    fn new(mut input: R, format: Format) -> CliResult<Self> {
        if format == Format::Jsonl {
            return Ok(Entries::Jsonl { input, line: 0 });
        }
        let mut magic = [0u8; 8];
        input.read_exact(&mut magic).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                "not a wisckey dump: shorter than its header".into()
            }
            _ => cut_or_failed(e, "its header"),
        })?;
        if &magic != MAGIC {
            return Err("not a wisckey dump (bad magic; for JSON lines use --format jsonl)".into());
        }
        Ok(Entries::Native { input, count: 0 })
    }

    /// The next entry; `None` once the dump has ended as it should.
    fn next_entry(&mut self) -> CliResult<Option<Entry>> {
        match self {
            Entries::Native { input, count } => {
                let entry = next_native(input, *count)?;
                *count += u64::from(entry.is_some());
                Ok(entry)
            }
            Entries::Jsonl { input, line } => next_jsonl(input, line),
        }
    }
}

/// The longest line `dump --format jsonl` writes for the largest entry: every byte of key
/// and value escaped as `\u00XX` (6 bytes), plus the field names and punctuation. A longer
/// line is refused before more of it is read, so an input without newlines (a binary file,
/// `/dev/zero`) cannot fill memory.
const MAX_JSONL_LINE: usize = 6 * (wisckey::MAX_KEY_SIZE + wisckey::MAX_VALUE_SIZE) + 64;

/// The next non-blank line's entry. Every error names the line: a file of JSON lines is
/// fixed by line number (the entry count would skip blank lines).
fn next_jsonl(input: &mut impl BufRead, line: &mut u64) -> CliResult<Option<Entry>> {
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        *line += 1;
        let n = *line;
        if !read_jsonl_line(input, &mut bytes, n, MAX_JSONL_LINE)? {
            return Ok(None);
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| format!("line {n}: stream did not contain valid UTF-8"))?;
        if text.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("line {n}: {e}"))?;
        let object = value
            .as_object()
            .ok_or_else(|| format!("line {n}: not a JSON object"))?;
        let (key, value) = (from_json(object, "key", n)?, from_json(object, "value", n)?);
        // Checked here to name the line (the batch would refuse it too, naming nothing).
        if key.len() > wisckey::MAX_KEY_SIZE || value.len() > wisckey::MAX_VALUE_SIZE {
            return Err(format!(
                "line {n}: a key of {} bytes and a value of {} bytes (the limits are {} and {})",
                key.len(),
                value.len(),
                wisckey::MAX_KEY_SIZE,
                wisckey::MAX_VALUE_SIZE
            )
            .into());
        }
        return Ok(Some((key, value)));
    }
}

/// Reads line `n` into `bytes`, without its newline; false at the end of the input. Refuses
/// the line as soon as what it holds cannot be an entry: longer than `max` bytes, or once
/// its first byte other than white space is not `{` (checked as it arrives, so a file that
/// is not JSON lines is refused at its first bytes, not after the whole of its first
/// "line" is in memory).
fn read_jsonl_line(
    input: &mut impl BufRead,
    bytes: &mut Vec<u8>,
    n: u64,
    max: usize,
) -> CliResult<bool> {
    let mut started = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading line {n}: {e}").into()),
        };
        if chunk.is_empty() {
            return Ok(!bytes.is_empty());
        }
        let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        if bytes.len() + part.len() > max {
            return Err(format!(
                "line {n}: longer than {max} bytes, the longest line an entry \
                 within the size limits takes (is the input JSON lines?)"
            )
            .into());
        }
        if !started {
            if let Some(&first) = part.iter().find(|b| !b.is_ascii_whitespace()) {
                if first != b'{' {
                    return Err(format!("line {n}: not a JSON object").into());
                }
                started = true;
            }
        }
        bytes.extend_from_slice(part);
        let used = part.len() + usize::from(newline);
        input.consume(used);
        if newline {
            return Ok(true);
        }
    }
}

/// The next entry of a native dump after its `count` entries; `None` after its end
/// marker, once the count it holds and the end of the input are checked.
fn next_native(input: &mut impl Read, count: u64) -> CliResult<Option<Entry>> {
    let mut tag = [0u8];
    input.read_exact(&mut tag).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            format!("dump cut after {count} entries (no end marker)").into()
        }
        _ => cut_or_failed(e, &format!("the tag of entry {count}")),
    })?;
    match tag[0] {
        0 => {
            let mut total = [0u8; 8];
            input
                .read_exact(&mut total)
                .map_err(|e| cut_or_failed(e, &format!("its end marker, after {count} entries")))?;
            let total = u64::from_le_bytes(total);
            if total != count {
                return Err(format!("dump says {total} entries, holds {count}").into());
            }
            // Two dumps concatenated (`cat a b | wisckey load`) would otherwise load
            // the first alone and report success.
            let mut after = [0u8];
            let read = loop {
                match input.read(&mut after) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    other => break other,
                }
            };
            match read {
                Ok(0) => Ok(None),
                Err(e) => Err(e.into()),
                // Not "loaded": the batch being filled when this is found is not written
                // (`load` reports how many entries its written batches held).
                Ok(_) => Err(format!(
                    "bytes follow the dump's end marker, after its {count} entries (was more \
                     than one dump joined?)"
                )
                .into()),
            }
        }
        1 => {
            let mut crc = [0u8; 4];
            let part = |what: &str| format!("entry {count}'s {what}");
            input
                .read_exact(&mut crc)
                .map_err(|e| cut_or_failed(e, &part("checksum")))?;
            let mut record = Vec::new();
            let key_len = read_varint(input, &part("key length"))?;
            check_length(count, "key", key_len, wisckey::MAX_KEY_SIZE)?;
            put_varint(&mut record, key_len);
            let key = read_exact_vec(input, key_len, &part("key"))?;
            record.extend_from_slice(&key);
            let value_len = read_varint(input, &part("value length"))?;
            check_length(count, "value", value_len, wisckey::MAX_VALUE_SIZE)?;
            put_varint(&mut record, value_len);
            let value = read_exact_vec(input, value_len, &part("value"))?;
            record.extend_from_slice(&value);
            if unmask(u32::from_le_bytes(crc)) != crc32c(&record) {
                // What was written before it, `load` says: whole batches, which may end
                // well before this entry.
                return Err(format!("entry {count} of the dump fails its checksum").into());
            }
            Ok(Some((key, value)))
        }
        other => Err(format!("entry {count}: unknown tag {other:#04x}").into()),
    }
}

/// Refuses a length no database could have written before anything is read for it: the
/// checksum is checked only after the whole entry is in memory, so one damaged length would
/// otherwise have the load buffer whatever follows, up to the length's gigabytes.
fn check_length(entry: u64, what: &str, len: u64, max: usize) -> CliResult {
    if len > max as u64 {
        return Err(format!(
            "entry {entry}: {what} length {len} exceeds the maximum {what} size of {max} bytes \
             (no database holds one: the dump is damaged there)"
        )
        .into());
    }
    Ok(())
}

/// `len` bytes (already checked against the engine's maxima by [`check_length`]).
fn read_exact_vec(input: &mut impl Read, len: u64, what: &str) -> CliResult<Vec<u8>> {
    let mut bytes = Vec::new();
    input
        .take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| cut_or_failed(e, what))?;
    if bytes.len() as u64 != len {
        return Err(format!("dump cut inside {what}").into());
    }
    Ok(bytes)
}

pub fn load(args: &LoadArgs) -> CliResult {
    // The input is opened, and its first entry read and checked, before the database: a
    // wrong path, an unreadable file or one that does not start as a dump of the chosen
    // format creates nothing (a failed load must not leave a new, empty database behind)
    // and changes nothing in an existing one.
    let source: Box<dyn Read> = match &args.input {
        Some(path) => {
            Box::new(std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => Box::new(std::io::stdin().lock()),
    };
    let not_loaded = |e| format!("{e}; nothing was loaded (the database was not opened)");
    let mut entries = Entries::new(BufReader::new(source), args.format).map_err(not_loaded)?;
    let first = entries.next_entry().map_err(not_loaded)?;
    let existed = args.db.join("CURRENT").exists();
    let options = Options {
        create_if_missing: args.create,
        ..Options::default()
    };
    // With --create, an InvalidArgument is about the arguments (an empty path), not a
    // missing database.
    let db = Db::open(&args.db, options).map_err(|e| -> Box<dyn std::error::Error> {
        if args.create {
            Box::new(e)
        } else {
            crate::kv::missing_database(&args.db, e, "pass --create to create it")
        }
    })?;
    // A database whose first key does not read is not "holding keys": its error is the
    // answer, not a hint to merge into it.
    let first_key = db.keys::<&[u8], _>(..)?.next().transpose();
    let holds_keys = match first_key {
        Ok(first) => first.is_some(),
        Err(e) => {
            let _ = db.close();
            return Err(e.into());
        }
    };
    if args.merge {
        crate::kv::refuse_server_keyspace(&db, &args.db, args.raw_keyspace, "--raw-keyspace")?;
    }
    if !args.merge && holds_keys {
        db.close()?;
        return Err(format!(
            "{} already holds keys; nothing was loaded. Pass --merge to load into it \
             (entries in the file overwrite the same keys)",
            args.db.display()
        )
        .into());
    }
    let mut written = Written::default();
    let result = load_into(&db, first, &mut entries, &mut written);
    match result {
        Ok(count) => {
            db.close()?;
            crate::note(format_args!("loaded {count} entries"));
            Ok(())
        }
        Err(e) => {
            // What was written before the error stays (nothing is ever deleted); say how
            // much of the dump that is. Counted by the load, not by scanning the database:
            // with --merge it also holds keys the dump does not, and a scan can fail too.
            let closed = db.close();
            let what = if existed {
                "the database"
            } else {
                "the database this load created"
            };
            let mut text = format!(
                "{e}; {}",
                written.describe(&entries, &format!("{what} ({})", args.db.display()))
            );
            if let Err(why) = closed {
                text += &format!("; closing the database failed too: {why}");
            }
            // Kept as the source, so damage the writes met still exits 2.
            Err(Box::new(crate::Context { text, source: e }))
        }
    }
}

/// How much of a dump a load wrote: the entries of the batches the database took.
#[derive(Debug, Default)]
struct Written {
    /// Entries in written batches: the dump's first `entries` entries.
    entries: u64,
    /// The key of the last of them.
    last_key: Option<Vec<u8>>,
    /// Where the last of them is in the dump (`entry 65535`, `line 70001`).
    last_at: String,
    /// Every entry of the dump was written (the error came after the last batch).
    all: bool,
}

impl Written {
    /// What the database `target` got from the dump, said after a load's error.
    fn describe<R>(&self, entries: &Entries<R>, target: &str) -> String {
        let n = self.entries;
        let Some(key) = &self.last_key else {
            return format!("no entry of the dump was written to {target}");
        };
        let key = show_key(key);
        if self.all {
            return format!(
                "all {n} entries of the dump (through key {key}) were written to {target} \
                 before it"
            );
        }
        // A native dump's entries are numbered from 0 in its errors; JSON lines are
        // named by line.
        let rest = match entries {
            Entries::Native { .. } => format!("entry {n} and every entry after it were not"),
            Entries::Jsonl { .. } => format!("the entries after {} were not", self.last_at),
        };
        format!(
            "the first {n} entries of the dump (through key {key}, {}) were written to \
             {target}; {rest}",
            self.last_at
        )
    }
}

/// A key for an error line: escaped as `scan` prints it, quoted, and cut after 64 bytes
/// (a key may be 64 KiB).
fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 64;
    match key.get(..SHOWN) {
        Some(start) if key.len() > SHOWN => format!(
            "'{}…' (a key of {} bytes)",
            crate::kv::escape(start),
            key.len()
        ),
        _ => format!("'{}'", crate::kv::escape(key)),
    }
}

impl<R> Entries<R> {
    /// Where the entry handed out last is: `entry N` (0-based, as the native errors count)
    /// or `line N`.
    fn last_at(&self) -> String {
        match self {
            Entries::Native { count, .. } => format!("entry {}", count.saturating_sub(1)),
            Entries::Jsonl { line, .. } => format!("line {line}"),
        }
    }
}

/// Whether a batch of `entries` holding `bytes` of keys and values is written now.
fn batch_is_full(bytes: usize, entries: usize) -> bool {
    bytes >= LOAD_BATCH_BYTES || entries >= LOAD_BATCH_ENTRIES
}

/// Writes `first` and every entry after it into `db` in batches; returns how many. On an
/// error, `written` says how many of the dump's entries (its first ones) the batches the
/// database took held: the entries of the batch being filled are not among them.
fn load_into(
    db: &Db,
    first: Option<Entry>,
    entries: &mut Entries<impl BufRead>,
    written: &mut Written,
) -> CliResult<u64> {
    let progress = bar("load");
    let mut batch = WriteBatch::new();
    let mut batch_bytes = 0usize;
    let mut count = 0u64;
    // The key of the batch's last entry, and where it is in the dump.
    let mut batch_last: Option<(Vec<u8>, String)> = None;
    let mut commit = |batch: WriteBatch, count: u64, last: Option<(Vec<u8>, String)>| {
        db.write(batch)?;
        written.entries = count;
        if let Some((key, at)) = last {
            written.last_key = Some(key);
            written.last_at = at;
        }
        CliResult::Ok(())
    };
    let mut next = first;
    while let Some((key, value)) = next {
        batch_bytes += key.len() + value.len();
        batch.put(&key, value);
        batch_last = Some((key, entries.last_at()));
        count += 1;
        progress.inc(1);
        if batch_is_full(batch_bytes, batch.len()) {
            commit(std::mem::take(&mut batch), count, batch_last.take())?;
            batch_bytes = 0;
        }
        next = entries.next_entry()?;
    }
    if !batch.is_empty() {
        commit(batch, count, batch_last)?;
    }
    written.all = true;
    db.flush()?;
    progress.finish_and_clear();
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads every line of `input` with [`read_jsonl_line`] and a limit of `max` bytes.
    fn lines(input: &[u8], max: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        for n in 1.. {
            let mut bytes = Vec::new();
            match read_jsonl_line(&mut reader, &mut bytes, n, max) {
                Ok(true) => out.push(bytes),
                Ok(false) => return Ok(out),
                Err(e) => return Err(e.to_string()),
            }
        }
        unreachable!("the loop returns at the end of the input")
    }

    #[test]
    fn json_lines_are_read_whole_across_buffer_refills() {
        let got = lines(b"{\"k\":1}\n\n  {\"a\": \"bc\"}\r\n{}", 64).expect("valid");
        let want: Vec<&[u8]> = vec![b"{\"k\":1}", b"", b"  {\"a\": \"bc\"}\r", b"{}"];
        assert_eq!(got, want);
    }

    #[test]
    fn a_line_is_refused_once_it_passes_the_limit_or_cannot_be_an_object() {
        // 20 bytes is over the limit of 16 before the line ends.
        let long = lines(b"{\"key\":\"0123456789\"}\n", 16).expect_err("too long");
        assert!(long.starts_with("line 1: longer than 16 bytes"), "{long}");
        // Exactly the limit is allowed.
        assert_eq!(lines(b"{\"a\":\"01234567\"}\n", 16).expect("fits").len(), 1);
        // Zeros (as from /dev/zero) are refused at the first byte, whatever the limit.
        let zeros = vec![0u8; 1 << 16];
        let refused = lines(&zeros, usize::MAX).expect_err("not JSON");
        assert_eq!(refused, "line 1: not a JSON object");
        let second = lines(b"{}\n   [1]\n", 64).expect_err("an array");
        assert_eq!(second, "line 2: not a JSON object");
    }

    #[test]
    fn a_batch_of_empty_entries_is_cut_by_its_entry_count() {
        assert!(!batch_is_full(0, LOAD_BATCH_ENTRIES - 1));
        assert!(batch_is_full(0, LOAD_BATCH_ENTRIES));
        assert!(batch_is_full(LOAD_BATCH_BYTES, 1));
    }
}
