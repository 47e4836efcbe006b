//! Shared by the CLI's integration tests: running the binary, and damaging a value record
//! of a database on disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `wisckey` binary with `args`, its output captured.
pub fn wisckey(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wisckey"))
        .args(args)
        .output()
        .expect("run wisckey")
}

/// Flips one byte inside the value of the record that starts with `value_prefix` (its
/// first bytes, unique in the log) in the first value-log segment of `dir`, 100 bytes in;
/// returns the segment's path and the damaged byte's offset.
// Each test crate compiles this module; not all of them damage values.
#[allow(dead_code)]
pub fn damage_value(dir: &Path, value_prefix: &[u8]) -> (PathBuf, u64) {
    let segment = dir.join("000001.vlog");
    let mut bytes = std::fs::read(&segment).expect("read segment");
    let at = (bytes.windows(value_prefix.len()))
        .position(|w| w == value_prefix)
        .expect("the value is in the log")
        + 100;
    bytes[at] ^= 0xff;
    std::fs::write(&segment, &bytes).expect("damage");
    (segment, at as u64)
}
