"""The free schedule: every physical core is a thread running the programs dispatched to
it one after another, ranks are processes, all run at once.  Fast and truly parallel
across ranks; not reproducible.

Cores start one at a time, each when the ones running cannot get on alone: the first
round's programs are dispatched at once (program p on core p, as on the NPU), but the thread
of the next core starts only when a running core waits (a wait's round, a spin or a poll),
finishes its programs, or has run LAZY_START_SECONDS without either.  The GIL runs one
thread at a time anyway, so a thread that is not needed yet only costs switches: four
running threads made a 4-program block loop's rounds 1.8x as expensive in CPU as one thread
running the programs in turn (benchmarks/bench_access.py, measured 2026-12-01 on the idle
2-core machine).  Running a core's program to its end before the next core starts is one
of the NPU's own schedules (one core far ahead of the others).

The first error of a launch ends it at once (issue 14 item 9): the other cores are
interrupted where they are (an asynchronous Aborted, raised at their next bytecode), so a
core computing for minutes cannot hide another core's error behind "launch timed out"."""
from __future__ import annotations

import contextlib
import ctypes
import threading
import time

from triton_dist import lifeline

from .. import board as B
from .. import dma
from ..spin import silent_now

STOP_GRACE_SECONDS = 5.0     # how long the failing launch waits for interrupted cores to stop
# A core that neither waits nor finishes for this long lets the next core start anyway: a
# poll the spin watch cannot call a wait (one that also writes every round) still sees the
# core it waits for run.  Only a delay, never a verdict: no result depends on it.
LAZY_START_SECONDS = 0.2


class FreeScheduler:
    name = "free"

    def __init__(self, board=None):
        self.board = board      # counts the writes, for the watchdog (sim/watchdog.py)
        self._want_core = None  # during a launch of several cores: set when one more should start

    def run_kernel(self, rt, launch, body):
        from ..runtime import Aborted
        errors = []
        lock = threading.Lock()
        threads = []
        want = threading.Event()

        def core(phys):
            c = None
            try:
                while True:
                    c = launch.next(phys)
                    if c is None:
                        return
                    body(c)
            except BaseException as e:  # noqa: BLE001 - reported to the launcher
                with lock:
                    errors.append((c, e))
                    first = not rt.abort.is_set()
                    rt.abort.set()          # no more dispatches; waiting cores stop
                if first and not isinstance(e, Aborted):
                    _interrupt([t for t in threads if t is not threading.current_thread()], Aborted)
            finally:
                want.set()                  # a core that ends lets the next one start

        if launch.ncores == 1:        # nothing to run beside it: no thread needed
            core(0)
            return errors
        self._want_core = want
        launch.first_round()
        try:
            while len(threads) < launch.ncores and not rt.abort.is_set():
                want.clear()        # what set it before is answered by this start
                with lock:          # _interrupt reads the list
                    threads.append(threading.Thread(target=core, args=(len(threads),), name=f"core{len(threads)}",
                                                    daemon=True))
                threads[-1].start()
                want.wait(LAZY_START_SECONDS)
        finally:
            self._want_core = None
            for p in range(len(threads), launch.ncores):    # never started (a core failed): not running
                rt.board.set_state(rt.rank, p, B.DONE)
        for t in threads:
            while t.is_alive():
                t.join(0.05)
                if rt.abort.is_set():
                    break
        if rt.abort.is_set():
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for t in threads:
                t.join(max(0.0, deadline - time.monotonic()))
        return list(errors)

    def start(self):
        pass

    def finish(self):
        pass

    def _need_core(self) -> None:
        """The calling core waits: if cores are still to start, the next one starts now."""
        w = self._want_core
        if w is not None:
            w.set()

    def point(self, op="access", addr=0, value=0):
        dma.at_point(self)      # a DMA store lands FREE_DELAY points of its core after its issue

    def saw(self, value, mask=None) -> None:    # no event log under the free schedule
        pass

    def wrote(self):
        # a spin's count of its rounds is no write the watchdog waits for (sim/spin.py): a
        # reader of it is judged by re-reading its slot instead
        if self.board is not None and not silent_now():
            self.board.wrote()

    def spin(self, waiter):
        dma.drain()             # a waiting core's pipes drain (sim/dma.py)
        self._need_core()
        # Back off so spinning threads leave the GIL to the ones that can make progress.
        n = waiter.rounds
        if n % 4096 == 0:
            lifeline.exit_if_orphaned()     # PR_SET_PDEATHSIG's backstop (triton_dist/lifeline.py)
        if n < 64:
            time.sleep(0)
        else:
            time.sleep(min(0.0005, 0.00002 * (n - 63)))

    def p2p_posted(self, kind, src, dst, tag):
        pass

    def p2p_wait(self, what, where, kind, src, dst, tag, seq):
        pass                    # gloo's own wait blocks; every rank runs meanwhile

    def poll(self, key):
        self._need_core()       # every started core runs anyway: a poller starves nobody here

    @contextlib.contextmanager
    def host_call(self, what):
        self.wrote()            # what the host code wrote before it blocks (torch ops count no writes)
        yield

    def digest(self):
        return ""


def _interrupt(threads, exc) -> None:
    """Raise `exc` in each live thread at its next bytecode (CPython's async exception)."""
    for t in threads:
        if t.is_alive() and t.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(exc))
