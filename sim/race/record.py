"""Online, in every rank: record each task's log of accesses and synchronisation.

A task is a rank's host code, one core of a kernel, or the DMA queue of that core.  The
simulator calls RaceRecorder's hooks (only when the check is on); at the end of the rank
dump_active() writes the logs for the launcher's analysis (analysis.py).  The event
encodings are in events.py.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import pickle
import threading
import time

import numpy as np

from .. import context
from ..access import ATOMIC as _ATOMIC
from ..access import DMA as _DMA
from ..access import KERNEL as _KERNEL
from ..access import LOAD as _LOAD
from .events import (ATOMIC, OP_ADD, OP_ATOMIC, OP_GET_DST, OP_GET_SRC, OP_GETNBI_DST, OP_GETNBI_SRC, OP_LOAD,
                     OP_PUT_DST, OP_PUT_SRC, OP_PUTNBI_DST, OP_PUTNBI_SRC, OP_PUTSIG_DST, OP_PUTSIG_SRC, OP_SET,
                     OP_STORE, OP_WAIT, READ, REL_ADD, REL_SET, SYNC_ADD, SYNC_READ, SYNC_WRITE, WRITE)
from .slots import SlotTable

ACTIVE = None          # the RaceRecorder of this process, if any


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
        self.allocs = []        # [offset, nbytes, label, t_alloc, t_free, Allocation]
        self._wrap_allocator(hs.allocator)
        # under the ascend models a kernel's stores are DMAs in flight (sim/dma.py): logged
        # as the core's DMA stream ("d"), complete at quiet/fence/barrier/putmem_signal/end
        self._dma_block = bool(rt.memory.caches)
        self._dma_scalar = self._dma_block and not getattr(rt.memory, "cached_kernel_stores", False)
        # first store of a (launch, block, line, addresses) by a mix block's sub-core instance
        self._siblings: dict = {}
        self._siblings_lock = threading.Lock()
        ACTIVE = self

    # -- bookkeeping --------------------------------------------------------------------------
    def _wrap_allocator(self, alloc):
        orig_alloc, orig_release = alloc.alloc, alloc.release
        allocs = self.allocs

        def wrapped_alloc(nbytes, label):
            a = orig_alloc(nbytes, label)
            allocs.append([a.offset, a.nbytes, a.label, time.monotonic_ns(), None, a])
            return a

        def wrapped_release(offset, *site):
            a = orig_release(offset, *site)
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

    def _line(self, site=None) -> int:
        """The id of a kernel line: `site` ((code, line), taken by sim/access.py) or the caller's."""
        if site is None:
            f = context.kernel_frame(2)
            site = None if f is None else (f.f_code, f.f_lineno)
        key = site
        lid = self.lines.get(key)
        if lid is None:
            name = context.site_name(site)
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

    # -- plain accesses (sim/access.py hands each one to access(); atomics to around_atomic) ----------
    def access(self, a) -> None:
        """A tl.load / tl.store of a kernel (the device library's own accesses are recorded
        through signal/observed/rma instead; atomics through around_atomic)."""
        if a.origin is not _KERNEL or a.kind is _ATOMIC:
            return
        if a.kind is _LOAD:
            self.block(READ, OP_LOAD, a.addrs, a.itemsize, site=a.site)
            return
        if a.scalar and self._dma_block:       # a scalar tl.store: a 1-element DMA, or through the cache
            self.scalar(WRITE, OP_STORE, a.lo, a.itemsize, a.route is _DMA, site=a.site)
            return
        if self._sibling_duplicate(a.addrs, a.values(), a.site):
            return
        self.block(WRITE, OP_STORE, a.addrs, a.itemsize, a.route is _DMA, site=a.site)

    def _sibling_duplicate(self, addrs, values, site=None) -> bool:
        """The second of the two sub-core instances of a mix block storing, at the same kernel
        line, the same bytes to the same addresses as the first: on the NPU that is one store
        (the cube's: the simulator runs the block's whole body on both vector instances,
        docs/device_model.md), so it is not logged a second time.  Different bytes are two
        writes, and race as such."""
        c = context.core()
        if c is None or c.sub_blocks < 2 or addrs.size == 0:
            return False
        key = (self.launch_no, c.grid_idx, self._line(site), addrs.tobytes())
        digest = hashlib.blake2b(np.ascontiguousarray(values).tobytes(), digest_size=16).digest()
        with self._siblings_lock:
            first = self._siblings.get(key)
            if first is None:
                self._siblings[key] = (c.sub_vec, digest)
                return False
            if first[0] != c.sub_vec and first[1] == digest:
                del self._siblings[key]
                return True
        return False

    def scalar(self, kind: int, op: int, addr: int, size: int, dma: bool = False, site=None) -> None:
        """A scalar load/store of `size` bytes at addr (dma: a store in flight, sim/dma.py)."""
        if not self._in_heaps(addr, addr + size):
            return
        t = self._task()
        line = self._line(site)
        cons = -1
        if kind == READ and t.consumed:
            cons = self._consumed(t, addr)
        key = (kind, op, line, cons, addr, size)
        if key in t.seen:
            return
        t.seen.add(key)
        rec = ("a", kind, op, line, np.array([[addr, addr + size]], dtype=np.int64), time.monotonic_ns(), cons)
        t.ev.append(("d", rec) if dma else rec)

    def block(self, kind: int, op: int, addrs: np.ndarray, size: int, dma: bool = False, site=None) -> None:
        """A block (DMA) access of the elements at addrs (already masked); dma: a store
        in flight until the core's next quiet/fence/barrier/putmem_signal/end (sim/dma.py)."""
        if addrs.size == 0:
            return
        if addrs.size == 1:
            return self.scalar(kind, op, int(addrs.ravel()[0]), size, dma, site)
        lo, hi = int(addrs.min()), int(addrs.max()) + size
        if not self._in_heaps(lo, hi):
            return
        runs = _runs(addrs, size)
        t = self._task()
        line = self._line(site)
        cons = -1
        if kind == READ and t.consumed:
            cons = self._consumed(t, lo)
        key = (kind, op, line, cons, runs.tobytes())
        if key in t.seen:
            return
        t.seen.add(key)
        rec = ("a", kind, op, line, runs, time.monotonic_ns(), cons)
        t.ev.append(("d", rec) if dma else rec)

    # -- host code's torch accesses of symmetric tensors (host.py) -----------------------------------
    def heap_span(self) -> tuple:
        """[lo, hi) of all heaps: a quick test before the exact one."""
        return self._heap_lo, self._heap_hi

    def host_access(self, kind: int, op: int, lo: int, hi: int, site) -> None:
        """Host code read or wrote bytes [lo, hi) of a symmetric tensor through torch, at `site`."""
        if context.core() is None:
            self.scalar(kind, op, lo, hi - lo, site=site)

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
    def around_atomic(self, a, perform):
        """A tl.atomic_* on the elements at a.addrs (already masked).  `perform()` does the
        atomic, sets a.read ({addr: value read}) and returns its result; an acquiring atomic
        synchronises with the releases whose value it read, so it is performed under the
        slot table's lock (SlotTable.read_modify_write)."""
        addrs, size = a.addrs, a.itemsize
        if a.origin is not _KERNEL or addrs is None or addrs.size == 0:
            return perform()
        self.block(ATOMIC, OP_ATOMIC, addrs, size, site=a.site)
        if not a.sync:
            return perform()
        uniq = np.unique(addrs)
        if not self._in_heaps(int(uniq[0]), int(uniq[-1]) + size):
            return perform()
        t = self._task()
        rid = self._rid()
        out, prevs = self.slots.read_modify_write(uniq[:256].tolist(), rid, lambda: (perform(), a.read))
        # an acquire-release read-modify-write: acquires what the releases it read published,
        # and its own release continues their release sequence
        self._sync(t, ("q", prevs, (), None))
        t.ev.append(("r", rid, None, 0, prevs))
        return out

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
    def rma(self, dst: int, src: int, nbytes: int, put: bool, nbi: bool, signal_addr=None,
            signal_size: int = 4) -> None:
        """putmem/getmem(+_nbi, +_signal) issued: dst/src are absolute addresses."""
        if nbytes <= 0:
            return
        t = self._task()
        if signal_addr is not None:
            self._sync(t, ("Q",))   # putmem_signal's quiet: everything issued before lands before its signal
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
            done_on_return = not nbi and ((put and kind == READ) or (not put))
            for k, lo, hi in _split_at_signal(kind, addr, addr + nbytes, signal_addr if put else None,
                                              signal_size):
                rec = ("a", k, op, line, np.array([[lo, hi]], dtype=np.int64), now, -1)
                # what completes before the call returns is the core's own access; the rest is
                # the core's DMA queue, complete only at quiet
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

    def stores_landed(self) -> None:
        """A releasing atomic completed the core's stores in flight (its DMA-store stream), not its puts."""
        t = self._task()
        self._sync(t, ("D",))

    # -- barriers, launches, collectives -------------------------------------------------------------
    def core_arrive(self, c, gen: int) -> None:
        self._sync(self._task(), ("r", self._rid(), ("cb", self.rank, self.launch_no, gen), 0, ()))

    def core_depart(self, c, gen: int) -> None:
        self._sync(self._task(), ("q", (), (("cb", self.rank, self.launch_no, gen),), None))

    def flag_set(self, c, keys) -> None:
        t = self._task()
        for k in keys:
            self._sync(t, ("r", self._rid(), ("fl", self.rank, self.launch_no) + k, 0, ()))

    def flag_wait(self, c, keys) -> None:
        self._sync(self._task(), ("q", (), tuple(("fl", self.rank, self.launch_no) + k for k in keys), None))

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

    def p2p_send(self, src: int, dst: int, tag: int, seq: int) -> None:
        """The seq-th torch.distributed send from src to dst with this tag was posted."""
        self._sync(self._task(), ("r", self._rid(), ("p2p", src, dst, tag, seq), 0, ()))

    def p2p_recv(self, src: int, dst: int, tag: int, seq: int) -> None:
        """The matching receive completed: what the sender did before its send happens before."""
        self._sync(self._task(), ("q", (), (("p2p", src, dst, tag, seq),), None))

    # -- the end of the rank ---------------------------------------------------------------------------
    def dump(self) -> None:
        if self.dumped:
            return
        self.dumped = True
        # the allocations as plain data: [offset, nbytes, label, t_alloc, t_free, itemsize, origin]
        # (the allocator fills in itemsize and origin after alloc returns)
        allocs = [r[:5] + [r[5].itemsize, r[5].origin] for r in self.allocs]
        doc = {"rank": self.rank, "tasks": {k: t.ev for k, t in self.tasks.items()},
               "lines": self.line_names, "allocs": allocs, "heaps": self.heaps,
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


def _split_at_signal(kind, lo, hi, signal_addr, signal_size):
    """A putmem_signal's data write over its own signal's bytes is part of the signal write
    (the library's quiet orders them, and the signal overwrites those bytes at once), so
    that part is a signal-like write a wait polling those bytes does not race; the rest of
    the range is the put's plain write.  Other accesses come back whole."""
    if kind != WRITE or signal_addr is None or not (lo < signal_addr + signal_size and signal_addr < hi):
        return [(kind, lo, hi)]
    s0, s1 = max(lo, signal_addr), min(hi, signal_addr + signal_size)
    return [(k, a, b) for k, a, b in ((WRITE, lo, s0), (SYNC_WRITE, s0, s1), (WRITE, s1, hi)) if a < b]
