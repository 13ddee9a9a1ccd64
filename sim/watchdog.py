"""The free schedule's deadlock watchdog, run by the launcher over the shared status board.

A verdict needs all of these, so that a loaded machine (a rank that gets no CPU for
seconds) never turns into a false alarm:
- every unfinished rank is blocked: its host code in a collective, or, in a kernel, no core
  running and at least one waiting (a kernel whose cores are all done or idle is starting
  or ending, never stuck);
- every waiting task has looked again since the last write any rank made (Board.writes,
  counted by the free schedule; `polled`): one that has not may yet see a change;
- no awaited slot already holds what its wait awaits (the watchdog re-reads each one from
  the symmetric heaps, which the launcher maps too): a waiter that got no CPU since its
  signal arrived is late, not stuck;
- all of that for STALL_SECONDS with the board unchanged.
Then no rank can make progress: the launch ends with DeadlockError and the board's report.
Deterministic schedules find deadlocks themselves, exactly (sim/schedulers/deterministic.py):
there the watchdog only supplies the report of a launch that timed out.
"""
from __future__ import annotations

import os
import time

from triton_dist.errors import DeadlockError

from . import board as B

STALL_SECONDS = float(os.environ.get("TRITON_DIST_STALL_SECONDS", "3"))


class BoardWatchdog:
    """The `watchdog` of triton_dist.launcher.collect for simulated ranks.

    heaps: the launcher's mappings of the ranks' symmetric heaps (to re-read awaited slots);
    judge: give verdicts (the free schedule) or only timeout reports (deterministic ones)."""

    def __init__(self, board, timeout: float, heaps=(), judge: bool = True):
        self.board = board
        self.stall = min(STALL_SECONDS, timeout)
        self.judge = judge
        self._heaps = [(_address(m), m) for m in heaps]
        self._since = None
        self._last = None

    def check(self, outcomes) -> None:
        if not self.judge or not self.stuck(outcomes):
            self._since, self._last = None, None
            return
        snap = self.board.snapshot()
        if self._last is not None and (snap == self._last).all():
            self._since = self._since or time.monotonic()
            if time.monotonic() - self._since > self.stall and self.stuck(outcomes):
                co = [f"rank {r}: {c}" for r in range(self.board.world_size)
                      if outcomes[r] is None and (c := self.board.coresidency(r))]
                raise DeadlockError(
                    f"no rank can make progress: every unfinished rank has been blocked for "
                    f"{self.stall:g} s with nothing changing" + "".join("; " + c for c in co[:1]),
                    self.board.report())
        else:
            self._since = None
        self._last = snap

    def stuck(self, outcomes) -> bool:
        """All blocked, every waiter has looked since the last write, no awaited slot is ready."""
        if not all_blocked(self.board, outcomes):
            return False
        board = self.board
        writes = board.write_count()
        for r, o in enumerate(outcomes):
            if o is not None:
                continue
            for c in waiting_cores(board, r):
                rec = board.rec[r, c]
                if int(rec["polled"]) != writes:
                    return False        # it has not looked since the last write: it may see it
                if board.condition_holds(r, c, self.read) is True:
                    return False        # its slot holds what it awaits: it just has not run since
        return True

    def read(self, addr: int, nbytes: int):
        """The signed integer of `nbytes` bytes at `addr` if it lies in a symmetric heap, else None."""
        for base, m in self._heaps:
            off = addr - base
            if 0 <= off and off + nbytes <= len(m):
                return int.from_bytes(m[off:off + nbytes], "little", signed=True)
        return None

    def timeout_report(self) -> str:
        return self.board.report()


def _address(m) -> int:
    from .heap import address_of
    return address_of(m)


def waiting_cores(board, rank) -> list:
    return [int(c) for c in (board.rec[rank, :board.cores]["state"] == B.WAITING).nonzero()[0]]


def all_blocked(board, outcomes) -> bool:
    """Every unfinished rank blocked, and at least one of them in a kernel with a waiting core
    and none running.

    Ranks that are all inside host collectives are never a verdict here: gloo either
    completes them or fails them at its timeout (the launch timeout), and a slow collective
    on a loaded machine must not be called a deadlock.  A rank in a kernel none of whose
    cores waits is starting or ending the kernel (cores idle or done), which it does by
    itself.  A false alarm is worse than a late report."""
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
        if (states == B.RUNNING).any() or not (states == B.WAITING).any():
            return False
        kernel_waiting = True
    return kernel_waiting
