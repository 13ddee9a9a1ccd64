"""Symmetric heaps: one shared-memory segment per rank, every rank maps every heap.

Two ways to get the segments, both leaving nothing behind in /dev/shm:
- `launch()` creates anonymous MAP_SHARED mappings before it forks the ranks, so all
  ranks see every heap at the same address and nothing has a name at all;
- a script under torchrun creates a named segment per rank, the ranks exchange names
  over gloo, map each other's, and every rank unlinks its own once all have mapped it
  (the mappings outlive the name).

The allocator is deterministic first-fit over the heap; because every rank makes the
same calls in the same order, an allocation lands at the same offset everywhere.
"""
from __future__ import annotations

import ctypes
import mmap
import os

# Allocation alignment: 512 bytes is what cube+vector ops want on Ascend (SEMANTICS §1),
# and it keeps every allocation 64-byte aligned for signal slots.
ALIGN = 512
# The start of every heap is reserved for the device library's own state: barrier
# counters and sync flags, in 64-byte slots (see sim/primitives.py).
RESERVED_BYTES = 64 * 1024
DEFAULT_HEAP_BYTES = int(os.environ.get("TRITON_DIST_HEAP_SIZE", 256 << 20))
SHM_DIR = "/dev/shm"
NAME_PREFIX = "tdist-"


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def address_of(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def anonymous_heaps(world_size: int, nbytes: int) -> list[mmap.mmap]:
    """Heaps for forked ranks: shared, nameless, zero-filled, backed only when touched."""
    return [mmap.mmap(-1, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            for _ in range(world_size)]


def create_named(name: str, nbytes: int) -> mmap.mmap:
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)


def map_named(name: str, nbytes: int) -> mmap.mmap:
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDWR)
    try:
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)


def unlink_named(name: str) -> None:
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def sweep_named(prefix: str) -> None:
    """Remove every segment whose name starts with prefix (used after a failed start)."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for n in names:
        if n.startswith(prefix):
            unlink_named(n)


class Allocation:
    __slots__ = ("aid", "offset", "nbytes", "label")

    def __init__(self, aid: int, offset: int, nbytes: int, label: str):
        self.aid, self.offset, self.nbytes, self.label = aid, offset, nbytes, label


class HeapAllocator:
    """First-fit allocator over [RESERVED_BYTES, size) with coalescing frees."""

    def __init__(self, size: int):
        self.size = size
        self.free_list = [(RESERVED_BYTES, size - RESERVED_BYTES)]  # (offset, nbytes), sorted
        self.live: dict[int, Allocation] = {}   # offset -> allocation
        self.next_id = 0

    def alloc(self, nbytes: int, label: str) -> Allocation:
        need = _round_up(max(nbytes, 1), ALIGN)
        for i, (off, n) in enumerate(self.free_list):
            if n >= need:
                if n == need:
                    del self.free_list[i]
                else:
                    self.free_list[i] = (off + need, n - need)
                a = Allocation(self.next_id, off, need, label)
                self.next_id += 1
                self.live[off] = a
                return a
        in_use = sum(a.nbytes for a in self.live.values())
        raise MemoryError(
            f"symmetric heap exhausted: asked for {nbytes} bytes, {in_use} of "
            f"{self.size - RESERVED_BYTES} in use; free tensors or set TRITON_DIST_HEAP_SIZE")

    def release(self, offset: int) -> Allocation:
        a = self.live.pop(offset)
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

    def find(self, offset: int) -> Allocation | None:
        """The live allocation holding heap offset `offset`, if any."""
        for a in self.live.values():
            if a.offset <= offset < a.offset + a.nbytes:
                return a
        return None
