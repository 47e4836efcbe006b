"""The Python binding: every method, its errors, context managers, iteration (also while
writing), threads sharing one DB, reopen, and a seeded model test against a dict."""

import os
import random
import threading

import pytest

import wisckey


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    with wisckey.DB(path) as opened:
        yield opened


def test_put_get_delete_and_dict_conveniences(db):
    db.put(b"a", b"1")
    db[b"b"] = bytearray(b"2")
    db.put(memoryview(b"c"), b"3" * 5000, sync=True)
    assert db.get(b"a") == b"1"
    assert db[b"b"] == b"2"
    assert db.get(b"c") == b"3" * 5000
    assert isinstance(db.get(b"a"), bytes)
    assert db.get(b"missing") is None
    assert db.get(b"missing", b"default") == b"default"
    assert b"a" in db and b"missing" not in db
    with pytest.raises(KeyError):
        db[b"missing"]
    del db[b"a"]
    assert b"a" not in db
    with pytest.raises(KeyError):
        del db[b"a"]
    db.delete(b"never-there")  # no error
    db.delete(b"b", sync=True)
    assert db.get(b"b") is None


def test_str_keys_and_values_are_a_clear_type_error(db):
    with pytest.raises(TypeError, match="encode"):
        db.put("text", b"v")
    with pytest.raises(TypeError, match="encode"):
        db.put(b"k", "text")
    with pytest.raises(TypeError):
        db.get(123)
    with pytest.raises(TypeError):
        "text" in db


def test_iterator_ranges_prefix_reverse_and_include_flags(db):
    for i in range(50):
        db.put(b"k%03d" % i, b"v%d" % i)
    db.put(b"other", b"x")
    everything = list(db.iterator())
    assert len(everything) == 51 and everything[0] == (b"k000", b"v0")
    assert [k for k, _ in db] == [k for k, _ in everything]
    assert list(db.iterator(start=b"k010", stop=b"k013")) == [
        (b"k010", b"v10"), (b"k011", b"v11"), (b"k012", b"v12")]
    assert list(db.iterator(prefix=b"k04", include_value=False)) == [
        b"k04%d" % i for i in range(10)]
    assert list(db.iterator(prefix=b"k00", reverse=True, include_key=False))[:2] == [b"v9", b"v8"]
    assert list(db.iterator(start=b"z")) == []
    assert list(db.iterator(start=b"k2", stop=b"k1")) == []
    with pytest.raises(wisckey.InvalidArgumentError):
        db.iterator(include_key=False, include_value=False)
    # More entries than one internal chunk, from both ends.
    for i in range(1000):
        db.put(b"many%05d" % i, b"x" * (i % 300))
    forward = [k for k, _ in db.iterator(prefix=b"many")]
    backward = [k for k, _ in db.iterator(prefix=b"many", reverse=True)]
    assert forward == sorted(forward) and len(forward) == 1000
    assert backward == forward[::-1]
    it = db.iterator()
    next(it)
    it.close()
    assert list(it) == []
    with db.iterator() as it2:
        assert next(it2)[0] == b"k000"


def test_an_iterator_reads_one_snapshot_while_writes_go_on(db):
    for i in range(600):
        db.put(b"%04d" % i, b"old")
    it = db.iterator()
    first = next(it)
    for i in range(600):
        db.put(b"%04d" % i, b"new")
    db.put(b"9999", b"new")
    rest = list(it)
    assert first == (b"0000", b"old")
    assert len(rest) == 599 and all(v == b"old" for _, v in rest)


def test_write_batch_and_transactions(db):
    with db.write_batch() as batch:
        batch.put(b"a", b"1")
        batch.put(b"b", b"2")
        batch.delete(b"a")
        assert len(batch) == 3
    assert db.get(b"a") is None and db.get(b"b") == b"2"
    with pytest.raises(RuntimeError):
        with db.write_batch(transaction=True) as batch:
            batch.put(b"c", b"3")
            raise RuntimeError("abandon")
    assert db.get(b"c") is None
    # Dropped, not written: a later write() says which.
    with pytest.raises(wisckey.InvalidArgumentError, match="dropped unwritten"):
        batch.write()
    assert len(batch) == 0 and db.get(b"c") is None
    with pytest.raises(RuntimeError):
        with db.write_batch() as batch:
            batch.put(b"d", b"4")
            raise RuntimeError("written anyway, as plyvel does")
    assert db.get(b"d") == b"4"
    batch = db.write_batch(sync=True)
    batch.put(b"e", b"5")
    batch.write()
    assert db.get(b"e") == b"5"
    with pytest.raises(wisckey.InvalidArgumentError):
        batch.write()


def test_an_iterator_refuses_another_databases_snapshot_at_once(tmp_path):
    with wisckey.DB(str(tmp_path / "one")) as one, wisckey.DB(str(tmp_path / "two")) as two:
        one.put(b"k", b"v")
        snap = one.snapshot()
        with pytest.raises(wisckey.InvalidArgumentError, match="another database"):
            two.iterator(snapshot=snap)
        assert list(one.iterator(snapshot=snap)) == [(b"k", b"v")]


def test_a_live_batch_keeps_its_database_open(path):
    db = wisckey.DB(path)
    batch = db.write_batch()
    batch.put(b"k", b"v")
    del db
    with pytest.raises(wisckey.LockedError):
        wisckey.DB(path)
    batch.write()
    del batch
    with wisckey.DB(path) as db:
        assert db.get(b"k") == b"v"


def test_snapshot_reads_and_multi_get(db):
    db.put(b"a", b"1")
    db.put(b"b", b"2" * 3000)
    with db.snapshot() as snap:
        db.put(b"a", b"changed")
        db.delete(b"b")
        assert snap.get(b"a") == b"1" and snap[b"b"] == b"2" * 3000
        assert b"b" in snap and b"b" not in db
        assert snap.multi_get([b"a", b"b", b"x"]) == [b"1", b"2" * 3000, None]
        assert list(snap.iterator()) == [(b"a", b"1"), (b"b", b"2" * 3000)]
        assert list(db.iterator(snapshot=snap)) == [(b"a", b"1"), (b"b", b"2" * 3000)]
    with pytest.raises(wisckey.ClosedError):
        snap.get(b"a")
    assert db.multi_get([b"a", b"b"]) == [b"changed", None]


def test_stats_gc_compact_and_check(path):
    # Small segments, so the two overwritten rounds fill sealed segments GC can collect.
    with wisckey.DB(path, vlog_segment_size=1 << 16) as db:
        for round_ in range(3):
            for i in range(300):
                db.put(b"%04d" % i, bytes([round_]) * 2000)
        stats = db.stats()
        assert isinstance(stats, dict) and "value_log" in stats
        # The default 32 MiB reserve, where the disk had room to make it.
        held = 32 << 20 if os.path.exists(os.path.join(path, "RESERVE")) else 0
        assert stats["disk_reserve_bytes"] == held, stats
        db.compact_range()
        db.compact_range(b"0000", b"0100")
        done = db.gc()
        assert done["segments_collected"] > 0, done
        assert done["space_amp"] < 2.0, done
        assert all(db.get(b"%04d" % i) == bytes([2]) * 2000 for i in range(300))
        report = db.check()
        assert report["problems"] == [] and report["keys"] == 300


def test_checkpoint_copies_an_open_database(path, tmp_path):
    # A backup while the database stays open and written: the copy opens on its own with
    # what was there at the call, and later writes stay in the original only.
    backup = tmp_path / "backup"
    with wisckey.DB(path) as db:
        for i in range(500):
            db.put(b"k%04d" % i, b"v%d" % i * 300)
        report = db.checkpoint(backup)
        assert report["segments"] >= 1 and report["segment_bytes"] > 0, report
        db.put(b"after", b"not in the copy")
        with pytest.raises(wisckey.InvalidArgumentError, match="already exists"):
            db.checkpoint(str(backup))
        with pytest.raises(wisckey.InvalidArgumentError, match="inside the database"):
            db.checkpoint(os.path.join(path, "copy"))
        assert db.get(b"after") == b"not in the copy"
    with wisckey.DB(str(backup), create_if_missing=False) as copy:
        assert [k for k, _ in copy] == [b"k%04d" % i for i in range(500)]
        assert copy.get(b"k0123") == b"v123" * 300
        assert copy.get(b"after") is None
        assert copy.check()["problems"] == []


def test_stats_keep_infinite_floats(path):
    # gc_space_amp_target=inf turns background GC off; stats() reports it as it is.
    with wisckey.DB(path, gc_space_amp_target=float("inf")) as db:
        log = db.stats()["value_log"]
        assert log["space_amp_target"] == float("inf")
        assert isinstance(log["space_amp"], float) and isinstance(log["log_bytes"], int)
        assert isinstance(log["segments"], list) and isinstance(log["segments"][0]["state"], str)
        stats = db.stats()
        # Per-level figures are lists, as they were when stats went through JSON.
        assert stats["level_files"] == [0] * len(stats["level_files"])
        assert isinstance(stats["level_bytes"], list)
    with wisckey.DB(path) as db:
        assert db.stats()["value_log"]["space_amp_target"] == 1.5


def test_cluster_values_rewrites_a_range_in_key_order(db):
    for i in range(400):
        j = (i * 157) % 400  # neighbours written far apart
        db.put(b"%04d" % j, bytes([j % 251]) * 1500)
    assert db.cluster_values_estimate(b"0100", b"0300")["values_relocated"] == 200
    done = db.cluster_values(b"0100", b"0300")
    assert done["keys_examined"] == 200 and done["values_relocated"] == 200
    assert db.cluster_values_estimate(b"0100", b"0300")["values_relocated"] == 0
    assert db.cluster_values(b"0100", b"0300")["values_relocated"] == 0
    assert db.cluster_values()["keys_examined"] == 400
    assert all(db.get(b"%04d" % j) == bytes([j % 251]) * 1500 for j in range(400))
    with pytest.raises(wisckey.InvalidArgumentError):
        db.cluster_values(b"9", b"1")


def test_errors_map_to_the_exception_hierarchy(path):
    db = wisckey.DB(path)
    with pytest.raises(wisckey.LockedError):
        wisckey.DB(path)
    db.close()
    assert db.closed
    with pytest.raises(wisckey.ClosedError):
        db.get(b"a")
    with pytest.raises(wisckey.ClosedError):
        db.put(b"a", b"b")
    db.close()  # idempotent
    with pytest.raises(wisckey.InvalidArgumentError):
        wisckey.DB(path + "-missing", create_if_missing=False)
    with pytest.raises(wisckey.InvalidArgumentError):
        wisckey.DB(path, error_if_exists=True)
    with pytest.raises(wisckey.InvalidArgumentError, match="unknown option"):
        wisckey.DB(path, no_such_option=1)
    assert issubclass(wisckey.CorruptionError, wisckey.Error)
    assert issubclass(wisckey.NoSpaceError, wisckey.Error)


def test_objects_used_after_close_raise_never_crash(path):
    db = wisckey.DB(path, memtable_size=1 << 20, value_threshold=32)
    for i in range(2000):
        db.put(b"%05d" % i, b"v" * 100)
    it = db.iterator()
    next(it)
    snap = db.snapshot()
    batch = db.write_batch()
    batch.put(b"x", b"y")
    db.close()
    with pytest.raises(wisckey.ClosedError):
        list(it)
    with pytest.raises(wisckey.ClosedError):
        snap.get(b"00001")
    with pytest.raises(wisckey.ClosedError):
        batch.write()


def test_reopen_keeps_everything(path):
    with wisckey.DB(path) as db:
        for i in range(500):
            db.put(b"%04d" % i, b"%d" % i * 50)
        db.delete(b"0007")
    with wisckey.DB(path, create_if_missing=False) as db:
        assert db.get(b"0001") == b"1" * 50
        assert db.get(b"0007") is None
        assert sum(1 for _ in db) == 499


def test_threads_hammer_one_db(db):
    errors = []
    # Each thread owns its keys, so its own model says what every read must return.
    models = [{} for _ in range(4)]

    def worker(t):
        try:
            rng = random.Random(t)
            model = models[t]
            prefix = b"t%d-" % t
            for i in range(2000):
                key = prefix + b"%d" % rng.randrange(200)
                if rng.random() < 0.2:
                    db.delete(key)
                    model.pop(key, None)
                else:
                    value = bytes([t]) * rng.randrange(1, 3000)
                    db.put(key, value)
                    model[key] = value
                assert db.get(key) == model.get(key), (t, i, key)
                if i % 500 == 0:
                    assert dict(db.iterator(prefix=prefix)) == model, (t, i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    for t in range(4):
        assert dict(db.iterator(prefix=b"t%d-" % t)) == models[t]


def test_model_against_a_dict(path):
    rng = random.Random(42)
    model = {}
    db = wisckey.DB(path, memtable_size=1 << 16, vlog_segment_size=1 << 16)
    for step in range(6000):
        key = b"key%03d" % rng.randrange(300)
        op = rng.random()
        if op < 0.55:
            value = bytes([rng.randrange(256)]) * rng.choice([0, 10, 100, 3000])
            db[key] = value
            model[key] = value
        elif op < 0.75:
            db.delete(key)
            model.pop(key, None)
        elif op < 0.85:
            assert db.get(key) == model.get(key)
        elif op < 0.9:
            lo, hi = sorted([b"key%03d" % rng.randrange(300), b"key%03d" % rng.randrange(300)])
            expect = sorted((k, v) for k, v in model.items() if lo <= k < hi)
            assert list(db.iterator(start=lo, stop=hi)) == expect
        elif op < 0.92:
            db.close()
            db = wisckey.DB(path)
        elif op < 0.93:
            db.gc()
        else:
            with db.write_batch() as batch:
                for _ in range(rng.randrange(1, 5)):
                    k = b"key%03d" % rng.randrange(300)
                    batch.put(k, b"batch")
                    model[k] = b"batch"
    assert dict(db.iterator()) == model
    db.close()


def test_name_repr_and_closed(path):
    db = wisckey.DB(path)
    assert db.name == path and not db.closed
    assert repr(db) == "<wisckey.DB %r (open)>" % path
    db.close()
    assert db.closed and repr(db) == "<wisckey.DB %r (closed)>" % path


def test_name_keeps_a_path_that_is_not_utf8(tmp_path):
    # The name as the OS has it: os.fsdecode's surrogate escapes, not U+FFFD replacements.
    path = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"db-\xff"))
    db = wisckey.DB(path)
    try:
        assert db.name == path
        assert os.fsencode(db.name).endswith(b"db-\xff")
        assert repr(db) == "<wisckey.DB %r (open)>" % path
    finally:
        db.close()
    assert os.path.isdir(os.fsencode(path))


def test_write_batch_clear_and_len(db):
    batch = db.write_batch()
    batch.put(b"a", b"1")
    batch.delete(b"b")
    assert len(batch) == 2
    batch.clear()
    assert len(batch) == 0
    batch.put(b"c", b"3")
    batch.write()
    assert db.get(b"a") is None and db[b"c"] == b"3"
    assert len(batch) == 0  # written
    with pytest.raises(wisckey.InvalidArgumentError):
        batch.clear()
    with db.write_batch() as batch:
        batch.put(b"d", b"4")
        batch.clear()
    assert b"d" not in db


def test_an_oversize_key_is_refused_when_added_to_a_batch(db):
    big_key = b"k" * (64 * 1024 + 1)
    batch = db.write_batch()
    batch.put(b"a", b"1")
    with pytest.raises(wisckey.InvalidArgumentError, match="maximum key size"):
        batch.put(big_key, b"v")
    with pytest.raises(wisckey.InvalidArgumentError, match="maximum key size"):
        batch.delete(big_key)
    assert len(batch) == 1  # nothing of the refused ones entered the batch
    batch.put(b"b", b"2")
    batch.put(b"k" * (64 * 1024), b"at the limit")
    assert len(batch) == 3
    batch.write()
    assert db.multi_get([b"a", b"b", b"k" * (64 * 1024)]) == [b"1", b"2", b"at the limit"]
    with pytest.raises(wisckey.InvalidArgumentError):
        with db.write_batch(transaction=True) as batch:
            batch.put(b"c", b"3")
            batch.put(big_key, b"v")  # raised here: the transaction writes nothing
    assert db.get(b"c") is None
    with pytest.raises(wisckey.InvalidArgumentError):
        with db.write_batch() as batch:
            batch.put(b"c", b"3")
            batch.put(big_key, b"v")  # raised here: what the batch took is written
    assert db.get(b"c") == b"3"


def test_a_batch_that_fails_to_write_keeps_its_writes(path):
    with wisckey.DB(path, max_batch_size=1 << 20) as db:
        batch = db.write_batch()
        batch.put(b"a", b"x" * (600 << 10))
        batch.put(b"b", b"y" * (600 << 10))
        batch.delete(b"c")
        with pytest.raises(wisckey.InvalidArgumentError, match="max_batch_size"):
            batch.write()
        assert len(batch) == 3 and b"a" not in db
        with pytest.raises(wisckey.InvalidArgumentError, match="max_batch_size"):
            batch.write()  # the same writes, refused again
        batch.clear()
        assert len(batch) == 0
        batch.put(b"small", b"v")
        batch.write()
        assert db[b"small"] == b"v" and b"a" not in db and len(batch) == 0
        with pytest.raises(wisckey.InvalidArgumentError, match="already written"):
            batch.write()
        pending = db.write_batch()
        pending.put(b"later", b"v")
    with pytest.raises(wisckey.ClosedError):
        pending.write()
    assert len(pending) == 1


def test_an_iterator_over_large_values_fetches_few_at_a_time(path):
    big = lambda i: bytes([i]) * (4 << 20)  # noqa: E731
    db = wisckey.DB(path)
    for i in range(6):
        db.put(b"%d" % i, big(i))
    assert list(db.iterator()) == [(b"%d" % i, big(i)) for i in range(6)]
    assert list(db.iterator(reverse=True, include_key=False)) == [big(i) for i in range(5, -1, -1)]
    it = db.iterator()
    assert next(it) == (b"0", big(0))
    db.close()
    with pytest.raises(wisckey.ClosedError):  # the second value was not fetched with the first
        next(it)


def test_a_closed_or_finished_iterator_releases_its_snapshot(path):
    def pinned(db):
        """Segments GC removed that stay on disk because a snapshot may read them."""
        db.gc()
        return [s["segment"] for s in db.stats()["value_log"]["segments"]
                if s["state"] == "pinned_by_readers"]

    # Small segments, so the overwritten first round fills sealed segments GC collects.
    with wisckey.DB(path, vlog_segment_size=1 << 16) as db:
        for i in range(300):
            db.put(b"%04d" % i, bytes([0]) * 2000)
        held = db.iterator()
        next(held)
        with db.iterator() as closed:
            next(closed)
        finished = db.iterator(start=b"0290")
        assert len(list(finished)) == 10
        for i in range(300):
            db.put(b"%04d" % i, bytes([1]) * 2000)
        assert pinned(db), "the open iterator holds its snapshot"
        held.close()
        assert pinned(db) == [], "no iterator holds a snapshot any more"
        assert next(closed, None) is None and next(finished, None) is None


def test_only_bytes_bytearray_and_memoryview_are_keys_and_values(db):
    import array

    with pytest.raises(TypeError, match="array"):
        db.put(array.array("i", [1]), b"v")
    with pytest.raises(TypeError, match="array"):
        db.put(b"k", array.array("b", [1]))

    class HasToBytes:
        def tobytes(self):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="HasToBytes"):
        db.get(HasToBytes())
    assert list(db) == []
    db.put(memoryview(b"key"), memoryview(bytearray(b"value")))
    assert db[memoryview(b"key")] == b"value"
    released = memoryview(b"key")
    released.release()
    with pytest.raises(ValueError, match="released"):  # memoryview's own error, not hidden
        db.get(released)


def test_snapshot_close_closed_and_iteration(db):
    for i in range(300):
        db.put(b"%03d" % i, b"old")
    snap = db.snapshot()
    db.put(b"000", b"new")
    db.put(b"zzz", b"new")
    assert not snap.closed
    assert [k for k, _ in snap] == [b"%03d" % i for i in range(300)]
    assert all(v == b"old" for _, v in snap)
    it = snap.iterator()  # made before close: keeps its own hold
    head = next(it)
    snap.close()
    assert snap.closed
    snap.close()  # idempotent
    for read in (lambda: snap.get(b"000"), lambda: snap[b"000"], lambda: b"000" in snap,
                 lambda: snap.multi_get([b"000"]), lambda: snap.iterator(), lambda: iter(snap),
                 lambda: db.iterator(snapshot=snap)):
        with pytest.raises(wisckey.ClosedError):
            read()
    rest = list(it)
    assert head == (b"000", b"old") and len(rest) == 299
    assert all(v == b"old" for _, v in rest), "the iterator still reads the snapshot"
    assert db[b"000"] == b"new"


def test_a_snapshot_is_closed_with_its_database(path):
    db = wisckey.DB(path)
    snap = db.snapshot()
    db.close()
    assert snap.closed
    with pytest.raises(wisckey.ClosedError):
        list(snap)


def test_bytes_like_keys_are_read_in_place_or_copied(db):
    key = bytearray(b"mutable")
    db.put(key, b"v")
    key[0:1] = b"M"  # changing it afterwards changes nothing stored
    assert db.get(b"mutable") == b"v" and db.get(bytes(key)) is None
    view = memoryview(b"xxkeyxx")[2:5]
    db[view] = b"w"
    assert db[b"key"] == b"w" and db.multi_get([view, bytearray(b"key")]) == [b"w", b"w"]


def test_every_public_name_is_documented():
    """Runtime docstrings where Python keeps them (classes, methods, properties; the
    slot dunders such as __getitem__ get CPython's generic text), and a docstring on
    every class and method of the stubs."""
    import ast
    import pathlib

    assert "LSM-tree" in wisckey.__doc__ and "GIL" in wisckey.__doc__
    slots = {"__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__",
             "__iter__", "__next__", "__repr__"}
    for cls in (wisckey.DB, wisckey.WriteBatch, wisckey.Snapshot, wisckey.Iterator):
        assert cls.__doc__ and len(cls.__doc__) > 40, cls
        for name, member in vars(cls).items():
            if name.startswith("_") and name not in ("__enter__", "__exit__"):
                continue
            assert member.__doc__ and len(member.__doc__) > 10, (cls, name)
    stub = pathlib.Path(__file__).resolve().parent.parent / "python" / "wisckey" / "__init__.pyi"
    tree = ast.parse(stub.read_text())
    assert ast.get_docstring(tree)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        assert ast.get_docstring(cls), cls.name
        methods = [n for n in cls.body if isinstance(n, ast.FunctionDef)]
        for method in methods:
            assert ast.get_docstring(method), f"{cls.name}.{method.name}"
        runtime = getattr(wisckey, cls.name)
        for name in vars(runtime):
            if not name.startswith("_") or name in slots or name in ("__enter__", "__exit__"):
                assert name in {m.name for m in methods}, f"stub lacks {cls.name}.{name}"


def test_a_read_only_open_shares_the_database_and_refuses_writes(tmp_path):
    path = str(tmp_path / "db")
    with wisckey.DB(path) as db:
        db.put(b"k", b"v")
        db.put(b"big", b"x" * 10000)
    with pytest.raises(wisckey.InvalidArgumentError):
        wisckey.DB(str(tmp_path / "missing"), read_only=True)
    assert not (tmp_path / "missing").exists()
    first = wisckey.DB(path, read_only=True)
    second = wisckey.DB(path, read_only=True)
    assert first.get(b"k") == second.get(b"k") == b"v"
    assert second.get(b"big") == b"x" * 10000
    assert list(first.iterator(include_value=False)) == [b"big", b"k"]
    for write in (lambda: first.put(b"k", b"w"), lambda: first.delete(b"k"),
                  lambda: first.compact_range(), lambda: first.gc()):
        with pytest.raises(wisckey.ReadOnlyError):
            write()
    with pytest.raises(wisckey.LockedError):
        wisckey.DB(path)
    first.close()
    second.close()
    with wisckey.DB(path) as db:
        assert db.get(b"k") == b"v"
