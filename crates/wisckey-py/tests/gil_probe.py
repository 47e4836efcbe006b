"""Whether a call releases the GIL: a thread that counts while the call runs.

With a switch interval far longer than the test, the main thread gives the GIL up only
where it blocks or releases it, so the counter thread counts only while main is inside a
call that released it. Any count proves the call released the GIL; held, the count would
be exactly zero however the machine is loaded."""

import sys
import threading
import time


class GilProbe:
    """`with GilProbe() as probe: probe.run(call)`; `probe.during` counts what the
    counter thread did while calls ran."""

    def __init__(self):
        self.during = 0
        self._inside = False
        self._stop = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._count)
        self._previous = None

    def _count(self):
        self._started.set()
        n = 0
        while not self._stop:
            if self._inside:
                self.during += 1
            n += 1
            if n % 2000 == 0:
                time.sleep(0.0001)  # lets main take the GIL back when its call returns

    def __enter__(self):
        self._previous = sys.getswitchinterval()
        self._thread.start()
        self._started.wait()
        sys.setswitchinterval(100.0)
        return self

    def run(self, call):
        """Runs `call()` with the counter counting; returns what it returned."""
        self._inside = True
        try:
            return call()
        finally:
            self._inside = False

    def __exit__(self, *exc):
        sys.setswitchinterval(self._previous)
        self._stop = True
        self._thread.join()
        return False
