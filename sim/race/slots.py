"""The only cross-rank state of the detector: which release wrote a signal (SlotTable).

A wait must know WHICH release it observed.  The launcher creates the table in anonymous
shared memory before it forks the ranks; a release registers itself before its store, so
a wait that sees the value always finds the release.
"""
from __future__ import annotations

import mmap

import numpy as np

from triton_dist.errors import TritonDistError

from ..board import probe
from .events import MASK64, REL_ADD


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
        i = probe(self.keys, addr, insert, 17)
        if i < 0 and insert:
            raise TritonDistError(f"race detector: more than {self.n} distinct signal addresses")
        return i

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
        with self.lock:
            return self._observed(addr, value & MASK64)

    def _observed(self, addr: int, value: int) -> list:
        r = self.RING
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

    def read_modify_write(self, addrs, rid: int, perform) -> tuple:
        """An acquire-release atomic on addrs: `perform()` does it and returns {addr: value
        read}.  Under the lock, so no release can register between the atomic's read and
        the edges taken from it: the atomic acquires the releases whose value it READ (not
        the newest one before it started, which a SET landing in between would miss), then
        registers its own release (an ADD: it continues the release sequence).  It also
        acquires the newest release registered before it, as every release registers
        before its store: that release (or the chain it continues) is at worst one not yet
        visible, an extra edge, while the ring of RING entries can be overrun by the
        atomic's own earlier polls (each one registers a release).
        Returns (perform's result, acquired release ids)."""
        r = self.RING
        with self.lock:
            out, read = perform()
            prevs = []
            for a in addrs:
                i = self._index(a, True)
                head = int(self.heads[i])
                if head:
                    prevs.append(int(self.ids[i * r + (head - 1) % r]))
                for p in self._observed(a, read.get(a, 0) & MASK64):
                    if p not in prevs:
                        prevs.append(p)
                j = i * r + head % r
                self.ids[j] = rid
                self.ops[j] = REL_ADD
                self.vals[j] = 0
                self.heads[i] = head + 1
        return out, prevs
