"""Online, in every rank: each program's list of ops for the performance model (model.py).

PerfRecorder subscribes to the rank's observers (sim/observers.py): every kernel memory
access and atomic (sim/access.py), signal, wait, RMA, quiet, core barrier and tl.dot.

Which SET satisfied which wait: like the race detector, a shared table (PerfSlots, a
SlotTable with a longer ring) maps a signal address to its last releases; a release
registers before its store, so a wait that saw a value finds the release(s) that wrote it.
Its own table, not the race detector's: each recorder registers every release once.

An op is a small tuple (model.py reads them):
  ("L"|"S", nbytes, owner rank, first address)   block or scalar load / store
  ("D", flops, dtype)                             tl.dot
  ("A", nbytes, owner, groups, rid)               atomic; groups like W's when it acquires
  ("R", rid, owner)                               signal SET / ADD on owner's memory
  ("W", groups)                                   a wait observed: [(mode, [rid, ...]), ...]
  ("P", nbytes, peer, put, nbi)                   putmem / getmem (+ _nbi, _signal)
  ("Q",)                                          quiet / fence
  ("CA"|"CD", generation)                         local core barrier arrive / depart
Consecutive identical loads (a poll of one address) are kept once.
"""
from __future__ import annotations

import itertools
import os
import pickle

from .. import context
from ..access import ATOMIC as _ATOMIC
from ..access import KERNEL as _KERNEL
from ..access import LOAD as _LOAD
from ..observers import subscribe
from ..race.events import MASK64, REL_ADD, REL_SET
from ..race.slots import SlotTable

ACTIVE = None        # the PerfRecorder of this process, if any


class PerfSlots(SlotTable):
    """Signal address -> its last RING releases.  For the model a wait needs every ADD of a
    counter (the value is their sum), so the ring is longer than the race detector's."""
    RING = 16

    def observe_group(self, addr: int, value: int):
        """("max", the ADDs since the newest SET, and that SET) if the newest release is an ADD:
        the value needed all of them; else ("min", the SETs of this value): any one sufficed."""
        r = self.RING
        with self.lock:
            i = self._index(addr, False)
            if i < 0:
                return ("min", [])
            head = int(self.heads[i])
            if not head:
                return ("min", [])
            js = [i * r + (head - k) % r for k in range(1, min(head, r) + 1)]
            if int(self.ops[js[0]]) == REL_ADD:
                out = []
                for j in js:
                    out.append(int(self.ids[j]))
                    if int(self.ops[j]) != REL_ADD:
                        break
                return ("max", out)
            v = value & MASK64
            same = [int(self.ids[j]) for j in js if int(self.ops[j]) != REL_ADD and int(self.vals[j]) == v]
            return ("min", same or [int(self.ids[js[0]])])


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


class PerfRecorder:
    """One per rank: launches -> programs -> op lists."""

    def __init__(self, rt, directory: str, slots: PerfSlots):
        global ACTIVE
        self.rank = rt.rank
        self.dir = directory
        self.slots = slots
        self.launches = []
        self._ids = itertools.count(1)
        hs = rt.heaps
        self._heaps = [(b, b + hs.size, r) for r, b in enumerate(hs.bases)]
        self.dumped = False
        ACTIVE = self

    def _rid(self) -> int:
        return (self.rank << 40) | next(self._ids)

    def _owner(self, addr: int) -> int:
        for b, e, r in self._heaps:
            if b <= addr < e:
                return r
        return self.rank            # a plain tensor argument: this rank's memory

    def _ops(self):
        c = context.core()
        if c is None or not self.launches:
            return None
        return self.launches[-1]["progs"].get(c.core)

    # -- memory ---------------------------------------------------------------------------------
    def _access(self, kind, addr, nbytes):
        ops = self._ops()
        if ops is None:
            return
        op = (kind, nbytes, self._owner(addr), addr)
        if kind == "L" and ops and ops[-1] == op:
            return                   # a poll of the same data: one load in the model
        ops.append(op)

    def access(self, a):
        """A kernel's load, store or atomic (sim/access.py); the device library's own
        accesses are ops of their own (R, W, P)."""
        if a.origin is not _KERNEL or a.addrs is None or not a.addrs.size:
            return
        if a.kind is _ATOMIC:
            self.atomic_done(a.addrs, a.itemsize, a.sync, a.read or {})
        else:
            self._access("L" if a.kind is _LOAD else "S", int(a.addrs[0]), int(a.addrs.size) * a.itemsize)

    def atomic_done(self, addrs, size, synchronising, read):
        """The atomic on addrs was performed and read `read` ({addr: value})."""
        ops = self._ops()
        if ops is None or not addrs.size:
            return
        a0 = int(addrs[0])
        groups, rid = [], 0
        if synchronising:
            rid = self._rid()
            for a in addrs[:16].tolist():
                groups.append(self.slots.observe_group(a, _int(read.get(a, 0))))
                self.slots.release(a, rid, REL_ADD, 0)
        op = ("A", int(addrs.size) * size, self._owner(a0), groups, rid)
        if ops and ops[-1][0] == "A" and ops[-1][1:3] == op[1:3]:
            ops[-1] = op             # a polling loop of atomics: the last poll is the one that counts
        else:
            ops.append(op)

    def dot(self, m, n, k, dtype, precision=None):
        ops = self._ops()
        if ops is not None:
            d = str(dtype)
            if d == "fp32" and "TF32" in str(precision).upper():
                d = "tf32"
            ops.append(("D", 2.0 * m * n * k, d))

    # -- signals, waits ----------------------------------------------------------------------------
    def signal(self, addr, size, add, value):
        rid = self._rid()
        self.slots.release(addr, rid, REL_ADD if add else REL_SET, _int(value))
        ops = self._ops()
        if ops is not None:
            ops.append(("R", rid, self._owner(addr)))

    def observed(self, addrs, values, size, token=False):
        ops = self._ops()
        if ops is not None:
            ops.append(("W", [self.slots.observe_group(a, _int(v)) for a, v in zip(addrs, values)]))

    def consume(self, value, token):
        pass

    def rma(self, dst, src, nbytes, put, nbi, signal_addr=None, signal_size=4):
        ops = self._ops()
        if ops is not None and nbytes > 0:
            ops.append(("P", int(nbytes), self._owner(dst if put else src), bool(put), bool(nbi)))

    def quiet(self):
        ops = self._ops()
        if ops is not None:
            ops.append(("Q",))

    # -- launches, cores, barriers ---------------------------------------------------------------------
    def kernel_begin(self):
        self.launches.append({"kernel": None, "progs": {}, "grid": 0})

    def core_begin(self, c):
        if not self.launches:
            self.kernel_begin()
        launch = self.launches[-1]
        launch["kernel"] = c.kernel
        launch["grid"] = c.ncores
        launch["progs"][c.core] = []

    def core_end(self, c):
        pass

    def kernel_end(self):
        pass

    def core_arrive(self, c, gen):
        ops = self._ops()
        if ops is not None:
            ops.append(("CA", gen))

    def core_depart(self, c, gen):
        ops = self._ops()
        if ops is not None:
            ops.append(("CD", gen))

    def collective_arrive(self):
        pass

    def collective_depart(self):
        pass

    def dump(self):
        if self.dumped:
            return
        self.dumped = True
        path = os.path.join(self.dir, f"rank{self.rank}.perf.pkl")
        with open(path + ".tmp", "wb") as f:
            pickle.dump({"rank": self.rank, "launches": self.launches}, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(path + ".tmp", path)


def attach(rt, directory: str, slots: PerfSlots) -> None:
    """Make the rank record for the model (alongside the race recorder if there is one)."""
    subscribe(rt, PerfRecorder(rt, directory, slots))


def dump_active() -> None:
    if ACTIVE is not None:
        ACTIVE.dump()
