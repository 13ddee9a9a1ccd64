"""Memory models: the NPU's per-core, non-coherent, write-back data cache, or none.

`ascend` (the default): each core (program instance) has its own cache of 64-byte lines.
Scalar loads and stores go through it; a miss fetches the whole line from memory, a
write-back (dcci, or the end of the kernel) writes the whole line back, so two cores
that write different bytes of one line can lose an update, exactly as on the NPU.
Block accesses (DMA), atomics and the device library's ADD bypass the cache.

`coherent`: no caches; every scalar access goes straight to memory.  Use it to tell an
algorithm bug from a cache bug.

At kernel end every dirty line is written back and the cache is dropped.  Where this
comes from: Ascend C's DataCacheCleanAndInvalid documentation says a scalar write needs
dcci to reach GM *immediately* (so it does reach GM later without it), and host code
reads a kernel's scalar outputs once the task completes; we take the end of an AI-core
task to clean its cache.  An inference from documentation, not verified on hardware.
Inside a kernel nothing but dcci makes a line move.
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

    def new_cache(self):
        return None

    def scalar_load(self, addr, np_dtype):
        return np.frombuffer(ctypes.string_at(addr, np.dtype(np_dtype).itemsize), dtype=np_dtype)[0]

    def scalar_store(self, addr, value):
        value = np.asarray(value)
        ctypes.memmove(addr, value.tobytes(), value.itemsize)
        context.runtime().sched.wrote()

    def dcci_line(self, addr):
        pass

    def dcci_all(self):
        pass

    def kernel_end(self, cache):
        pass


class AscendMemory(CoherentMemory):
    """Per-core write-back caches; the cache object is a dict line address -> [bytearray, dirty]."""
    name = "ascend"
    caches = True

    def new_cache(self):
        return {}

    @staticmethod
    def _line(addr):
        c = context.core()
        cache = c.cache
        base = addr & _MASK
        entry = cache.get(base)
        if entry is None:
            entry = [bytearray(ctypes.string_at(base, LINE)), False]
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
        return np.frombuffer(bytes(entry[0][off:off + size]), dtype=np_dtype)[0]

    def scalar_store(self, addr, value):
        if context.core() is None:
            return super().scalar_store(addr, value)
        raw = np.asarray(value).tobytes()
        entry, off = self._line(addr)
        n = min(len(raw), LINE - off)
        entry[0][off:off + n] = raw[:n]
        entry[1] = True
        if n < len(raw):
            e2, _ = self._line(addr + n)
            e2[0][:len(raw) - n] = raw[n:]
            e2[1] = True

    @staticmethod
    def _writeback(base, entry):
        if entry[1]:
            ctypes.memmove(base, bytes(entry[0]), LINE)
            entry[1] = False
            context.runtime().sched.wrote()

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
            self._writeback(base, entry)
        cache.clear()


MODELS = {"ascend": AscendMemory, "coherent": CoherentMemory}


def make(name: str):
    if name not in MODELS:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(f"memory_model must be one of {sorted(MODELS)}, got {name!r}")
    return MODELS[name]()
