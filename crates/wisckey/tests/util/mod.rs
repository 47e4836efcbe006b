//! Small helpers shared by integration tests that do not need `common`'s `HookFs`. Each
//! test binary uses some of them, so each is allowed to be unused in the others.

use std::path::Path;

use wisckey::fs::FileSystem;

/// Whole 4 KiB blocks of the value-log files in `dir` that read as zeros (on `MemFs`, the
/// blocks GC punched out).
#[allow(dead_code)]
pub fn zeroed_log_blocks(fs: &dyn FileSystem, dir: &Path) -> u64 {
    let mut zeroed = 0;
    for name in fs.list(dir).expect("list") {
        if !name.ends_with(".vlog") {
            continue;
        }
        let file = fs.open_read(&dir.join(&name)).expect("open");
        let mut block = vec![0u8; 4096];
        let mut offset = 0;
        while file.read_at(offset, &mut block).expect("read") == block.len() {
            zeroed += u64::from(block.iter().all(|&b| b == 0));
            offset += 4096;
        }
    }
    zeroed
}
