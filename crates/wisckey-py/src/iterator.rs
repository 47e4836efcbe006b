//! `wisckey.Iterator`: entries of a key range at one snapshot, fetched in chunks.
//!
//! No Python object borrows the engine across calls: each chunk is a fresh engine cursor
//! from just past the last key returned (or before it, in reverse) at the same snapshot,
//! so the database can be closed between chunks (the next chunk raises `ClosedError`).
//! A chunk keeps the engine's errors in their places among the entries: a value that
//! cannot be read is raised at its entry, and the iteration goes on past it. Such an
//! entry ends its chunk, so a run of unreadable values is read one `next()` at a time.
//!
//! The class is frozen (its methods take `&self`). What changes sits in `state`, a mutex
//! held only briefly and never across an engine call or a call into Python; `fetching`
//! lets one thread at a time fetch a chunk and is taken only with the GIL released. So
//! `close()` from another thread never waits for a fetch in flight: the fetch finds the
//! iterator closed when it is done and drops its chunk.

use std::collections::VecDeque;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::convert::{to_bytes, Shared};
use crate::errors::{to_py_err, Failure};

/// Entries an iterator fetches from the engine per chunk, at most.
const ITER_CHUNK: usize = 256;

/// Key and value bytes after which a chunk ends (it still holds at least one entry):
/// values may be up to 256 MiB, and one `next()` must not load a chunk of them.
const ITER_CHUNK_BYTES: usize = 4 << 20;

/// One entry as the engine yields it: an error takes the place of the entry it is about.
type Entry = engine::Result<(Vec<u8>, Vec<u8>)>;

/// What an iterator walks and what it yields, as `DB.iterator` takes them.
pub(crate) struct Span {
    pub(crate) start: Option<Vec<u8>>,
    pub(crate) stop: Option<Vec<u8>>,
    pub(crate) prefix: Option<Vec<u8>>,
    pub(crate) reverse: bool,
    pub(crate) include_key: bool,
    pub(crate) include_value: bool,
}

/// Entries in key order at one snapshot, made by `DB.iterator()` (or `iter(db)`,
/// `Snapshot.iterator()`): `(key, value)` tuples, or keys, or values. A context manager;
/// `close()` ends it early.
#[pyclass(module = "wisckey", frozen)]
pub(crate) struct Iterator {
    shared: Shared,
    reverse: bool,
    include_key: bool,
    include_value: bool,
    state: Mutex<State>,
    /// Held (without the GIL) by the one thread fetching a chunk.
    fetching: Mutex<()>,
}

/// What an iterator has left.
struct State {
    /// `None` once nothing is left to fetch (the end was fetched, or `close()`): a held
    /// snapshot keeps compaction and GC from dropping old versions.
    snapshot: Option<engine::Snapshot>,
    /// Lower bound (inclusive) and upper bound (exclusive) of what is still ahead.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    buffered: VecDeque<Entry>,
}

/// A chunk fetched from the engine.
struct Chunk {
    entries: Vec<Entry>,
    /// The key the next chunk starts past (after it; before it in reverse): the chunk's
    /// last entry's, whether it read or not. `None`: the chunk holds no entry.
    last_key: Option<Vec<u8>>,
    /// The range ended within the chunk (or an error in the key index ended it).
    ended: bool,
}

impl Iterator {
    pub(crate) fn new(shared: Shared, snapshot: engine::Snapshot, span: Span) -> PyResult<Self> {
        if !span.include_key && !span.include_value {
            // A refused argument, as every other one: `wisckey.Error` catches it.
            return Err(crate::errors::InvalidArgumentError::new_err(
                "include_key and include_value cannot both be False",
            ));
        }
        let (mut lower, mut upper) = (span.start, span.stop);
        if let Some(prefix) = span.prefix {
            lower = lower.max(Some(prefix.clone()));
            let end = prefix_successor(&prefix);
            upper = match (upper, end) {
                (Some(u), Some(e)) => Some(u.min(e)),
                (u, e) => u.or(e),
            };
        }
        let empty = matches!((&lower, &upper), (Some(l), Some(u)) if l >= u);
        Ok(Iterator {
            shared,
            reverse: span.reverse,
            include_key: span.include_key,
            include_value: span.include_value,
            state: Mutex::new(State {
                snapshot: (!empty).then_some(snapshot),
                lower,
                upper,
                buffered: VecDeque::new(),
            }),
            fetching: Mutex::new(()),
        })
    }

    /// The next entry (None: the end, or closed), fetching a chunk if none is buffered.
    /// Runs without the GIL.
    fn next_entry(&self) -> Result<Option<Entry>, Failure> {
        // `__next__`, the only caller, has checked the process: `fetching` may have been
        // held by a parent's thread at a fork, and a child would wait for it forever.
        let _one_fetch_at_a_time = self.fetching.lock();
        // Another thread may have fetched (or closed) while this one waited.
        let (snapshot, lower, upper) = {
            let mut state = self.state.lock();
            if let Some(entry) = state.buffered.pop_front() {
                return Ok(Some(entry));
            }
            match &state.snapshot {
                Some(s) => (s.clone(), state.lower.clone(), state.upper.clone()),
                None => return Ok(None),
            }
        };
        let chunk = self.fetch(snapshot, lower, upper)?;
        let mut state = self.state.lock();
        if state.snapshot.is_none() {
            return Ok(None); // closed during the fetch: its chunk is dropped
        }
        if chunk.ended {
            state.snapshot = None;
        } else if let Some(last) = chunk.last_key {
            if self.reverse {
                state.upper = Some(last);
            } else {
                let mut after = last;
                after.push(0);
                state.lower = Some(after);
            }
        }
        state.buffered.extend(chunk.entries);
        Ok(state.buffered.pop_front())
    }

    /// The next chunk of entries between `lower` and `upper` at `snapshot`.
    fn fetch(
        &self,
        snapshot: engine::Snapshot,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> Result<Chunk, Failure> {
        let opts = engine::ReadOptions {
            snapshot: Some(snapshot),
            keys_only: !self.include_value,
            lower_bound: lower,
            upper_bound: upper,
            ..engine::ReadOptions::default()
        };
        let (reverse, with_values) = (self.reverse, self.include_value);
        self.shared.on_db(|db| {
            let mut cursor = match db.iter(&opts) {
                Ok(cursor) => cursor,
                Err(e) => return Ok(Chunk::failed(e)),
            };
            if reverse {
                cursor.seek_to_last();
            } else {
                cursor.seek_to_first();
            }
            let steps = std::iter::from_fn(|| {
                if !cursor.valid() {
                    return cursor.status().err().map(Step::Failed);
                }
                let key = cursor.key().to_vec();
                let value = if with_values {
                    cursor.value()
                } else {
                    Ok(Vec::new())
                };
                if reverse {
                    cursor.prev();
                } else {
                    cursor.next();
                }
                Some(Step::Entry(key, value))
            });
            Ok(take_chunk(steps))
        })
    }
}

/// One step of an engine cursor.
enum Step {
    /// An entry: its key, and its value or why the value could not be read.
    Entry(Vec<u8>, engine::Result<Vec<u8>>),
    /// The cursor itself failed (the key index): nothing follows.
    Failed(engine::Error),
}

impl Chunk {
    /// The chunk of a cursor that failed to open: the error, then the end.
    fn failed(e: engine::Error) -> Chunk {
        Chunk {
            entries: vec![Err(e)],
            last_key: None,
            ended: true,
        }
    }
}

/// The next chunk of `steps`: at most `ITER_CHUNK` entries or about `ITER_CHUNK_BYTES`
/// (at least one entry), and it ends at an entry whose value could not be read, so the
/// error is raised before anything past it is read. The next chunk starts past the
/// chunk's last key, so it never meets an entry (or an error) already reported. An error
/// of the cursor itself ends the iteration.
fn take_chunk(steps: impl std::iter::Iterator<Item = Step>) -> Chunk {
    let mut entries = Vec::new();
    let mut bytes = 0;
    for step in steps {
        match step {
            Step::Failed(e) => {
                entries.push(Err(e));
                break;
            }
            Step::Entry(key, Err(e)) => {
                entries.push(Err(e));
                return Chunk {
                    entries,
                    last_key: Some(key),
                    ended: false,
                };
            }
            Step::Entry(key, Ok(value)) => {
                bytes += key.len() + value.len();
                entries.push(Ok((key, value)));
                if entries.len() >= ITER_CHUNK || bytes >= ITER_CHUNK_BYTES {
                    let last_key = entries.last().and_then(|e| e.as_ref().ok());
                    let last_key = last_key.map(|(key, _)| key.clone());
                    return Chunk {
                        entries,
                        last_key,
                        ended: false,
                    };
                }
            }
        }
    }
    Chunk {
        entries,
        last_key: None,
        ended: true,
    }
}

/// The smallest key above every key starting with `prefix` (None: there is none).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[pymethods]
impl Iterator {
    /// Returns the iterator itself.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next entry: `(key, value)`, or the key or the value alone as `include_key` and
    /// `include_value` chose. StopIteration at the end; ClosedError when the database was
    /// closed before the entry was fetched. CorruptionError (or IOError) for an entry whose
    /// value cannot be read; the next `next()` goes on with the entry after it. An error
    /// in the key index itself ends the iteration.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        // In a forked child every call raises, even one an entry already fetched could
        // answer, and before `next_entry` takes `fetching` (see there).
        self.shared.check_process().map_err(|e| e.into_py(py))?;
        let buffered = self.state.lock().buffered.pop_front();
        let entry = match buffered {
            Some(entry) => entry,
            None => match py.detach(|| self.next_entry()).map_err(|e| e.into_py(py))? {
                Some(entry) => entry,
                None => return Ok(None),
            },
        };
        let (key, value) = entry.map_err(|e| to_py_err(py, e))?;
        let item = match (self.include_key, self.include_value) {
            (true, true) => {
                let pair = [PyBytes::new(py, &key), PyBytes::new(py, &value)];
                PyTuple::new(py, pair)?.into_any().unbind()
            }
            (true, false) => to_bytes(py, &key),
            _ => to_bytes(py, &value),
        };
        Ok(Some(item))
    }

    /// Stops the iteration and releases what it holds (its snapshot too); later `next()`
    /// raises StopIteration. A `next()` in flight in another thread returns StopIteration
    /// (or the entry it had). Idempotent.
    fn close(&self) {
        let (snapshot, buffered) = {
            let mut state = self.state.lock();
            (state.snapshot.take(), std::mem::take(&mut state.buffered))
        };
        self.shared.release(snapshot);
        drop(buffered);
    }

    /// Returns the iterator itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the iterator.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

impl Drop for Iterator {
    fn drop(&mut self) {
        let snapshot = self.state.get_mut().snapshot.take();
        self.shared.release(snapshot);
    }
}
