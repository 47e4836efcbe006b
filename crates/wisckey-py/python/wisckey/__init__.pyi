"""wisckey: an embeddable key-value store that keeps keys in an LSM-tree and values in a
value log (WiscKey, FAST '16).

`wisckey.DB(path, create_if_missing=True, **options)` opens a database. The API follows
plyvel (get, put, delete, write_batch, iterator, snapshot) with dict conveniences
(`db[key]`, `db[key] = value`, `del db[key]`, `key in db`, iteration) and adds multi_get,
stats, gc, compact_range and check. Keys and values are bytes-like in (bytes, bytearray,
memoryview) and bytes out; a str is a TypeError. Every call that may do I/O releases the
GIL, so threads sharing one DB run in parallel. Errors are `Error` and its subclasses, one
per kind of engine error.

A DB belongs to the process that opened it: in a forked child, every call on it (or on its
snapshots, iterators and batches) raises Error, and the child's copy is never closed or
flushed (the engine's threads and file lock are not inherited); open the database again in
the child once the parent has closed it. A DB still open at interpreter exit (kept alive by
a daemon thread, a reference cycle, ...) is synced by an atexit hook, so acknowledged writes
reach the disk; it stays open for atexit hooks that run later.
"""

import os
from types import TracebackType
from typing import Any, Iterable, Iterator as _PyIterator, Optional, Tuple, Type, Union

_Bytes = Union[bytes, bytearray, memoryview]

class Error(Exception):
    """Any error raised by wisckey."""

class CorruptionError(Error):
    """Stored bytes failed validation (the message names the file and offset)."""

class LockedError(Error):
    """Another process (or DB object) has the database open."""

class NoSpaceError(Error):
    """The device is full; nothing acknowledged was lost. Free space and retry."""

class IOError(Error, OSError):
    """An operating-system I/O call failed (the message names the operation and the file).
    Also an OSError. Not in __all__: `from wisckey import *` leaves the builtin IOError
    alone; use `wisckey.IOError` (or catch OSError)."""

class InvalidArgumentError(Error):
    """An argument or option wisckey does not accept."""

class NotADatabaseError(Error):
    """The directory holds files that are not a wisckey database."""

class ClosedError(Error):
    """The database (or this object's database or snapshot) is closed."""

class UnsupportedVersionError(Error):
    """A file of the database has a newer format version than this build reads (the message
    names the file and both versions): open it with a newer wisckey."""

class InternalError(Error):
    """An internal invariant failed or the engine panicked: a bug in wisckey (please report
    it), not damaged data. Reopen the database."""

class AbortedError(Error):
    """Work was abandoned before it ran (the message says which)."""

class ReadOnlyError(Error):
    """The database is open read-only (`DB(path, read_only=True)`) and the call would
    write to it."""

class DB:
    """A wisckey database; a context manager (closed on exit).

    Options are wisckey::Options fields: value_threshold, vlog_segment_size,
    vlog_buffer_size, vlog_flush_interval, vlog_preallocate_size, vlog_write_back_interval,
    vlog_direct_writes, vlog_zero_fill_size, write_through_to_os, vlog_mapped_writes,
    memtable_size, memtable_max_log_bytes, max_immutable_memtables, block_size, block_restart_interval,
    block_cache_size, value_cache_size, table_preload_size, bloom_bits_per_key, max_open_tables,
    target_file_size, level1_max_bytes, l0_compaction_trigger, l0_slowdown_trigger, l0_stop_trigger,
    scan_readahead_entries, scan_readahead_threads, recovery_mode, gc_space_amp_target,
    gc_victim_order, auto_cluster_ratio, disk_reserve_size, max_batch_size. Sizes and counts
    are ints, ratios floats, switches bools, and:

    - vlog_flush_interval: seconds (float or int) an acknowledged write may sit in the value
      log's buffer; default 0.01, at least 0.0001.
    - recovery_mode: "strict" (default: a value log damaged before valid records is refused
      with CorruptionError, nothing changed) or "salvage_prefix" (keep the log up to the
      damage, drop what follows; the dropped part is kept in lost/salvage-N/).
    - gc_victim_order: "cost_benefit" (default: mostly dead, old segments first) or
      "oldest_first" (the WiscKey paper's tail-first order).

    An unknown name or a value the engine refuses is an InvalidArgumentError; a value of the
    wrong type a TypeError.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        create_if_missing: bool = True,
        error_if_exists: bool = False,
        read_only: bool = False,
        **options: Any,
    ) -> None:
        """Opens (or creates) the database in directory `path`. LockedError if it is open
        elsewhere, NotADatabaseError if the directory holds foreign files. `read_only=True`
        opens it for reading only: any number of read-only DBs may share it (in this
        process or others) but no read-write one; every write raises ReadOnlyError, and a
        missing database is InvalidArgumentError (it is never created)."""
    def close(self) -> None:
        """Closes the database: waits for calls in flight, flushes and syncs. Later calls
        that read or write it raise ClosedError: the DB's own, a snapshot's reads, an
        iterator's next fetch (entries it already fetched are still returned) and a batch's
        write(); adding to a batch touches no database and still works. Idempotent; a
        close() racing it returns once the database is closed. In a forked child it does
        nothing (the database is the parent's)."""
    @property
    def closed(self) -> bool:
        """Whether close() was called."""
    @property
    def name(self) -> str:
        """The directory the database lives in, as given to DB()."""
    def __enter__(self) -> "DB":
        """Returns the database itself."""
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        """Closes the database; an exception in the block propagates."""
    def __repr__(self) -> str:
        """`<wisckey.DB '/path' (open)>` or `(closed)`."""
    def get(self, key: _Bytes, default: Any = None) -> Any:
        """The value of `key` (bytes), or `default` if it has none."""
    def put(self, key: _Bytes, value: _Bytes, sync: bool = False) -> None:
        """Stores `value` under `key`; sync=True makes it durable before returning."""
    def delete(self, key: _Bytes, sync: bool = False) -> None:
        """Deletes `key` (nothing happens if it has no value)."""
    def __getitem__(self, key: _Bytes) -> bytes:
        """`db[key]`: the value of `key`; KeyError if it has none."""
    def __setitem__(self, key: _Bytes, value: _Bytes) -> None:
        """`db[key] = value`: put(key, value)."""
    def __delitem__(self, key: _Bytes) -> None:
        """`del db[key]`: deletes `key`; KeyError if it has no value. Check and delete are
        one step for every `del` on this DB: of two racing `del`s of a key, one succeeds."""
    def __contains__(self, key: _Bytes) -> bool:
        """`key in db`: whether `key` has a value (reads no value)."""
    def __iter__(self) -> "Iterator":
        """(key, value) pairs of the whole database in key order, at a snapshot taken now."""
    def multi_get(self, keys: Iterable[_Bytes]) -> list[Optional[bytes]]:
        """Values of `keys` (None where a key has none), all read at one moment."""
    def write_batch(self, sync: bool = False, transaction: bool = False) -> "WriteBatch":
        """A batch of puts and deletes written at once (all or nothing). As a context
        manager it is written on exit; with transaction=True, not if the block raised."""
    def iterator(
        self,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
        snapshot: Optional["Snapshot"] = None,
    ) -> "Iterator":
        """Entries in key order, as (key, value) tuples (or keys, or values): between
        `start` (inclusive) and `stop` (exclusive), or under `prefix`; reverse=True from the
        end. Reads one snapshot (`snapshot`, or one taken now). ClosedError if the database
        or `snapshot` is closed; InvalidArgumentError if `snapshot` is another database's."""
    def snapshot(self) -> "Snapshot":
        """A consistent view of the database as it is now, with the same read methods."""
    def stats(self) -> dict[str, Any]:
        """Statistics: tables per level, value-log segments with live and dead bytes, GC
        totals, disk_reserve_bytes (the disk reserve held now; 0 when spent on a full disk
        or there was no room for it). Floats may be infinite (value_log.space_amp_target
        with GC off)."""
    def gc(self) -> dict[str, Any]:
        """Value-log garbage collection now (compacts the key index first); returns what it
        did and the value log's space_amp after it."""
    def compact_range(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> None:
        """Flushes, then compacts the key index between `start` and `stop`, both inclusive
        (None: unbounded)."""
    def cluster_values(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> dict[str, Any]:
        """Rewrites the values between `start` (inclusive) and `stop` (exclusive; None:
        unbounded) in key order, so scans of the range read neighbours' values together; the
        old copies are left to GC. Returns keys_examined, values_in_log, values_kept,
        values_relocated, bytes_relocated, values_changed."""
    def cluster_values_estimate(self, start: Optional[_Bytes] = None, stop: Optional[_Bytes] = None) -> dict[str, Any]:
        """What cluster_values(start, stop) would move now, without moving anything (reads
        keys and pointers only); values_relocated counts what would move."""
    def check(self) -> dict[str, Any]:
        """Reads and verifies everything; returns the report (`problems` empty when
        sound)."""
    def checkpoint(self, path: Union[str, os.PathLike[str]]) -> dict[str, Any]:
        """Copies the database, as it is now, into the new directory `path` (outside this
        one) while it stays open: a backup that opens on its own. Returns tables,
        table_bytes, segments, segment_bytes, last_sequence. InvalidArgumentError if `path`
        exists or lies inside the database."""

class WriteBatch:
    """Puts and deletes written at once, all or nothing; made by DB.write_batch(). As a
    context manager it is written on exit; with transaction=True, not if the block raised."""

    def put(self, key: _Bytes, value: _Bytes) -> None:
        """Adds a put of `value` under `key` (copied now). InvalidArgumentError for a key
        over 64 KiB or a value over 256 MiB; the batch is left as it was."""
    def delete(self, key: _Bytes) -> None:
        """Adds a delete of `key`. InvalidArgumentError for a key over 64 KiB; the batch is
        left as it was."""
    def clear(self) -> None:
        """Forgets the writes added so far."""
    def write(self) -> None:
        """Writes the batch (all or nothing). A batch is written once; a second write()
        raises InvalidArgumentError (so does a write() of a transaction batch its block
        dropped by raising). A write that fails keeps the batch's writes, to retry
        or clear(). Other threads' calls on the batch wait for a write in flight."""
    def __len__(self) -> int:
        """`len(batch)`: the number of puts and deletes added (0 once written)."""
    def __enter__(self) -> "WriteBatch":
        """Returns the batch itself."""
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        """Writes the batch, unless the block raised and the batch is a transaction."""

class Snapshot:
    """A consistent view of the database, made by DB.snapshot(); a context manager.
    close() (or leaving the with block) releases it."""

    def get(self, key: _Bytes, default: Any = None) -> Any:
        """The value of `key` at the snapshot, or `default` if it had none."""
    def __getitem__(self, key: _Bytes) -> bytes:
        """`snap[key]`: the value of `key` at the snapshot; KeyError if it had none."""
    def __contains__(self, key: _Bytes) -> bool:
        """`key in snap`: whether `key` had a value at the snapshot (reads no value)."""
    def __iter__(self) -> "Iterator":
        """(key, value) pairs at the snapshot in key order; ClosedError once the snapshot
        or its database is closed."""
    def multi_get(self, keys: Iterable[_Bytes]) -> list[Optional[bytes]]:
        """Values of `keys` at the snapshot (None where a key had none)."""
    def iterator(
        self,
        start: Optional[_Bytes] = None,
        stop: Optional[_Bytes] = None,
        prefix: Optional[_Bytes] = None,
        reverse: bool = False,
        include_key: bool = True,
        include_value: bool = True,
    ) -> "Iterator":
        """DB.iterator at this snapshot. The iterator keeps its own hold on the snapshot:
        it goes on after close(). ClosedError once the snapshot or its database is
        closed."""
    @property
    def closed(self) -> bool:
        """Whether the snapshot was released (close()) or its database closed."""
    def close(self) -> None:
        """Releases the snapshot; reads through it then raise ClosedError (a read in
        flight in another thread finishes at the snapshot). Idempotent."""
    def __enter__(self) -> "Snapshot":
        """Returns the snapshot itself."""
    def __exit__(self, *exc: Any) -> bool:
        """Releases the snapshot."""

class Iterator(_PyIterator[Any]):
    """Entries in key order at one snapshot: (key, value) tuples, or keys, or values. A
    context manager; close() ends it early."""

    def __iter__(self) -> "Iterator":
        """Returns the iterator itself."""
    def __next__(self) -> Union[Tuple[bytes, bytes], bytes]:
        """The next entry. StopIteration at the end; ClosedError when the database was
        closed before the entry was fetched. CorruptionError (or IOError) for an entry whose
        value cannot be read (raised before anything past it is read); the next next() goes
        on with the entry after it. An error in the key index itself ends the iteration."""
    def close(self) -> None:
        """Stops the iteration and releases its snapshot; later next() raises
        StopIteration, as does a next() in flight in another thread. Idempotent."""
    def __enter__(self) -> "Iterator":
        """Returns the iterator itself."""
    def __exit__(self, *exc: Any) -> bool:
        """Closes the iterator."""
