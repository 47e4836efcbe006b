"""A database handle across a process's life: used in a forked child (refused, and the
child's copy is never closed), dropped without close() (the engine's close runs without
the GIL), and kept alive until interpreter exit (synced by the exit hook, so acknowledged
writes reach the disk, and left open for atexit hooks that run later). Anything that forks, or may hang, runs in a subprocess with a
timeout."""

import subprocess
import sys
import textwrap
import threading
import time

import wisckey
from gil_probe import GilProbe

# Shared by the forking scripts: `try_in_child` prints whether each call was refused as
# the parent's database; `wait_for_child` reaps the child, killing it after 20 s.
CHILD_HELPERS = textwrap.dedent(
    """
    import os, time
    import wisckey

    def try_in_child(calls):
        for name, call in calls:
            try:
                call()
                print("child", name, "no error", flush=True)
            except wisckey.Error as e:
                ok = type(e) is wisckey.Error and "opened by process %d" % os.getppid() in str(e)
                print("child", name, "refused" if ok else "wrong error: %r" % e, flush=True)

    def wait_for_child(pid):
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print("child status", status, flush=True)
                return
            if time.monotonic() > deadline:
                print("child hung", flush=True)
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return
            time.sleep(0.05)
    """
)

# The parent opens a database, writes, scans it once with values (the engine's reader
# threads start) and makes a snapshot, an iterator (one chunk fetched) and a batch, then
# forks. The child tries each through the inherited handle, then leaves with sys.exit():
# finalizers and atexit hooks run. The parent waits for it (killing it after 20 s) and
# goes on using the database.
FORK = CHILD_HELPERS + textwrap.dedent(
    """
    import sys

    db = wisckey.DB(sys.argv[1], memtable_size=64 << 20)
    for i in range(2000):
        db.put(b"k%05d" % i, b"%05d" % i * 100)
    assert sum(1 for _ in db) == 2000
    snap = db.snapshot()
    it = db.iterator()
    next(it)
    batch = db.write_batch()
    batch.put(b"from-child-batch", b"x")

    pid = os.fork()
    if pid == 0:
        calls = {
            "multi_get": lambda: db.multi_get([b"k00001", b"k00002"]),
            "get": lambda: db.get(b"k00001"),
            "put": lambda: db.put(b"from-child", b"x" * 1000, sync=True),
            "delete": lambda: db.delete(b"k00003"),
            "scan": lambda: sum(1 for _ in db),
            # The iterator has buffered entries: the first next() raises all the same.
            "iterator": lambda: next(it),
            "snapshot": lambda: snap.get(b"k00001"),
            "batch": batch.write,
            "batch_put": lambda: batch.put(b"x", b"y"),
            "batch_len": lambda: len(batch),
            "write_batch": db.write_batch,
        }
        try_in_child(calls.items())
        db.close()  # the parent's database: nothing to do here
        sys.exit(0)

    wait_for_child(pid)
    assert db.get(b"k00001") == b"00001" * 100
    db.put(b"parent-after", b"y", sync=True)
    assert db.get(b"from-child") is None and db.get(b"k00003") is not None
    batch.write()
    db.close()
    with wisckey.DB(sys.argv[1]) as db:
        print("reopened", len(list(db.iterator(include_value=False))),
              db.get(b"parent-after"), db.get(b"from-child"), db.get(b"from-child-batch"),
              db.check()["problems"], flush=True)
    """
)


def test_a_forked_child_is_refused_the_parents_handle_and_exits(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORK, str(tmp_path / "db")],
                          capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr[-3000:])
    for name in ("multi_get", "get", "put", "delete", "scan", "iterator", "snapshot",
                 "batch", "batch_put", "batch_len", "write_batch"):
        assert "child %s refused" % name in out, (out, done.stderr[-3000:])
    assert "child status 0" in out, (out, done.stderr[-3000:])
    assert "reopened 2002 b'y' None b'x' []" in out, (out, done.stderr[-3000:])


# A fork while threads of the parent are inside an iterator's fetch and a batch's write:
# each holds its object's own lock, waiting for the database, which a close() in progress
# holds. The child's copies of those locks are never released; its calls must raise, not
# wait on them forever. A close takes well under a second here, so the fork comes 10 ms
# after it starts, in several attempts; the test needs at least one that forked while
# it was in progress.
FORK_MID_CALL = CHILD_HELPERS + textwrap.dedent(
    """
    import sys, threading

    def quietly(call):
        try:
            call()
        except wisckey.Error:
            pass

    for attempt in range(8):
        db = wisckey.DB(sys.argv[1] + str(attempt), memtable_size=256 << 20)
        for start in range(0, 200_000, 10_000):
            batch = db.write_batch()
            for i in range(start, start + 10_000):
                batch.put(b"key%09d" % i, b"v" * 100)
            batch.write()
        it = db.iterator()
        batch = db.write_batch()
        batch.put(b"k", b"v")
        closer = threading.Thread(target=db.close)
        callers = [threading.Thread(target=quietly, args=(call,))
                   for call in (lambda: next(it), batch.write)]
        closer.start()
        for t in callers:
            t.start()
        time.sleep(0.01)
        print("attempt", attempt, "close in progress at the fork:", closer.is_alive(),
              flush=True)
        pid = os.fork()
        if pid == 0:
            try_in_child([("iterator", lambda: next(it)),
                          ("batch_put", lambda: batch.put(b"x", b"y")),
                          ("batch_write", batch.write)])
            os._exit(0)
        wait_for_child(pid)
        closer.join()
        for t in callers:
            t.join()
    """
)


def test_a_fork_during_an_iterator_fetch_or_a_batch_write_does_not_hang_the_child(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORK_MID_CALL, str(tmp_path / "db")],
                          capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr[-3000:])
    # Otherwise no thread was inside its call at a fork: nothing was tested.
    assert "close in progress at the fork: True" in out, (out, done.stderr[-3000:])
    assert "child hung" not in out and "no error" not in out, out
    assert "wrong error" not in out, out
    for name in ("iterator", "batch_put", "batch_write"):
        assert out.count("child %s refused" % name) == 8, (out, done.stderr[-3000:])
    assert out.count("child status 0") == 8, out


def test_dropping_an_open_database_lets_other_threads_run(tmp_path):
    """`del db` without close() runs the engine's close (flush of a large memtable, joins,
    sync) without the GIL: another thread counts meanwhile (`gil_probe`)."""
    db = wisckey.DB(str(tmp_path / "db"), memtable_size=256 << 20)
    for start in range(0, 200_000, 10_000):
        batch = db.write_batch()
        for i in range(start, start + 10_000):
            batch.put(b"key%09d" % i, b"v" * 100)
        batch.write()
    del batch
    holder = [db]
    del db  # the list holds the last reference: clearing it runs the drop
    with GilProbe() as probe:
        t0 = time.perf_counter()
        probe.run(holder.clear)
        took = time.perf_counter() - t0
    assert probe.during > 0, (probe.during, took)  # any count proves it (`gil_probe`)
    with wisckey.DB(str(tmp_path / "db")) as db:  # the drop closed it
        assert db[b"key%09d" % 199_999] == b"v" * 100


# A database kept alive until interpreter exit, by a daemon thread's reference or by a
# reference cycle, with its last write acknowledged but not synced. The log's buffer is
# written out only when full, on a sync, or after vlog_flush_interval (an hour here).
EXIT = textwrap.dedent(
    """
    import sys, threading, time
    import wisckey

    db = wisckey.DB(sys.argv[1], vlog_flush_interval=3600.0)
    if sys.argv[2] == "daemon":
        threading.Thread(target=lambda d=db: time.sleep(100), daemon=True).start()
    elif sys.argv[2] == "busy-daemon":
        def busy(d=db):
            while True:
                d.get(b"last")
        threading.Thread(target=busy, daemon=True).start()
    else:
        class Holder:
            pass
        holder = Holder()
        holder.self, holder.db = holder, db
    db.put(b"last", b"v" * 100)
    del db
    print("exiting", flush=True)
    """
)


def test_acknowledged_writes_survive_exit_with_the_database_still_open(tmp_path):
    for keeper in ("daemon", "busy-daemon", "cycle"):
        path = str(tmp_path / keeper)
        done = subprocess.run([sys.executable, "-c", EXIT, path, keeper],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == "exiting\n", (keeper, done)
        with wisckey.DB(path) as db:
            assert db.get(b"last") == b"v" * 100, keeper


# A daemon thread writes (acknowledged, not synced: the log's buffer holds them) and drops
# its last reference to the database as the main thread returns: the drop's close, still
# writing out the buffer, must finish before the process ends. The exit hook no longer
# found the handle (gone from its registry) and did not wait: up to a whole buffer of
# acknowledged writes was lost.
DROP_AT_EXIT = textwrap.dedent(
    """
    import sys, threading
    import wisckey

    opts = dict(vlog_flush_interval=3600.0, vlog_buffer_size=256 << 20,
                memtable_size=256 << 20, memtable_max_log_bytes=1 << 30)
    about_to_drop = threading.Event()

    def worker():
        db = wisckey.DB(sys.argv[1], **opts)
        for i in range(int(sys.argv[2])):
            db.put(b"k%06d" % i, b"x" * 4000)
        about_to_drop.set()
        del db

    threading.Thread(target=worker, daemon=True).start()
    about_to_drop.wait()
    print("exiting", flush=True)
    """
)


def test_a_database_dropped_by_a_daemon_thread_at_exit_keeps_its_writes(tmp_path):
    n = 8000
    for attempt in range(3):
        path = str(tmp_path / str(attempt))
        done = subprocess.run([sys.executable, "-c", DROP_AT_EXIT, path, str(n)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout == "exiting\n", done
        with wisckey.DB(path) as db:
            kept = sum(1 for _ in db.iterator(include_value=False))
        assert kept == n, (attempt, kept)


# A read-only DB still open at exit: the exit hook leaves it alone (its sync would refuse).
READ_ONLY_AT_EXIT = textwrap.dedent(
    """
    import sys
    import wisckey

    db = wisckey.DB(sys.argv[1], read_only=True)
    assert db.get(b"k") == b"v"
    print("exiting", flush=True)
    """
)


def test_a_read_only_database_open_at_exit_exits_quietly(tmp_path):
    path = str(tmp_path / "db")
    with wisckey.DB(path) as db:
        db.put(b"k", b"v")
    done = subprocess.run([sys.executable, "-c", READ_ONLY_AT_EXIT, path],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "exiting\n" and done.stderr == "", done


# An application's atexit hook registered before wisckey was imported runs after
# wisckey's (atexit runs hooks newest first): the database must still be usable there.
LATE_HOOK = textwrap.dedent(
    """
    import atexit, sys

    def late():
        db.put(b"late", b"x", sync=True)
        print("late ok", flush=True)

    atexit.register(late)
    import wisckey

    db = wisckey.DB(sys.argv[1])
    """
)


def test_an_atexit_hook_that_runs_after_wisckeys_can_still_write(tmp_path):
    path = str(tmp_path / "db")
    done = subprocess.run([sys.executable, "-c", LATE_HOOK, path],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "late ok\n", done
    with wisckey.DB(path) as db:
        assert db.get(b"late") == b"x"
