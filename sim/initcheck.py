"""Reads of symmetric memory nothing has written (msSanitizer's initcheck; issue 26 item 5).

On the NPU `aclshmem_malloc` (the `shmem` binding's aclshmem_create_tensor) hands out memory
as it is: not zeroed.  A kernel that relies on zeroed signals or accumulators passes on a
simulator that zero-fills and fails there.  So new symmetric memory is filled with a poison
pattern instead of zeros
- always for `shmem.aclshmem_create_tensor` under --shmem-compat (sim/compat/shmem.py: the
  upstream code there expects aclshmem_malloc's memory);
- for `triton_dist.symm_tensor` when TRITON_DIST_SIM_INIT_CHECK=1 (its contract is zero-filled,
  on the simulator and on the NPU backend alike, so this is an option: to check code meant to
  run on raw aclshmem_malloc memory) -- for the user's own calls only.  The kernel library
  (triton_dist/kernels) allocates its workspaces through the same symm_tensor and relies on
  that contract in writing: its signal slots start at zero and each call waits for its epoch
  (triton_dist/kernels/_common.py, "fresh slots are zero (symm_tensor zero-fills, then
  barriers)"), and every backend honours it (backend_ascend/runtime.py zeroes what
  aclshmem_create_tensor returns, then barriers).  The library is correct there, so its
  allocations keep the zero fill instead of being reported as the user's unwritten memory
  (issue 32);
and a kernel's read of a word that still holds its poison (tl.load, tl.atomic_*, a wait's poll,
a signal ADD, the source of putmem/getmem) is reported at once as an UninitializedReadError,
naming the read, the tensor and where it was allocated.

The pattern is a hash of the rank and the word's heap offset (8-byte words): a word that
holds it was almost surely never written (2**-64 per word), and data copied from another word
or rank never matches its new place's pattern.  An element counts as unwritten while every
word it overlaps holds its poison, so a sub-word element written alone is not reported
unless its bytes happen to equal the poison's (1 in 2**(8*size)).  Host writes (t.zero_(),
t.fill_(), copies) overwrite the pattern like any write, which is why no shadow memory is
needed: torch's host writes are invisible to the simulator, the bytes are not.
"""
from __future__ import annotations

import os

import numpy as np

from triton_dist.errors import TritonDistError

from . import context

ENV = "TRITON_DIST_SIM_INIT_CHECK"
_C1, _C2, _C3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


class UninitializedReadError(TritonDistError):
    """A kernel read symmetric memory that nothing wrote since it was allocated."""


def native_enabled() -> bool:
    """Does triton_dist.symm_tensor poison its memory (TRITON_DIST_SIM_INIT_CHECK=1)?"""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def library_caller(frame):
    """'file.py:LINE' of the triton_dist package code that called triton_dist.symm_tensor, when
    the allocation is the library's own (its workspaces), else None: the user called it.
    `frame`: any frame inside the call (the backend's symm_tensor); the public wrapper
    triton_dist.symm_tensor and the simulator's own frames are skipped."""
    import triton_dist
    pkg = os.path.dirname(os.path.abspath(triton_dist.__file__))
    sim = os.path.dirname(os.path.abspath(__file__))
    wrapper = os.path.join(pkg, "__init__.py")
    f = frame
    while f is not None:
        name = os.path.abspath(f.f_code.co_filename)
        if not (name.startswith(sim + os.sep) or name == wrapper):
            break
        f = f.f_back
    if f is None:
        return None
    name = os.path.abspath(f.f_code.co_filename)
    return f"{os.path.relpath(name, os.path.dirname(pkg))}:{f.f_lineno}" if name.startswith(pkg + os.sep) else None


def pattern(words: np.ndarray, rank: int) -> np.ndarray:
    """The poison of the 8-byte words at heap word offsets `words` of rank's heap (splitmix64)."""
    z = words.astype(np.uint64) * _C1 + np.uint64((0xA5A5A5A5A5A5A5A5 ^ (rank * 0x100000001B3)) & (2**64 - 1))
    z = (z ^ (z >> _S30)) * _C2
    z = (z ^ (z >> _S27)) * _C3
    return z ^ (z >> _S31)


def _words_view(hs, rank: int) -> np.ndarray:
    views = hs.__dict__.setdefault("_u64_views", {})
    v = views.get(rank)
    if v is None:
        v = views[rank] = np.frombuffer(hs.maps[rank], dtype=np.uint64)
    return v


def poison(hs, rank: int, a, site: str, how: str) -> None:
    """Fill allocation `a` of this rank's heap with its poison; later reads of it are checked."""
    w0, w1 = a.offset // 8, (a.offset + a.nbytes) // 8
    _words_view(hs, rank)[w0:w1] = pattern(np.arange(w0, w1, dtype=np.uint64), rank)
    if not getattr(a, "poisoned", False):
        hs.poisoned = getattr(hs, "poisoned", 0) + 1
    a.poisoned, a.site = True, f"{site} ({how})"


def forget(hs, a) -> None:
    """Allocation `a` is freed."""
    if getattr(a, "poisoned", False):
        a.poisoned = False
        hs.poisoned -= 1


def check(rt, lo: int, addrs, what: str, site=None) -> None:
    """A kernel (or the device library on its behalf) reads the bytes at `addrs` (1-D lane
    addresses; None: the one element at lo): a word still holding its poison is reported."""
    b = rt.space.find(lo)
    if b is None or b.heap is None:
        return
    hs = b.heap
    a = hs.allocator.find(lo - b.start)
    if a is None or not getattr(a, "poisoned", False):
        return
    offs = np.array([lo], dtype=np.uint64) if addrs is None else np.asarray(addrs, dtype=np.uint64)
    words = np.unique((offs - np.uint64(b.start)) >> np.uint64(3))
    words = words[words < np.uint64(hs.size // 8)]
    bad = _words_view(hs, b.heap_rank)[words] == pattern(words, b.heap_rank)
    if bad.any():
        first = int(words[bad][0]) * 8 + b.start
        raise UninitializedReadError(_report(rt, a, b, max(first, lo), int(bad.sum()), what, site))


def _report(rt, a, b, addr, nwords, what, site) -> str:
    c = context.core()
    who = f"rank {rt.rank}" + (f" core {c.phys} (program {tuple(c.grid_idx)})" if c is not None else " (host)")
    where = context.site_name(site) if site is not None else context.kernel_line(4)
    more = f" ({nwords} unwritten 8-byte words in this access)" if nwords > 1 else ""
    return (f"uninitialised read: {who}: {what} at {where} reads {rt.space.describe(addr)}{more}, which nothing "
            f"has written since it was allocated at {a.site}.  On the NPU aclshmem_malloc does not zero new memory, "
            f"so this reads whatever was there (the simulator filled it with a poison pattern; msSanitizer's "
            f"initcheck reports such reads).  Fix: write it before the first read, e.g. t.zero_() on every rank "
            f"and then a barrier before the kernel that reads it.")
