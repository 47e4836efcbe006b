"""Interpreter exit while daemon threads are inside engine calls: the process exits with
status 0. Such a thread finishes its call (the GIL released) while the interpreter
finalizes, and asks for the GIL back; CPython before 3.14 ends it there with pthread_exit,
whose forced unwinding must not cross the binding's Rust frames (it aborts the process:
"FATAL: exception not rethrown", SIGABRT). The thread has to hang there instead, as
CPython 3.14 does itself."""

import subprocess
import sys
import textwrap

# A script that leaves its database open: daemon threads loop on calls that release the
# GIL (puts of 4 KiB values, gets, multi_gets, iterations of a prefix), and the main
# thread returns while they are busy.
SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    import wisckey

    db = wisckey.DB(sys.argv[1], memtable_size=1 << 20)
    value = os.urandom(4096)
    calls = [0] * 8

    def worker(n):
        keys = [b"%d-%04d" % (n, i) for i in range(64)]
        i = 0
        while True:
            db.put(keys[i % 64], value)
            db.get(keys[(i * 7) % 64])
            db.multi_get(keys)
            for _ in db.iterator(prefix=b"%d-" % n):
                pass
            calls[n] += 1
            i += 1

    for n in range(len(calls)):
        threading.Thread(target=worker, args=(n,), daemon=True).start()
    time.sleep(float(sys.argv[2]))
    print("busy", sum(calls), flush=True)
    """
)

RUNS = 20


def test_exit_while_daemon_threads_are_inside_engine_calls(tmp_path):
    failures = []
    for run in range(RUNS):
        busy_for = str(0.1 + 0.01 * (run % 5))  # s
        args = [sys.executable, "-c", SCRIPT, str(tmp_path / f"db{run}"), busy_for]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or not done.stdout.startswith("busy "):
            failures.append((run, done.returncode, done.stdout, done.stderr[-2000:]))
    statuses = [status for _, status, _, _ in failures]
    assert not failures, (
        "%d of %d runs failed (exit statuses %s); first: run %d, status %d\n"
        "stdout: %s\nstderr: %s" % ((len(failures), RUNS, statuses) + failures[0])
    )
