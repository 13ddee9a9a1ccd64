"""The symmetric heap's layout and allocator, shared by every backend.

Every PE reserves one heap of the same size; an allocation lands at the same offset in
every heap because every rank makes the same calls in the same order and the allocator
is deterministic first-fit (docs/semantics.md §2).  The start of each heap holds the device
library's own state.
"""
from __future__ import annotations

# Allocation alignment: 512 bytes is what cube+vector ops want on Ascend (docs/semantics.md §1),
# and it keeps every allocation 64-byte aligned for signal slots.
ALIGN = 512
# The start of every heap is reserved for the device library's own state: barrier
# counters and sync flags, in 64-byte slots (see sim/primitives.py).
RESERVED_BYTES = 64 * 1024
# this PE's barrier counter and barrier flag (read by every other PE), each alone in its
# 64-byte line
SYNC_COUNTER_OFFSET = 0
SYNC_POOL_OFFSET = 64


FREED_KEPT = 1024       # freed allocations remembered for "was freed" messages


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class Allocation:
    """nbytes: the heap space taken (rounded up to ALIGN); size: the bytes asked for, the
    tensor's own bytes (what an access must stay inside)."""
    __slots__ = ("aid", "offset", "nbytes", "label", "size", "freed_at", "site", "poisoned", "itemsize", "origin")

    def __init__(self, aid: int, offset: int, nbytes: int, label: str, size: int | None = None):
        self.aid, self.offset, self.nbytes, self.label = aid, offset, nbytes, label
        self.size = nbytes if size is None else size
        self.freed_at = None        # "file.py:LINE" of the triton_dist.free that released it
        self.site = None            # where it was allocated, once a backend records it
        self.poisoned = False       # filled with a poison pattern, not zeros (the simulator's initcheck)
        self.itemsize = 0           # bytes per element (0: unknown), for element indices in messages
        self.origin = ""            # where it was allocated: "'sig' allocated at t.py:40" (sim/naming.py)


class HeapAllocator:
    """First-fit allocator over [RESERVED_BYTES, size) with coalescing frees."""

    def __init__(self, size: int):
        self.size = size
        self.free_list = [(RESERVED_BYTES, size - RESERVED_BYTES)]  # (offset, nbytes), sorted
        self.live: dict[int, Allocation] = {}   # offset -> allocation
        self.freed: list[Allocation] = []       # released, most recent last (for messages)
        self.next_id = 0

    def alloc(self, nbytes: int, label: str) -> Allocation:
        need = _round_up(max(nbytes, 1), ALIGN)
        for i, (off, n) in enumerate(self.free_list):
            if n >= need:
                if n == need:
                    del self.free_list[i]
                else:
                    self.free_list[i] = (off + need, n - need)
                a = Allocation(self.next_id, off, need, label, nbytes)
                self.next_id += 1
                self.live[off] = a
                return a
        in_use = sum(a.nbytes for a in self.live.values())
        raise MemoryError(
            f"symmetric heap exhausted: asked for {nbytes} bytes, {in_use} of "
            f"{self.size - RESERVED_BYTES} in use; free tensors or set TRITON_DIST_HEAP_SIZE")

    def release(self, offset: int, site: str = "?") -> Allocation:
        a = self.live.pop(offset)
        a.freed_at = site
        self.freed.append(a)
        del self.freed[:-FREED_KEPT]
        self.free_list.append((a.offset, a.nbytes))
        self.free_list.sort()
        merged = []
        for off, n in self.free_list:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((off, n))
        self.free_list = merged
        return a

    def freed_at(self, offset: int) -> Allocation | None:
        """The most recently freed allocation that held heap offset `offset`, if no live one
        holds it now (an access there is a use after free)."""
        if self.find(offset) is not None:
            return None
        for a in reversed(self.freed):
            if a.offset <= offset < a.offset + a.nbytes:
                return a
        return None

    def find(self, offset: int) -> Allocation | None:
        """The live allocation holding heap offset `offset`, if any."""
        for a in self.live.values():
            if a.offset <= offset < a.offset + a.nbytes:
                return a
        return None

    def neighbours(self, offset: int) -> tuple:
        """(the live allocation starting at or below offset, the first one above it), for
        naming the tensor an out-of-bounds access probably meant."""
        below = above = None
        for a in self.live.values():
            if a.offset <= offset and (below is None or a.offset > below.offset):
                below = a
            if a.offset > offset and (above is None or a.offset < above.offset):
                above = a
        return below, above
