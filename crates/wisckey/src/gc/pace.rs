//! Pacing writers to what value-log GC frees, once their writes would take background GC
//! far behind its target.
//!
//! Owns the headroom writers may still append before that, the rate at which they may
//! append after it (a fraction of GC's measured net freeing rate), and the virtual clock of
//! when the appends so far are paid for. Without it a writer faster than GC grows the log
//! without bound: GC frees a 64 MiB segment in about a quarter of a second on the 2-core
//! test VM while one writer appends 500 MB/s of 1 KiB values (docs/BENCHMARKS.md, "Writers
//! paced to GC"). Also owns the estimate of the garbage in the log not flushed yet
//! ([`UncountedGarbage`]), which tells GC how far behind it is before a flush has counted
//! it.
//!
//! Invariants:
//! - pacing is off (rate 0) unless GC has measured its own rate on at least one victim
//!   since open and background GC sees that writes could take it far behind: a database
//!   opened far over its target is not slowed before GC has shown what it can do (writers
//!   spending the headroom then only stop GC yielding), and a writer slower than GC never
//!   waits (the clock stays in the past);
//! - writes within the headroom GC gave (the bytes that would take it from where it stands
//!   to far behind) are never charged: GC judges where it stands only between victims, and
//!   a victim can take over a second while one writer appends hundreds of MiB, so the
//!   writers' own bytes say when pacing starts, not GC's next look;
//! - GC's own relocations are never charged (they are what brings the log down);
//! - a writer sleeps only once its debt exceeds [`MIN_SLEEP`], so small writes are not each
//!   charged a sleep (whose real length is tens of microseconds at best);
//! - the clock runs at most [`MAX_DEBT`] ahead of now, so no write waits longer than that
//!   (a 512 MiB batch at the floor rate would otherwise owe a minute, and every writer
//!   after it too).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A writer sleeps once it owes at least this much time.
pub const MIN_SLEEP: Duration = Duration::from_millis(1);
/// The clock never runs further ahead of now than this: the longest a write waits.
pub const MAX_DEBT: Duration = Duration::from_secs(1);
/// Writers may append at this fraction of GC's net freeing rate: a little below 1, so the
/// log does not grow while they are paced. 0.5 bounded the log no better in sustained
/// overwrites and slowed YCSB A on an aged database (GC gaining ground) to 0.82–0.93 of the
/// unpaced rate, against 0.95–0.97 with 0.9 (docs/BENCHMARKS.md, "Writers paced to GC").
pub const PACE_FRACTION: f64 = 0.9;
/// Writers are never paced below this (bytes per second): a GC that frees next to nothing
/// (victims nearly all live) must not stall writes for it.
pub const MIN_WRITERS_RATE: f64 = 8.0 * 1024.0 * 1024.0;
/// Weight of the newest victim in GC's measured rate.
const RATE_WEIGHT: f64 = 0.5;

#[derive(Debug, Default)]
struct PacerState {
    /// Bytes per second writers may append once the headroom is spent; 0: not paced.
    bytes_per_sec: f64,
    /// When the bytes charged so far are paid for.
    paid_until: Option<Instant>,
}

/// The writers' side: what a write owes. One per database.
#[derive(Debug, Default)]
pub struct WritePacer {
    /// Whether the rate is above 0: read by every write, so kept apart from the clock.
    on: AtomicBool,
    /// Bytes writers may still append before they are paced: spent by every write while a
    /// rate is set, so taken without the lock (set only under it).
    headroom: AtomicU64,
    state: Mutex<PacerState>,
}

impl WritePacer {
    /// Sets the rate writers may append at (bytes per second) at once; 0 turns pacing off
    /// and forgets any debt.
    pub fn set_rate(&self, bytes_per_sec: f64) {
        self.set_rate_after(bytes_per_sec, 0);
    }

    /// Sets the rate writers may append at once they have appended `headroom` more bytes;
    /// a rate of 0 turns pacing off. Any debt is forgotten unless pacing starts at once.
    pub fn set_rate_after(&self, bytes_per_sec: f64, headroom: u64) {
        let mut state = self.state.lock();
        state.bytes_per_sec = bytes_per_sec.max(0.0);
        self.headroom.store(headroom, Ordering::Release);
        if state.bytes_per_sec == 0.0 || headroom > 0 {
            state.paid_until = None;
        }
        self.on.store(state.bytes_per_sec > 0.0, Ordering::Release);
    }

    /// What background GC sets before each step: writers may append `headroom` more log
    /// bytes before they are paced at `writers_rate` (`None` headroom: not paced at all).
    /// Before GC has measured a rate nothing can pace them, but GC still stops yielding
    /// once they have spent the headroom ([`WritePacer::pacing`]): an infinite rate charges
    /// nothing.
    pub fn arm(&self, headroom: Option<u64>, writers_rate: Option<f64>) {
        match headroom {
            Some(headroom) => self.set_rate_after(writers_rate.unwrap_or(f64::INFINITY), headroom),
            None => self.set_rate(0.0),
        }
    }

    /// Whether a rate is set (writers must report what they append, paced or not yet).
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Whether writers are paced now: a rate is set and the headroom is spent.
    pub fn pacing(&self) -> bool {
        self.is_on() && self.headroom.load(Ordering::Acquire) == 0
    }

    /// Charges `bytes` appended now and sleeps until they are paid for, if the debt is at
    /// least [`MIN_SLEEP`] (at most [`MAX_DEBT`]). The sleep is taken in slices and ends
    /// early once pacing stops (GC caught up and gave new headroom, or its round ended) or
    /// `closing` says so.
    pub fn pay(&self, bytes: u64, closing: impl Fn() -> bool) {
        const SLICE: Duration = Duration::from_millis(10);
        let now = Instant::now();
        let Some(wait) = self.charge(bytes, now) else {
            return;
        };
        let until = now + wait;
        loop {
            let now = Instant::now();
            if now >= until || !self.pacing() || closing() {
                return;
            }
            std::thread::sleep((until - now).min(SLICE));
        }
    }

    /// Charges `bytes` appended at `now` (what the headroom does not cover); returns how
    /// long the writer must sleep first, if its debt is at least [`MIN_SLEEP`].
    pub fn charge(&self, bytes: u64, now: Instant) -> Option<Duration> {
        let spent = self.headroom.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            (left > 0).then(|| left.saturating_sub(bytes))
        });
        // What the headroom left (or 0 when it covered all of it) is charged.
        let bytes = match spent {
            Ok(left) => bytes.saturating_sub(left),
            Err(_) => bytes,
        };
        if bytes == 0 {
            return None;
        }
        let mut state = self.state.lock();
        if state.bytes_per_sec <= 0.0 {
            return None;
        }
        let start = state.paid_until.map_or(now, |paid| paid.max(now));
        let cost = Duration::from_secs_f64(bytes as f64 / state.bytes_per_sec);
        let paid_until = (start + cost).min(now + MAX_DEBT);
        state.paid_until = Some(paid_until);
        let debt = paid_until.saturating_duration_since(now);
        (debt >= MIN_SLEEP).then_some(debt)
    }
}

/// GC's side: its net freeing rate (bytes freed less bytes rewritten, per second of the
/// round since victims last left the log, flushes included), smoothed over the victims
/// that left together (those of earlier rounds too: a round's first victim would
/// otherwise run with writers unpaced).
#[derive(Debug, Default, Clone, Copy)]
pub struct FreeingRate {
    bytes_per_sec: Option<f64>,
}

impl FreeingRate {
    /// Adds the victims that left the log together: `freed` bytes read from them,
    /// `rewritten` bytes they relocated, in `took` (since victims last left).
    pub fn add_victim(&mut self, freed: u64, rewritten: u64, took: Duration) {
        let secs = took.as_secs_f64().max(1e-3);
        let rate = freed.saturating_sub(rewritten) as f64 / secs;
        self.bytes_per_sec = Some(match self.bytes_per_sec {
            Some(old) => old * (1.0 - RATE_WEIGHT) + rate * RATE_WEIGHT,
            None => rate,
        });
    }

    /// The rate writers may append at once their headroom is spent: [`PACE_FRACTION`] of GC's
    /// net freeing rate, at least [`MIN_WRITERS_RATE`]; `None` before GC has collected a
    /// victim.
    pub fn writers_rate(&self) -> Option<f64> {
        (self.bytes_per_sec).map(|r| (r * PACE_FRACTION).max(MIN_WRITERS_RATE))
    }
}

/// Weight of the newest flush in [`UncountedGarbage`]'s share.
const SHARE_WEIGHT: f64 = 0.5;

/// The garbage no count shows yet: what a memtable's writes make dead is counted only when
/// it is flushed, so until then the log it covers looks all live, and under sustained
/// overwrites that part can outgrow the whole live data (a victim's collection took 1.25 s
/// while one writer appended 720 MiB; docs/BENCHMARKS.md, "Writers paced from their own
/// bytes"). Owns the share of the log bytes written into a memtable (relocations left out)
/// that its flush found dead (the old copies relocations replace left out), smoothed over
/// flushes (weighted by bytes, the newest flush weighing [`SHARE_WEIGHT`]), which GC
/// applies to the log written and not flushed yet.
///
/// Invariants: the share is in `[0, 1]` (a flush of shrinking values can count more dead
/// bytes than it covers; the estimate never counts more of the unflushed log as garbage
/// than there is log); it is 0 until a flush covered log bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct UncountedGarbage {
    dead: f64,
    covered: f64,
}

impl UncountedGarbage {
    /// Adds one flush: `dead` bytes it counted (the records its memtable's entries made
    /// dead, the old copies of relocations left out) of a memtable whose writes (not
    /// relocations) appended `covered` log bytes.
    pub fn add_flush(&mut self, dead: u64, covered: u64) {
        self.dead = self.dead * (1.0 - SHARE_WEIGHT) + dead as f64;
        self.covered = self.covered * (1.0 - SHARE_WEIGHT) + covered as f64;
    }

    /// The share of the log a flush covers that it finds dead.
    pub fn share(&self) -> f64 {
        if self.covered <= 0.0 {
            0.0
        } else {
            (self.dead / self.covered).clamp(0.0, 1.0)
        }
    }

    /// The estimated dead bytes among `unflushed` log bytes not flushed yet.
    pub fn estimate(&self, unflushed: u64) -> u64 {
        (self.share() * unflushed as f64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    #[test]
    fn an_unpaced_writer_never_waits() {
        let pacer = WritePacer::default();
        let now = Instant::now();
        assert_eq!(pacer.charge(1 << 30, now), None);
        assert!(!pacer.is_on());
    }

    #[test]
    fn a_paced_writer_waits_for_what_it_wrote_beyond_the_rate() {
        let pacer = WritePacer::default();
        pacer.set_rate(100.0 * MB);
        let now = Instant::now();
        // 10 MB at 100 MB/s: 100 ms owed.
        let wait = pacer.charge(10_000_000, now).expect("owes");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        // Written again before that time passed: the debts add up.
        let wait = pacer.charge(10_000_000, now).expect("owes");
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-6, "{wait:?}");
        // Once the time is paid, a write at the rate owes only its own cost.
        let later = now + Duration::from_millis(500);
        let wait = pacer.charge(1_000_000, later).expect("owes");
        assert!((wait.as_secs_f64() - 0.01).abs() < 1e-6, "{wait:?}");
    }

    #[test]
    fn small_writes_sleep_only_once_their_debt_is_worth_a_sleep() {
        let pacer = WritePacer::default();
        pacer.set_rate(100.0 * MB);
        let now = Instant::now();
        // 1 KiB costs ~10 us: 97 of them owe less than MIN_SLEEP, the next one sleeps.
        let sleeps: Vec<bool> = (0..100)
            .map(|_| pacer.charge(1024, now).is_some())
            .collect();
        let first = sleeps.iter().position(|&s| s).expect("a sleep");
        assert_eq!(first, 97, "{sleeps:?}");
    }

    #[test]
    fn no_write_owes_more_than_the_longest_wait() {
        let pacer = WritePacer::default();
        pacer.set_rate(MIN_WRITERS_RATE);
        let now = Instant::now();
        // 512 MiB at the floor would owe a minute; it owes MAX_DEBT, and so does the next.
        assert_eq!(pacer.charge(512 << 20, now), Some(MAX_DEBT));
        assert_eq!(pacer.charge(1 << 20, now), Some(MAX_DEBT));
    }

    #[test]
    fn writes_within_the_headroom_are_not_paced() {
        let pacer = WritePacer::default();
        pacer.set_rate_after(100.0 * MB, 10_000_000);
        assert!(pacer.is_on() && !pacer.pacing());
        let now = Instant::now();
        assert_eq!(pacer.charge(6_000_000, now), None);
        assert!(!pacer.pacing());
        // 4 MB of headroom left: the other 2 MB are charged, 20 ms at 100 MB/s.
        let wait = pacer.charge(6_000_000, now).expect("owes");
        assert!((wait.as_secs_f64() - 0.02).abs() < 1e-6, "{wait:?}");
        assert!(pacer.pacing());
        // New headroom (GC gained ground): the debt is forgotten.
        pacer.set_rate_after(100.0 * MB, 1);
        assert!(!pacer.pacing());
        let wait = pacer.charge(1_000_001, now).expect("owes");
        assert!((wait.as_secs_f64() - 0.01).abs() < 1e-6, "{wait:?}");
    }

    #[test]
    fn gc_arms_the_pacer_with_its_headroom_and_rate() {
        let pacer = WritePacer::default();
        let now = Instant::now();
        // Nothing to collect: not paced, nothing counted.
        pacer.arm(None, Some(100.0 * MB));
        assert!(!pacer.is_on());
        // Headroom and a measured rate: free until spent, then charged.
        pacer.arm(Some(1_000_000), Some(100.0 * MB));
        assert_eq!(pacer.charge(1_000_000, now), None);
        assert!(pacer.pacing());
        assert!(pacer.charge(1_000_000, now).is_some());
        // No rate measured yet: spending the headroom tells GC to stop yielding, but no
        // writer waits.
        pacer.arm(Some(1_000_000), None);
        assert!(pacer.is_on() && !pacer.pacing());
        assert_eq!(pacer.charge(1 << 30, now), None);
        assert!(pacer.pacing());
        assert_eq!(pacer.charge(1 << 30, now), None);
        // Far behind with a rate: charged at once.
        pacer.arm(Some(0), Some(100.0 * MB));
        assert!(pacer.pacing());
        assert!(pacer.charge(1_000_000, now).is_some());
    }

    #[test]
    fn turning_pacing_off_forgets_the_debt() {
        let pacer = WritePacer::default();
        pacer.set_rate(1.0 * MB);
        let now = Instant::now();
        assert!(pacer.charge(10_000_000, now).is_some());
        pacer.set_rate(0.0);
        assert_eq!(pacer.charge(10_000_000, now), None);
        pacer.set_rate(1.0 * MB);
        let wait = pacer.charge(1_000, now).expect("owes");
        assert!(wait < Duration::from_millis(2), "old debt forgotten: {wait:?}");
    }

    #[test]
    fn a_writer_stops_paying_once_pacing_stops_or_the_database_closes() {
        let pacer = std::sync::Arc::new(WritePacer::default());
        pacer.set_rate(1.0 * MB);
        // 10 MB at 1 MB/s: ten seconds, MAX_DEBT owed, cut short when pacing stops.
        let paying = {
            let pacer = std::sync::Arc::clone(&pacer);
            std::thread::spawn(move || {
                let start = Instant::now();
                pacer.pay(10_000_000, || false);
                start.elapsed()
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        pacer.set_rate(0.0);
        let paid_for = paying.join().expect("no panic");
        assert!(paid_for < MAX_DEBT / 2, "{paid_for:?}");
        // Closing ends it too.
        pacer.set_rate(1.0 * MB);
        let start = Instant::now();
        pacer.pay(10_000_000, || start.elapsed() > Duration::from_millis(30));
        assert!(start.elapsed() < MAX_DEBT / 2, "{:?}", start.elapsed());
    }

    #[test]
    fn writers_get_a_fraction_of_gcs_smoothed_net_rate_once_it_has_one() {
        let mut rate = FreeingRate::default();
        assert_eq!(rate.writers_rate(), None, "no victim yet");
        // 64 MB freed, 4 MB rewritten, in 0.3 s: 200 MB/s net.
        rate.add_victim(64_000_000, 4_000_000, Duration::from_millis(300));
        let r = rate.writers_rate().expect("rate");
        assert!((r - 200.0 * MB * PACE_FRACTION).abs() < 1.0, "{r}");
        // A victim at 100 MB/s net moves the smoothed rate halfway.
        rate.add_victim(32_000_000, 2_000_000, Duration::from_millis(300));
        let r = rate.writers_rate().expect("rate");
        assert!((r - 150.0 * MB * PACE_FRACTION).abs() < 1.0, "{r}");
        // Rewriting more than it freed counts as freeing nothing; writers still get the floor.
        let mut rate = FreeingRate::default();
        rate.add_victim(1_000, 2_000, Duration::from_millis(1));
        assert_eq!(rate.writers_rate(), Some(MIN_WRITERS_RATE));
    }

    #[test]
    fn uncounted_garbage_is_the_recent_flushes_dead_share_of_the_unflushed_log() {
        let mut garbage = UncountedGarbage::default();
        // No flush yet: nothing is estimated.
        assert_eq!(garbage.estimate(1 << 30), 0);
        // Overwrites: every byte a flush covers made as many bytes dead.
        garbage.add_flush(512 << 20, 512 << 20);
        assert_eq!(garbage.estimate(100 << 20), 100 << 20);
        // New keys since: the share falls towards 0, the newest flush weighing half.
        garbage.add_flush(0, 512 << 20);
        assert!((garbage.share() - 1.0 / 3.0).abs() < 1e-9, "{}", garbage.share());
        for _ in 0..20 {
            garbage.add_flush(0, 512 << 20);
        }
        assert!(garbage.share() < 1e-5, "{}", garbage.share());
        // A small flush moves it little: the share is per byte, not per flush.
        garbage.add_flush(1 << 20, 1 << 20);
        assert!(garbage.share() < 0.01, "{}", garbage.share());
    }

    #[test]
    fn uncounted_garbage_never_exceeds_the_unflushed_log() {
        let mut garbage = UncountedGarbage::default();
        // 16 KiB values overwritten with 1 KiB ones: 16 dead bytes per byte covered.
        garbage.add_flush(16 << 20, 1 << 20);
        assert_eq!(garbage.share(), 1.0);
        assert_eq!(garbage.estimate(300), 300);
    }
}
