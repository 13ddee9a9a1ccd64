"""Device memory as the simulator sees it: the known buffers and the checks of an address.

The access path (sim/access.py) checks every load, store and atomic here, so there is one
place that
- refuses an address outside every known buffer, naming the kernel line (never a segfault);
- refuses an access outside the tensor its pointer was computed from (provenance);
- names an address as "symmetric tensor + offset" in reports.
The raw helpers at the end are the hardware paths the device library takes (checked by
the caller).
"""
from __future__ import annotations

import bisect
import ctypes

import numpy as np
from triton._C.libtriton import interpreter as _cpu

from triton_dist.errors import TritonDistError

from . import context, naming

_ACQ_REL = _cpu.MEM_SEMANTIC.ACQUIRE_RELEASE


class SimMemoryError(TritonDistError):
    """A kernel touched memory outside every buffer it may touch."""


class MisalignedAccessError(SimMemoryError):
    """A kernel's access to global memory at an address that is not a multiple of the DMA's
    granularity for its element type (msSanitizer's "unaligned access")."""


# The GM address granularity of a kernel's DMA by element size: AscendNPU-IR's load/store
# templates move 8/16/32-bit elements with copy_gm_to_ubuf_align_b8/_b16/_b32 (and the
# copy_ubuf_to_gm_* twins) and 64-bit ones as pairs of 32-bit ones
# (bishengir/lib/Template/include/DMA/DMAUtils.h L253-310, Ascend/AscendNPU-IR @ 52f96a13).
DMA_GRAIN = {1: 1, 2: 2, 4: 4, 8: 4, 16: 4}


def misaligned(rt, what: str, addr: int, grain: int, itemsize: int) -> MisalignedAccessError:
    """The report of an access at `addr`, not a multiple of `grain` bytes."""
    c = context.core()
    who = f"rank {rt.rank}" + (f" core {c.phys} (program {tuple(c.grid_idx)})" if c is not None else "")
    return MisalignedAccessError(
        f"misaligned access: {who}: {what} at {context.kernel_line(4)} touches {rt.space.describe(addr)} "
        f"(address 0x{addr:x}), which is not a multiple of {grain} bytes.  On the NPU a kernel's access to "
        f"global memory is a DMA whose address granularity is the element width, at most 4 bytes "
        f"({itemsize}-byte elements move with copy_gm_to_ubuf_align_b{8 * min(itemsize, 4)}): off that grain the "
        f"transfer is invalid (msSanitizer's memcheck reports it as an unaligned access).  Fix: move a "
        f"pointer of this dtype only by whole elements (do not bitcast a byte pointer at an odd offset to a wider "
        f"type).")


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
        """'symm tensor #3 (int32[256]) of rank 1, element 32 ('x' allocated at t.py:9)' (sim/naming.py)
        or the buffer's name + offset."""
        b = self.find(addr)
        if b is None:
            return f"0x{addr:x} (outside every known buffer)"
        off = addr - b.start
        if b.heap is not None:
            a = b.heap.allocator.find(off)
            if a is not None:
                return naming.element(a.label, a.itemsize, b.heap_rank, off - a.offset, origin=a.origin)
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
        self.check_span(int(addrs.min()), int(addrs.max()) + itemsize, addrs, itemsize, what)

    def check_span(self, lo: int, hi: int, addrs, itemsize: int, what) -> None:
        """check_many with the span [lo, hi) of `addrs` known (None: one scalar at lo); `what`
        may be a function naming the access, called only to report an error."""
        b = self.find(lo)
        if b is not None and hi <= b.end:
            if b.heap is None:
                return
            a = b.heap.allocator.find(lo - b.start)
            if a is not None and hi - b.start <= a.offset + a.size:
                return
        what = what() if callable(what) else what
        if addrs is None:
            self.check(lo, hi, what)
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


# Raw, checked-by-caller helpers for the primitives (they model the hardware paths).

def atomic_add(addr: int, value: int, np_dtype) -> int:
    """Hardware atomic add (UB->GM copy in atomic-add mode): bypasses every cache."""
    ptr = np.array([addr], dtype=np.uint64)
    return int(_cpu.atomic_rmw(_cpu.RMW_OP.ADD, ptr, np.array([value], dtype=np_dtype),
                               np.array([True]), _ACQ_REL)[0])


def copy(dst: int, src: int, nbytes: int) -> None:
    """A DMA copy (MTE): GM -> UB -> GM, bypassing the data caches."""
    ctypes.memmove(dst, src, nbytes)
