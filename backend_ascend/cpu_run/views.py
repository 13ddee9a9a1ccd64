"""numpy views of the memref descriptors a template call gets, checked once and reused.

Each template call of a compiled kernel passes its operands as MLIR memref descriptors
(`{allocated, aligned, offset, sizes[R], strides[R]}`, int64 each).  Turning one into a checked
numpy view the long way (memory.view, memory.check_ub / check_gm, memory.View.array: ctypes
arrays, as_strided) cost 10-30 us a call, most of a launch (measured 2026-12-02 with cProfile
on benchmarks/bench_hivm.py's kernels: the template bodies were 85-90% of a launch, and
building views was most of each body).  Here:

- on-chip operands (UB, L1, L0C): each core's on-chip spaces are a `Pool` that lives from block
  to block (zeroed when a block first asks for a space, as a fresh buffer was), so the same
  descriptor names the same bytes of the same buffer in every block: its view is built and
  checked (memory.check_ub: inside the space, 32-byte aligned for a vector operand) once per
  pool and reused.  Only a view that passed the check is kept.
- global-memory operands: checked at every call against the live buffers of the launch (an
  interval test over a handful of buffers, memory.check_gm's rule), then built with
  `np.ndarray(buffer=<that buffer's bytes>)`, which numpy bounds-checks again.  A view that
  leaves every buffer goes the long way, so the fault says exactly what memory.check_gm says.
"""
from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np

from . import memory as M

_WORD = 8
_string_at = ctypes.string_at


class Pool:
    """The on-chip spaces of one core (one running block at a time) and the views checked in them."""

    def __init__(self):
        self.spaces = {}      # space -> uint8 array, kept from block to block
        self.views = {}       # (descriptor bytes, dtype, rank, space, vector) -> checked ndarray

    def space(self, name: str, size: int) -> np.ndarray:
        """The space zeroed, as np.zeros gave each block before (a block reads no bytes of the last one)."""
        buf = self.spaces.get(name)
        if buf is None or len(buf) != size:
            if buf is not None:
                self.views.clear()        # views into the old buffer must not outlive it
            buf = self.spaces[name] = np.zeros(size, dtype=np.uint8)
        else:
            buf.fill(0)
        return buf


_free: list = []
_free_lock = threading.Lock()


def acquire() -> Pool:
    with _free_lock:
        return _free.pop() if _free else Pool()


def release(pool: Pool) -> None:
    with _free_lock:
        _free.append(pool)


def _array(base: np.ndarray, base_addr: int, v: M.View, dtype: np.dtype) -> np.ndarray:
    start = v.aligned + v.offset * v.itemsize - base_addr
    strides = tuple(st * v.itemsize for st in v.strides)
    try:
        return np.ndarray(v.sizes, dtype=dtype, buffer=base, offset=start, strides=strides)
    except (ValueError, TypeError):     # a layout np.ndarray refuses (checked in bounds already)
        return v.array(dtype)


def ub(ptr: int, rank: int, dtype: np.dtype, what: str, space: str = "ub", vector: bool = True) -> np.ndarray:
    """The on-chip operand at descriptor `ptr` as a numpy view, checked as memory.check_ub checks it."""
    s = M.state()
    pool = getattr(s, "pool", None)     # memory.BlockState.pool, set by the runner
    raw = _string_at(ptr, _WORD * (3 + 2 * rank))
    key = (raw, dtype, space, vector, s.sizes.get("ub_align"))
    if pool is not None:
        got = pool.views.get(key)
        if got is not None:
            return got
    v = M.view(ptr, rank, dtype.itemsize)
    M.check_ub(v, what, space, vector=vector)
    base = s.spaces.get(space)
    if base is None or v.empty:
        return v.array(dtype)         # not checkable (no such space yet) or empty: never kept
    out = _array(base, base.ctypes.data, v, dtype)
    if pool is not None and pool.spaces.get(space) is base:
        pool.views[key] = out
    return out


def space_base(space: str) -> int:
    """The address of the running block's on-chip `space` (the module's __hivm_space_base_<space>)."""
    s = M.state()
    buf = s.spaces.get(space)
    if buf is None:
        pool = getattr(s, "pool", None)
        if pool is None:
            return M.space_base(space)
        buf = s.spaces[space] = pool.space(space, s.sizes[space])
    return buf.ctypes.data


_gm_bytes: dict = {}      # (start, end) -> uint8 view of a live buffer's bytes


def _buffer_bytes(b: M.Buffer) -> np.ndarray:
    key = (b.start, b.end)
    got = _gm_bytes.get(key)
    if got is None:
        if len(_gm_bytes) > 4096:
            _gm_bytes.clear()
        got = _gm_bytes[key] = np.frombuffer((ctypes.c_char * (b.end - b.start)).from_address(b.start),
                                             dtype=np.uint8)
    return got


_DESCRIPTORS = {r: struct.Struct(f"<{3 + 2 * r}q") for r in range(1, 9)}


def gm(ptr: int, rank: int, dtype: np.dtype, what: str, kind: str) -> np.ndarray:
    """The global-memory operand at descriptor `ptr`, checked against the live buffers at every call
    (the span memory.View.span computes, the containment memory.check_gm tests)."""
    words = _DESCRIPTORS[rank].unpack(_string_at(ptr, _WORD * (3 + 2 * rank)))
    sizes, strides = words[3:3 + rank], words[3 + rank:]
    size = dtype.itemsize
    if min(sizes) <= 0:
        return np.zeros(sizes, dtype=dtype)       # memory.View.array of an empty view
    first = words[1] + words[2] * size
    lo = hi = first
    for n, st in zip(sizes, strides):
        ext = (n - 1) * st * size
        if ext < 0:
            lo += ext
        else:
            hi += ext
    hi += size
    for b in M.state().buffers:
        if b.start <= lo and hi <= b.end:
            try:
                return np.ndarray(sizes, dtype=dtype, buffer=_buffer_bytes(b), offset=first - b.start,
                                  strides=tuple(st * size for st in strides))
            except (ValueError, TypeError):
                break
    v = M.view(ptr, rank, size)
    M.check_gm(v, what, kind)       # outside every live buffer: the MTE fault with the buffer and the source lines
    return v.array(dtype)
