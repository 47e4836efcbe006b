//! I/O accounting for the benchmark report: bytes written by the block device holding the
//! database (`/sys/dev/block/MAJ:MIN/stat`, sectors written, 512-byte units), bytes this
//! process caused to be written (`/proc/self/io`, `write_bytes - cancelled_write_bytes`,
//! covers all threads), and the space the database directory takes on disk (allocated
//! blocks, so sparse preallocated files count for what they use). The device counter sees
//! every process on the machine, so on a shared machine it is an upper bound; the process
//! counter sees only us. Both are sampled after a `sync`, outside the timed region.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the device counter is read from.
#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    stat_path: PathBuf,
}

/// One sample of both write counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoSample {
    pub device_bytes: Option<u64>,
    pub process_bytes: Option<u64>,
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
    IoSample {
        device_bytes: device.and_then(|d| read_device_written(&d.stat_path)),
        process_bytes: read_process_written(),
    }
}

fn read_device_written(stat_path: &Path) -> Option<u64> {
    let text = fs::read_to_string(stat_path).ok()?;
    // Field 7 (1-based) is sectors written; sectors are always 512 bytes here.
    let sectors: u64 = text.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

fn read_process_written() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let written = field("write_bytes:")?;
    let cancelled = field("cancelled_write_bytes:").unwrap_or(0);
    Some(written.saturating_sub(cancelled))
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

/// The second report line: write amplification by device and by process, and DB size.
/// Format shared with the peers and parsed by `bench/run-side-by-side.sh`.
pub fn io_line(
    device: Option<&Device>,
    before: IoSample,
    after: IoSample,
    user_bytes: u64,
    db_dir: &Path,
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
        mb(dir_size_on_disk(db_dir))
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
    fn dir_size_counts_nested_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub/f"), vec![1u8; 10_000]).expect("write");
        assert!(dir_size_on_disk(dir.path()) >= 10_000);
        assert_eq!(dir_size_on_disk(&dir.path().join("missing")), 0);
    }
}
