"""One naming of device addresses for every message: reports, the event log, the trace.

A symmetric address is named by its tensor, the rank whose heap holds it, the element
index, and where the tensor was allocated (the variable it was assigned to, when the line
says):

    symm tensor #1 (int32[16]) of rank 1, element 3 ('sig' allocated at t.py:40)
    symm tensor #0 (float32[32]) of rank 0, elements [24:32] ('gathered' allocated at hello.py:37)

Every place that names an address calls `element()` (the rank side through
sim/memory.py AddressSpace.describe, the launcher through the allocation table the ranks
share, sim/evidence/board.py, and the race report through its logs).
"""
from __future__ import annotations

import linecache
import os
import re

_ASSIGNED = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]*)?=[^=]")


def origin(filename: str, line: int) -> str:
    """"'sig' allocated at t.py:40" for the line `sig = triton_dist.symm_tensor(...)`, or
    'allocated at t.py:40' when the line assigns no single name."""
    where = f"{os.path.basename(filename)}:{line}"
    m = _ASSIGNED.match(linecache.getline(filename, line) or "")
    return f"'{m.group(1)}' allocated at {where}" if m else f"allocated at {where}"


def element(label: str, itemsize: int, rank: int, lo: int, hi: int | None = None, origin: str = "") -> str:
    """The words for bytes [lo, hi) (hi None: the element at lo) of the tensor `label` in the
    heap of `rank`; lo/hi are offsets from the tensor's start."""
    if itemsize and lo % itemsize == 0:
        first, last = lo // itemsize, -(-(lo + itemsize if hi is None else hi) // itemsize)
        what = f"element {first}" if last - first <= 1 else f"elements [{first}:{last}]"
    elif hi is None or hi - lo <= 1:
        what = f"byte {lo}"
    else:
        what = f"bytes [{lo}:{hi}]"
    return f"{label} of rank {rank}, {what}" + (f" ({origin})" if origin else "")


class HeapNamer:
    """Names addresses of the symmetric heaps where no rank's allocator is at hand (the
    launcher, a replay's event log): `allocation(offset)` gives (label, itemsize, start
    offset, origin) of the live allocation holding a heap offset (sim/evidence/board.py keeps
    the table), or None."""

    def __init__(self, bases, size: int, allocation, reserved: int):
        self.bases, self.size, self.allocation, self.reserved = list(bases), size, allocation, reserved

    def heap_of(self, addr: int):
        """(rank, offset) of an address in a heap, or None."""
        for r, b in enumerate(self.bases):
            if b <= addr < b + self.size:
                return r, addr - b
        return None

    def tensor_span(self, addr: int):
        """[lo, hi) absolute of the symmetric tensor holding addr, or None."""
        h = self.heap_of(addr)
        a = self.allocation(h[1]) if h is not None else None
        if a is None:
            return None
        return self.bases[h[0]] + a[2], self.bases[h[0]] + a[2] + _nbytes(a)

    def name(self, addr: int, hi: int | None = None, short: bool = False) -> str:
        """Words for the element (or bytes [addr, hi)) at addr; short: just 'element 3'."""
        h = self.heap_of(addr)
        if h is None:
            return f"0x{addr:x}"
        rank, off = h
        a = self.allocation(off)
        if a is None:
            if off < self.reserved:
                return f"device-library state of rank {rank} + {off}"
            return f"the symmetric heap of rank {rank} + {off}"
        label, itemsize, start, origin = a[:4]
        words = element(label, itemsize, rank, off - start, None if hi is None else hi - addr + off - start,
                        origin=origin)
        return words.split(", ", 1)[1].split(" (", 1)[0] if short else words


def _nbytes(a) -> int:
    return a[4] if len(a) > 4 else 1 << 62
