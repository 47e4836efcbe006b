//! [`DirectWritable`]: an append-only file written with `O_DIRECT`, so appended bytes go
//! from our memory to the device without passing through the page cache. What it is for:
//! on a fast device a large load is bound by the kernel's cost of copying every byte into
//! the page cache, writing it back and reclaiming it under a memory limit; with direct
//! writes the device's DMA does that work (measured in `docs/BENCHMARKS.md`).
//!
//! `O_DIRECT` wants the buffer, the file offset and the length aligned to the device's
//! block size, while a log appends records of any length. So every append rewrites the
//! file's last, partial block: the bytes of that block already appended (kept in memory),
//! then the new data, padded with zeros to a whole block. Invariants:
//! - after an `append` returns, every byte appended so far is in the file (the same promise
//!   a buffered `pwrite` gives), so readers may read it at once through their own handles;
//! - bytes past the logical length `len()` inside the last block are zeros, and the file's
//!   size on disk is `len()` rounded up to [`BLOCK`], or more after `zero_fill` (zero
//!   blocks past it); recovery reads that as the log's torn tail, and
//!   [`DirectWritable::set_len`] (called when a segment is finished or reopened) cuts it
//!   off;
//! - `tail` holds exactly the bytes of the file from `align_down(len)` to `len`.
//!
//! Page-cache coherence: the kernel drops cached pages of a range written directly, so a
//! reader reading through the page cache sees the new bytes. A write never changes bytes
//! before `len` (it rewrites them with the same values), so a reader of a record appended
//! earlier sees the same bytes whichever version of the block it gets.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::WritableFile;
use crate::error::{Error, Result};

/// Alignment of every direct write: buffer address, file offset and length. 4 KiB covers
/// devices with 512-byte and 4 KiB logical blocks.
pub(crate) const BLOCK: usize = 4096;
/// The largest usual write (the value log's default buffer); the staging buffer shrinks back
/// to it after a larger one.
const USUAL_WRITE: usize = 1 << 20;

/// A byte buffer whose usable part starts at a [`BLOCK`]-aligned address. Safe code: the
/// vector is over-allocated by one block and the aligned window found inside it.
#[derive(Debug, Default)]
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Makes room for `len` bytes (a multiple of [`BLOCK`]) and returns them, contents
    /// unspecified.
    fn window(&mut self, len: usize) -> &mut [u8] {
        if self.storage.len() < len + BLOCK {
            self.storage = vec![0; len + BLOCK];
            self.start = self.storage.as_ptr().align_offset(BLOCK);
        }
        self.len = len;
        &mut self.storage[self.start..self.start + len]
    }

    fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    /// Gives back memory after a write much larger than usual.
    fn shrink_to(&mut self, keep: usize) {
        if self.storage.len() > 2 * (keep + BLOCK) {
            self.storage = Vec::new();
            self.len = 0;
        }
    }
}

/// An append-only file written with `O_DIRECT` (see the module docs).
#[derive(Debug)]
pub(crate) struct DirectWritable {
    file: File,
    path: PathBuf,
    /// Logical length: bytes appended.
    len: u64,
    /// The file's bytes from `align_down(len)` to `len` (less than one block).
    tail: Vec<u8>,
    /// `tail` could not be read back after a `set_len`: an append would write its block
    /// without the bytes before `len` in it, over what the file holds there. Appends refuse
    /// until a `set_len` reads it back.
    tail_unknown: bool,
    staging: AlignedBuf,
}

fn io_err(op: &str, path: &Path, e: io::Error) -> Error {
    Error::io(format!("{op} {}", path.display()), e)
}

fn align_down(n: u64) -> u64 {
    n - n % BLOCK as u64
}

impl DirectWritable {
    /// Opens `path` for direct appends, creating (and truncating) it when `create`. Fails
    /// where the file system does not support `O_DIRECT` (the caller falls back).
    pub(crate) fn open(path: &Path, create: bool) -> Result<DirectWritable> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).custom_flags(libc::O_DIRECT);
        if create {
            options.create(true).truncate(true);
        }
        let file = options
            .open(path)
            .map_err(|e| io_err("open (O_DIRECT)", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| io_err("open (stat)", path, e))?
            .len();
        let mut writable = DirectWritable {
            file,
            path: path.to_path_buf(),
            len,
            tail: Vec::new(),
            tail_unknown: false,
            staging: AlignedBuf::default(),
        };
        writable.load_tail()?;
        Ok(writable)
    }

    /// Writes the staging buffer's window whole at `offset` (both block-aligned); `op`
    /// names the call in errors.
    fn write_staged(&self, offset: u64, op: &str) -> Result<()> {
        let bytes = self.staging.bytes();
        let mut written = 0;
        while written < bytes.len() {
            // A short direct write ends on a block boundary; go on from there.
            match self
                .file
                .write_at(&bytes[written..], offset + written as u64)
            {
                Ok(0) => return Err(io_err(op, &self.path, io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(op, &self.path, e)),
            }
        }
        Ok(())
    }

    /// Reads the bytes of the last partial block into `tail`.
    fn load_tail(&mut self) -> Result<()> {
        let start = align_down(self.len);
        let want = (self.len - start) as usize;
        self.tail.clear();
        if want == 0 {
            return Ok(());
        }
        // Direct reads must be whole blocks too: read the block, keep its head.
        let block = self.staging.window(BLOCK);
        let got = loop {
            match self.file.read_at(block, start) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err("read tail (O_DIRECT)", &self.path, e)),
            }
        };
        if got < want {
            return Err(Error::corruption(
                self.path.display().to_string(),
                start,
                format!("short read of the last block: wanted {want} bytes, got {got}"),
            ));
        }
        self.tail.extend_from_slice(&self.staging.bytes()[..want]);
        Ok(())
    }
}

impl WritableFile for DirectWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.tail_unknown {
            return Err(io_err(
                "append (O_DIRECT)",
                &self.path,
                io::Error::other("the last block was not read back after the file was cut"),
            ));
        }
        let start = align_down(self.len);
        let head = self.tail.len();
        let used = head + data.len();
        let padded = used.div_ceil(BLOCK) * BLOCK;
        let window = self.staging.window(padded);
        window[..head].copy_from_slice(&self.tail);
        window[head..used].copy_from_slice(data);
        window[used..].fill(0);
        // Part of the write may land past `len` and then fail; the logical length stays
        // where it was, and the caller cuts the file back with `set_len`.
        self.write_staged(start, "append (O_DIRECT)")?;
        self.len += data.len() as u64;
        let keep = (self.len - align_down(self.len)) as usize;
        self.tail.clear();
        self.tail
            .extend_from_slice(&self.staging.bytes()[used - keep..used]);
        self.staging.shrink_to(USUAL_WRITE);
        Ok(())
    }

    fn sync_data(&mut self) -> Result<()> {
        // Direct writes bypass the page cache, not the device's cache or the file's
        // metadata (its size, newly written extents): fdatasync still makes them durable.
        self.file
            .sync_data()
            .map_err(|e| io_err("sync_data", &self.path, e))
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| io_err("set_len", &self.path, e))?;
        self.len = len;
        let loaded = self.load_tail();
        self.tail_unknown = loaded.is_err();
        loaded
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn preallocate(&mut self, up_to: u64) -> Result<()> {
        super::posix::preallocate(&self.file, &self.path, self.len, up_to)
    }

    /// Whole zero blocks from the first block boundary at or after `from` up to `to` rounded
    /// up: the block holding `len` is left alone (its bytes past `len` are zeros already,
    /// and every append rewrites it).
    fn zero_fill(&mut self, from: u64, to: u64) -> Result<bool> {
        const CHUNK: usize = 64 << 10;
        if from < self.len {
            return Err(Error::InvalidArgument(format!(
                "zero_fill {}: {from} lies before the append position {}",
                self.path.display(),
                self.len
            )));
        }
        let block = BLOCK as u64;
        let mut at = from.div_ceil(block) * block;
        let end = to.div_ceil(block) * block;
        while at < end {
            let n = (end - at).min(CHUNK as u64) as usize;
            self.staging.window(n).fill(0);
            self.write_staged(at, "zero_fill (O_DIRECT)")?;
            at += n as u64;
        }
        self.staging.shrink_to(USUAL_WRITE);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct-write file in a fresh directory, or `None` (with a note) where the file
    /// system refuses `O_DIRECT`: then `PosixFs` falls back to buffered files, tested
    /// elsewhere.
    fn direct_file(dir: &Path) -> Option<DirectWritable> {
        match DirectWritable::open(&dir.join("log"), true) {
            Ok(file) => Some(file),
            Err(Error::Io { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("O_DIRECT not supported under {}: skipped", dir.display());
                None
            }
            Err(e) => panic!("open: {e}"),
        }
    }

    /// The file's bytes as a buffered reader sees them.
    fn contents(dir: &Path) -> Vec<u8> {
        std::fs::read(dir.join("log")).expect("read back")
    }

    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (seed * 31 + i * 7) as u8).collect()
    }

    /// After a cut whose read-back of the last block failed (`tail_unknown`; an EIO there
    /// cannot be staged on a real file, so the state is set here), an append refuses: it
    /// would write its block from offset `align_down(len)` without the bytes before `len`,
    /// over records the file holds. A later cut that reads the block back clears it.
    #[test]
    fn an_append_after_a_failed_read_back_of_the_last_block_refuses() {
        let temp = tempfile::tempdir().expect("tempdir");
        let Some(mut file) = direct_file(temp.path()) else {
            return;
        };
        let first = pattern(1, 5000);
        file.append(&first).expect("append");
        file.tail_unknown = true;
        assert!(file.append(b"more").is_err(), "refused");
        assert_eq!(
            &contents(temp.path())[..5000],
            &first[..],
            "nothing overwritten"
        );
        file.set_len(5000)
            .expect("cut again, reading the block back");
        file.append(b"more").expect("append after the cut");
        let on_disk = contents(temp.path());
        assert_eq!(&on_disk[..5000], &first[..]);
        assert_eq!(&on_disk[5000..5004], b"more");
    }

    #[test]
    fn appends_of_any_length_are_readable_at_once_and_padded_with_zeros() {
        let temp = tempfile::tempdir().expect("tempdir");
        let Some(mut file) = direct_file(temp.path()) else {
            return;
        };
        let mut expected = Vec::new();
        // Lengths that start and end inside blocks, fill a block exactly, and span several.
        for (i, len) in [1usize, 17, 4078, 4096, 5000, 3, 12_288, 100, 65_536, 1]
            .into_iter()
            .enumerate()
        {
            let data = pattern(i, len);
            file.append(&data).expect("append");
            expected.extend_from_slice(&data);
            assert_eq!(file.len(), expected.len() as u64);
            let on_disk = contents(temp.path());
            assert_eq!(on_disk.len() % BLOCK, 0, "the size is whole blocks");
            assert_eq!(
                &on_disk[..expected.len()],
                &expected[..],
                "after append {i}"
            );
            assert!(
                on_disk[expected.len()..].iter().all(|&b| b == 0),
                "zeros past the logical end"
            );
        }
        file.sync_data().expect("sync");
    }

    #[test]
    fn appends_overwrite_zero_filled_blocks_and_set_len_cuts_them() {
        let temp = tempfile::tempdir().expect("tempdir");
        let Some(mut file) = direct_file(temp.path()) else {
            return;
        };
        let first = pattern(3, 5_000);
        file.append(&first).expect("append");
        assert!(file.zero_fill(5_000, 150_000).expect("zero fill"));
        assert_eq!(file.len(), 5_000, "the append position stays");
        assert_eq!(
            contents(temp.path()).len(),
            150_000_usize.div_ceil(BLOCK) * BLOCK
        );
        assert!(
            file.zero_fill(100, 200).is_err(),
            "never over appended bytes"
        );
        let second = pattern(4, 70_000);
        file.append(&second).expect("append");
        let on_disk = contents(temp.path());
        assert_eq!(&on_disk[..5_000], &first[..]);
        assert_eq!(&on_disk[5_000..75_000], &second[..]);
        assert!(on_disk[75_000..].iter().all(|&b| b == 0));
        file.set_len(file.len()).expect("cut");
        assert_eq!(contents(temp.path()).len(), 75_000);
    }

    #[test]
    fn set_len_and_reopen_continue_from_the_logical_end() {
        let temp = tempfile::tempdir().expect("tempdir");
        let Some(mut file) = direct_file(temp.path()) else {
            return;
        };
        let first = pattern(1, 10_000);
        file.append(&first).expect("append");
        // Cut back inside a block: the next append rewrites that block from the cut.
        file.set_len(6_000).expect("set_len");
        assert_eq!(
            contents(temp.path()).len(),
            6_000,
            "set_len sets the real size"
        );
        let second = pattern(2, 3_000);
        file.append(&second).expect("append after set_len");
        let mut expected = first[..6_000].to_vec();
        expected.extend_from_slice(&second);
        assert_eq!(&contents(temp.path())[..expected.len()], &expected[..]);
        drop(file);

        // Reopened (as the value-log writer does after a restart): the size on disk is
        // padded; cutting it to the logical end and appending goes on seamlessly.
        let mut file = DirectWritable::open(&temp.path().join("log"), false).expect("reopen");
        assert_eq!(file.len(), 3 * BLOCK as u64, "padded size before the cut");
        file.set_len(expected.len() as u64).expect("cut");
        let third = pattern(3, 2_500);
        file.append(&third).expect("append after reopen");
        expected.extend_from_slice(&third);
        let on_disk = contents(temp.path());
        assert_eq!(&on_disk[..expected.len()], &expected[..]);
        assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn posix_fs_writes_direct_where_it_can_and_falls_back_where_it_cannot() {
        use crate::fs::{FileSystem, PosixFs};
        let temp = tempfile::tempdir().expect("tempdir");
        let path = temp.path().join("log");
        let fs = PosixFs::new();
        let mut file = fs.create_direct(&path).expect("create_direct");
        file.append(b"hello").expect("append");
        assert_eq!(file.len(), 5);
        let mut again = fs.open_append_direct(&path).expect("open_append_direct");
        // Direct: the size is padded to a block; buffered (no O_DIRECT here): exact.
        assert!(
            again.len() == 5 || again.len() == BLOCK as u64,
            "{}",
            again.len()
        );
        again.set_len(5).expect("cut");
        again.append(b", world").expect("append");
        assert_eq!(&std::fs::read(&path).expect("read")[..12], b"hello, world");
    }
}
