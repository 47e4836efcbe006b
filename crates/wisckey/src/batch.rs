//! `WriteBatch`: several puts and deletes applied atomically, in order.
//!
//! A batch is written to the value log as consecutive records with consecutive sequence
//! numbers, the last one flagged as the end of the batch, so recovery applies it entirely
//! or not at all.

use crate::error::{Error, Result};
use crate::key::ValueKind;

/// One operation of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchOp {
    pub kind: ValueKind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// An ordered list of puts and deletes applied atomically by `Db::write`: after a crash
/// either all of it is in the database or none of it.
///
/// ```
/// # fn main() -> wisckey::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = wisckey::Db::open(dir.path(), wisckey::Options::default())?;
/// let mut batch = wisckey::WriteBatch::new();
/// batch.put("user:1", "ann").put("user:2", "bob").delete("user:0");
/// assert_eq!(batch.len(), 3);
/// db.write(batch)?;
/// assert_eq!(db.get("user:2")?, Some(b"bob".to_vec()));
///
/// // A batch is reusable once cleared (it keeps its allocation).
/// let mut batch = wisckey::WriteBatch::new();
/// for i in 0..100 {
///     batch.put(format!("n{i}"), i.to_string());
///     if batch.payload_bytes() > 1 << 20 {
///         db.write(std::mem::take(&mut batch))?;
///     }
/// }
/// db.write(batch)?;
/// assert_eq!(db.get("n99")?, Some(b"99".to_vec()));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    bytes: usize,
    /// The first operation refused for its size: it was not copied, and writing the batch
    /// returns this error (a batch is all or nothing).
    refused: Option<String>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a put. A later operation on the same key in the batch wins. A key over
    /// [`crate::MAX_KEY_SIZE`] or a value over [`crate::MAX_VALUE_SIZE`] is not copied; the
    /// batch then fails with `InvalidArgument` when written.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.push(ValueKind::Value, key.as_ref(), value.as_ref())
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(ValueKind::Deletion, key.as_ref(), &[])
    }

    /// [`WriteBatch::put`], refusing a key or value over the limits at once
    /// (`InvalidArgument`, naming the limit) and leaving the batch as it was, instead of
    /// failing the whole batch when it is written. For callers that add entries one by one
    /// on behalf of a user (a language binding) and can report each refusal where it
    /// happened.
    pub fn try_put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<&mut Self> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.check_addable(key.len(), value.len())?;
        Ok(self.push(ValueKind::Value, key, value))
    }

    /// [`WriteBatch::delete`], refusing a key over the limit at once (see
    /// [`WriteBatch::try_put`]).
    pub fn try_delete(&mut self, key: impl AsRef<[u8]>) -> Result<&mut Self> {
        let key = key.as_ref();
        self.check_addable(key.len(), 0)?;
        Ok(self.push(ValueKind::Deletion, key, &[]))
    }

    /// Why an entry of these lengths cannot be added: over the limits, or the batch already
    /// refused one (a plain `put` or `delete` did), so it would keep nothing more.
    fn check_addable(&self, key_len: usize, value_len: usize) -> Result<()> {
        if let Some(why) = &self.refused {
            return Err(Error::InvalidArgument(format!(
                "this batch already refused an entry, and keeps nothing more: {why}"
            )));
        }
        crate::options::check_entry_size(key_len, value_len).map_err(Error::InvalidArgument)
    }

    fn push(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) -> &mut Self {
        if self.refused.is_some() {
            return self;
        }
        // Checked before copying: an oversize value must not cost its size in memory first.
        if let Err(why) = crate::options::check_entry_size(key.len(), value.len()) {
            self.refused = Some(why);
            return self;
        }
        self.bytes += key.len() + value.len();
        self.ops.push(BatchOp {
            kind,
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation. A batch that refused an operation is not
    /// empty, though it holds nothing: writing it fails, and a caller that skips writing
    /// an empty batch must not take the refusal for nothing to do (and acknowledge it).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.refused.is_none()
    }

    /// Total key and value bytes.
    pub fn payload_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether every operation is a delete (true for an empty batch): such writes free
    /// space, so on a full disk they may spend the disk reserve (`db::write`).
    pub(crate) fn deletes_only(&self) -> bool {
        self.ops.iter().all(|op| op.kind == ValueKind::Deletion)
    }

    /// Removes every operation, keeping the allocation.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
        self.refused = None;
    }

    /// Why an operation was refused (see [`WriteBatch::put`]), if one was.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_operations_in_order() {
        let mut b = WriteBatch::new();
        b.put("a", "1").delete("b").put("", "");
        assert_eq!(b.len(), 3);
        assert_eq!(b.payload_bytes(), 3);
        assert_eq!(b.ops[1].kind, ValueKind::Deletion);
        assert_eq!(b.ops[2].key, b"");
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn a_refused_operation_leaves_the_batch_not_empty_until_cleared() {
        let mut b = WriteBatch::new();
        b.put(vec![b'k'; crate::MAX_KEY_SIZE + 1], "v").put("a", "1");
        assert_eq!(b.len(), 0, "neither the refused put nor the one after it is kept");
        assert!(!b.is_empty(), "a refused batch must be written (and fail), not skipped");
        assert!(b.refused().is_some_and(|why| why.contains("maximum key size")));
        b.clear();
        assert!(b.is_empty() && b.refused().is_none());
    }

    #[test]
    fn try_put_and_try_delete_refuse_at_once_and_keep_the_batch() {
        let mut b = WriteBatch::new();
        b.put("a", "1");
        let long_key = vec![b'k'; crate::MAX_KEY_SIZE + 1];
        let refused = (b.try_put(&long_key, "v").map(|_| ())).expect_err("over the key limit");
        assert!(
            matches!(&refused, Error::InvalidArgument(why) if why.contains("maximum key size")),
            "{refused}"
        );
        let refused = (b.try_delete(&long_key).map(|_| ())).expect_err("over the key limit");
        assert!(matches!(refused, Error::InvalidArgument(_)), "{refused}");
        b.try_put("b", "2").expect("in bounds").try_delete("a").expect("in bounds");
        assert_eq!(b.len(), 3, "the refusals left the batch as it was");
        assert!(b.refused().is_none(), "and do not fail it when written");
        // A batch a plain put already refused keeps nothing more: `try_` says so.
        b.put(&long_key, "v");
        let refused = (b.try_put("c", "3").map(|_| ())).expect_err("refused before");
        assert!(
            matches!(&refused, Error::InvalidArgument(why) if why.contains("already refused")),
            "{refused}"
        );
    }
}
