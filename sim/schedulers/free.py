"""The free schedule: every program instance is a thread, ranks are processes, all run
at once.  Fast and truly parallel across ranks; not reproducible."""
from __future__ import annotations

import contextlib
import threading
import time

from triton_dist import lifeline


class FreeScheduler:
    name = "free"

    def run_kernel(self, rt, cores, body):
        errors = []
        lock = threading.Lock()

        def run(c):
            try:
                body(c)
            except BaseException as e:  # noqa: BLE001 - reported to the launcher
                with lock:
                    errors.append((c, e))
                rt.abort.set()          # release every other core of this launch

        if len(cores) == 1:           # nothing to run beside it: no thread needed
            run(cores[0])
            return errors
        threads = [threading.Thread(target=run, args=(c,), name=f"core{c.core}", daemon=True) for c in cores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors

    def start(self):
        pass

    def finish(self):
        pass

    def point(self, op="access", addr=0, value=0):
        pass

    def wrote(self):
        pass

    def spin(self, waiter):
        # Back off so spinning threads leave the GIL to the ones that can make progress.
        n = waiter.rounds
        if n % 4096 == 0:
            lifeline.exit_if_orphaned()     # PR_SET_PDEATHSIG's backstop (triton_dist/lifeline.py)
        if n < 64:
            time.sleep(0)
        else:
            time.sleep(min(0.0005, 0.00002 * (n - 63)))

    @contextlib.contextmanager
    def host_call(self, what):
        yield

    def digest(self):
        return ""
