"""Memory models: the NPU's per-core, non-coherent, write-back data cache, or none.

Where each rule comes from: docs/device_model.md (a table: rule | source | test).

`ascend` (the default) follows how triton-ascend lowers scalar accesses (evidence:
docs/device_model.md):
- a scalar tl.load is a `memref.load` on GM = a scalar-unit load through the core's data
  cache: a miss fetches the whole 64-byte line, later loads hit it and can be stale until
  dcci (no compiler pass inserts dcci);
- a scalar tl.store becomes a 1-element tensor store = an MTE3 DMA of exactly sizeof(T)
  bytes: it writes exactly the element's bytes to memory, dirties no line and touches no
  other core's cache (the storing core's own cached copy of the line, if any, gets the new
  bytes too, so a core reads its own writes: inferred, not verified);
- the device library's own scalar stores (signal SET, the barrier's flag and counter) are
  Ascend C scalar stores through the cache, each followed by dcci of its line
  (docs/semantics.md §3): a SET writes back the whole line, so SETs to different bytes of one line can lose
  each other's update.
Block accesses (DMA), atomics and the device library's ADD bypass the cache.

`ascend-scalar-cache`: the stricter reading of Ascend C's SetValue documentation: scalar
tl.stores go through the cache too and reach memory only as whole lines, at dcci or the end
of the kernel; cores writing different bytes of one line lose updates.  For code whose
scalar stores do take the scalar unit (hand-written Ascend C, or a lowering that does).

`ascend-weak-atomics`: `ascend` with the older reading of atomics: no atomic completes the
core's stores in flight (sim/stale.py says what the default does instead, and why).

`coherent`: no caches; every scalar access goes straight to memory.  Use it to tell an
algorithm bug from a cache bug.

At kernel end every dirty line is written back and the cache is dropped (an inference from
documentation, not verified on hardware; docs/device_model.md).  Under `ascend` nothing is
dirty by then: tl.store never dirties a line and every library store is followed by its
dcci, so the write-back matters only under `ascend-scalar-cache`.  A write-back writes the
whole line but only inside the buffers (a heap, a tensor argument's storage) the core wrote
bytes of: a line that straddles the end of a host tensor never writes the bytes beyond it,
nor a neighbouring tensor that shares the line (issue 14 item 7).
"""
from __future__ import annotations

import ctypes

import numpy as np

from triton_dist.symbols import CACHE_LINE_BYTES

from . import context

LINE = CACHE_LINE_BYTES
_MASK = ~(LINE - 1)


class CoherentMemory:
    name = "coherent"
    caches = False
    # an atomic with release/acq_rel semantics completes the core's stores in flight (sim/stale.py)
    release_completes_stores = True

    def new_cache(self):
        return None

    def scalar_load(self, addr, np_dtype):
        return np.frombuffer(ctypes.string_at(addr, np.dtype(np_dtype).itemsize), dtype=np_dtype)[0]

    def scalar_store(self, addr, value):
        """A kernel's scalar tl.store."""
        value = np.asarray(value)
        ctypes.memmove(addr, value.tobytes(), value.itemsize)
        context.runtime().sched.wrote()

    def library_store(self, addr, value):
        """A scalar store of the device library (Ascend C): the caller dccis the line."""
        self.scalar_store(addr, value)

    def dcci_line(self, addr):
        pass

    def dcci_all(self):
        pass

    def kernel_end(self, cache):
        pass


class AscendMemory(CoherentMemory):
    """Per-core write-back caches; the cache object is a dict line address ->
    [bytearray, dirty, dirty-byte mask].
    Scalar loads through the cache; a kernel's scalar store exact (DMA); library stores cached."""
    name = "ascend"
    caches = True
    cached_kernel_stores = False

    def new_cache(self):
        return {}

    @staticmethod
    def _line(addr):
        c = context.core()
        cache = c.cache
        base = addr & _MASK
        entry = cache.get(base)
        if entry is None:
            entry = [bytearray(ctypes.string_at(base, LINE)), False, 0]   # bytes, dirty, dirty-byte mask
            cache[base] = entry
        return entry, addr - base

    def scalar_load(self, addr, np_dtype):
        if context.core() is None:        # host code reads memory directly
            return super().scalar_load(addr, np_dtype)
        entry, off = self._line(addr)
        size = np.dtype(np_dtype).itemsize
        if off + size > LINE:             # a scalar straddling two lines: read both
            return np.frombuffer(bytes(entry[0][off:]) + bytes(self._line(addr + LINE - off)[0][0][:off + size - LINE]),
                                 dtype=np_dtype)[0]
        return np.frombuffer(entry[0], dtype=np_dtype, count=1, offset=off)[0]

    def scalar_store(self, addr, value):
        c = context.core()
        if c is None:
            return super().scalar_store(addr, value)
        if self.cached_kernel_stores:
            return self.library_store(addr, value)
        # a 1-element DMA: exactly the element's bytes reach memory; the storing core's own
        # copy of the line(s) (if cached) sees them, no other core's cache does
        raw = value.tobytes()              # a numpy scalar or array: the element's bytes
        ctypes.memmove(addr, raw, len(raw))
        cache = c.cache
        if cache:
            end = addr + len(raw)
            base = addr & _MASK
            while base < end:
                e = cache.get(base)
                if e is not None:
                    lo, hi = max(addr, base), min(end, base + LINE)
                    e[0][lo - base:hi - base] = raw[lo - addr:hi - addr]
                base += LINE
        context.runtime().sched.wrote()

    def library_store(self, addr, value):
        if context.core() is None:
            return CoherentMemory.scalar_store(self, addr, value)
        raw = np.asarray(value).tobytes()
        entry, off = self._line(addr)
        n = min(len(raw), LINE - off)
        entry[0][off:off + n] = raw[:n]
        entry[1] = True
        entry[2] |= ((1 << n) - 1) << off
        if n < len(raw):
            e2, _ = self._line(addr + n)
            e2[0][:len(raw) - n] = raw[n:]
            e2[1] = True
            e2[2] |= (1 << (len(raw) - n)) - 1

    @staticmethod
    def _writeback(base, entry, cause=None):
        """Write a dirty line back: the whole line, as the hardware does, but only inside the
        buffers (heap, tensor argument) this core wrote bytes of: never a byte the simulation
        does not own, never a neighbouring buffer that merely shares the line.  Bytes it did
        not write that memory holds newer values of are reverted: the observers are told
        (written_back; sim/evidence/watch.py names the lost update `cache line`)."""
        if entry[1]:
            rt = context.runtime()
            for lo, hi in rt.space.owned(base, base + LINE):
                if entry[2] >> (lo - base) & ((1 << (hi - lo)) - 1):
                    new = bytes(entry[0][lo - base:hi - base])
                    obs = rt.observers
                    if obs is not None and obs.wants("written_back"):   # lost updates (sim/evidence/)
                        obs.written_back(base, lo, ctypes.string_at(lo, hi - lo), new, entry[2], cause)
                    ctypes.memmove(lo, new, hi - lo)
            entry[1] = False
            entry[2] = 0
            rt.sched.wrote()

    def dcci_line(self, addr):
        c = context.core()
        if c is None:
            return
        base = addr & _MASK
        entry = c.cache.pop(base, None)
        if entry is not None:
            self._writeback(base, entry)

    def dcci_all(self):
        c = context.core()
        if c is None:
            return
        for base, entry in c.cache.items():
            self._writeback(base, entry)
        c.cache.clear()

    def kernel_end(self, cache):
        for base, entry in cache.items():
            self._writeback(base, entry, "at the end of its kernel")
        cache.clear()


class AscendScalarCacheMemory(AscendMemory):
    """The strict model: a kernel's scalar stores go through the data cache as well."""
    name = "ascend-scalar-cache"
    cached_kernel_stores = True


class AscendWeakAtomicsMemory(AscendMemory):
    """The older, stricter reading of atomics: no tl.atomic_* completes the core's stores in
    flight, whatever its sem (sim/stale.py); only quiet/fence, barriers, putmem_signal,
    tl.debug_barrier() and the end of the program do.  For code that must also hold where an
    atomic is a bare hardware atomic store that nothing orders after the core's earlier DMAs."""
    name = "ascend-weak-atomics"
    release_completes_stores = False


MODELS = {"ascend": AscendMemory, "ascend-scalar-cache": AscendScalarCacheMemory,
          "ascend-weak-atomics": AscendWeakAtomicsMemory, "coherent": CoherentMemory}


def make(name: str):
    if name not in MODELS:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(f"memory_model must be one of {sorted(MODELS)}, got {name!r}")
    return MODELS[name]()
