//! Names of the files in a database directory. All numbered files share one counter kept
//! in the manifest (`next_file_number`) except value-log segments, which have their own
//! sequence (segments are ordered by number; replay walks them in order).
//!
//! | file               | name                |
//! |--------------------|---------------------|
//! | sorted table       | `000123.sst`        |
//! | value-log segment  | `000007.vlog`       |
//! | manifest           | `MANIFEST-000004`   |
//! | current pointer    | `CURRENT`           |
//! | lock               | `LOCK`              |
//! | temporary          | `000009.tmp`        |
//! | disk-space reserve | `RESERVE`           |

use std::path::{Path, PathBuf};

pub const CURRENT: &str = "CURRENT";
pub const LOCK: &str = "LOCK";
pub const RESERVE: &str = "RESERVE";
/// Marks a checkpoint's directory while it is being copied (removed once its CURRENT is in
/// place): a copy cut short is refused by open, never taken for a new database.
pub const CHECKPOINT_INCOMPLETE: &str = "CHECKPOINT-INCOMPLETE";

/// What a file in the database directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Table(u64),
    ValueLog(u64),
    Manifest(u64),
    Temp(u64),
    Current,
    Lock,
    Reserve,
    CheckpointIncomplete,
}

pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

pub fn vlog_file_name(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:06}.vlog"))
}

pub fn manifest_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("MANIFEST-{number:06}"))
}

pub fn temp_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.tmp"))
}

/// Classifies a directory entry; `None` for names wisckey never writes.
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        CURRENT => return Some(FileKind::Current),
        LOCK => return Some(FileKind::Lock),
        RESERVE => return Some(FileKind::Reserve),
        CHECKPOINT_INCOMPLETE => return Some(FileKind::CheckpointIncomplete),
        _ => {}
    }
    if let Some(num) = name.strip_prefix("MANIFEST-") {
        return parse_number(num).map(FileKind::Manifest);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let number = parse_number(stem)?;
    match ext {
        "sst" => Some(FileKind::Table(number)),
        "vlog" => Some(FileKind::ValueLog(number)),
        "tmp" => Some(FileKind::Temp(number)),
        _ => None,
    }
}

/// The largest number a file of ours can carry: far beyond any count of files a database
/// makes (one a microsecond for nine years), far enough from `u64::MAX` that the counters
/// derived from it cannot wrap. A name with a larger number is not ours.
pub const MAX_FILE_NUMBER: u64 = 1 << 48;

fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A stray `18446744073709551615.tmp` marked "used" would make the next number wrap to
    // 0 and then reuse (and truncate) live tables' numbers.
    let number = s.parse().ok().filter(|&n| n <= MAX_FILE_NUMBER)?;
    // Only the spelling wisckey writes (at least six digits, no other leading zeros):
    // `1.sst` or `0000005.sst` is someone else's file, which the obsolete-file sweep must
    // not delete and repair must not take for one of ours (it moved CURRENT aside, then
    // failed to move the file under the name it rebuilt).
    (format!("{number:06}") == s).then_some(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_numbers_near_the_counters_limit_are_not_ours() {
        assert_eq!(parse_file_name("18446744073709551615.tmp"), None);
        assert_eq!(parse_file_name("MANIFEST-18446744073709551614"), None);
        assert_eq!(
            parse_file_name(&format!("{}.sst", MAX_FILE_NUMBER)),
            Some(FileKind::Table(MAX_FILE_NUMBER))
        );
    }

    #[test]
    fn only_the_names_wisckey_writes_are_ours() {
        for name in [
            "1.sst",
            "12.tmp",
            "MANIFEST-1",
            "0000005.sst",
            "01000000.vlog",
            "00012.vlog",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
        assert_eq!(parse_file_name("000005.sst"), Some(FileKind::Table(5)));
        assert_eq!(parse_file_name("000000.tmp"), Some(FileKind::Temp(0)));
        assert_eq!(
            parse_file_name("1000000.vlog"),
            Some(FileKind::ValueLog(1_000_000))
        );
    }

    #[test]
    fn names_round_trip() {
        let dir = Path::new("/db");
        let cases = [
            (table_file_name(dir, 12), FileKind::Table(12)),
            (vlog_file_name(dir, 3), FileKind::ValueLog(3)),
            (
                manifest_file_name(dir, 1_000_000),
                FileKind::Manifest(1_000_000),
            ),
            (temp_file_name(dir, 5), FileKind::Temp(5)),
        ];
        for (path, kind) in cases {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("utf-8 name");
            assert_eq!(parse_file_name(name), Some(kind));
        }
        assert_eq!(parse_file_name("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse_file_name("LOG"), None);
        assert_eq!(parse_file_name("x.sst"), None);
        assert_eq!(parse_file_name("-1.sst"), None);
    }
}
