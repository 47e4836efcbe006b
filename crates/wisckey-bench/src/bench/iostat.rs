//! I/O and CPU accounting for the benchmark report: bytes written and read by the block
//! device holding the database (`/sys/dev/block/MAJ:MIN/stat`, sectors written / sectors
//! read, 512-byte units), bytes this process caused to be written or fetched from storage
//! (`/proc/self/io`: `write_bytes - cancelled_write_bytes`, `read_bytes`; all threads;
//! page-cache hits are not counted, readahead is), the space the database directory takes
//! on disk (allocated blocks, so sparse preallocated files count for what they use), and the
//! process's CPU time (`getrusage(RUSAGE_SELF)`, user + system, all threads). The device
//! counters see every process on the machine, so on a shared machine they are upper bounds;
//! the process counters see only us. Samples are taken after a `sync`, outside the timed
//! region. Stateless functions; safe from any thread.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the device counter is read from.
#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    stat_path: PathBuf,
}

/// One sample of the device and process counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoSample {
    pub device_bytes: Option<u64>,
    pub process_bytes: Option<u64>,
    pub device_read_bytes: Option<u64>,
    pub process_read_bytes: Option<u64>,
}

/// Finds the block device holding `path` (or its nearest existing ancestor).
pub fn device_of(path: &Path) -> Option<Device> {
    let existing = path.ancestors().find(|p| p.exists())?;
    let dev = fs::metadata(existing).ok()?.dev();
    // glibc's gnu_dev_major / gnu_dev_minor encoding.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let stat_path = sys.join("stat");
    fs::read_to_string(&stat_path).ok()?;
    let name = fs::canonicalize(&sys)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{major}:{minor}"));
    Some(Device { name, stat_path })
}

/// Flushes dirty pages of the whole system to the devices, so that counters include them.
pub fn sync_all() {
    // `sync` the program: the CLI has no libc dependency, and this runs outside timing.
    let _ = std::process::Command::new("sync").status();
}

/// Reads both counters now.
pub fn sample(device: Option<&Device>) -> IoSample {
    let (device_read_bytes, device_bytes) = device
        .and_then(|d| fs::read_to_string(&d.stat_path).ok())
        .map_or((None, None), |text| parse_device_stat(&text));
    let (process_read_bytes, process_bytes) = fs::read_to_string("/proc/self/io")
        .ok()
        .map_or((None, None), |text| parse_proc_io(&text));
    IoSample {
        device_bytes,
        process_bytes,
        device_read_bytes,
        process_read_bytes,
    }
}

/// (bytes read, bytes written) from a block device's `stat` file: fields 3 and 7 (1-based)
/// are sectors read and written; sectors are always 512 bytes there.
fn parse_device_stat(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |n: usize| -> Option<u64> {
        let sectors: u64 = text.split_whitespace().nth(n)?.parse().ok()?;
        Some(sectors * 512)
    };
    (field(2), field(6))
}

/// (bytes read, bytes written) from `/proc/self/io`.
fn parse_proc_io(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let written = field("write_bytes:").map(|written| {
        let cancelled = field("cancelled_write_bytes:").unwrap_or(0);
        written.saturating_sub(cancelled)
    });
    (field("read_bytes:"), written)
}

/// CPU seconds (user + system) used so far by every thread of this process.
pub fn cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a `struct rusage` into the valid, writable pointer it is
    // given and reads nothing else; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and zeroed() already made
    // every field a valid integer).
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// Bytes allocated on disk by the files under `dir` (0 if it does not exist).
pub fn dir_size_on_disk(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            total += dir_size_on_disk(&entry.path());
        } else {
            total += meta.blocks() * 512;
        }
    }
    total
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

fn ratio(written: u64, user: u64) -> String {
    if user == 0 {
        "n/a".to_string()
    } else {
        format!("{:.3}", written as f64 / user as f64)
    }
}

/// What the harness knows about one measured span, besides the counter samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpanFacts {
    /// Key + value bytes the benchmark wrote (deletes count their key).
    pub user_written: u64,
    /// Key + value bytes the benchmark got back from reads and scans.
    pub user_read: u64,
    /// Live logical bytes after the span (see `live`), if known.
    pub live_bytes: Option<u64>,
    /// CPU seconds used in the timed region, and its wall seconds.
    pub cpu: Option<(f64, f64)>,
}

/// The two report lines after a benchmark's db_bench line (format shared with the peers and
/// parsed by `bench/run-side-by-side.sh`): write amplification and DB size, then read
/// amplification, space amplification and CPU utilisation.
pub fn amp_lines(
    device: Option<&Device>,
    before: IoSample,
    after: IoSample,
    facts: SpanFacts,
    db_dir: &Path,
) -> String {
    let db_bytes = dir_size_on_disk(db_dir);
    let write = io_line(device, before, after, facts.user_written, db_bytes);
    let user_read = facts.user_read;
    let device_read = match (device, before.device_read_bytes, after.device_read_bytes) {
        (Some(d), Some(b), Some(a)) => {
            let r = a.saturating_sub(b);
            format!(
                "ra={} (device {} read {:.1} MiB / user {:.1} MiB)",
                ratio(r, user_read),
                d.name,
                mb(r),
                mb(user_read)
            )
        }
        _ => format!(
            "ra=n/a (no readable block device counter; user {:.1} MiB)",
            mb(user_read)
        ),
    };
    let process_read = match (before.process_read_bytes, after.process_read_bytes) {
        (Some(b), Some(a)) => {
            let r = a.saturating_sub(b);
            format!(
                "ra_process={} (process read {:.1} MiB)",
                ratio(r, user_read),
                mb(r)
            )
        }
        _ => "ra_process=n/a (/proc/self/io unreadable)".to_string(),
    };
    let space = match facts.live_bytes {
        Some(live) => format!(
            "space_amp={} (db {:.1} MiB / live {:.1} MiB)",
            ratio(db_bytes, live),
            mb(db_bytes),
            mb(live)
        ),
        None => "space_amp=n/a (live bytes unknown: existing db)".to_string(),
    };
    let cpu = match facts.cpu {
        Some((cpu, wall)) if wall > 0.0 => format!(
            "cpu={:.0}% (user+sys {:.2} s / wall {:.2} s)",
            cpu / wall * 100.0,
            cpu,
            wall
        ),
        _ => "cpu=n/a".to_string(),
    };
    format!(
        "{write}\n{:<12}   {device_read} {process_read} {space} {cpu}",
        ""
    )
}

/// Write amplification by device and by process, and DB size.
fn io_line(
    device: Option<&Device>,
    before: IoSample,
    after: IoSample,
    user_bytes: u64,
    db_bytes: u64,
) -> String {
    let device_part = match (device, before.device_bytes, after.device_bytes) {
        (Some(d), Some(b), Some(a)) => {
            let w = a.saturating_sub(b);
            format!(
                "wa={} (device {} wrote {:.1} MiB / user {:.1} MiB)",
                ratio(w, user_bytes),
                d.name,
                mb(w),
                mb(user_bytes)
            )
        }
        _ => format!(
            "wa=n/a (no readable block device counter; user {:.1} MiB)",
            mb(user_bytes)
        ),
    };
    let process_part = match (before.process_bytes, after.process_bytes) {
        (Some(b), Some(a)) => {
            let w = a.saturating_sub(b);
            format!(
                "wa_process={} (process wrote {:.1} MiB)",
                ratio(w, user_bytes),
                mb(w)
            )
        }
        _ => "wa_process=n/a (/proc/self/io unreadable)".to_string(),
    };
    format!(
        "{:<12}   {device_part} {process_part} db_size={:.1} MiB",
        "",
        mb(db_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_handles_zero_user_bytes() {
        assert_eq!(ratio(10, 0), "n/a");
        assert_eq!(ratio(30, 20), "1.500");
    }

    #[test]
    fn parses_device_and_process_counters() {
        let stat = "  100 5 2000 40 300 7 4000 50 0 90 90 0 0 0 0";
        assert_eq!(
            parse_device_stat(stat),
            (Some(2000 * 512), Some(4000 * 512))
        );
        assert_eq!(parse_device_stat("1 2"), (None, None));
        let io = "rchar: 9\nwchar: 9\nsyscr: 1\nsyscw: 1\nread_bytes: 4096\n\
                  write_bytes: 10000\ncancelled_write_bytes: 1000\n";
        assert_eq!(parse_proc_io(io), (Some(4096), Some(9000)));
    }

    #[test]
    fn amp_lines_report_each_ratio() {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::write(dir.path().join("f"), vec![1u8; 8192]).expect("write");
        let before = IoSample {
            process_bytes: Some(0),
            process_read_bytes: Some(0),
            ..IoSample::default()
        };
        let after = IoSample {
            process_bytes: Some(3000),
            process_read_bytes: Some(4000),
            ..IoSample::default()
        };
        let facts = SpanFacts {
            user_written: 1000,
            user_read: 2000,
            live_bytes: Some(4096),
            cpu: Some((0.5, 1.0)),
        };
        let text = amp_lines(None, before, after, facts, dir.path());
        assert!(text.contains("wa_process=3.000"), "{text}");
        assert!(text.contains("ra_process=2.000"), "{text}");
        assert!(text.contains("space_amp=2.000"), "{text}");
        assert!(text.contains("cpu=50%"), "{text}");
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn cpu_time_is_readable_and_monotonic() {
        let a = cpu_seconds().expect("getrusage works");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = cpu_seconds().expect("getrusage works");
        assert!(b >= a);
    }

    #[test]
    fn dir_size_counts_nested_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub/f"), vec![1u8; 10_000]).expect("write");
        assert!(dir_size_on_disk(dir.path()) >= 10_000);
        assert_eq!(dir_size_on_disk(&dir.path().join("missing")), 0);
    }
}
