"""Symmetric heaps: one shared-memory segment per rank, every rank maps every heap.

Two ways to get the segments, both leaving nothing behind in /dev/shm:
- `launch()` creates anonymous MAP_SHARED mappings before it forks the ranks, so all
  ranks see every heap at the same address and nothing has a name at all;
- a script under torchrun creates a segment per rank with no name at all (memfd; where
  that is missing, a named one unlinked right after creation), the ranks exchange
  (pid, fd) over gloo and map each other's through /proc/<pid>/fd: a rank killed at any
  point of init leaves nothing (issue 14 item 12).  init also sweeps segments named by
  processes that are gone (`sweep_stale`): a rank killed between creation and unlink.

The allocator is deterministic first-fit over the heap; because every rank makes the
same calls in the same order, an allocation lands at the same offset everywhere.
"""
from __future__ import annotations

import ctypes
import mmap
import os

from triton_dist.symm_heap import ALIGN, RESERVED_BYTES, Allocation, HeapAllocator  # noqa: F401 (re-exported)

DEFAULT_HEAP_BYTES = 256 << 20
HEAP_ENV = "TRITON_DIST_HEAP_SIZE"
MIN_HEAP_BYTES = RESERVED_BYTES + ALIGN      # the device library's area and one allocation
SHM_DIR = "/dev/shm"
NAME_PREFIX = "tdist-"


def heap_bytes() -> int:
    """Bytes per heap: TRITON_DIST_HEAP_SIZE (read at every launch/init) or the default."""
    text = os.environ.get(HEAP_ENV, "").strip()
    if not text:
        return DEFAULT_HEAP_BYTES
    try:
        n = int(text, 0)
    except ValueError:
        n = None
    if n is None or n < MIN_HEAP_BYTES:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(
            f"{HEAP_ENV} must be a whole number of bytes per rank, at least {MIN_HEAP_BYTES} (the first "
            f"{RESERVED_BYTES} belong to the device library), got {text!r}; e.g. {HEAP_ENV}={DEFAULT_HEAP_BYTES} "
            f"(256 MiB, the default; 0x10000000 works too), or unset it")
    return n


def address_of(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def anonymous_heaps(world_size: int, nbytes: int) -> list[mmap.mmap]:
    """Heaps for forked ranks: shared, nameless, zero-filled, backed only when touched."""
    return [mmap.mmap(-1, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            for _ in range(world_size)]


def create_named(name: str, nbytes: int) -> tuple[mmap.mmap, int]:
    """A rank's heap segment for peers to map through /proc: (mapping, fd to keep open until
    every peer has mapped it).  Nothing is left in /dev/shm even if the process dies now."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
    else:
        path = os.path.join(SHM_DIR, f"{name}-p{os.getpid()}")     # the pid lets sweep_stale judge it
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.unlink(path)
    try:
        os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED), fd
    except BaseException:
        os.close(fd)
        raise


def map_peer(pid: int, fd: int, nbytes: int) -> mmap.mmap:
    """Map the segment another process (a peer rank of this host) holds open as fd."""
    try:
        peer = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
    except OSError as e:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(f"cannot map the symmetric heap of the rank with pid {pid} through "
                              f"/proc/{pid}/fd/{fd}: {e}. Simulated ranks under torchrun must run on one "
                              f"host, as one user; or run them with triton_dist.launch / `triton-dist run`, "
                              f"which need no /proc access") from None
    try:
        return mmap.mmap(peer, nbytes, flags=mmap.MAP_SHARED)
    finally:
        os.close(peer)


def sweep_stale(prefix: str = NAME_PREFIX) -> list[str]:
    """Remove the segments `prefix...-p<pid>` whose process is gone; the names removed."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    gone = []
    for n in names:
        pid = n.rpartition("-p")[2]
        if not n.startswith(prefix) or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            os.unlink(os.path.join(SHM_DIR, n))
            gone.append(n)
        except OSError:           # another user's, or swept by a peer first
            pass
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
