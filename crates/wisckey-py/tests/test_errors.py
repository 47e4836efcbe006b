"""Each exception class raised where it can be provoked: a damaged value-log segment
(CorruptionError), a foreign directory (NotADatabaseError), a second open (LockedError),
bad options (InvalidArgumentError), a path under a file (IOError), a closed database
(ClosedError) and a full tmpfs (NoSpaceError, when this process may mount one)."""

import glob
import os
import subprocess
import sys

import pytest

import wisckey


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


def test_every_class_is_a_wisckey_error():
    for cls in (wisckey.CorruptionError, wisckey.LockedError, wisckey.NoSpaceError,
                wisckey.IOError, wisckey.InvalidArgumentError, wisckey.NotADatabaseError,
                wisckey.ClosedError):
        assert issubclass(cls, wisckey.Error) and cls.__doc__


def test_every_engine_error_kind_has_its_own_documented_class():
    names = ["CorruptionError", "LockedError", "NoSpaceError", "InvalidArgumentError",
             "NotADatabaseError", "ClosedError", "UnsupportedVersionError", "InternalError",
             "AbortedError", "ReadOnlyError"]
    for name in names:
        cls = getattr(wisckey, name)
        assert issubclass(cls, wisckey.Error) and cls is not wisckey.Error, name
        assert cls.__module__ == "wisckey" and len(cls.__doc__) > 30, name
        assert name in wisckey.__all__, name
    assert len(set(getattr(wisckey, n) for n in names)) == len(names)


def test_io_error_is_also_an_os_error_and_never_shadows_the_builtin():
    assert issubclass(wisckey.IOError, wisckey.Error)
    assert issubclass(wisckey.IOError, OSError) and wisckey.IOError is not OSError
    assert wisckey.IOError.__module__ == "wisckey" and "OSError" in wisckey.IOError.__doc__
    assert "IOError" not in wisckey.__all__
    namespace = {}
    exec("from wisckey import *\nshadowed = IOError", namespace)
    assert namespace["shadowed"] is OSError
    assert "Error" in namespace and "DB" in namespace


def _value(i):
    return (b"value-%05d-" % i) * 100  # ~1.1 KiB, in the log


def _keys_with_value_123_damaged(path):
    """Stores key00000..key00199 (values in the value log), then overwrites 16 bytes in
    the middle of key00123's value on disk."""
    with wisckey.DB(path) as db:
        for i in range(200):
            db.put(b"key%05d" % i, _value(i))
    victim = _value(123)
    damaged = 0
    for segment in glob.glob(os.path.join(path, "*.vlog")):
        with open(segment, "r+b") as f:
            data = f.read()
            at = data.find(victim)
            if at >= 0:
                f.seek(at + 500)
                f.write(b"\xff" * 16)
                damaged += 1
    assert damaged == 1, "the value is stored once, verbatim, in one segment"


def test_a_damaged_value_log_record_is_a_corruption_error(path):
    _keys_with_value_123_damaged(path)
    with wisckey.DB(path, value_cache_size=1 << 20) as db:  # the cache holds verified values
        assert db.get(b"key%05d" % 122) == _value(122)
        with pytest.raises(wisckey.CorruptionError, match="vlog"):
            db.get(b"key%05d" % 123)
        with pytest.raises(wisckey.CorruptionError):
            db[b"key%05d" % 123]
        with pytest.raises(wisckey.CorruptionError):
            db.multi_get([b"key%05d" % 1, b"key%05d" % 123])
        with pytest.raises(wisckey.CorruptionError):
            list(db.iterator(start=b"key%05d" % 120))
        assert b"key%05d" % 123 in db  # the key index itself is sound
        report = db.check()
        assert report["problems"], "check() reports the damaged record"


def test_iteration_yields_the_entries_around_a_damaged_value(path):
    _keys_with_value_123_damaged(path)
    key = lambda i: b"key%05d" % i  # noqa: E731
    with wisckey.DB(path) as db:
        it = db.iterator(start=key(120))
        assert [next(it) for _ in range(3)] == [(key(i), _value(i)) for i in (120, 121, 122)]
        with pytest.raises(wisckey.CorruptionError, match="vlog"):
            next(it)
        assert next(it) == (key(124), _value(124)), "the iterator moves past the damage"
        assert list(it) == [(key(i), _value(i)) for i in range(125, 200)]
        it = db.iterator(stop=key(126), reverse=True, include_key=False)
        assert [next(it), next(it)] == [_value(125), _value(124)]
        with pytest.raises(wisckey.CorruptionError):
            next(it)
        assert list(it) == [_value(i) for i in range(122, -1, -1)]
        everything, seen = db.iterator(), []  # one chunk holds them all
        for _ in range(201):  # bounded: an iterator stuck on the error would never end
            try:
                seen.append(next(everything)[0])
            except wisckey.CorruptionError:
                seen.append(None)
            except StopIteration:
                break
        assert seen == [key(i) if i != 123 else None for i in range(200)]
        assert list(db.iterator(include_value=False)) == [key(i) for i in range(200)]


def _keys_with_a_run_of_damaged_values(path):
    """Stores key00000..key02999 (values in the value log, in 1 MiB segments), then
    overwrites all but the header of the second segment: a run of several hundred keys in
    the middle, more than an iterator's chunk, whose values do not read. Returns the
    indexes of those keys (found by reading each key)."""
    with wisckey.DB(path, vlog_segment_size=1 << 20) as db:
        for i in range(3000):
            db.put(b"key%05d" % i, _value(i))
    segments = sorted(glob.glob(os.path.join(path, "*.vlog")))
    assert len(segments) >= 3
    size = os.path.getsize(segments[1])
    with open(segments[1], "r+b") as f:
        f.seek(64)
        f.write(b"\xff" * (size - 64))
    damaged = []
    with wisckey.DB(path) as db:
        for i in range(3000):
            try:
                assert db.get(b"key%05d" % i) == _value(i)
            except wisckey.CorruptionError:
                damaged.append(i)
    assert len(damaged) > 300 and damaged == list(range(damaged[0], damaged[-1] + 1))
    return damaged


def test_a_run_of_unreadable_values_is_raised_one_entry_at_a_time(path):
    """Each unreadable value is raised at its entry, and ends the chunk the iterator
    fetched: a next() never reads ahead through a run of them (nor buffers their errors).
    After the first error of the run, a closed database is the very next next()'s
    ClosedError."""
    damaged = _keys_with_a_run_of_damaged_values(path)
    first, last = damaged[0], damaged[-1]
    key = lambda i: b"key%05d" % i  # noqa: E731

    def walk(it):
        seen = []
        for _ in range(3001):  # bounded: an iterator stuck on an error would never end
            try:
                seen.append(next(it)[0])
            except wisckey.CorruptionError:
                seen.append(None)
            except StopIteration:
                return seen
        raise AssertionError("the iteration did not end")

    expected = [None if first <= i <= last else key(i) for i in range(3000)]
    with wisckey.DB(path) as db:
        assert walk(db.iterator()) == expected
        assert walk(db.iterator(reverse=True)) == expected[::-1]
        assert walk(db.iterator(start=key(first + 10), stop=key(last + 3))) == (
            [None] * (last - first - 9) + [key(last + 1), key(last + 2)])
        assert list(db.iterator(include_value=False)) == [key(i) for i in range(3000)]
        for reverse in (False, True):
            it = db.iterator(start=key(first - 2), stop=key(last + 3), reverse=reverse)
            ahead = [key(last + 2), key(last + 1)] if reverse else [key(first - 2), key(first - 1)]
            assert [next(it)[0], next(it)[0]] == ahead
            with pytest.raises(wisckey.CorruptionError):
                next(it)
            with pytest.raises(wisckey.CorruptionError):
                next(it)
    with wisckey.DB(path) as db:
        it = db.iterator(start=key(first))
        with pytest.raises(wisckey.CorruptionError):
            next(it)
        db.close()
        with pytest.raises(wisckey.ClosedError):  # not another buffered CorruptionError
            next(it)


def test_key_in_a_snapshot_reads_no_value(path):
    _keys_with_value_123_damaged(path)
    with wisckey.DB(path) as db:
        db.delete(b"key00122")
        with db.snapshot() as snap:
            db.delete(b"key00123")
            assert b"key00123" in snap, "the key index is sound; the value is not read"
            assert b"key00122" not in snap and b"key00200" not in snap
            assert b"key00123" not in db


def test_a_directory_of_foreign_files_is_not_a_database(tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"\xff\xd8 not a database")
    with pytest.raises(wisckey.NotADatabaseError, match="holiday.jpg"):
        wisckey.DB(str(foreign))
    with pytest.raises(wisckey.NotADatabaseError):
        wisckey.DB(str(foreign), create_if_missing=False)
    assert os.listdir(foreign) == ["holiday.jpg"]


def test_a_second_open_of_one_path_is_locked(path):
    with wisckey.DB(path) as db:
        with pytest.raises(wisckey.LockedError):
            wisckey.DB(path)
        db.put(b"still", b"usable")
        assert db[b"still"] == b"usable"
    with wisckey.DB(path) as db:  # the lock goes with close()
        assert db[b"still"] == b"usable"


def test_bad_options_are_invalid_arguments(path):
    with pytest.raises(wisckey.InvalidArgumentError, match="unknown option 'no_such_option'"):
        wisckey.DB(path, no_such_option=1)
    with pytest.raises(wisckey.InvalidArgumentError, match="gc_space_amp_target"):
        wisckey.DB(path, gc_space_amp_target=0.5)
    with pytest.raises(wisckey.InvalidArgumentError, match="auto_cluster_ratio"):
        wisckey.DB(path, auto_cluster_ratio=-1.0)
    with pytest.raises(wisckey.InvalidArgumentError, match="does not exist"):
        wisckey.DB(path, create_if_missing=False)
    with pytest.raises(TypeError):
        wisckey.DB(path, memtable_size="big")
    with pytest.raises(TypeError):
        wisckey.DB(path, vlog_write_back_interval="1M")
    with wisckey.DB(path, vlog_write_back_interval=0) as db:  # hints off: still a store
        db.put(b"k", b"v" * 5000)
        assert db[b"k"] == b"v" * 5000
    with pytest.raises(OverflowError):  # a size, never negative
        wisckey.DB(path, vlog_zero_fill_size=-1)
    with wisckey.DB(path, vlog_zero_fill_size=0) as db:  # sync writes without zeros ahead
        db.put(b"k2", b"w" * 5000, sync=True)
        assert db[b"k2"] == b"w" * 5000
    with pytest.raises(TypeError):
        wisckey.DB(path, vlog_mapped_writes="yes")
    # Write-through writes through the mapped log and through pwrite keep the same data.
    for mapped in (True, False):
        with wisckey.DB(path, write_through_to_os=True, vlog_mapped_writes=mapped) as db:
            db.put(b"k3", b"m" * 3000 if mapped else b"p" * 3000)
        with wisckey.DB(path) as db:
            assert db[b"k3"] == (b"m" * 3000 if mapped else b"p" * 3000)
            assert db[b"k2"] == b"w" * 5000
    with pytest.raises(OverflowError):  # a size, never negative
        wisckey.DB(path, table_preload_size=-1)
    for preload in (0, 1 << 30):  # off, and more than the tables hold
        with wisckey.DB(path, table_preload_size=preload) as db:
            assert db[b"k2"] == b"w" * 5000
    with pytest.raises(wisckey.InvalidArgumentError):
        wisckey.DB(path, error_if_exists=True)
    with wisckey.DB(path) as db:
        with pytest.raises(wisckey.InvalidArgumentError):
            db.put(b"k" * 100_000, b"v")  # over the maximum key size


def test_a_path_under_a_regular_file_is_an_io_error(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(wisckey.IOError):
        wisckey.DB(str(tmp_path / "file" / "db"))
    with pytest.raises(OSError, match="I/O error"):
        wisckey.DB(str(tmp_path / "file" / "db"))


def test_a_newer_format_version_is_an_unsupported_version_error(path):
    wisckey.DB(path).close()
    (manifest,) = glob.glob(os.path.join(path, "MANIFEST-*"))
    with open(manifest, "r+b") as f:
        f.seek(8)  # the format version, after the magic
        f.write((99).to_bytes(4, "little"))
    with pytest.raises(wisckey.UnsupportedVersionError, match="format version 99"):
        wisckey.DB(path)


def test_recovery_mode_flush_interval_and_victim_order_options(path):
    for mode in ("strict", "salvage_prefix"):
        for order in ("cost_benefit", "oldest_first"):
            with wisckey.DB(path, recovery_mode=mode, gc_victim_order=order,
                            vlog_flush_interval=0.5) as db:
                db.put(b"k", b"v" * 100)
                assert db[b"k"] == b"v" * 100
    with wisckey.DB(path, vlog_flush_interval=1) as db:  # an int is seconds too
        assert db[b"k"] == b"v" * 100
    bad = [("recovery_mode", "Strict"), ("recovery_mode", "salvage"),
           ("gc_victim_order", "newest_first"), ("vlog_flush_interval", -0.001),
           ("vlog_flush_interval", float("nan")), ("vlog_flush_interval", float("inf")),
           ("vlog_flush_interval", 0.0),  # under the engine's least, 100 microseconds
           ("vlog_flush_interval", 1e300)]
    for name, value in bad:
        with pytest.raises(wisckey.InvalidArgumentError, match=name):
            wisckey.DB(path, **{name: value})
    with pytest.raises(TypeError):
        wisckey.DB(path, recovery_mode=1)
    with pytest.raises(TypeError):
        wisckey.DB(path, vlog_flush_interval="10ms")


def _salvage_value(i):
    return (b"value-%05d-" % i) * 30


# Twenty sync puts, nothing flushed, then the process dies without closing: all twenty are
# in the value log only, to be replayed at the next open.
TWENTY_SYNC_PUTS = """
import os, sys, wisckey
db = wisckey.DB(sys.argv[1])
for i in range(20):
    db.put(b"key%05d" % i, (b"value-%05d-" % i) * 30, sync=True)
os._exit(0)
"""


def test_salvage_prefix_opens_a_log_damaged_before_valid_records(path):
    subprocess.run([sys.executable, "-c", TWENTY_SYNC_PUTS, path], check=True, timeout=60)
    (segment,) = glob.glob(os.path.join(path, "*.vlog"))
    with open(segment, "r+b") as f:
        data = bytearray(f.read())
        at = data.find(_salvage_value(5))
        assert at > 0
        data[at + 10] ^= 0x01
        f.seek(0)
        f.write(data)
    with pytest.raises(wisckey.CorruptionError, match='recovery_mode="salvage_prefix"'):
        wisckey.DB(path)
    with pytest.raises(wisckey.CorruptionError):
        wisckey.DB(path, recovery_mode="strict")
    with wisckey.DB(path, recovery_mode="salvage_prefix") as db:
        assert [db.get(b"key%05d" % i) for i in range(5)] == [_salvage_value(i) for i in range(5)]
        assert db.multi_get([b"key%05d" % i for i in range(5, 20)]) == [None] * 15
        db.put(b"after", b"salvage", sync=True)
    assert os.path.isdir(os.path.join(path, "lost", "salvage-1"))
    with wisckey.DB(path) as db:  # strict again: the damage was cut off
        assert db[b"after"] == b"salvage" and db[b"key00004"] == _salvage_value(4)


def test_every_call_on_a_closed_database_is_a_closed_error(path):
    db = wisckey.DB(path)
    db.put(b"a", b"1")
    snap = db.snapshot()
    db.close()
    calls = [
        lambda: db.get(b"a"), lambda: db.put(b"a", b"2"), lambda: db.delete(b"a"),
        lambda: db[b"a"], lambda: db.__setitem__(b"a", b"2"), lambda: db.__delitem__(b"a"),
        lambda: b"a" in db, lambda: iter(db), lambda: db.iterator(), lambda: db.snapshot(),
        lambda: db.multi_get([b"a"]), lambda: db.stats(), lambda: db.gc(),
        lambda: db.compact_range(), lambda: db.check(), lambda: db.write_batch().write(),
        lambda: db.cluster_values(), lambda: db.cluster_values_estimate(),
        # A snapshot taken before close() and everything read through it.
        lambda: db.iterator(snapshot=snap), lambda: snap.iterator(), lambda: iter(snap),
        lambda: snap.get(b"a"), lambda: snap[b"a"], lambda: b"a" in snap,
        lambda: snap.multi_get([b"a"]),
    ]
    for call in calls:
        with pytest.raises(wisckey.ClosedError):
            call()


def _mount_tmpfs(where, size):
    """Mounts a tmpfs of `size` at `where`; the reason it could not, or None."""
    if os.geteuid() != 0:
        return "not root: mounting a tmpfs to fill needs root"
    os.makedirs(where, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", where],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return f"mount -t tmpfs failed: {done.stderr.strip()}"
    return None


def test_a_full_device_is_a_no_space_error(tmp_path):
    mount = str(tmp_path / "tiny")
    why = _mount_tmpfs(mount, "8m")
    if why:
        # Under CI this is the only test of a real full device: it must run there.
        if os.environ.get("CI"):
            pytest.fail(f"under CI: {why}")
        print(f"skipped: {why}")
        pytest.skip(why)
    try:
        db = wisckey.DB(os.path.join(mount, "db"), vlog_segment_size=1 << 20,
                        vlog_preallocate_size=1 << 20, disk_reserve_size=1 << 20,
                        memtable_size=256 << 10)
        acknowledged = []
        with pytest.raises(wisckey.NoSpaceError):
            for i in range(4096):  # 16 MiB of values into 8 MiB
                db.put(b"%06d" % i, bytes([i % 251]) * 4096, sync=True)
                acknowledged.append(i)
        assert len(acknowledged) > 100
        for i in acknowledged:
            assert db.get(b"%06d" % i) == bytes([i % 251]) * 4096
        try:
            db.close()
        except wisckey.NoSpaceError:
            pass  # closing may need space it has not got; nothing acknowledged is lost
        # Nothing acknowledged is lost across a reopen on the full device either.
        with wisckey.DB(os.path.join(mount, "db"), vlog_segment_size=1 << 20,
                        vlog_preallocate_size=1 << 20, disk_reserve_size=1 << 20,
                        memtable_size=256 << 10) as db:
            for i in acknowledged:
                assert db.get(b"%06d" % i) == bytes([i % 251]) * 4096
    finally:
        subprocess.run(["umount", mount], check=False)
