"""Ranks die with their launcher.

A forked rank asks the kernel for SIGKILL when its parent goes (PR_SET_PDEATHSIG), so a
launcher killed by SIGKILL or SIGTERM (or a crashing pytest-xdist worker) leaves no rank
behind: orphaned ranks would hold ~250 MB each, the xdist worker's pipes (the session then
waits for them forever) and, under a deterministic schedule, wait on a semaphore forever.

Two caveats the checks below cover:
- PDEATHSIG fires when the parent *thread* that forked exits, not the process.  Ranks are
  forked by the thread that calls launch(), which blocks in launch() until they are gone,
  so that thread outlives them; it is still the right signal if that thread dies.
- the parent may die between fork() and prctl(): the rank compares getppid() with the pid
  it was forked from right after prctl, and every blocking wait of the simulator calls
  `exit_if_orphaned()` when it wakes up.
"""
from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
_parent = [None]          # pid of the launcher this process was forked from (None: not a rank)


def die_with_parent(parent_pid: int) -> None:
    """Call first thing in a forked rank: SIGKILL when the parent goes; exit now if it has."""
    _parent[0] = parent_pid
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):      # not Linux: the parent checks still apply
        pass
    exit_if_orphaned()


def orphaned() -> bool:
    """True in a rank whose launcher is gone (it was reparented to init or a subreaper)."""
    return _parent[0] is not None and os.getppid() != _parent[0]


def exit_if_orphaned() -> None:
    """At a blocking point: a rank whose launcher is gone has nobody to report to; exit."""
    if orphaned():
        os._exit(1)
