"""The race detector: unordered conflicting accesses to symmetric memory.

Off by default; `launch(..., race_check=True)`, `pytest --sim-race-check` and
`triton-dist run/explore --race-check` turn it on, under any schedule.  See docs/races.md.

How it works, in two halves (one module per concern; this package only re-exports them):

- online, in every rank (record.py: RaceRecorder; the log's encodings in events.py):
  each task -- a rank's host code, one core of a kernel, and the DMA queue of that core
  (puts and gets in flight) -- appends to its own log the symmetric-memory accesses it
  makes (kind, kernel line, byte ranges) and the synchronisation it takes part in:
  releases (signal SET/ADD, atomics, the arrival at a barrier, the end of a core, a
  kernel launch) and acquires (a wait that observed a signal value, the departure from a
  barrier, the start of a core, the end of a kernel).  A wait has to know WHICH release
  it observed: that is the only cross-rank state, a small table in memory the launcher
  shares with the ranks before it forks (slots.py: SlotTable, signal address -> its last
  few releases and the values they wrote).  A release registers itself before its store,
  so a wait that sees the value always finds the release; no scheduling point is added,
  so schedules and digests are unchanged.
- offline, in the launcher once every rank has finished (analysis.py: analyze): the logs
  give the happens-before graph; vector clocks are computed over it (FastTrack epochs: an
  access X happens before Y iff epoch(X) <= clock(Y)[task(X)]), every pair of accesses
  to overlapping bytes from different tasks with at least one write is checked, and the
  unordered ones are reported once per distinct pair of kernel lines (reporting.py: Race,
  in words; the report's text and RaceError live in triton_dist.errors).  Because the
  analysis uses the happens-before relation, not the interleaving that happened, it
  finds the same races under the free schedule as under any seed.

Memory-model choices (each is what the hardware and the compiler guarantee, no more):
- putmem/getmem (blocking or not) write their destination asynchronously: the data is
  complete only after quiet/fence/barrier_all or at the end of the kernel; putmem_signal
  orders its own data before its own signal.  A blocking put has read its source when it
  returns, a blocking get has written its destination.
- under the ascend models a kernel's stores are DMAs too (sim/dma.py): done by the core's
  DMA-store stream, complete at quiet/fence/barrier/putmem_signal/the end of the core;
  later accesses of the same core to their bytes are ordered after them.
- dl.wait has only a read effect: a later load is ordered after it only through
  dl.consume_token(ptr, token) (loads of the symmetric tensor the pointer lies in), or
  after a library call with write effects (notify, put/get, quiet, barrier, ...).
  Stores and library calls are ordered after the wait in program order.
- signal ops (SET, ADD, the reads of waits) and atomics never race with each other; a
  plain load or store racing with one is reported (e.g. polling a signal with tl.load).
- tl.atomic_* with acquire/release semantics synchronise like signals.
"""
from __future__ import annotations

import sys
import types

from triton_dist.errors import RaceError, race_report
from triton_dist.errors import race_report as report

from . import record
from .analysis import _SYNCISH, _WRITES, _analyze, _conflicts, _Logs, _State, analyze, analyze_available
from .events import (ATOMIC, MASK64, NOUNS, OP_ADD, OP_ATOMIC, OP_GET_DST, OP_GET_SRC, OP_GETNBI_DST, OP_GETNBI_SRC,
                     OP_LOAD, OP_PUT_DST, OP_PUT_SRC, OP_PUTNBI_DST, OP_PUTNBI_SRC, OP_PUTSIG_DST, OP_PUTSIG_SRC,
                     OP_SET, OP_STORE, OP_WAIT, OPS, READ, REL_ADD, REL_SET, SYNC_ADD, SYNC_READ, SYNC_WRITE, WRITE)
from .record import RaceRecorder, _int_value, _runs, _Task, dump_active
from .reporting import _DTYPE_SIZES, _LABEL, Race, RaceAccess, _access, _describe, _missing
from .slots import SlotTable

__all__ = ["RaceError", "report", "race_report", "Race", "RaceAccess", "RaceRecorder", "SlotTable", "analyze",
           "analyze_available",
           "dump_active", "ACTIVE", "READ", "WRITE", "ATOMIC", "SYNC_READ", "SYNC_WRITE", "SYNC_ADD", "OPS", "NOUNS",
           "REL_SET", "REL_ADD", "MASK64", "OP_LOAD", "OP_STORE", "OP_ATOMIC", "OP_PUT_SRC", "OP_PUT_DST",
           "OP_GET_SRC", "OP_GET_DST", "OP_SET", "OP_ADD", "OP_WAIT", "OP_PUTNBI_SRC", "OP_PUTNBI_DST",
           "OP_GETNBI_SRC", "OP_GETNBI_DST", "OP_PUTSIG_SRC", "OP_PUTSIG_DST"]


class _Package(types.ModuleType):
    """sim.race.ACTIVE (the RaceRecorder of this process, if any) reads and writes
    record.ACTIVE, its one source of truth."""

    @property
    def ACTIVE(self):
        return record.ACTIVE

    @ACTIVE.setter
    def ACTIVE(self, recorder):
        record.ACTIVE = recorder


sys.modules[__name__].__class__ = _Package
