//! `--mem_limit`: moves this process into a memory cgroup with a hard limit before the
//! database opens, so that a database several times larger than the limit is read from the
//! device rather than from the page cache (the page cache a cgroup's processes fill is charged
//! to it). Works with cgroup v2 (the unified hierarchy with the memory controller) or v1 (the
//! `memory` hierarchy), whichever the machine has; bench/cgexec.sh does the same for the peer
//! programs, so every engine can be limited alike.
//!
//! The cgroup is `<root>/wisckey-bench-<name>` (v2) or `<root>/memory/wisckey-bench-<name>`
//! (v1), created if missing and left behind for the next run; the whole process moves (all
//! threads, and threads started later). Pages charged before the move stay where they were,
//! which is why the scripts drop the page cache first. Needs permission to write the cgroup
//! files (root, or a delegated subtree).

use std::path::{Path, PathBuf};

/// The machine's cgroup mount point.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// A memory cgroup this process was moved into.
#[derive(Debug)]
pub struct MemoryLimit {
    pub version: CgroupVersion,
    pub dir: PathBuf,
    pub bytes: u64,
}

impl MemoryLimit {
    /// Moves the current process into `wisckey-bench-<name>` under `root`, limited to `bytes`.
    pub fn enter(root: &Path, name: &str, bytes: u64) -> Result<MemoryLimit, String> {
        if bytes == 0 {
            return Err("--mem_limit must be positive".to_string());
        }
        let group = format!("wisckey-bench-{name}");
        let version = detect(root)?;
        let dir = match version {
            CgroupVersion::V2 => root.join(&group),
            CgroupVersion::V1 => root.join("memory").join(&group),
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("--mem_limit: create {}: {e}", dir.display()))?;
        let limit_file = match version {
            CgroupVersion::V2 => "memory.max",
            CgroupVersion::V1 => "memory.limit_in_bytes",
        };
        write(&dir.join(limit_file), &bytes.to_string())?;
        // Peak counters reset so that the figure printed at the end belongs to this run; a
        // kernel without resettable peaks (v2 before 6.12) keeps the old one, which is noted.
        let peak_file = match version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        };
        let _ = std::fs::write(dir.join(peak_file), "0");
        write(&dir.join("cgroup.procs"), &std::process::id().to_string())?;
        Ok(MemoryLimit {
            version,
            dir,
            bytes,
        })
    }

    /// Highest memory use the cgroup has recorded (page cache included), if readable.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The header line describing the limit.
    pub fn describe(&self) -> String {
        let version = match self.version {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        };
        format!(
            "{} MiB (cgroup {version} {})",
            self.bytes >> 20,
            self.dir.display()
        )
    }
}

/// v2 when `root` is a unified hierarchy offering the memory controller, else v1 when it has
/// a `memory` hierarchy, else an error saying what was looked for.
pub fn detect(root: &Path) -> Result<CgroupVersion, String> {
    if let Ok(controllers) = std::fs::read_to_string(root.join("cgroup.controllers")) {
        if controllers.split_whitespace().any(|c| c == "memory") {
            return Ok(CgroupVersion::V2);
        }
    }
    if root.join("memory").is_dir() {
        return Ok(CgroupVersion::V1);
    }
    Err(format!(
        "--mem_limit: no memory cgroup under {} (looked for cgroup v2 with the memory \
         controller in cgroup.controllers, and for a v1 memory/ hierarchy)",
        root.display()
    ))
}

/// `1073741824`, `1G`, `1GiB`, `512M`, `512MiB`, `64K` (binary units; case-insensitive).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("bad size '{text}' (e.g. 1G, 512M, 1073741824)"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("bad size unit in '{text}' (use K, M, G or T)")),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size '{text}' is too large"))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("--mem_limit: write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("1073741824"), Ok(1 << 30));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert!(parse_size("").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn v2_is_chosen_when_the_unified_root_offers_memory() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            root.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .expect("write");
        std::fs::create_dir(root.path().join("memory")).expect("mkdir");
        assert_eq!(detect(root.path()), Ok(CgroupVersion::V2));
        let limit = MemoryLimit::enter(root.path(), "t", 1 << 30).expect("enter");
        let dir = root.path().join("wisckey-bench-t");
        assert_eq!(limit.dir, dir);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read");
        assert_eq!(read("memory.max"), (1u64 << 30).to_string());
        assert_eq!(read("cgroup.procs"), std::process::id().to_string());
        assert!(limit.describe().starts_with("1024 MiB (cgroup v2 "));
    }

    #[test]
    fn v1_is_chosen_when_only_the_memory_hierarchy_exists() {
        let root = tempfile::tempdir().expect("tempdir");
        // A hybrid machine: a unified mount without controllers, memory on v1.
        std::fs::write(root.path().join("cgroup.controllers"), "\n").expect("write");
        std::fs::create_dir(root.path().join("memory")).expect("mkdir");
        assert_eq!(detect(root.path()), Ok(CgroupVersion::V1));
        let limit = MemoryLimit::enter(root.path(), "t", 512 << 20).expect("enter");
        let dir = root.path().join("memory/wisckey-bench-t");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read");
        assert_eq!(read("memory.limit_in_bytes"), (512u64 << 20).to_string());
        assert_eq!(read("cgroup.procs"), std::process::id().to_string());
        std::fs::write(dir.join("memory.max_usage_in_bytes"), "4096\n").expect("write");
        assert_eq!(limit.peak_bytes(), Some(4096));
    }

    #[test]
    fn no_memory_cgroup_is_a_clear_error() {
        let root = tempfile::tempdir().expect("tempdir");
        let err = detect(root.path()).expect_err("nothing to use");
        assert!(err.contains("no memory cgroup"), "{err}");
        let err = MemoryLimit::enter(root.path(), "t", 0).expect_err("zero");
        assert!(err.contains("positive"), "{err}");
    }
}
