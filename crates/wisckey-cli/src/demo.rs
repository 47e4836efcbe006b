//! `wisckey demo`: a smoke benchmark on a temporary database. Phases: fillrandom,
//! readrandom, readseq, reopen (which replays the value log), readrandom again. Each prints
//! a db_bench-style line `name : X micros/op Y ops/sec; Z MB/s`, then one summary. Flags are
//! spelled as `wisckey-bench bench` spells them (`--num`, `--value_size`, `--db`, `--seed`).
//! It never writes into an existing database: `--db` must name a new directory.
//!
//! SIGINT (Ctrl-C) and SIGTERM stop it between two operations: the database is closed, the
//! temporary one removed (a `--db` one is kept), and the exit status is 130 or 143. A second
//! signal while it closes exits at once, leaving whatever is on disk.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use wisckey::{Db, Options};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of keys to write (at least 1).
    #[arg(long, default_value_t = 200_000)]
    num: u64,
    /// Value size in bytes (at most the engine's maximum, 256 MiB).
    #[arg(long = "value_size", alias = "value-size", default_value_t = 1024)]
    value_size: usize,
    /// Database directory, which must not hold a database yet (default: a fresh temporary
    /// directory, removed afterwards).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Random seed.
    #[arg(long, default_value_t = 301)]
    seed: u64,
}

fn key_of(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn value_of(i: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in v.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x % 95) as u8 + 32;
    }
    v
}

fn report(
    out: &mut impl Write,
    name: &str,
    ops: u64,
    bytes: u64,
    started: Instant,
) -> std::io::Result<()> {
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    writeln!(
        out,
        "{name:<12} : {:>10.3} micros/op {:>10.0} ops/sec; {:>7.1} MB/s",
        secs * 1e6 / ops.max(1) as f64,
        ops as f64 / secs,
        bytes as f64 / secs / 1e6
    )
}

/// The signals that stop the demo, with the exit status each gives: 128 + the signal, as a
/// shell reports a process the signal killed.
const STOP_SIGNALS: [(i32, &str, u8); 2] = [
    (signal_hook::consts::SIGINT, "SIGINT", crate::EXIT_SIGINT),
    (signal_hook::consts::SIGTERM, "SIGTERM", crate::EXIT_SIGTERM),
];

/// Set by the signal handlers; the demo's loops look at it between operations. Without
/// them a Ctrl-C killed the process at once and left its temporary database (hundreds of
/// MB) behind, though `--db`'s help promises it is removed.
struct Stop {
    /// The signal received (0: none yet).
    signal: Arc<AtomicUsize>,
}

impl Stop {
    fn install() -> std::io::Result<Stop> {
        let signal = Arc::new(AtomicUsize::new(0));
        let stopping = Arc::new(AtomicBool::new(false));
        for (number, _, status) in STOP_SIGNALS {
            // Registered first, so it runs before `stopping` is set: the first signal only
            // asks the demo to stop; a second one (the close is slow, or stuck) exits now.
            signal_hook::flag::register_conditional_shutdown(
                number,
                i32::from(status),
                Arc::clone(&stopping),
            )?;
            // A signal number is small and positive.
            signal_hook::flag::register_usize(number, Arc::clone(&signal), number as usize)?;
            signal_hook::flag::register(number, Arc::clone(&stopping))?;
        }
        Ok(Stop { signal })
    }

    /// An [`Interrupted`] error once a signal came (its text is completed by [`run`]).
    fn check(&self) -> Result<(), Interrupted> {
        let received = self.signal.load(Ordering::Relaxed);
        match STOP_SIGNALS.iter().find(|(n, ..)| *n as usize == received) {
            None => Ok(()),
            Some(&(_, name, status)) => Err(Interrupted {
                text: format!("demo interrupted by {name}"),
                status,
            }),
        }
    }
}

/// The demo stopped on SIGINT or SIGTERM; `main` exits with `status` (130 or 143).
#[derive(Debug)]
pub struct Interrupted {
    text: String,
    pub status: u8,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Interrupted {}

pub fn run(args: &DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Checked before anything is created: the engine would refuse every put of a larger
    // value, and a value this size is allocated once per put and read.
    // Usage errors (exit 64), found before anything is opened, as the README promises.
    if args.value_size > wisckey::MAX_VALUE_SIZE {
        return Err(crate::Usage(format!(
            "--value_size {} exceeds the maximum value size of {} bytes",
            args.value_size,
            wisckey::MAX_VALUE_SIZE
        ))
        .into());
    }
    // The phases draw keys from 0..num, an empty range when num is 0.
    if args.num == 0 {
        return Err(crate::Usage("--num must be at least 1".into()).into());
    }
    // Before the temporary directory exists, so no signal can come between its creation
    // and the handler that makes sure it is removed.
    let stop = Stop::install()?;
    let Some(path) = &args.db else {
        let temp = tempfile::tempdir()?;
        let dir = temp.path().display().to_string();
        // `phases` has closed (or dropped) its database by the time it returns: nothing
        // writes into the directory while it is removed.
        let result = phases(args, &temp.path().join("db"), &stop);
        let removed = temp.close();
        return match (result, removed) {
            (Err(e), removed) => match e.downcast::<Interrupted>() {
                Ok(mut stopped) => {
                    stopped.text += &match removed {
                        Ok(()) => "; the temporary database was removed".to_string(),
                        Err(why) => format!(
                            "; the temporary database could not be removed ({why}): remove \
                             {dir} by hand"
                        ),
                    };
                    Err(stopped)
                }
                Err(e) => Err(e),
            },
            (Ok(()), Err(why)) => {
                Err(format!("the temporary database {dir} could not be removed: {why}").into())
            }
            (Ok(()), Ok(())) => Ok(()),
        };
    };
    phases(args, path, &stop).map_err(|e| match e.downcast::<Interrupted>() {
        Ok(mut stopped) => {
            // Never removed: the operator named it.
            stopped.text += &format!(
                "; {} was closed and kept, holding what the demo wrote",
                path.display()
            );
            stopped
        }
        Err(e) => e,
    })
}

/// The demo's phases on a new database at `path`. On an error (an interruption too) the
/// database is dropped on the way out, which closes it.
fn phases(args: &DemoArgs, path: &Path, stop: &Stop) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "wisckey demo: {} keys, 16-byte keys, {}-byte values, db at {}",
        args.num,
        args.value_size,
        path.display()
    )?;
    let entry_bytes = 16 + args.value_size as u64;
    let mut rng = SmallRng::seed_from_u64(args.seed);
    // A demo never writes into someone's database.
    let new_only = Options {
        error_if_exists: true,
        ..Options::default()
    };

    let db = Db::open(path, new_only)?;
    let started = Instant::now();
    for _ in 0..args.num {
        stop.check()?;
        let i = rng.gen_range(0..args.num);
        db.put(key_of(i), value_of(i, args.value_size))?;
    }
    let fill_secs = started.elapsed().as_secs_f64();
    report(
        &mut out,
        "fillrandom",
        args.num,
        args.num * entry_bytes,
        started,
    )?;

    let started = Instant::now();
    let found = read_random(&db, &mut rng, args, stop)?;
    report(
        &mut out,
        "readrandom",
        args.num,
        found * entry_bytes,
        started,
    )?;
    writeln!(
        out,
        "  ({found} of {} found: as in db_bench, fillrandom drew its keys at random, so about \
         63% of the key space exists and a random read finds about that share)",
        args.num
    )?;

    let started = Instant::now();
    let mut scanned = 0u64;
    for entry in db.range::<&[u8], _>(..)? {
        stop.check()?;
        let (key, value) = entry?;
        let i: u64 = std::str::from_utf8(&key)?.parse()?;
        if value != value_of(i, args.value_size) {
            return Err(format!("wrong value scanned for key {i}").into());
        }
        scanned += 1;
    }
    report(&mut out, "readseq", scanned, scanned * entry_bytes, started)?;

    let started = Instant::now();
    db.close()?;
    stop.check()?;
    let db = Db::open(path, Options::default())?;
    let reopen = started.elapsed();
    let replayed = db.recovery_report().replayed_records;
    writeln!(
        out,
        "{:<12} : {:>10.1} ms (close flushes the memtable; open replayed {replayed} log records)",
        "reopen",
        reopen.as_secs_f64() * 1e3
    )?;

    let started = Instant::now();
    let found_again = read_random(&db, &mut rng, args, stop)?;
    report(
        &mut out,
        "readrandom",
        args.num,
        found_again * entry_bytes,
        started,
    )?;
    let stats = db.stats()?;
    let levels = stats.level_files;
    db.close()?;
    writeln!(
        out,
        "summary: {scanned} distinct keys written ({:.1} MB of keys and values, {:.0} puts/s), \
         every value read back verified; value log {:.1} MB on disk, {:.1} MB live; tables per \
         level {levels:?}",
        (scanned * entry_bytes) as f64 / 1e6,
        args.num as f64 / fill_secs.max(1e-9),
        stats.value_log.log_bytes as f64 / 1e6,
        stats.value_log.live_bytes as f64 / 1e6,
    )?;
    Ok(())
}

/// `args.num` random reads, each value checked; returns how many keys were found.
fn read_random(
    db: &Db,
    rng: &mut SmallRng,
    args: &DemoArgs,
    stop: &Stop,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut found = 0u64;
    for _ in 0..args.num {
        stop.check()?;
        let i = rng.gen_range(0..args.num);
        if let Some(v) = db.get(key_of(i))? {
            if v != value_of(i, args.value_size) {
                return Err(format!("wrong value read for key {i}").into());
            }
            found += 1;
        }
    }
    Ok(found)
}
