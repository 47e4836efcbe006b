"""Threads: engine calls release the GIL (another Python thread runs during one), an
iterator sees one snapshot while a writer thread commits, racing `del db[key]`s delete a
value once, and close() racing busy threads gives them ClosedError, never a crash."""

import threading
import time

import pytest

import wisckey
from gil_probe import GilProbe


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


def test_another_python_thread_runs_during_an_engine_call(path):
    """Another thread counts while main is inside the engine call (`gil_probe`)."""
    db = wisckey.DB(path, memtable_size=1 << 20, value_threshold=64)
    for i in range(20_000):
        db.put(b"%08d" % i, b"v" * 200)
    try:
        with GilProbe() as probe:
            for _ in range(20):
                probe.run(db.check)  # reads every key and value: a long call
                if probe.during > 0:
                    break
    finally:
        db.close()
    # Any count proves the GIL was released (`gil_probe`); how much says how fast this
    # machine is, which a test does not judge.
    assert probe.during > 0, probe.during


def test_iteration_sees_one_snapshot_while_a_writer_thread_commits(path):
    """The writer rewrites all keys with the next generation in one atomic batch at a time;
    every iteration (forward, reverse, through a snapshot), spread over many generations,
    must see a single generation for all of them."""
    keys = [b"k%05d" % i for i in range(1000)]  # several of the iterator's chunks
    db = wisckey.DB(path, memtable_size=1 << 20)
    with db.write_batch() as batch:
        for k in keys:
            batch.put(k, b"%08d" % 0)
    progress = {"generation": 0, "stop": False}
    advanced = threading.Condition()
    failures = []

    def writer():
        try:
            while not progress["stop"]:
                g = progress["generation"] + 1
                with db.write_batch() as batch:
                    for k in keys:
                        batch.put(k, b"%08d" % g + b"x" * (g % 200))
                with advanced:
                    progress["generation"] = g
                    advanced.notify_all()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    def wait_for_a_commit():
        with advanced:
            seen = progress["generation"]
            assert advanced.wait_for(lambda: progress["generation"] > seen, timeout=60)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for round_ in range(6):
            snap = db.snapshot() if round_ % 3 == 2 else None
            it = snap.iterator() if snap else db.iterator(reverse=round_ % 3 == 1)
            first_generation = progress["generation"]
            generations, count = set(), 0
            for key, value in it:
                generations.add(value[:8])
                count += 1
                if count % 200 == 0:
                    wait_for_a_commit()  # the writer commits mid-iteration, every time
            assert count == len(keys)
            assert len(generations) == 1, (round_, sorted(generations)[:3])
            assert progress["generation"] >= first_generation + 4
            if snap:
                snap.close()
    finally:
        progress["stop"] = True
        thread.join()
        db.close()
    assert failures == []


def test_racing_deletes_of_one_key_succeed_once(path):
    db = wisckey.DB(path)
    keys = [b"%04d" % i for i in range(3000)]
    for k in keys:
        db[k] = b"v"
    deleted, missing = [], []
    go = threading.Barrier(4)

    def deleter():
        go.wait(timeout=120)
        for k in keys:
            try:
                del db[k]
                deleted.append(k)
            except KeyError:
                missing.append(k)

    threads = [threading.Thread(target=deleter) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(deleted) == keys  # each key deleted by exactly one thread
    assert len(missing) == 3 * len(keys)
    assert list(db) == []
    db.close()


def test_close_racing_busy_threads_gives_them_closed_error(path):
    db = wisckey.DB(path, memtable_size=1 << 20, value_threshold=64)
    for i in range(3000):
        db.put(b"%06d" % i, b"v" * (i % 500))
    outcome = {}
    busy = threading.Barrier(7)  # six workers and the main thread

    def worker(n):
        ops = 0
        try:
            it = db.iterator()
            snap = db.snapshot()
            busy.wait(timeout=120)
            while True:
                ops += 1
                k = b"%06d" % (ops * 7 % 3000)
                kind = (n + ops) % 6
                if kind == 0:
                    db.put(k, b"w" * (ops % 700))
                elif kind == 1:
                    db.get(k)
                    k in db  # noqa: B015 - the call is the point
                elif kind == 2:
                    next(it, None)
                    if ops % 50 == 0:
                        it = db.iterator(start=k)
                elif kind == 3:
                    snap.get(k)
                    snap.multi_get([k, b"none"])
                elif kind == 4:
                    with db.write_batch() as batch:
                        batch.put(k, b"b")
                        batch.delete(b"gone")
                else:
                    db.multi_get([k, k])
        except wisckey.ClosedError:
            outcome[n] = ("closed", ops)
        except BaseException as e:  # noqa: BLE001 - any other outcome fails the test
            outcome[n] = ("error", repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    busy.wait(timeout=120)
    time.sleep(0.05)  # let them get going; correctness does not depend on how far
    db.close()
    for t in threads:
        t.join()
    assert sorted(outcome) == list(range(6))
    assert all(kind == "closed" for kind, _ in outcome.values()), outcome
    assert db.closed


def test_racing_closes_both_return_once_the_database_is_released(path):
    for attempt in range(5):
        db = wisckey.DB(path, memtable_size=64 << 20, value_threshold=1 << 10)
        for i in range(20000):  # a full memtable, which close() flushes
            db.put(b"%06d" % i, b"%d" % attempt * 200)
        start = threading.Barrier(2)
        one_at_a_time = threading.Lock()
        outcome = []

        def closer():
            start.wait(timeout=60)
            db.close()
            assert db.closed
            with one_at_a_time:  # each reopen finds the database released by close()
                try:
                    wisckey.DB(path).close()
                    outcome.append("reopened")
                except wisckey.Error as e:
                    outcome.append(repr(e))

        threads = [threading.Thread(target=closer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcome == ["reopened", "reopened"], (attempt, outcome)
    with wisckey.DB(path) as db:
        assert db[b"019999"] == b"4" * 200


def test_a_snapshot_closed_during_its_own_multi_get(path):
    """close() called from inside a call on the snapshot (here by the keys' iterable)
    releases it; the call in flight finishes at the snapshot it started with."""
    db = wisckey.DB(path)
    db.put(b"a", b"1")
    snap = db.snapshot()
    db.put(b"a", b"2")

    def keys():
        snap.close()
        yield b"a"

    assert snap.multi_get(keys()) == [b"1"]
    assert snap.closed
    with pytest.raises(wisckey.ClosedError):
        snap.get(b"a")
    with db.snapshot() as snap:
        assert snap.multi_get(iter([b"a"])) == [b"2"]

        def closing_keys():
            snap.__exit__(None, None, None)
            yield b"a"

        assert snap.multi_get(closing_keys()) == [b"2"]
        assert snap.closed
    db.close()


def _big_database(path, n=2000):
    db = wisckey.DB(path, value_threshold=64)
    for i in range(n):
        db.put(b"%06d" % i, bytes([i % 251]) * 16_000)
    return db


def test_snapshot_closed_while_another_thread_reads_it(path):
    """Leaving `with db.snapshot()` (or close()) while a worker thread is inside a read on
    the snapshot releases it: the worker's later reads raise ClosedError, nothing raises
    RuntimeError."""
    db = _big_database(path)
    keys = [b"%06d" % i for i in range(0, 2000, 3)]
    try:
        for attempt in range(20):
            outcome, reading, stop = [], threading.Event(), threading.Event()

            def worker(snap):
                try:
                    while not stop.is_set():
                        assert len(snap.multi_get(keys)) == len(keys)
                        reading.set()
                        snap.get(keys[0])
                        keys[1] in snap  # noqa: B015 - the call is the point
                    outcome.append("stopped")
                except wisckey.ClosedError:
                    outcome.append("closed")
                except BaseException as e:  # noqa: BLE001 - any other outcome fails the test
                    outcome.append(repr(e))

            snap = db.snapshot()
            thread = threading.Thread(target=worker, args=(snap,), daemon=True)
            try:
                with snap:
                    thread.start()
                    assert reading.wait(timeout=60)
                    time.sleep(0.001 * (attempt % 5))
                    if attempt % 2:
                        snap.close()
            except BaseException:
                stop.set()  # the worker would otherwise read on
                raise
            finally:
                thread.join(timeout=60)
            assert snap.closed
            assert outcome == ["closed"], (attempt, outcome)
    finally:
        db.close()


def test_iterator_closed_while_another_thread_iterates_it(path):
    """close() while another thread is inside next() (fetching a chunk) stops the
    iteration: no RuntimeError on either side, and the other thread's loop ends."""
    db = _big_database(path)
    try:
        for attempt in range(20):
            outcome, started = [], threading.Event()
            it = db.iterator(reverse=attempt % 2 == 1)

            def worker():
                try:
                    count = 0
                    for _ in it:
                        count += 1
                        started.set()
                    outcome.append(count)
                except BaseException as e:  # noqa: BLE001 - any outcome but a count fails
                    outcome.append(repr(e))
                started.set()

            thread = threading.Thread(target=worker, daemon=True)
            thread.start()
            try:
                assert started.wait(timeout=60)
                time.sleep(0.001 * (attempt % 5))
                it.close()
            finally:
                thread.join(timeout=60)
            assert len(outcome) == 1 and isinstance(outcome[0], int), (attempt, outcome)
            assert next(it, None) is None
    finally:
        db.close()


def test_a_batch_used_by_another_thread_while_it_is_written(path):
    """len(), put() and a second write() from another thread while write() is in flight:
    they wait for it or see it written, never RuntimeError."""
    db = wisckey.DB(path)
    try:
        for attempt in range(10):
            batch = db.write_batch(sync=True)
            for i in range(20_000):
                batch.put(b"%06d" % i, b"%d" % attempt * 50)
            outcome, writing, stop = [], threading.Event(), threading.Event()

            def other():
                try:
                    writing.wait(timeout=60)
                    lengths = set()
                    while not stop.is_set():
                        lengths.add(len(batch))
                    lengths.add(len(batch))
                    outcome.append(sorted(lengths))
                    with pytest.raises(wisckey.InvalidArgumentError, match="already written"):
                        batch.put(b"late", b"x")
                    with pytest.raises(wisckey.InvalidArgumentError, match="already written"):
                        batch.write()
                except BaseException as e:  # noqa: BLE001 - reported below
                    outcome.append(repr(e))

            thread = threading.Thread(target=other, daemon=True)
            thread.start()
            try:
                writing.set()
                batch.write()
            finally:
                stop.set()
                thread.join(timeout=60)
            assert len(outcome) == 1 and isinstance(outcome[0], list), (attempt, outcome)
            assert set(outcome[0]) <= {20_000, 0} and outcome[0][0] == 0, outcome
            assert db[b"019999"] == b"%d" % attempt * 50
    finally:
        db.close()
