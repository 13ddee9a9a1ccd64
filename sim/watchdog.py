"""The free schedule's deadlock watchdog, run by the launcher over the shared status board.

When every unfinished rank is blocked (its host code in a collective, or all its running
cores waiting), at least one of them in a kernel, and the board has not changed for
STALL_SECONDS, no rank can make progress:
the launch ends with DeadlockError and the board's report.  Deterministic schedules find
deadlocks themselves (sim/schedulers/deterministic.py); this covers the free one.
"""
from __future__ import annotations

import os
import time

from triton_dist.errors import DeadlockError

from . import board as B

STALL_SECONDS = float(os.environ.get("TRITON_DIST_STALL_SECONDS", "3"))


class BoardWatchdog:
    """The `watchdog` of triton_dist.launcher.collect for simulated ranks."""

    def __init__(self, board, timeout: float):
        self.board = board
        self.stall = min(STALL_SECONDS, timeout)
        self._since = None
        self._last = None

    def check(self, outcomes) -> None:
        if not all_blocked(self.board, outcomes):
            self._since, self._last = None, None
            return
        snap = self.board.snapshot()
        if self._last is not None and (snap == self._last).all():
            self._since = self._since or time.monotonic()
            if time.monotonic() - self._since > self.stall:
                co = [f"rank {r}: {c}" for r in range(self.board.world_size)
                      if outcomes[r] is None and (c := self.board.coresidency(r))]
                raise DeadlockError(
                    f"no rank can make progress: every unfinished rank has been blocked for "
                    f"{STALL_SECONDS:g} s with nothing changing" + "".join("; " + c for c in co[:1]),
                    self.board.report())
        else:
            self._since = None
        self._last = snap

    def timeout_report(self) -> str:
        return self.board.report()


def all_blocked(board, outcomes) -> bool:
    """Every unfinished rank blocked, and at least one of them in a kernel whose cores all wait.

    Ranks that are all inside host collectives are never a verdict here: gloo either
    completes them or fails them at its timeout (the launch timeout), and a slow collective
    on a loaded machine must not be called a deadlock.  A false alarm is worse than a late
    report."""
    kernel_waiting = False
    for r, o in enumerate(outcomes):
        if o is not None:
            continue
        host = int(board.rec[r, board.host]["state"])
        if host == B.HOST_COLLECTIVE or host == B.DONE:
            continue
        if host != B.IN_KERNEL:
            return False
        states = board.rec[r, :board.cores]["state"]
        if (states == B.RUNNING).any():
            return False
        kernel_waiting = True
    return kernel_waiting
