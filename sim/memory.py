"""Device memory as the simulator sees it: known buffers, address checks, and every access.

Every load, store and atomic a kernel makes arrives here (sim/interp.py routes the
interpreter's memory ops to this module), so there is one place that
- refuses an address outside every known buffer, naming the kernel line (never a segfault);
- names an address as "symmetric tensor + offset" in reports;
- puts scalar accesses through the core's data cache (sim/cache.py) and lets block
  accesses (DMA) bypass it, as on the NPU;
- under the ascend models queues a kernel's stores as DMAs in flight (sim/dma.py).
"""
from __future__ import annotations

import bisect
import ctypes

import numpy as np
from triton._C.libtriton import interpreter as _cpu

from triton_dist.errors import TritonDistError

from . import context, dma, spin

_RELAXED = _cpu.MEM_SEMANTIC.RELAXED
_ACQ_REL = _cpu.MEM_SEMANTIC.ACQUIRE_RELEASE


class SimMemoryError(TritonDistError):
    """A kernel touched memory outside every buffer it may touch."""


class Buffer:
    __slots__ = ("start", "end", "name", "heap_rank", "heap")

    def __init__(self, start, end, name, heap_rank=None, heap=None):
        self.start, self.end, self.name = start, end, name
        self.heap_rank, self.heap = heap_rank, heap


class AddressSpace:
    """Sorted, non-overlapping ranges: all ranks' heaps plus the running kernel's tensors."""

    def __init__(self):
        self._starts: list[int] = []
        self._bufs: list[Buffer] = []

    def add(self, buf: Buffer) -> None:
        i = bisect.bisect_left(self._starts, buf.start)
        self._starts.insert(i, buf.start)
        self._bufs.insert(i, buf)

    def remove(self, buf: Buffer) -> None:
        i = self._bufs.index(buf)
        del self._starts[i]
        del self._bufs[i]

    def find(self, addr: int) -> Buffer | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            b = self._bufs[i]
            if addr < b.end:
                return b
        return None

    def heap_of(self, addr: int) -> Buffer | None:
        b = self.find(addr)
        return b if b is not None and b.heap_rank is not None else None

    def owned(self, lo: int, hi: int) -> list:
        """The parts of [lo, hi) inside known buffers: the only bytes a write-back may write."""
        i = max(bisect.bisect_right(self._starts, lo) - 1, 0)
        out = []
        for b in self._bufs[i:]:
            if b.start >= hi:
                break
            if b.end > lo:
                out.append((max(lo, b.start), min(hi, b.end)))
        return out

    def describe(self, addr: int) -> str:
        """'symm tensor #3 (int32, 1024 B) of rank 1 + 128' or the buffer's name + offset."""
        b = self.find(addr)
        if b is None:
            return f"0x{addr:x} (outside every known buffer)"
        off = addr - b.start
        if b.heap is not None:
            a = b.heap.allocator.find(off)
            if a is not None:
                return f"{a.label} of rank {b.heap_rank} + {off - a.offset}"
            if off < b.heap.reserved:
                return f"device-library state of rank {b.heap_rank} + {off}"
        return f"{b.name} + {off}"

    def check(self, lo: int, hi: int, what: str) -> Buffer:
        """Check [lo, hi) lies in one known buffer, and in a symmetric heap inside one live
        allocation (the tensor's own bytes, never the device library's reserved area);
        raise a SimMemoryError naming the tensor, its size and the offset otherwise."""
        b = self.find(lo)
        if b is not None and hi <= b.end:
            if b.heap is not None:
                self._check_allocation(b, lo, hi, what)
            return b
        where = context.kernel_line(3)
        if b is None:
            i = bisect.bisect_right(self._starts, lo) - 1
            near = ""
            if i >= 0:
                pb = self._bufs[i]
                near = f"; the nearest buffer below, {pb.name}, ends {lo - pb.end} bytes earlier"
            raise SimMemoryError(
                f"{where}: {what} at 0x{lo:x} is outside every known buffer (the symmetric heaps "
                f"of all ranks and this launch's tensor arguments){near}. Check the offsets and "
                f"masks of this access.")
        raise SimMemoryError(
            f"{where}: {what} runs {hi - b.end} bytes past the end of {b.name} "
            f"(0x{b.start:x}..0x{b.end:x}). Check the offsets and masks of this access.")

    def _check_allocation(self, b: Buffer, lo: int, hi: int, what: str) -> None:
        heap = b.heap
        off, end = lo - b.start, hi - b.start
        a = heap.allocator.find(off)
        if a is not None and end <= a.offset + a.size:
            return
        where = context.kernel_line(3)
        fix = "Check the offsets and masks of this access."
        if a is not None and off < a.offset + a.size:
            raise SimMemoryError(
                f"{where}: {what} at bytes [{off - a.offset}, {end - a.offset}) of {a.label} of rank "
                f"{b.heap_rank} runs past its end: the tensor has {a.size} bytes. {fix}")
        below, above = heap.allocator.neighbours(off)
        gone = heap.allocator.freed_at(off)
        if gone is not None:        # a use after free: say so, not which live tensor is near
            raise SimMemoryError(
                f"{where}: {what} at offset {off - gone.offset} of {gone.label} of rank {b.heap_rank}, which was "
                f"freed (triton_dist.free at {gone.freed_at}). Use a symmetric tensor only before it is freed.")
        if off < heap.reserved:
            near = f", {above.offset - off} bytes before the start of {above.label}" if above is not None else ""
            raise SimMemoryError(
                f"{where}: {what} at heap offset {off} of rank {b.heap_rank} lands in the device "
                f"library's reserved area (the first {heap.reserved} bytes of every heap hold its barrier "
                f"counters and flags; kernels may not touch them){near}. A negative index? {fix}")
        if below is not None:
            raise SimMemoryError(
                f"{where}: {what} at offset {off - below.offset} of {below.label} of rank {b.heap_rank} "
                f"is out of bounds: the tensor has {below.size} bytes"
                f"{' (freed or never allocated memory follows it)' if above is None else ''}. {fix}")
        raise SimMemoryError(
            f"{where}: {what} at heap offset {off} of rank {b.heap_rank} is outside every live "
            f"symmetric tensor. {fix}")

    def check_many(self, addrs: np.ndarray, itemsize: int, what: str) -> None:
        if addrs.size == 0:
            return
        lo, hi = int(addrs.min()), int(addrs.max()) + itemsize
        b = self.find(lo)
        if b is not None and hi <= b.end:
            if b.heap is None:
                return
            a = b.heap.allocator.find(lo - b.start)
            if a is not None and hi - b.start <= a.offset + a.size:
                return
        # The access spans several buffers (a gather across tensors): check each address.
        for a in np.unique(addrs):
            self.check(int(a), int(a) + itemsize, what)


# ---- provenance: the tensor a pointer was derived from (sim/interp.py keeps it) ----------

def base_of(data: np.ndarray):
    """(lo, hi, name) of the tensor every lane of the pointer `data` lies in: a live symmetric
    tensor's own bytes, or a tensor argument's storage; None if unknown or mixed."""
    rt = context._runtime
    if rt is None or data.size == 0:
        return None
    lo, hi = int(data.min()), int(data.max())
    b = rt.space.find(lo)
    if b is None or hi >= b.end:
        return None
    if b.heap is None:
        return (b.start, b.end, b.name)
    a = b.heap.allocator.find(lo - b.start)
    if a is None or hi - b.start >= a.offset + a.nbytes:
        return None
    return (b.start + a.offset, b.start + a.offset + a.size, f"{a.label} of rank {b.heap_rank}")


def check_base(base, addrs: np.ndarray, itemsize: int, what: str) -> None:
    """Every accessed address inside the tensor the pointer was derived from."""
    if base is None or addrs.size == 0:
        return
    lo, hi = int(addrs.min()), int(addrs.max()) + itemsize
    if base[0] <= lo and hi <= base[1]:
        return
    rt = context.runtime()
    a = np.asarray(addrs, dtype=np.uint64)
    bad = lo if lo < base[0] else int(a[a + np.uint64(itemsize) > np.uint64(base[1])].min())   # the first one out
    landed = rt.space.find(bad)
    if landed is not None and landed.heap is not None and bad - landed.start < landed.heap.reserved:
        into = "the device library's reserved area (its barrier counters and flags)"
    else:
        into = rt.space.describe(bad)
    raise SimMemoryError(
        f"{context.kernel_line(3)}: {what} at offset {bad - base[0]} of {base[2]} is out of bounds: the "
        f"tensor has {base[1] - base[0]} bytes (the pointer was computed from it; the address lands in "
        f"{into}). Check the offsets and masks of this access.")


# ---- accesses ------------------------------------------------------------------------

def _masked(ptrs: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    if mask is None:
        return ptrs.ravel()
    m = np.broadcast_to(mask, ptrs.shape)
    return ptrs[m] if not m.all() else ptrs.ravel()


def load(ptrs: np.ndarray, mask: np.ndarray, other: np.ndarray, np_dtype, scalar: bool, base=None) -> np.ndarray:
    rt = context.runtime()
    itemsize = np.dtype(np_dtype).itemsize
    if scalar and rt.memory.caches:
        addr = int(ptrs.ravel()[0])
        if not bool(np.asarray(mask).ravel()[0]):
            return other
        check_base(base, ptrs.ravel()[:1], itemsize, f"scalar load of {np.dtype(np_dtype).name}")
        rt.space.check(addr, addr + itemsize, f"scalar load of {np.dtype(np_dtype).name}")
        rt.sched.point("scalar load", addr)
        dma.depend(addr, addr + itemsize)
        if rt.race is not None:
            rt.race.scalar_load(addr, itemsize)
        out = rt.memory.scalar_load(addr, np_dtype)
        rt.spin_watch(("cached", addr), out, addr=addr)
        return np.full(ptrs.shape, out, dtype=np_dtype)
    sel = _masked(ptrs, mask)
    check_base(base, sel, itemsize, f"load of {np.dtype(np_dtype).name}")
    rt.space.check_many(sel, itemsize, f"load of {np.dtype(np_dtype).name}")
    rt.sched.point("load" if not scalar else "scalar load", int(sel[0]) if sel.size else 0)
    if sel.size:
        dma.depend(int(sel.min()), int(sel.max()) + itemsize)
    if rt.race is not None:
        rt.race.block_load(sel, itemsize)
    out = _cpu.load(ptrs, mask, other, np_dtype)
    if sel.size:    # a poll (sim/spin.py): spinning only if the core's whole state repeats
        a = int(sel[0])
        rt.spin_watch(("load", a, sel.size, int(sel[-1])), out, "spin on loads", a)
    return out


def store(ptrs: np.ndarray, value: np.ndarray, mask: np.ndarray, scalar: bool, base=None) -> None:
    rt = context.runtime()
    itemsize = value.dtype.itemsize
    if scalar and rt.memory.caches:
        if not bool(np.asarray(mask).ravel()[0]):
            return
        addr = int(ptrs.ravel()[0])
        check_base(base, ptrs.ravel()[:1], itemsize, f"scalar store of {value.dtype.name}")
        rt.space.check(addr, addr + itemsize, f"scalar store of {value.dtype.name}")
        rt.sched.point("scalar store", addr, _int(value.ravel()[0]))
        dma.depend(addr, addr + itemsize)
        if rt.race is not None:
            rt.race.scalar_store(addr, itemsize)
        v = value.ravel()[0].copy()
        if rt.memory.cached_kernel_stores or context.core() is None:
            rt.memory.scalar_store(addr, v)          # ascend-scalar-cache: through the data cache
        else:   # triton-ascend: a 1-element tensor store = an MTE3 DMA, in flight (sim/dma.py)
            dma.issue(context.core(), addr, addr + itemsize, lambda: rt.memory.scalar_store(addr, v))
        rt.spin_reset()
        return
    sel = _masked(ptrs, mask)
    check_base(base, sel, itemsize, f"store of {value.dtype.name}")
    rt.space.check_many(sel, itemsize, f"store of {value.dtype.name}")
    rt.sched.point("store" if not scalar else "scalar store", int(sel[0]) if sel.size else 0)
    if sel.size:
        dma.depend(int(sel.min()), int(sel.max()) + itemsize)
    if rt.race is not None:
        rt.race.block_store(sel, itemsize, _masked(np.broadcast_to(value, ptrs.shape), mask))
    if sel.size and dma.enabled(rt):     # an MTE3 DMA: in flight until it completes (sim/dma.py)
        p, v, m = np.array(ptrs), np.array(value), np.array(mask)

        def perform():
            _cpu.store(p, v, m)
            rt.sched.wrote()
        dma.issue(context.core(), int(sel.min()), int(sel.max()) + itemsize, perform)
    else:
        _cpu.store(ptrs, value, mask)
        rt.sched.wrote()
    rt.spin_reset()


def atomic_rmw(op, ptrs, val, mask, sem, base=None):
    rt = context.runtime()
    sel = _masked(ptrs, mask)
    check_base(base, sel, val.dtype.itemsize, f"atomic on {val.dtype.name}")
    rt.space.check_many(sel, val.dtype.itemsize, f"atomic on {val.dtype.name}")
    rt.sched.point("atomic", int(sel[0]) if sel.size else 0)
    if sel.size:
        dma.depend(int(sel.min()), int(sel.max()) + val.dtype.itemsize)
    if rt.race is not None:
        out = rt.race.atomic(sel, val.dtype.itemsize, sem != _RELAXED,
                             lambda: _read_by(ptrs, mask, _cpu.atomic_rmw(op, ptrs, val, mask, sem)))
    else:
        out = _cpu.atomic_rmw(op, ptrs, val, mask, sem)
    _atomic_done(rt, sel, out, spin.rmw_changed(op.name, out, val, mask))
    return out


def atomic_cas(ptrs, cmp, val, sem, base=None):
    rt = context.runtime()
    check_base(base, ptrs.ravel(), val.dtype.itemsize, f"atomic_cas on {val.dtype.name}")
    rt.space.check_many(ptrs.ravel(), val.dtype.itemsize, f"atomic_cas on {val.dtype.name}")
    rt.sched.point("atomic_cas", int(ptrs.ravel()[0]))
    dma.depend(int(ptrs.min()), int(ptrs.max()) + val.dtype.itemsize)
    if rt.race is not None:
        out = rt.race.atomic(ptrs.ravel(), val.dtype.itemsize, sem != _RELAXED,
                             lambda: _read_by(ptrs, None, _cpu.atomic_cas(ptrs, cmp, val, sem)))
    else:
        out = _cpu.atomic_cas(ptrs, cmp, val, sem)
    _atomic_done(rt, ptrs.ravel(), out, spin.cas_changed(out, cmp, val))
    return out


def _atomic_done(rt, sel, out, changed: bool) -> None:
    """An atomic that changed memory is a write; one that did not (a failed atomic_cas, an
    atomic_add of 0) only read: polled in a loop it is a spin like a load's (issue 14 item 5)."""
    if changed:
        rt.sched.wrote()
        rt.spin_reset()
    elif sel.size:
        a = int(sel[0])
        rt.spin_watch(("atomic", a, sel.size), np.asarray(out), "spin on atomic polls", a)


def _read_by(ptrs, mask, out):
    """(out, {address: the value the atomic read there}) for the race detector: an acquire
    synchronises with what was actually read (the first lane on an address read it first)."""
    p = np.asarray(ptrs).ravel()
    o = np.broadcast_to(np.asarray(out), np.asarray(ptrs).shape).ravel()
    m = np.ones(p.shape, dtype=bool) if mask is None else np.broadcast_to(mask, np.asarray(ptrs).shape).ravel()
    read = {}
    for a, v, on in zip(p.tolist(), o.tolist(), m.tolist()):
        if on and a not in read:
            read[a] = _int(v)
    return out, read


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


# Raw, checked-by-caller helpers for the primitives (they model the hardware paths).

def raw_read(addr: int, np_dtype) -> int:
    return np.frombuffer((ctypes.c_char * np.dtype(np_dtype).itemsize).from_address(addr),
                         dtype=np_dtype)[0].item()


def raw_write(addr: int, value, np_dtype) -> None:
    np.frombuffer((ctypes.c_char * np.dtype(np_dtype).itemsize).from_address(addr),
                  dtype=np_dtype)[0] = value


def atomic_add(addr: int, value: int, np_dtype) -> int:
    """Hardware atomic add (UB->GM copy in atomic-add mode): bypasses every cache."""
    ptr = np.array([addr], dtype=np.uint64)
    return int(_cpu.atomic_rmw(_cpu.RMW_OP.ADD, ptr, np.array([value], dtype=np_dtype),
                               np.array([True]), _ACQ_REL)[0])


def copy(dst: int, src: int, nbytes: int) -> None:
    """A DMA copy (MTE): GM -> UB -> GM, bypassing the data caches."""
    ctypes.memmove(dst, src, nbytes)
