"""The race detector: unordered conflicting accesses to symmetric memory.

Off by default; `launch(..., race_check=True)`, `pytest --sim-race-check` and
`triton-dist run/explore --race-check` turn it on, under any schedule.  See docs/races.md.

How it works, in two halves:

- online, in every rank (RaceRecorder): each task -- a rank's host code, one core of a
  kernel, and the DMA queue of that core (puts and gets in flight) -- appends to its own
  log the symmetric-memory accesses it makes (kind, kernel line, byte ranges) and the
  synchronisation it takes part in: releases (signal SET/ADD, atomics, the arrival at a
  barrier, the end of a core, a kernel launch) and acquires (a wait that observed a
  signal value, the departure from a barrier, the start of a core, the end of a
  kernel).  A wait has to know WHICH release it observed: that is the only cross-rank
  state, a small table in memory the launcher shares with the ranks before it forks
  (SlotTable: signal address -> its last few releases and the values they wrote).  A
  release registers itself before its store, so a wait that sees the value always finds
  the release; no scheduling point is added, so schedules and digests are unchanged.
- offline, in the launcher once every rank has finished (analyze): the logs give the
  happens-before graph; vector clocks are computed over it (FastTrack epochs: an
  access X happens before Y iff epoch(X) <= clock(Y)[task(X)]), every pair of accesses
  to overlapping bytes from different tasks with at least one write is checked, and the
  unordered ones are reported once per distinct pair of kernel lines.  Because the
  analysis uses the happens-before relation, not the interleaving that happened, it
  finds the same races under the free schedule as under any seed.

Memory-model choices (each is what the hardware and the compiler guarantee, no more):
- putmem/getmem (blocking or not) write their destination asynchronously: the data is
  complete only after quiet/fence/barrier_all or at the end of the kernel; putmem_signal
  orders its own data before its own signal.  A blocking put has read its source when it
  returns, a blocking get has written its destination.
- dl.wait has only a read effect: a later load is ordered after it only through
  dl.consume_token(ptr, token) (loads of the symmetric tensor the pointer lies in), or
  after a library call with write effects (notify, put/get, quiet, barrier, ...).
  Stores and library calls are ordered after the wait in program order.
- signal ops (SET, ADD, the reads of waits) and atomics never race with each other; a
  plain load or store racing with one is reported (e.g. polling a signal with tl.load).
- tl.atomic_* with acquire/release semantics synchronise like signals.
"""
from __future__ import annotations

import itertools
import mmap
import os
import pickle
import re
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from triton_dist.errors import TritonDistError

from . import context

# access kinds
READ, WRITE, ATOMIC, SYNC_READ, SYNC_WRITE, SYNC_ADD = range(6)
_WRITES = np.array([False, True, True, False, True, True])
_SYNCISH = np.array([False, False, True, True, True, True])   # atomics and signal ops: never race each other

# what an access was, for reports: (verb, noun)
OPS = ["loads", "stores to", "atomically updates", "putmem reads", "putmem writes", "getmem reads",
       "getmem writes", "sets the signal", "adds to the signal", "waits on the signal",
       "putmem_nbi reads", "putmem_nbi writes", "getmem_nbi reads", "getmem_nbi writes",
       "putmem_signal reads", "putmem_signal writes"]
(OP_LOAD, OP_STORE, OP_ATOMIC, OP_PUT_SRC, OP_PUT_DST, OP_GET_SRC, OP_GET_DST, OP_SET, OP_ADD, OP_WAIT,
 OP_PUTNBI_SRC, OP_PUTNBI_DST, OP_GETNBI_SRC, OP_GETNBI_DST, OP_PUTSIG_SRC, OP_PUTSIG_DST) = range(len(OPS))

# what an access was, as a noun: "after that <noun>"
NOUNS = ["load", "store", "atomic update", "put", "put", "get", "get", "signal SET", "signal ADD", "wait",
         "putmem_nbi", "putmem_nbi", "getmem_nbi", "getmem_nbi", "putmem_signal", "putmem_signal"]

REL_SET, REL_ADD = 0, 1
MASK64 = (1 << 64) - 1

ACTIVE = None          # the RaceRecorder of this process, if any


class RaceError(TritonDistError):
    """A launch with race_check=True found races.

    ``races``: the list of Race; ``result``: the LaunchResult of the launch (its values
    and the same races); str() is the full report.
    """

    def __init__(self, races, result=None):
        self.races = races
        self.result = result
        super().__init__(report(races))

    def __reduce__(self):
        return (RaceError, (self.races, self.result))


# ---- shared state: which release wrote a signal -------------------------------------------------

class SlotTable:
    """Signal address -> its last RING releases (id, SET or ADD, value written).

    Created by the launcher before it forks the ranks (anonymous shared memory and a
    process-shared lock).  Open addressing, linear probing; addresses never leave."""
    RING = 4

    def __init__(self, nslots: int = 1 << 15):
        import multiprocess as mp
        self.n = n = nslots
        r = self.RING
        layout = [("keys", np.uint64, n), ("heads", np.uint64, n), ("ids", np.int64, n * r),
                  ("vals", np.uint64, n * r), ("ops", np.int64, n * r)]
        size = sum(np.dtype(t).itemsize * k for _, t, k in layout)
        self._mm = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        off = 0
        for name, t, k in layout:
            setattr(self, name, np.frombuffer(self._mm, dtype=t, count=k, offset=off))
            off += np.dtype(t).itemsize * k
        self.lock = mp.get_context("fork").Lock()

    def _index(self, addr: int, insert: bool) -> int:
        n = self.n
        i = ((addr >> 2) * 0x9E3779B97F4A7C15 >> 17) & (n - 1)
        keys = self.keys
        for _ in range(n):
            k = int(keys[i])
            if k == addr:
                return i
            if k == 0:
                if not insert:
                    return -1
                keys[i] = addr
                return i
            i = (i + 1) & (n - 1)
        raise TritonDistError(f"race detector: more than {n} distinct signal addresses")

    def release(self, addr: int, rid: int, op: int, value: int) -> int:
        """Record a release; return the id of the newest release before it (or -1)."""
        r = self.RING
        with self.lock:
            i = self._index(addr, True)
            head = int(self.heads[i])
            prev = int(self.ids[i * r + (head - 1) % r]) if head else -1
            j = i * r + head % r
            self.ids[j] = rid
            self.ops[j] = op
            self.vals[j] = value & MASK64
            self.heads[i] = head + 1
        return prev

    def observe(self, addr: int, value: int) -> list:
        """The releases a read of `value` at addr may have observed: the newest ADD (it carries
        the earlier releases) and every remembered SET of that value; if none, the newest
        release.  Taking too many only adds edges (it can hide a race, never invent one)."""
        r = self.RING
        value &= MASK64
        with self.lock:
            i = self._index(addr, False)
            if i < 0:
                return []
            head = int(self.heads[i])
            if not head:
                return []
            out = []
            add_seen = False
            for k in range(1, min(head, r) + 1):
                j = i * r + (head - k) % r
                if int(self.ops[j]) == REL_ADD:
                    if not add_seen:
                        out.append(int(self.ids[j]))
                        add_seen = True
                elif int(self.vals[j]) == value:
                    out.append(int(self.ids[j]))
            return out or [int(self.ids[i * r + (head - 1) % r])]


# ---- online: what each rank records ---------------------------------------------------------------

class _Task:
    __slots__ = ("ev", "seen", "consumed", "carry", "nputs")

    def __init__(self):
        self.ev = []            # the log, in program order
        self.seen = set()       # accesses logged since the last synchronisation (dedup)
        self.consumed = []      # [(lo, hi)] heap offsets of symmetric tensors a consume_token'd pointer lies in
        self.carry = {}         # signal address -> put number whose data its next release carries
        self.nputs = 0


def _int_value(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


class RaceRecorder:
    """One per rank.  Every method is a hook the simulator calls only when the check is on."""

    def __init__(self, rt, directory: str, slots: SlotTable):
        global ACTIVE
        self.rt = rt
        self.rank = rt.rank
        self.dir = directory
        self.slots = slots
        self.tasks: dict = {}
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self.lines: dict = {}
        self.line_names: list = []
        self.launch_no = 0
        self._launch_rid = -1
        self.coll_no = 0
        self.dumped = False
        hs = rt.heaps
        self.heaps = sorted((b, b + hs.size, r) for r, b in enumerate(hs.bases))
        self._heap_lo = min(b for b, _, _ in self.heaps)
        self._heap_hi = max(e for _, e, _ in self.heaps)
        self.allocs = []        # [offset, nbytes, label, t_alloc, t_free]
        self._wrap_allocator(hs.allocator)
        ACTIVE = self

    # -- bookkeeping --------------------------------------------------------------------------
    def _wrap_allocator(self, alloc):
        orig_alloc, orig_release = alloc.alloc, alloc.release
        allocs = self.allocs

        def wrapped_alloc(nbytes, label):
            a = orig_alloc(nbytes, label)
            allocs.append([a.offset, a.nbytes, a.label, time.monotonic_ns(), None])
            return a

        def wrapped_release(offset):
            a = orig_release(offset)
            for rec in reversed(allocs):
                if rec[0] == offset and rec[4] is None:
                    rec[4] = time.monotonic_ns()
                    break
            return a
        alloc.alloc, alloc.release = wrapped_alloc, wrapped_release

    def _task(self) -> _Task:
        c = context.core()
        k = -1 if c is None else c.core
        t = self.tasks.get(k)
        if t is None:
            t = self.tasks[k] = _Task()
        return t

    def _rid(self) -> int:
        return (self.rank << 40) | next(self._ids)

    def _line(self) -> int:
        f = context.kernel_frame(2)
        key = None if f is None else (f.f_code, f.f_lineno)
        lid = self.lines.get(key)
        if lid is None:
            name = "<host>" if f is None else \
                f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} ({f.f_code.co_name})"
            lid = len(self.line_names)
            self.line_names.append(name)
            self.lines[key] = lid
        return lid

    def _in_heaps(self, lo: int, hi: int) -> bool:
        if hi <= self._heap_lo or lo >= self._heap_hi:
            return False
        for b, e, _ in self.heaps:
            if lo < e and hi > b:
                return True
        return False

    def _sync(self, t: _Task, ev) -> None:
        t.ev.append(ev)
        if t.seen:
            t.seen.clear()

    # -- plain accesses -------------------------------------------------------------------------
    def scalar_load(self, addr: int, size: int) -> None:
        self.scalar(READ, OP_LOAD, addr, size)

    def scalar_store(self, addr: int, size: int) -> None:
        self.scalar(WRITE, OP_STORE, addr, size)

    def block_load(self, addrs, size: int) -> None:
        self.block(READ, OP_LOAD, addrs, size)

    def block_store(self, addrs, size: int) -> None:
        self.block(WRITE, OP_STORE, addrs, size)

    def scalar(self, kind: int, op: int, addr: int, size: int) -> None:
        """A scalar load/store of `size` bytes at addr."""
        if not self._in_heaps(addr, addr + size):
            return
        t = self._task()
        line = self._line()
        cons = -1
        if kind == READ and t.consumed:
            cons = self._consumed(t, addr)
        key = (kind, op, line, cons, addr, size)
        if key in t.seen:
            return
        t.seen.add(key)
        t.ev.append(("a", kind, op, line, np.array([[addr, addr + size]], dtype=np.int64),
                     time.monotonic_ns(), cons))

    def block(self, kind: int, op: int, addrs: np.ndarray, size: int) -> None:
        """A block (DMA) access of the elements at addrs (already masked)."""
        if addrs.size == 0:
            return
        if addrs.size == 1:
            return self.scalar(kind, op, int(addrs.ravel()[0]), size)
        lo, hi = int(addrs.min()), int(addrs.max()) + size
        if not self._in_heaps(lo, hi):
            return
        runs = _runs(addrs, size)
        t = self._task()
        line = self._line()
        cons = -1
        if kind == READ and t.consumed:
            cons = self._consumed(t, lo)
        key = (kind, op, line, cons, runs.tobytes())
        if key in t.seen:
            return
        t.seen.add(key)
        t.ev.append(("a", kind, op, line, runs, time.monotonic_ns(), cons))

    def _consumed(self, t: _Task, addr: int) -> int:
        """The symmetric tensor (heap offset) holding addr, if a consume_token'd pointer of this
        task lies in it on any rank (symm_at of a consumed pointer keeps the dependency)."""
        for b, e, _ in self.heaps:
            if b <= addr < e:
                off = addr - b
                for lo, hi in t.consumed:
                    if lo <= off < hi:
                        return lo
                return -1
        return -1

    # -- atomics (tl.atomic_*) -----------------------------------------------------------------------
    def atomic(self, addrs: np.ndarray, size: int, synchronising: bool) -> None:
        if addrs.size == 0:
            return
        self.block(ATOMIC, OP_ATOMIC, addrs, size)
        if not synchronising:
            return
        uniq = np.unique(addrs)
        if not self._in_heaps(int(uniq[0]), int(uniq[-1]) + size):
            return
        t = self._task()
        rid = self._rid()
        prevs = []
        for a in uniq[:256].tolist():
            p = self.slots.release(int(a), rid, REL_ADD, 0)
            if p >= 0:
                prevs.append(p)
        # an acquire-release read-modify-write: acquires what the location's last release
        # published, and its own release continues that release sequence
        self._sync(t, ("q", prevs, (), None))
        t.ev.append(("r", rid, None, 0, prevs))

    # -- signals ----------------------------------------------------------------------------------------
    def signal(self, addr: int, size: int, add: bool, value) -> None:
        """A signal SET (store + dcci) or ADD (atomic) at addr: called before the store."""
        t = self._task()
        kind, op = (SYNC_ADD, OP_ADD) if add else (SYNC_WRITE, OP_SET)
        in_heap = self._in_heaps(addr, addr + size)
        if in_heap:
            t.ev.append(("a", kind, op, self._line(), np.array([[addr, addr + size]], dtype=np.int64),
                         time.monotonic_ns(), -1))
        rid = self._rid()
        carry = t.carry.pop(addr, 0) if t.carry else 0
        prev = self.slots.release(addr, rid, REL_ADD if add else REL_SET, _int_value(value))
        # an ADD continues the release sequence of the slot: whoever observes the sum
        # synchronises with every earlier release on it
        self._sync(t, ("r", rid, None, carry, (prev,) if add and prev >= 0 else ()))

    def observed(self, addrs, values, size: int, token: bool = False) -> int:
        """A wait saw values[i] at addrs[i] (after its last poll).  Returns the token of a
        dl.wait (0 for a full acquire)."""
        t = self._task()
        rids = []
        for a, v in zip(addrs, values):
            rids.extend(self.slots.observe(a, _int_value(v)))
        tok = next(self._tokens) & 0x7FFFFFFF if token else None
        self._sync(t, ("q", rids, (), tok))
        line = self._line()
        now = time.monotonic_ns()
        for a in addrs:
            if self._in_heaps(a, a + size):
                t.ev.append(("a", SYNC_READ, OP_WAIT, line, np.array([[a, a + size]], dtype=np.int64), now, -1))
        return tok or 0

    def consume(self, value, token) -> None:
        """dl.consume_token(value, token): loads through value's tensor depend on the wait."""
        tok = _int_value(np.asarray(getattr(getattr(token, "handle", None), "data", token)).ravel()[0]) \
            if token is not None else 0
        ty = getattr(value, "type", None)
        if ty is None or not ty.scalar.is_ptr():
            return
        addrs = np.unique(np.asarray(value.handle.data).ravel())
        t = self._task()
        rt = self.rt
        done = set()
        for a in addrs[:64].tolist():
            b = rt.space.find(int(a))
            if b is None or b.heap_rank is None:
                continue
            al = rt.heaps.allocator.find(int(a) - b.start)
            lo, hi = (al.offset, al.offset + al.nbytes) if al is not None else (0, b.end - b.start)
            if lo in done:
                continue
            done.add(lo)
            if (lo, hi) not in t.consumed:
                t.consumed.append((lo, hi))
            self._sync(t, ("c", lo, tok))

    # -- RMA ------------------------------------------------------------------------------------------
    def rma(self, dst: int, src: int, nbytes: int, put: bool, nbi: bool, signal_addr=None) -> None:
        """putmem/getmem(+_nbi, +_signal) issued: dst/src are absolute addresses."""
        if nbytes <= 0:
            return
        t = self._task()
        line = self._line()
        now = time.monotonic_ns()
        if put:
            src_op, dst_op = ((OP_PUTNBI_SRC, OP_PUTNBI_DST) if nbi else
                              (OP_PUTSIG_SRC, OP_PUTSIG_DST) if signal_addr is not None else (OP_PUT_SRC, OP_PUT_DST))
        else:
            src_op, dst_op = (OP_GETNBI_SRC, OP_GETNBI_DST) if nbi else (OP_GET_SRC, OP_GET_DST)
        own, queued = [], []
        for kind, op, addr in ((READ, src_op, src), (WRITE, dst_op, dst)):
            if not self._in_heaps(addr, addr + nbytes):
                continue
            rec = ("a", kind, op, line, np.array([[addr, addr + nbytes]], dtype=np.int64), now, -1)
            # what completes before the call returns is the core's own access; the rest is
            # the core's DMA queue, complete only at quiet
            done_on_return = not nbi and ((put and kind == READ) or (not put))
            (own if done_on_return else queued).append(rec)
        t.ev.extend(own)
        t.nputs += 1
        self._sync(t, ("p", queued))
        if signal_addr is not None:
            t.carry[signal_addr] = t.nputs

    def quiet(self) -> None:
        """quiet/fence (and barrier_all, the end of a core): every issued transfer is complete."""
        t = self._task()
        self._sync(t, ("Q",))

    # -- barriers, launches, collectives -------------------------------------------------------------
    def core_arrive(self, c, gen: int) -> None:
        self._sync(self._task(), ("r", self._rid(), ("cb", self.rank, self.launch_no, gen), 0, ()))

    def core_depart(self, c, gen: int) -> None:
        self._sync(self._task(), ("q", (), (("cb", self.rank, self.launch_no, gen),), None))

    def kernel_begin(self) -> None:
        self.launch_no += 1
        self._launch_rid = self._rid()
        self._sync(self._task(), ("r", self._launch_rid, None, 0, ()))

    def core_begin(self, c) -> None:
        t = self._task()
        t.consumed = []
        self._sync(t, ("q", (self._launch_rid,), (), None))

    def core_end(self, c) -> None:
        t = self._task()
        self._sync(t, ("Q",))
        self._sync(t, ("r", self._rid(), ("end", self.rank, self.launch_no), 0, ()))

    def kernel_end(self) -> None:
        self._sync(self._task(), ("q", (), (("end", self.rank, self.launch_no),), None))

    def collective_arrive(self) -> None:
        self._sync(self._task(), ("r", self._rid(), ("coll", self.coll_no), 0, ()))

    def collective_depart(self) -> None:
        self._sync(self._task(), ("q", (), (("coll", self.coll_no),), None))
        self.coll_no += 1

    # -- the end of the rank ---------------------------------------------------------------------------
    def dump(self) -> None:
        if self.dumped:
            return
        self.dumped = True
        doc = {"rank": self.rank, "tasks": {k: t.ev for k, t in self.tasks.items()},
               "lines": self.line_names, "allocs": self.allocs, "heaps": self.heaps,
               "reserved": self.rt.heaps.reserved}
        path = os.path.join(self.dir, f"rank{self.rank}.pkl")
        with open(path + ".tmp", "wb") as f:
            pickle.dump(doc, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(path + ".tmp", path)


def dump_active() -> None:
    """Called by a rank when its function has returned: write its log for the launcher."""
    if ACTIVE is not None:
        ACTIVE.dump()


def _runs(addrs: np.ndarray, size: int) -> np.ndarray:
    """Sorted disjoint [lo, hi) byte runs covering the elements at addrs."""
    a = np.asarray(addrs, dtype=np.int64).ravel()
    if a.size > 1 and not (a[1:] > a[:-1]).all():
        a = np.unique(a)
    brk = np.flatnonzero(np.diff(a) != size)
    starts = a[np.concatenate(([0], brk + 1))]
    ends = a[np.concatenate((brk, [a.size - 1]))] + size
    return np.stack([starts, ends], axis=1)


# ---- the report ----------------------------------------------------------------------------------

@dataclass
class RaceAccess:
    rank: int
    core: int
    op: str            # e.g. "loads", "putmem writes"
    where: str         # kernel line: "file.py:LINE (kernel)"
    in_flight: bool    # done by the core's DMA queue (a put/get not yet completed)

    @property
    def who(self) -> str:
        return f"rank {self.rank} core {self.core}" if self.core >= 0 else f"rank {self.rank} host"


@dataclass
class Race:
    first: RaceAccess      # the earlier of the two in the run that was checked
    second: RaceAccess
    target: str            # symmetric tensor + bytes, e.g. "symm tensor #1 (float32[8]) of rank 1 [0:32]"
    missing: str           # the missing happens-before edge, in words
    count: int = 1         # how many unordered pairs of accesses these two lines gave

    def __str__(self) -> str:
        more = f" ({self.count} unordered pairs of accesses)" if self.count > 1 else ""
        return (f"{self.first.who} {self.first.op} {self.target} at {self.first.where}; "
                f"{self.second.who} {self.second.op} it at {self.second.where}: {self.missing}{more}")


def report(races) -> str:
    if not races:
        return "no races"
    head = f"{len(races)} race{'s' if len(races) != 1 else ''} on symmetric memory " \
           f"(unordered conflicting accesses, one per pair of kernel lines):"
    return head + "".join(f"\n  {i + 1}. {r}" for i, r in enumerate(races))


# ---- offline: the analysis ------------------------------------------------------------------------

class _Logs:
    def __init__(self, docs):
        self.docs = docs
        self.heaps = docs[0]["heaps"]
        self.reserved = docs[0]["reserved"]
        self.allocs = docs[0]["allocs"]
        self.lines: list = []
        index = {}
        self.line_map = []
        for d in docs:
            m = []
            for name in d["lines"]:
                if name not in index:
                    index[name] = len(self.lines)
                    self.lines.append(name)
                m.append(index[name])
            self.line_map.append(np.array(m, dtype=np.int64))


_DTYPE_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
                "int64": 8, "uint8": 1, "bool": 1, "uint16": 2, "uint32": 4, "uint64": 8}
_LABEL = re.compile(r"\((\w+)\[")


def _describe(logs: _Logs, lo: int, hi: int, t_ns: int) -> str:
    for b, e, r in logs.heaps:
        if b <= lo < e:
            off, end = lo - b, hi - b
            best = None
            for a_off, nbytes, label, t0, t1 in logs.allocs:
                if a_off <= off < a_off + nbytes and t0 <= t_ns and (t1 is None or t_ns < t1):
                    best = (a_off, label)
            if best is None:
                for a_off, nbytes, label, t0, t1 in logs.allocs:
                    if a_off <= off < a_off + nbytes:
                        best = (a_off, label)
            if best is not None:
                a_off, label = best
                m = _LABEL.search(label)
                size = _DTYPE_SIZES.get(m.group(1)) if m else None
                s, f = off - a_off, end - a_off
                what = f"elements [{s // size}:{-(-f // size)}]" if size else f"{f - s} bytes"
                return f"{label} of rank {r} + {s}, {what}"
            if off < logs.reserved:
                return f"device-library state of rank {r} + {off}"
            return f"the symmetric heap of rank {r} + {off} (bytes [{off}:{end}])"
    return f"0x{lo:x}..0x{hi:x}"


class _State:
    __slots__ = ("rank", "core", "ev", "pos", "own", "stream", "vc", "lvc", "ctr", "tokens", "cons",
                 "fver", "lver", "cver")

    def __init__(self, rank, core, ev, own, stream, n):
        self.rank, self.core, self.ev, self.pos = rank, core, ev, 0
        self.own, self.stream = own, stream
        self.vc = np.zeros(n, dtype=np.int64)
        self.vc[own] = 1
        self.lvc = self.vc.copy()
        self.ctr = 0
        self.tokens = {}
        self.cons = {}
        self.fver = self.lver = -1
        self.cver = {}


def analyze(directory: str, world_size: int) -> list:
    """Read every rank's log from directory; return the races, one per distinct pair of lines."""
    docs = []
    for r in range(world_size):
        path = os.path.join(directory, f"rank{r}.pkl")
        if not os.path.exists(path):
            raise TritonDistError(f"race detector: rank {r} left no log (it did not finish)")
        with open(path, "rb") as f:
            docs.append(pickle.load(f))
    return _analyze(_Logs(docs))


def _analyze(logs: _Logs) -> list:
    # components of the vector clocks: every task and every core's DMA queue
    comp = {}
    for d in logs.docs:
        for core in sorted(d["tasks"]):
            comp[(d["rank"], core, False)] = len(comp)
            if core >= 0:
                comp[(d["rank"], core, True)] = len(comp)
    n = len(comp)
    groups = defaultdict(list)
    states = []
    for d in logs.docs:
        for core, ev in sorted(d["tasks"].items()):
            for e in ev:
                if e[0] == "r" and e[2] is not None:
                    groups[e[2]].append(e[1])
            st = _State(d["rank"], core, ev, comp[(d["rank"], core, False)],
                        comp.get((d["rank"], core, True), -1), n)
            states.append(st)
    rel = {}
    clocks = []            # clock versions (rows)
    recs = []              # (tid, epoch, ver, fullver, kind, op, line, runs, t, rank, core, stream, issue_epoch, own)

    def full_ver(st):
        if st.fver < 0:
            st.fver = len(clocks)
            clocks.append(st.vc.copy())
        return st.fver

    def load_ver(st, cons):
        if cons >= 0 and cons in st.cons:
            key = cons
            v = st.cver.get(key)
            if v is None:
                v = st.cver[key] = len(clocks)
                clocks.append(np.maximum(st.lvc, st.cons[cons]))
            return v
        if st.lver < 0:
            st.lver = len(clocks)
            clocks.append(st.lvc.copy())
        return st.lver

    def changed(st):
        st.fver = -1
        st.lver = -1
        st.cver = {}

    def tick(st):
        st.vc[st.own] += 1
        st.lvc = st.vc.copy()            # a library call with write effects: loads are ordered too
        changed(st)

    def ready(e):
        if e[0] == "q":
            for d in e[1]:
                if d not in rel:
                    return False
            for g in e[2]:
                for d in groups.get(g, ()):
                    if d not in rel:
                        return False
        elif e[0] == "r":
            for d in e[4]:
                if d not in rel:
                    return False
        return True

    def step(st, e, force=False):
        k = e[0]
        rank_lines = logs.line_map[st.rank]
        if k == "a":
            _, kind, op, line, runs, t, cons = e
            ver = load_ver(st, cons) if kind == READ and op == OP_LOAD else full_ver(st)
            recs.append((st.own, int(st.vc[st.own]), ver, full_ver(st), kind, op, int(rank_lines[line]), runs, t,
                         st.rank, st.core, False, 0, st.own))
        elif k == "p":
            st.ctr += 1
            fv = full_ver(st)
            issue = int(st.vc[st.own])
            for _, kind, op, line, runs, t, cons in e[1]:
                recs.append((st.stream, st.ctr, fv, fv, kind, op, int(rank_lines[line]), runs, t,
                             st.rank, st.core, True, issue, st.own))
            tick(st)
        elif k == "r":
            _, rid, group, carry, chain = e
            snap = st.vc.copy()
            if carry and st.stream >= 0:
                snap[st.stream] = max(snap[st.stream], carry)
            for d in chain:
                if d in rel:
                    np.maximum(snap, rel[d], out=snap)
            rel[rid] = snap
            tick(st)
        elif k == "q":
            _, rids, grps, tok = e
            x = np.zeros(n, dtype=np.int64)
            for d in rids:
                if d in rel:
                    np.maximum(x, rel[d], out=x)
            for g in grps:
                for d in groups.get(g, ()):
                    if d in rel:
                        np.maximum(x, rel[d], out=x)
            np.maximum(st.vc, x, out=st.vc)
            if tok is None:
                st.lvc = st.vc.copy()
            else:
                st.tokens[tok] = x
            changed(st)
        elif k == "Q":
            if st.stream >= 0:
                st.vc[st.stream] = max(st.vc[st.stream], st.ctr)
            st.lvc = st.vc.copy()
            changed(st)
        elif k == "c":
            _, lo, tok = e
            x = st.tokens.get(tok)
            if x is not None:
                st.cons[lo] = np.maximum(st.cons[lo], x) if lo in st.cons else x.copy()
            else:
                st.cons.setdefault(lo, np.zeros(n, dtype=np.int64))
            changed(st)

    pending = list(states)
    while pending:
        progressed = False
        for st in pending:
            ev = st.ev
            while st.pos < len(ev):
                e = ev[st.pos]
                if not ready(e):
                    break
                step(st, e)
                st.pos += 1
                progressed = True
        pending = [st for st in pending if st.pos < len(st.ev)]
        if pending and not progressed:
            # a release that no log holds (cannot happen when every rank finished): go on without it
            st = pending[0]
            step(st, st.ev[st.pos])
            st.pos += 1
    if not recs:
        return []
    return _conflicts(logs, recs, np.array(clocks), comp)


def _conflicts(logs, recs, C, comp) -> list:
    nrec = len(recs)
    tid = np.fromiter((r[0] for r in recs), dtype=np.int64, count=nrec)
    epoch = np.fromiter((r[1] for r in recs), dtype=np.int64, count=nrec)
    ver = np.fromiter((r[2] for r in recs), dtype=np.int64, count=nrec)
    kind = np.fromiter((r[4] for r in recs), dtype=np.int64, count=nrec)
    is_w = _WRITES[kind]
    syncish = _SYNCISH[kind]
    lens = np.fromiter((len(r[7]) for r in recs), dtype=np.int64, count=nrec)
    runs = np.concatenate([r[7] for r in recs])
    row_rec = np.repeat(np.arange(nrec), lens)
    bounds = np.unique(runs.ravel())
    s0 = np.searchsorted(bounds, runs[:, 0])
    s1 = np.searchsorted(bounds, runs[:, 1])
    cover = s1 - s0
    total = int(cover.sum())
    # expand every run into the elementary segments [bounds[k], bounds[k+1]) it covers
    seg = np.repeat(s0, cover) + (np.arange(total) - np.repeat(np.cumsum(cover) - cover, cover))
    rec_of = np.repeat(row_rec, cover)
    order = np.lexsort((rec_of, seg))
    seg, rec_of = seg[order], rec_of[order]
    starts = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))
    ends = np.concatenate((starts[1:], [len(seg)]))
    w_count = np.add.reduceat(is_w[rec_of].astype(np.int64), starts) if len(seg) else np.zeros(0)
    t_min = np.minimum.reduceat(tid[rec_of], starts) if len(seg) else np.zeros(0)
    t_max = np.maximum.reduceat(tid[rec_of], starts) if len(seg) else np.zeros(0)
    interesting = np.flatnonzero((w_count > 0) & (t_min != t_max))
    pairs = {}
    for i in interesting.tolist():
        members = np.unique(rec_of[starts[i]:ends[i]])
        lo, hi = int(bounds[seg[starts[i]]]), int(bounds[seg[starts[i]] + 1])
        mw = is_w[members]
        ms = syncish[members]
        mt = tid[members]
        for wi in np.flatnonzero(mw).tolist():
            a = int(members[wi])
            other = members[(mt != mt[wi]) & ~(ms & ms[wi])]
            for b in other.tolist():
                key = (a, b) if a < b else (b, a)
                p = pairs.get(key)
                if p is None:
                    pairs[key] = [lo, hi]
                else:
                    p[0] = min(p[0], lo)
                    p[1] = max(p[1], hi)
    if not pairs:
        return []
    keys = np.array(list(pairs.keys()), dtype=np.int64)
    a, b = keys[:, 0], keys[:, 1]
    ab = epoch[a] <= C[ver[b], tid[a]]
    ba = epoch[b] <= C[ver[a], tid[b]]
    racy = np.flatnonzero(~(ab | ba))
    by_lines = {}
    for i in racy.tolist():
        x, y = int(a[i]), int(b[i])
        if recs[y][8] < recs[x][8]:
            x, y = y, x
        rx, ry = recs[x], recs[y]
        key = tuple(sorted(((rx[6], rx[5]), (ry[6], ry[5]))))
        cur = by_lines.get(key)
        if cur is None:
            by_lines[key] = [x, y, pairs[(min(x, y), max(x, y))], 1]
        else:
            cur[3] += 1
            if rx[8] < recs[cur[0]][8]:
                cur[0], cur[1], cur[2] = x, y, pairs[(min(x, y), max(x, y))]
    races = []
    for x, y, (lo, hi), count in sorted(by_lines.values(), key=lambda v: recs[v[0]][8]):
        rx, ry = recs[x], recs[y]
        races.append(Race(_access(logs, rx), _access(logs, ry), _describe(logs, lo, hi, rx[8]),
                          _missing(logs, rx, ry, C, comp), count))
    return races


def _access(logs, r) -> RaceAccess:
    return RaceAccess(rank=r[9], core=r[10], op=OPS[r[5]], where=logs.lines[r[6]], in_flight=r[11])


def _missing(logs, x, y, C, comp) -> str:
    """Why x (the earlier access) is not ordered before y, in words."""
    ax, ay = _access(logs, x), _access(logs, y)
    kx, ky = x[4], y[4]
    # (tid, epoch, ver, fullver, kind, op, line, runs, t, rank, core, stream, issue_epoch, own)
    if ky == READ and y[5] == OP_LOAD and x[1] <= C[y[3], x[0]]:
        return (f"{ay.who} loads it after a dl.wait that orders the write, but the load's pointer did "
                f"not go through dl.consume_token(ptr, token) of that wait, so the load may be "
                f"issued before the wait completes")
    if x[11]:
        if ay.rank == ax.rank and ay.core == ax.core and not y[11]:
            return (f"{ay.who} {'reads' if ky == READ else 'writes'} it while its own {NOUNS[x[5]]} may "
                    f"still be in flight: call quiet (or fence) in between")
        if x[12] <= C[y[3], x[13]]:
            return (f"the {NOUNS[x[5]]} was issued before the signal or barrier that orders {ay.who}, "
                    f"but it was not complete then: without quiet/fence between the put and the signal "
                    f"the data may land after it (putmem_signal orders its own data before its signal)")
        return (f"{ay.who} did not wait on a signal set after that {NOUNS[x[5]]} completed (quiet, "
                f"putmem_signal) nor meet {ax.who} at a barrier in between")
    if kx in (SYNC_WRITE, SYNC_ADD) and ky in (READ, WRITE):
        what = "reads the signal with a plain load" if ky == READ else "writes the signal with a plain store"
        return (f"{ay.who} {what}, which is not ordered after {ax.who}'s signal op: observe a signal "
                f"with dl.wait or signal_wait_until")
    if ky in (SYNC_WRITE, SYNC_ADD, SYNC_READ) and kx in (READ, WRITE):
        return (f"{ax.who}'s plain {NOUNS[x[5]]} of the signal is not ordered with {ay.who}'s "
                f"{NOUNS[y[5]]} on it: observe a signal with dl.wait or signal_wait_until, and reset "
                f"it only after something orders the reset with every signal op on it")
    if ax.rank == ay.rank and not y[11]:
        return (f"cores {min(ax.core, ay.core)} and {max(ax.core, ay.core)} of rank {ax.rank} do not "
                f"synchronise between these "
                f"accesses (no barrier_all or signal from one to the other)")
    return (f"{ay.who} did not wait on a signal set after that {NOUNS[x[5]]} "
            f"(nor meet {ax.who} at a barrier in between)")
