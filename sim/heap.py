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

from triton_dist.symm_heap import ALIGN, RESERVED_BYTES, Allocation, HeapAllocator  # noqa: F401 (re-exported)

DEFAULT_HEAP_BYTES = int(os.environ.get("TRITON_DIST_HEAP_SIZE", 256 << 20))
SHM_DIR = "/dev/shm"
NAME_PREFIX = "tdist-"


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
