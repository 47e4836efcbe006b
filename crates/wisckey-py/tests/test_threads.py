"""Threads: engine calls release the GIL (another Python thread runs during one), an
iterator sees one snapshot while a writer thread commits, racing `del db[key]`s delete a
value once, and close() racing busy threads gives them ClosedError, never a crash."""

import sys
import threading
import time

import pytest

import wisckey


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


def test_another_python_thread_runs_during_an_engine_call(path):
    """With a switch interval far longer than the test, the main thread gives the GIL up
    only where it blocks or releases it. The counter thread then counts only while main is
    inside the engine call, so any count proves the call released the GIL; held, the count
    would be exactly zero however the machine is loaded."""
    db = wisckey.DB(path, memtable_size=1 << 20, value_threshold=64)
    for i in range(20_000):
        db.put(b"%08d" % i, b"v" * 200)
    state = {"in_call": False, "during": 0, "stop": False}
    started = threading.Event()

    def counter():
        started.set()
        n = 0
        while not state["stop"]:
            if state["in_call"]:
                state["during"] += 1
            n += 1
            if n % 2000 == 0:
                time.sleep(0.0001)  # lets main take the GIL back when its call returns

    previous = sys.getswitchinterval()
    thread = threading.Thread(target=counter)
    thread.start()
    started.wait()
    sys.setswitchinterval(100.0)
    try:
        for _ in range(20):
            state["in_call"] = True
            db.check()  # reads every key and value: a long call
            state["in_call"] = False
            if state["during"] >= 10_000:
                break
    finally:
        sys.setswitchinterval(previous)
        state["stop"] = True
        thread.join()
        db.close()
    assert state["during"] >= 10_000, state


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
