//! Maintenance subcommands on an existing database: `gc` (offline value-log garbage
//! collection), `cluster` (rewrite a key range's values in key order, then collect the old
//! records), `stats` (what the value log holds and why each segment is or is not
//! collected), `check` (verify everything) and `repair` (rebuild the key index from the
//! value log). Each refuses a directory that holds no database (they never create one)
//! and one that another process has open for writing. `stats`, `check`, `checkpoint` and
//! `cluster --dry-run` open it read-only (`Db::open_read_only`): they change nothing in it, and run beside
//! other read-only commands. On stderr, when it is a terminal, `check` shows a progress bar per pass with
//! rate and ETA (`Db::check_with_progress`); `gc`, `cluster` and `repair`, which report no
//! progress within the call, show a spinner with the elapsed time.
//!
//! Arguments are checked before the database is opened, so a wrong one never locks or
//! touches it: `gc`'s numbers as clap parses them, `cluster`'s range and `checkpoint`'s
//! target (never inside the database it copies) as usage errors ([`crate::Usage`]).
//! `repair` that lost keys' newest values, or reverted keys to older ones, prints its report
//! and fails with [`ValuesLost`].

use std::io::{IsTerminal, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use wisckey::{CheckPhase, Db, DbStats, GcOptions, Options};

#[derive(Debug, Args)]
pub struct GcArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Collect until the value log's bytes on disk are at most this many times its live
    /// bytes (1.0: collect every segment with at least --min-dead-fraction dead).
    #[arg(long = "target", default_value_t = 1.0, value_parser = space_amp_target)]
    target: f64,
    /// Leave segments less dead than this (0 to 1) alone.
    #[arg(
        long = "min-dead-fraction",
        alias = "min_dead_fraction",
        default_value_t = 0.01,
        value_parser = dead_fraction
    )]
    min_dead_fraction: f64,
    /// Do not compact the key index first (faster; garbage compaction has not found yet
    /// stays uncounted unless sampling finds it).
    #[arg(long = "no-compact", alias = "no_compact")]
    no_compact: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// First key of the range (inclusive); default: the first key.
    #[arg(long)]
    from: Option<String>,
    /// End of the range (exclusive); default: past the last key.
    #[arg(long)]
    to: Option<String>,
    /// Leave the old records for background GC (default: collect them before closing).
    #[arg(long = "no-gc", alias = "no_gc")]
    no_gc: bool,
    /// Only say what a pass would move (reads keys and pointers, opens read-only).
    #[arg(long = "dry-run", alias = "dry_run")]
    dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    encoding: crate::kv::Encoding,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Print the statistics as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Print the report (counts read, each problem by file and offset) as JSON; the exit
    /// status is the same.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Print the number of tables per level after compacting as a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Print the repair report (what was read, rebuilt, moved aside and found damaged) as
    /// JSON.
    #[arg(long)]
    json: bool,
}

/// The database's files are damaged: the command exits with status 2 for this (as every
/// command does on bytes that do not verify), 1 for every other failure, so a script can
/// tell damage from a wrong path or a locked database.
#[derive(Debug)]
pub enum Damaged {
    /// The report on stdout names the damage.
    Reported,
    /// The damage stopped `check` before it could report (the open, most often).
    Unreadable(wisckey::Error),
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damaged::Reported => write!(f, "the database is damaged"),
            Damaged::Unreadable(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Damaged {}

/// `repair` rebuilt the key index, but keys' newest writes are gone: values not in the log,
/// or writes in a segment set aside (the report on stdout names both): exit status 3, so a
/// script does not take the repair for a full recovery.
#[derive(Debug)]
pub struct ValuesLost {
    /// Keys whose newest values are not in the log (their reads report corruption).
    pub lost_values: u64,
    /// Keys whose newest writes lay in segments set aside: they read as older entries.
    pub keys_reverted: u64,
}

impl std::fmt::Display for ValuesLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "repair rebuilt the database, but ")?;
        if self.lost_values > 0 {
            write!(
                f,
                "{} keys' newest values were lost (reads of those keys report corruption)",
                self.lost_values
            )?;
        }
        if self.lost_values > 0 && self.keys_reverted > 0 {
            write!(f, " and ")?;
        }
        if self.keys_reverted > 0 {
            write!(
                f,
                "{} keys' newest writes were lost with a segment set aside (those keys read \
                 as older values, or as missing)",
                self.keys_reverted
            )?;
        }
        write!(f, "; the report names them")
    }
}

impl std::error::Error for ValuesLost {}

/// `gc --target`, checked as `GcOptions` will be (clap reports it, before anything opens).
fn space_amp_target(text: &str) -> Result<f64, String> {
    let target: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if target.is_nan() || target < 1.0 {
        return Err("must be at least 1 (bytes on disk per live byte)".into());
    }
    Ok(target)
}

/// `gc --min-dead-fraction`, checked as `GcOptions` will be.
fn dead_fraction(text: &str) -> Result<f64, String> {
    let fraction: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err("must be from 0 to 1".into());
    }
    Ok(fraction)
}

/// `Damaged` when `e` says stored bytes do not verify. Only `Corruption` does: a missing
/// directory, a permission or I/O error, a lock, a directory that is not a database or a
/// newer format version are no evidence the files are damaged.
fn damage_or(e: wisckey::Error) -> Box<dyn std::error::Error> {
    if e.is_corruption() {
        Box::new(Damaged::Unreadable(e))
    } else {
        Box::new(e)
    }
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// The new directory the copy goes to (must not exist, and not be inside the database
    /// directory).
    #[arg(long)]
    to: PathBuf,
}

fn open(path: &PathBuf) -> Result<Db, Box<dyn std::error::Error>> {
    let options = Options {
        create_if_missing: false,
        // This command does the collecting; no background collection beside it.
        gc_space_amp_target: f64::INFINITY,
        ..Options::default()
    };
    Db::open(path, options).map_err(|e| {
        crate::kv::missing_database(path, e, "gc, compact and cluster never create one")
    })
}

/// For the commands that only read: nothing in the directory changes.
fn open_read_only(path: &PathBuf) -> Result<Db, Box<dyn std::error::Error>> {
    Ok(Db::open_read_only(path, Options::default())?)
}

/// `check`'s progress bar (hidden when stderr is not a terminal).
fn check_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template(
        "check {msg}: {wide_bar} {human_pos}/{human_len} ({per_sec}, ETA {eta}) {elapsed}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// A spinner with the elapsed time on stderr (hidden when stderr is not a terminal, as the
/// progress bars of `dump` and `load` are).
fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    let style = ProgressStyle::with_template("{spinner} {prefix} {msg} {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

pub fn gc(args: &GcArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = open(&args.db)?;
    let before = db.stats()?;
    let options = GcOptions {
        space_amp_target: args.target,
        min_dead_fraction: args.min_dead_fraction,
        compact_first: !args.no_compact,
        ..GcOptions::default()
    };
    let started = std::time::Instant::now();
    let progress = spinner("gc");
    progress.set_message(format!(
        "collecting {} of value log",
        mib(before.value_log.log_bytes)
    ));
    let done = db.gc(&options);
    progress.finish_and_clear();
    let done = done?;
    let after = db.stats()?;
    db.close()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = serde_json::json!({ "gc": done, "before": before, "after": after });
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "collected {} segments in {:.1} s: read {}, relocated {} records ({}), dropped {} dead records; punched out {}",
        done.segments_collected,
        started.elapsed().as_secs_f64(),
        mib(done.bytes_read),
        done.records_relocated,
        mib(done.bytes_relocated),
        done.records_dropped,
        mib(after.gc.bytes_punched)
    )?;
    writeln!(
        out,
        "value log: {} -> {} (live {}), space amplification {:.2} -> {:.2}",
        mib(before.value_log.log_bytes),
        mib(after.value_log.log_bytes),
        mib(after.value_log.live_bytes),
        before.value_log.space_amp,
        after.value_log.space_amp
    )?;
    Ok(())
}

pub fn cluster(args: &ClusterArgs) -> Result<(), Box<dyn std::error::Error>> {
    // The range is checked here, not by the engine after the open: a wrong one must not
    // open (or lock) the database, and must read as a usage error, not a missing database.
    let key = |arg: &Option<String>, what: &str| -> Result<Option<Vec<u8>>, crate::Usage> {
        arg.as_deref()
            .map(|text| args.encoding.parse(text, what))
            .transpose()
    };
    let (from, to) = (key(&args.from, "--from")?, key(&args.to, "--to")?);
    if let (Some(from), Some(to)) = (&from, &to) {
        if from > to {
            return Err(Box::new(crate::Usage(
                "the range starts after it ends (--from is past --to)".into(),
            )));
        }
    }
    let from = from.map_or(Bound::Unbounded, Bound::Included);
    let to = to.map_or(Bound::Unbounded, Bound::Excluded);
    if args.dry_run {
        let db = open_read_only(&args.db)?;
        let estimate = db.cluster_values_estimate((from, to))?;
        db.close()?;
        let mut out = std::io::stdout().lock();
        if args.json {
            let report = serde_json::json!({ "estimate": estimate });
            writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        } else {
            writeln!(
                out,
                "{} keys ({} values in the log): a pass would move {} values ({}) and leave {} already in runs",
                estimate.keys_examined,
                estimate.values_in_log,
                estimate.values_relocated,
                mib(estimate.bytes_relocated),
                estimate.values_kept
            )?;
        }
        return Ok(());
    }
    let db = open(&args.db)?;
    let before = db.stats()?;
    let started = std::time::Instant::now();
    let progress = spinner("cluster");
    progress.set_message("rewriting values in key order");
    let done = db.cluster_values((from, to));
    let done = match done {
        Ok(done) if !args.no_gc => {
            progress.set_message("collecting the old records");
            db.gc(&GcOptions::default()).map(|gc| (done, Some(gc)))
        }
        Ok(done) => Ok((done, None)),
        Err(e) => Err(e),
    };
    progress.finish_and_clear();
    let (done, gc) = done?;
    let after = db.stats()?;
    db.close()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let report =
            serde_json::json!({ "cluster": done, "gc": gc, "before": before, "after": after });
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "examined {} keys ({} values in the log) in {:.1} s: relocated {} values ({}) in key order, left {} already in runs, {} changed meanwhile",
        done.keys_examined,
        done.values_in_log,
        started.elapsed().as_secs_f64(),
        done.values_relocated,
        mib(done.bytes_relocated),
        done.values_kept,
        done.values_changed
    )?;
    if let Some(gc) = gc {
        writeln!(
            out,
            "collected {} segments, dropped {} dead records",
            gc.segments_collected, gc.records_dropped
        )?;
    }
    writeln!(
        out,
        "value log: {} -> {} (live {})",
        mib(before.value_log.log_bytes),
        mib(after.value_log.log_bytes),
        mib(after.value_log.live_bytes)
    )?;
    Ok(())
}

pub fn stats(args: &StatsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = open_read_only(&args.db)?;
    let stats = db.stats()?;
    db.close()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats)?)?;
    } else {
        print_stats(&mut out, &stats)?;
    }
    Ok(())
}

pub fn check(args: &CheckArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = Db::open_read_only(&args.db, Options::default()).map_err(damage_or)?;
    let progress = check_bar();
    let mut phase = None;
    let report = db.check_with_progress(|p| {
        if phase != Some(p.phase) {
            phase = Some(p.phase);
            progress.reset();
            progress.set_message(match p.phase {
                CheckPhase::Tables => "tables (bytes)",
                CheckPhase::Values => "values (keys)",
                CheckPhase::Segments => "sealed log segments (bytes)",
                _ => "",
            });
        }
        progress.set_length(p.total);
        progress.set_position(p.done);
    });
    progress.finish_and_clear();
    let report = report.map_err(damage_or)?;
    db.close()?;
    let printed = print_check(&mut std::io::stdout().lock(), &report, args.json);
    // The status is the verdict, so it says "damaged" even when the report could not be
    // written whole (`check | head -1` closed the pipe, say).
    if !report.is_ok() {
        return Err(Box::new(Damaged::Reported));
    }
    printed
}

fn print_check(
    out: &mut impl Write,
    report: &wisckey::CheckReport,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(report)?)?;
    } else {
        writeln!(
            out,
            "read {} tables ({} entries), {} keys ({} values in the log), {} sealed segments ({} records)",
            report.tables,
            report.table_entries,
            report.keys,
            report.pointers,
            report.segments,
            report.segment_records
        )?;
        for p in &report.problems {
            match p.offset {
                Some(offset) => {
                    writeln!(out, "problem: {} at offset {offset}: {}", p.file, p.what)?
                }
                None => writeln!(out, "problem: {}: {}", p.file, p.what)?,
            }
        }
        if report.is_ok() {
            writeln!(out, "no problems found")?;
        }
    }
    out.flush()?;
    Ok(())
}

pub fn checkpoint(args: &CheckpointArgs) -> Result<(), Box<dyn std::error::Error>> {
    refuse_target_inside(
        &args.db,
        &args.to,
        "checkpoint target",
        "the copy would become part of the database it copies; name a directory outside it",
    )?;
    // A backup writes nothing to what it copies.
    let db = open_read_only(&args.db)?;
    let started = std::time::Instant::now();
    let report = db.checkpoint(&args.to)?;
    db.close()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "copied {} tables ({}) and {} value-log segments ({}) to {} in {:.1} s",
        report.tables,
        mib(report.table_bytes),
        report.segments,
        mib(report.segment_bytes),
        args.to.display(),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// Refuses a target (a checkpoint's directory, a dump's file) inside the database directory
/// (or the directory itself), before anything is opened or written: it would be a file the
/// database does not own, which `repair` refuses to rebuild around (and the next checkpoint
/// would copy a checkpoint too). `what` names the target and `why` the consequence.
/// Compared as canonical paths (`wisckey::fs::path_is_within`), so `..` and symlinks cannot
/// hide it, and each directory the copy would create is checked (`a/new/../b` creates
/// `a/new` too). Where a path cannot be canonicalized, the open or the copy reports why;
/// nothing is refused.
pub(crate) fn refuse_target_inside(
    db: &Path,
    target: &Path,
    what: &str,
    why: &str,
) -> Result<(), crate::Usage> {
    let inside = wisckey::fs::path_is_within(&wisckey::fs::PosixFs, target, db).unwrap_or(false);
    if inside {
        return Err(crate::Usage(format!(
            "{what} {} is the database directory {} or inside it: {why} (nothing was written)",
            target.display(),
            db.display()
        )));
    }
    Ok(())
}

pub fn compact(args: &CompactArgs) -> Result<(), Box<dyn std::error::Error>> {
    let db = open(&args.db)?;
    let started = std::time::Instant::now();
    db.compact_range(None, None)?;
    let stats = db.stats()?;
    db.close()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&stats.level_files)?)?;
    } else {
        writeln!(
            out,
            "compacted in {:.1} s; tables per level: {:?}",
            started.elapsed().as_secs_f64(),
            stats.level_files
        )?;
    }
    Ok(())
}

pub fn repair(args: &RepairArgs) -> Result<(), Box<dyn std::error::Error>> {
    let progress = spinner("repair");
    progress.set_message("rebuilding the key index from the value log");
    let report = Db::repair(&args.db, Options::default());
    progress.finish_and_clear();
    let report = report?;
    let printed = print_repair(&mut std::io::stdout().lock(), &report, args);
    // The status says writes were lost even when the report could not be written whole:
    // a key that reads corrupt and a key that reads an older value are both data lost.
    if report.lost_values > 0 || report.keys_reverted > 0 {
        return Err(Box::new(ValuesLost {
            lost_values: report.lost_values,
            keys_reverted: report.keys_reverted,
        }));
    }
    printed
}

fn print_repair(
    out: &mut impl Write,
    report: &wisckey::RepairReport,
    args: &RepairArgs,
) -> Result<(), Box<dyn std::error::Error>> {
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(report)?)?;
        out.flush()?;
        return Ok(());
    }
    writeln!(
        out,
        "read {} tables ({} entries) and {} value-log segments ({} records)",
        report.tables_read, report.table_entries, report.segments_scanned, report.log_records
    )?;
    writeln!(
        out,
        "rebuilt the key index: {} keys in {} tables ({} deleted keys kept as deletes), last sequence {}; new writes go to segment {}",
        report.keys, report.tables_written, report.deleted_keys, report.last_sequence, report.new_segment
    )?;
    let stepped_over = report.zeroed_log_bytes
        + report.damaged_log_bytes
        + report.punched_log_bytes
        + report.torn_log_bytes;
    if stepped_over + report.incomplete_batch_records > 0 {
        writeln!(
            out,
            "stepped over {} punched, {} zeroed and {} damaged log bytes; left out {} unsynced \
             log bytes at the log's end ({} records of incomplete batches)",
            report.punched_log_bytes,
            report.zeroed_log_bytes,
            report.damaged_log_bytes,
            report.torn_log_bytes,
            report.incomplete_batch_records
        )?;
    }
    if !report.moved_to.is_empty() {
        writeln!(
            out,
            "moved the {} replaced files to {} (nothing was deleted)",
            report.moved.len(),
            args.db.join(&report.moved_to).display()
        )?;
    }
    for p in &report.problems {
        match p.offset {
            Some(offset) => writeln!(out, "problem: {} at offset {offset}: {}", p.file, p.what)?,
            None if p.file.is_empty() => writeln!(out, "problem: {}", p.what)?,
            None => writeln!(out, "problem: {}: {}", p.file, p.what)?,
        }
    }
    let unlisted = report.problems_total - report.problems.len() as u64;
    if unlisted > 0 {
        writeln!(out, "... and {unlisted} more problems")?;
    }
    if report.lost_values > 0 {
        writeln!(
            out,
            "{} keys' newest values are not in the log; their reads report corruption",
            report.lost_values
        )?;
    }
    if report.keys_reverted > 0 {
        writeln!(
            out,
            "{} keys' newest writes lie in segments set aside (their headers do not verify); \
             they read as their older entries, or as missing",
            report.keys_reverted
        )?;
    }
    out.flush()?;
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn print_stats(out: &mut impl Write, stats: &DbStats) -> std::io::Result<()> {
    let log = &stats.value_log;
    writeln!(out, "{:>5} {:>6} {:>12}", "level", "tables", "bytes")?;
    for (level, (files, bytes)) in stats.level_files.iter().zip(&stats.level_bytes).enumerate() {
        writeln!(out, "{level:>5} {files:>6} {:>12}", mib(*bytes))?;
    }
    writeln!(
        out,
        "value log: {} on disk, {} live, space amplification {:.2} (background target {})",
        mib(log.log_bytes),
        mib(log.live_bytes),
        log.space_amp,
        log.space_amp_target
    )?;
    writeln!(
        out,
        "replay head in segment {}, writer in segment {}",
        log.head_segment, log.active_segment
    )?;
    writeln!(
        out,
        "{:>8} {:>12} {:>12} {:>12} {:>12}  state",
        "segment", "size", "live", "dead", "punched"
    )?;
    for s in &log.segments {
        writeln!(
            out,
            "{:>8} {:>12} {:>12} {:>12} {:>12}  {:?}",
            s.segment,
            mib(s.size),
            mib(s.live_bytes),
            mib(s.dead_bytes),
            mib(s.punched_bytes),
            s.state
        )?;
    }
    Ok(())
}
