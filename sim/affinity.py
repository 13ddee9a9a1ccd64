"""Where the core threads of a kernel under a deterministic schedule run: on one CPU, when the
machine has one to spare.

A deterministic schedule runs exactly one task at a time (sim/schedulers/deterministic.py),
so the core threads of one rank's kernel never use more than one CPU at once; but every
hand-off of the baton to a thread the kernel placed on another CPU wakes that CPU, and on a
virtual machine waking an idle CPU is slow.  Measured on the idle 2-core machine
(2026-12-01, benchmarks/bench_access.py's 4-program block loop under random, thread CPU
time per round, 3 runs each): 1110-1250 us with the kernel placing the threads, 710-850 us
with the process on one CPU (`taskset -c 0`); the plain interpreter's round: 420-550 us.
Ranks are processes and are left alone: pinning two ranks of `triton-dist explore` to one
CPU made 20 seeds no faster (4.8-5.2 s against 5.5-5.6 s).

So the core threads of a kernel with several cores keep to the CPU its rank's host thread
is on when it launches the kernel, but only while the machine is not busy (load average
below the usable CPUs less one half): on a loaded machine the kernel's load balancing is
worth more than warm hand-offs, and two launches side by side (pytest-xdist) must not
share one CPU while another idles.  The threads end with the kernel, so nothing is undone.
The free schedule runs cores in parallel threads and is never pinned.  TRITON_DIST_SIM_PIN=0
switches it off.  It changes only speed: which task runs when is the schedule's alone.
"""
from __future__ import annotations

import ctypes
import os

ENV = "TRITON_DIST_SIM_PIN"


def kernel_cpu(ncores: int) -> int | None:
    """The CPU the `ncores` core threads of a kernel should keep to, or None (leave them be)."""
    if ncores < 2 or os.environ.get(ENV, "1") == "0" or not hasattr(os, "sched_setaffinity"):
        return None
    try:
        usable = os.sched_getaffinity(0)
        busy = os.getloadavg()[0] > len(usable) - 0.5
    except OSError:
        return None
    if len(usable) < 2 or busy:
        return None
    cpu = _current_cpu()
    return cpu if cpu in usable else None


def pin(cpu: int | None) -> None:
    """Keep the calling thread on `cpu`; None: do nothing."""
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})      # Linux: pid 0 is the calling thread
    except OSError:
        pass            # a CPU set by a container's cgroup may refuse it: only speed is lost


_libc = None


def _current_cpu() -> int | None:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        n = _libc.sched_getcpu()
    except (OSError, AttributeError):
        return None
    return n if n >= 0 else None
