//! [`ValueLog`]: the value log as one object — the single writer behind its lock, the shared
//! reader, and the positions the writer publishes so that readers and memtable switches need
//! not take the writer's lock (it is held across fsyncs).
//!
//! Invariants:
//! - a failed writer call made through [`ValueLog::with_writer`] poisons the writer before
//!   its lock is released, so no later append can land where discarded (possibly already
//!   acknowledged) records were; callers that take the lock themselves
//!   ([`ValueLog::lock_writer`]) keep the same rule;
//! - the published positions never run ahead of the writer: `flushed_end` has reached the
//!   OS and `end` is where the next record goes, as of the last publish;
//! - a record is read from the write buffer only while it is not yet flushed; everything
//!   else is a verified positional read by [`VlogReader`].
//!
//! Like the rest of `vlog`, it knows nothing of the LSM-tree: which segments are live is the
//! key index's knowledge (the `Version`), checked by the caller before a read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::reader::extract_value;
use super::{LiveRange, ValuePointer, VlogOptions, VlogReader, VlogWriter};
use crate::error::{Error, Result};
use crate::position::LogPosition;

/// Where a pointer's value comes from: already read out of the write buffer, or a
/// positional read of a log file still to do, checked against the log's end as of now.
#[derive(Debug)]
pub enum PointerRead {
    Buffered(Vec<u8>),
    File { ptr: ValuePointer, live: LiveRange },
}

#[derive(Debug, Clone, Copy)]
struct Published {
    end: LogPosition,
    flushed_end: LogPosition,
}

/// The value log: writer, reader and published positions.
#[derive(Debug)]
pub struct ValueLog {
    writer: Mutex<VlogWriter>,
    reader: Arc<VlogReader>,
    published: Mutex<Published>,
    options: VlogOptions,
    last_write_out: Mutex<Instant>,
}

impl ValueLog {
    pub fn new(writer: VlogWriter, reader: VlogReader, options: VlogOptions) -> ValueLog {
        let published = Published {
            end: writer.end(),
            flushed_end: writer.flushed_end(),
        };
        ValueLog {
            writer: Mutex::new(writer),
            reader: Arc::new(reader),
            published: Mutex::new(published),
            options,
            last_write_out: Mutex::new(Instant::now()),
        }
    }

    /// Runs `op` on the writer, then publishes its positions. If `op` fails, the writer is
    /// poisoned before the lock is released; the caller decides whether to latch the error.
    /// A panic in `op` is such a failure (`Error::Internal`): what it left half done (a
    /// buffer partly written out, its length not counted) must not be written again.
    pub fn with_writer<T>(&self, op: impl FnOnce(&mut VlogWriter) -> Result<T>) -> Result<T> {
        let mut writer = self.writer.lock();
        let result = crate::error::catch_panic("a value-log writer call", || op(&mut writer));
        if let Err(e) = &result {
            writer.poison(e.clone());
        }
        self.publish(&writer);
        result
    }

    /// The writer's lock, for a caller that must tell a clean failure from one that poisons
    /// (the write leader's space reservation). It must poison the writer itself on any
    /// failure after buffering, and [`ValueLog::publish`] before releasing the lock.
    pub fn lock_writer(&self) -> MutexGuard<'_, VlogWriter> {
        self.writer.lock()
    }

    /// Publishes `writer`'s positions (call with its lock held).
    pub fn publish(&self, writer: &VlogWriter) {
        *self.published.lock() = Published {
            end: writer.end(),
            flushed_end: writer.flushed_end(),
        };
    }

    /// Where the next record goes, as last published (exact while write leadership is held).
    pub fn end(&self) -> LogPosition {
        self.published.lock().end
    }

    /// Everything before this has reached the OS, as last published (it may lag).
    pub fn flushed_end(&self) -> LogPosition {
        self.published.lock().flushed_end
    }

    pub fn reader(&self) -> &Arc<VlogReader> {
        &self.reader
    }

    pub fn options(&self) -> &VlogOptions {
        &self.options
    }

    /// Time since the buffer was last written out.
    pub fn since_write_out(&self) -> Duration {
        self.last_write_out.lock().elapsed()
    }

    /// Records that the buffer was just written out.
    pub fn wrote_out(&self) {
        *self.last_write_out.lock() = Instant::now();
    }

    /// Where the record `ptr` addresses is read from: the write buffer (returned verified:
    /// checksum, length, kind and `key`) while it is not yet flushed, else a file read to do.
    /// A length no record can have is `Corruption` here, before any caller sizes a buffer
    /// by it (a damaged pointer may claim up to 4 GiB).
    pub fn locate(&self, ptr: &ValuePointer, key: &[u8]) -> Result<PointerRead> {
        if !self.options.record_len_possible(ptr.len) {
            return Err(Error::corruption(
                crate::filename::vlog_file_name(self.reader.dir(), ptr.segment)
                    .display()
                    .to_string(),
                ptr.offset,
                "value pointer: impossible record length",
            ));
        }
        let record_end = LogPosition::new(ptr.segment, ptr.end());
        // The published position may lag behind the writer; only when the record looks
        // unflushed is the writer consulted.
        let mut flushed = self.flushed_end();
        if record_end > flushed {
            let writer = self.writer.lock();
            if let Some(bytes) = writer.read_buffered(ptr) {
                let value =
                    extract_value(&bytes, ptr, key, &self.options, "value-log write buffer")?;
                return Ok(PointerRead::Buffered(value));
            }
            flushed = writer.flushed_end();
            // Past what reached the file and not in the buffer: after a failed write-out
            // that is a record the failure took with it (the buffer was dropped), so the
            // read fails with that failure, not as damage. No stored byte is damaged.
            if let Some(failure) = writer.failure().filter(|_| record_end > flushed) {
                return Err(failure.clone());
            }
        }
        Ok(PointerRead::File {
            ptr: *ptr,
            live: LiveRange { end: flushed },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::vlog::RECORD_HEADER_LEN;

    /// A damaged pointer's length is refused before a reader sizes a buffer by it.
    #[test]
    fn a_pointer_with_an_impossible_length_is_corruption_before_any_read_is_planned() {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).expect("mkdir");
        let options = VlogOptions::for_tests(1 << 20, 4096);
        let writer =
            VlogWriter::create(Arc::clone(&fs), dir.clone(), 1, options.clone()).expect("create");
        let reader = VlogReader::new(Arc::clone(&fs), dir, options.clone());
        let log = ValueLog::new(writer, reader, options.clone());
        let at = |len: u32| ValuePointer {
            segment: 1,
            offset: 32,
            len,
        };
        for len in [u32::MAX, options.max_record_len() as u32 + 1, 1] {
            let err = log.locate(&at(len), b"k").expect_err("impossible length");
            assert!(
                err.to_string().contains("impossible record length"),
                "{len}: {err}"
            );
        }
        let fits = RECORD_HEADER_LEN as u32 + 10;
        assert!(matches!(
            log.locate(&at(fits), b"k"),
            Ok(PointerRead::File { .. })
        ));
    }
}
