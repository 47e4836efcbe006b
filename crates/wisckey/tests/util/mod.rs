//! Small helpers shared by integration tests that do not need `common`'s `HookFs`. Each
//! test binary uses some of them, so each is allowed to be unused in the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wisckey::fs::{FileSystem, MemFs};
use wisckey::{Db, ReadOptions};

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

/// Every key and its value, read through an iterator (which fails on a value it cannot
/// read, as a reopened database must not).
#[allow(dead_code)]
pub fn read_all(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db
        .iter(&ReadOptions::default())
        .expect("iter after recovery");
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().expect("value after recovery"));
        it.next();
    }
    it.status().expect("iterator status after recovery");
    out
}

/// The files at the top of the real directory `dir` (LOCK aside), copied into a new `MemFs`
/// under `at`, every byte and name durable: a database built on disk (with the damage a
/// test gave it), on a file system whose power cuts `MemFs::power_loss_image` can take.
#[allow(dead_code)]
pub fn durable_mem_copy(dir: &Path, at: &Path) -> MemFs {
    let mem = MemFs::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if entry.file_type().expect("type").is_file() && name != "LOCK" {
            let bytes = std::fs::read(entry.path()).expect("read");
            mem.set_contents(&at.join(name), &bytes).expect("copy");
        }
    }
    mem.sync_dir(at).expect("sync_dir");
    mem
}

/// The first file of `mem` whose bytes are `bytes`: where a file set aside as it was is.
#[allow(dead_code)]
pub fn file_holding(mem: &MemFs, bytes: &[u8]) -> Option<PathBuf> {
    (mem.file_names().into_iter()).find(|path| mem.contents(path).as_deref() == Some(bytes))
}
