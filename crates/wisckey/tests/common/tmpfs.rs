//! Shared by the real-full-disk tests (`hardening.rs` here, and the CLI's
//! `operator_errors.rs`, which include it with `#[path]`): a tmpfs of a few MiB mounted for
//! one test, so ENOSPC comes from a real file system rather than an injected fault.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for one test and unmounted when dropped (needs root).
pub struct TmpfsMount {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TmpfsMount {
    /// A tmpfs of `mib` MiB, or `None` where none can be mounted (not root, no mount rights):
    /// `test` then skips, saying so. Under CI (`CI` set) that fails instead, as a missing
    /// redis-cli does for the server's tests: these are the only tests of a real full disk.
    pub fn or_skip(mib: u32, test: &str) -> Option<TmpfsMount> {
        let mount = TmpfsMount::new(mib);
        if mount.is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: could not mount a tmpfs under CI (needs root and mount rights)"
            );
            eprintln!("SKIPPED {test}: could not mount a tmpfs (needs root and mount rights)");
        }
        mount
    }

    fn new(mib: u32) -> Option<TmpfsMount> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        status.success().then(|| TmpfsMount {
            path: dir.path().to_path_buf(),
            _dir: dir,
        })
    }

    /// Where the tmpfs is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}
