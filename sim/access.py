"""The access path: every load, store and atomic of a kernel, as one pipeline.

    check -> schedule -> route -> perform -> observe

1. check: the address range lies inside the tensor the pointer was computed from and
   inside one known buffer, every lane at a multiple of its DMA grain (sim/memory.py: an
   error naming the kernel line, never a segfault); a read of bytes another core's
   unordered store is still writing is a stale read (sim/stale.py, only for a core that
   synchronised through such an atomic: `c.hazards`); a read of symmetric memory still
   holding its allocation's poison is an uninitialised read (sim/initcheck.py, only while
   some live allocation is poisoned: `rt.heaps.poisoned`) -- the last two cost one
   attribute test when off;
2. schedule: the access is a scheduling point (sim/schedulers/), and a store of the same
   core still in flight to overlapping bytes lands first (sim/dma.py: `depend`);
3. route: a scalar load goes through the core's data cache (CACHE, sim/cache.py); a store
   under the ascend models is a DMA in flight (DMA: queued on its core, it lands later,
   sim/dma.py); everything else goes straight to memory (MEMORY: block loads, atomics,
   `coherent`, host code);
4. perform: numpy / Triton's interpreter reads or writes the bytes; a poll that read the
   same thing again is watched for spinning (sim/spin.py);
5. observe: the access is handed to the rank's subscribers (sim/observers.py: race
   detector, predictor, trace) -- only when there are any that take accesses
   (rt.access_observers): otherwise no Access object is built and nothing is called (the
   fast path; the device watch, subscribed on every rank, takes rarer events only).

sim/interp.py routes the interpreter's memory ops here (told whether the pointer is a
scalar), and the device library's own accesses (sim/primitives.py) take the same path
through `library_load` / `library_store` / `library_add` / `library_copy` (origin LIBRARY:
the race detector and the predictor see the library through its own events instead).

What an observer gets, `Access` (its fields, all cheap to read):
  kind      LOAD, STORE or ATOMIC
  route     CACHE, DMA or MEMORY (above)
  origin    KERNEL (tl.load / tl.store / tl.atomic_*) or LIBRARY (the device library)
  scalar    the pointer is a scalar (one lane)
  lo, hi    the byte range [lo, hi) the active lanes cover
  addrs     the active lanes' addresses (1-D numpy array)
  itemsize  bytes per lane; dtype: the numpy dtype
  data      a store's values, a load's result, an atomic's old values (the pointers' shape)
  mask      the lanes' mask (the pointers' shape), or None when every lane is active
  values()  the active lanes' values, 1-D
  core      the CoreContext that made it (rank, program, physical core), None on the host
  site      (code, line) of the kernel line that made it, taken when it was made;
            where() names it "file.py:LINE (kernel)"
  sync      an atomic's acquire/release (not relaxed) semantics
  read      an atomic's {address: value it read}, once performed (observers only)
"""
from __future__ import annotations

import numpy as np
from triton._C.libtriton import interpreter as _cpu

from triton_dist.backend import current_call

from . import context, core_split, dma, initcheck, memory, spin, stale, widened_mask
from .spin import ATOMIC_SPIN, LOAD_SPIN, PLAIN_SPIN

_RELAXED = _cpu.MEM_SEMANTIC.RELAXED

LOAD, STORE, ATOMIC = "load", "store", "atomic"
CACHE, DMA, MEMORY = "cache", "dma", "memory"
KERNEL, LIBRARY = "kernel", "library"


class Access:
    """One access, as its observers see it (fields: the module docstring)."""
    __slots__ = ("kind", "route", "origin", "scalar", "lo", "hi", "addrs", "itemsize", "dtype", "data", "mask",
                 "core", "site", "sync", "read", "ptrs", "rt")

    def __init__(self, rt, kind, route, origin, scalar, lo, hi, addrs, dtype, data, mask, site, core=context.HERE):
        self.rt, self.kind, self.route, self.origin, self.scalar = rt, kind, route, origin, scalar
        self.lo, self.hi, self.addrs, self.dtype, self.itemsize = lo, hi, addrs, dtype, dtype.itemsize
        self.data, self.mask, self.site = data, mask, site
        self.core = context.core() if core is context.HERE else core
        self.sync = False
        self.read = None
        self.ptrs = None

    def values(self) -> np.ndarray:
        d = np.asarray(self.data)
        if self.mask is None:
            return d.ravel()
        shape = np.shape(self.mask)
        return np.broadcast_to(d, shape)[np.asarray(self.mask, dtype=bool)]

    def where(self) -> str:
        return context.site_name(self.site)

    def land(self) -> None:
        """Perform a store in flight (sim/dma.py calls it when it lands), then tell the observers."""
        rt = self.rt
        if self.scalar:
            rt.memory.scalar_store(self.lo, self.data.ravel()[0])
        else:
            _cpu.store(self.ptrs, self.data, self.mask if self.mask is not None else _all(self.ptrs))
            rt.sched.wrote()
        if rt.observers is not None:
            rt.observers.landed(self)

    def __repr__(self):
        return (f"Access({self.kind} {self.route} {self.origin} [0x{self.lo:x}, 0x{self.hi:x}) "
                f"{self.addrs.size if self.addrs is not None else 0} x {self.dtype} at {self.where()})")


_ITEMSIZE: dict = {}


def _itemsize(np_dtype) -> int:
    n = _ITEMSIZE.get(np_dtype)
    if n is None:
        n = _ITEMSIZE[np_dtype] = np.dtype(np_dtype).itemsize
    return n


def _active(ptrs: np.ndarray, mask: np.ndarray | None):
    """(the active lanes' addresses, 1-D; the mask as the observers get it: None when all are active)."""
    if mask is None:
        return ptrs.ravel(), None
    if mask.shape != ptrs.shape:
        mask = np.broadcast_to(mask, ptrs.shape)
    if mask.all():
        return ptrs.ravel(), None
    return ptrs[mask], mask


_ALL: dict = {}
_ZEROS: dict = {}


def _zeros(shape, np_dtype):
    """Zeros of that shape and dtype (read-only, shared): the `other` of an unmasked load."""
    key = (shape, np_dtype)
    z = _ZEROS.get(key)
    if z is None:
        z = _ZEROS[key] = np.zeros(shape, dtype=np_dtype)
        z.flags.writeable = False
    return z


def _all(ptrs):
    """An all-true mask of the pointers' shape (read-only, shared: the interpreter never writes it)."""
    m = _ALL.get(ptrs.shape)
    if m is None:
        m = _ALL[ptrs.shape] = np.ones(ptrs.shape, dtype=bool)
        m.flags.writeable = False
    return m


def _site():
    f = context.kernel_frame(3)
    return None if f is None else (f.f_code, f.f_lineno)


_OR = np.bitwise_or.reduce


def _check(rt, base, sel, lo, hi, itemsize, what):
    """Step 1: inside the pointer's own tensor, inside one known buffer (else SimMemoryError).
    A pointer's base is a live allocation of a known buffer, taken in this launch (sim/interp.py,
    memory.base_of): an access inside it needs no other look-up.  Every lane's address must be
    a multiple of the DMA's granularity for the element size (memory.DMA_GRAIN)."""
    g = memory.DMA_GRAIN.get(itemsize, 1)
    if g > 1 and (lo if sel is None or sel.size < 2 else int(_OR(sel))) & (g - 1):     # one pass over the lanes
        bad = lo if lo % g else int(sel[(sel & np.uint64(g - 1)) != 0][0])
        raise memory.misaligned(rt, what(), bad, g, itemsize)
    if base is not None:
        if base[0] <= lo and hi <= base[1]:
            return
        memory.check_base(base, sel if sel is not None else np.array([lo], dtype=np.uint64), itemsize, what())
    rt.space.check_span(lo, hi, sel, itemsize, what)


# ---- tl.load / tl.store / tl.atomic_* (sim/interp.py) -------------------------------------

def _owned(kind, c=context.HERE) -> bool:
    """False on the instance of a split block (sim/core_split.py) whose core does not own this access."""
    if c is context.HERE:
        c = context.core()
    return c is None or c.split is None or core_split.owns(c, kind)


def _unowned_load(rt, ptrs, mask, other, np_dtype, base):
    """The value a non-owning instance computes with: memory as it is, seen by nothing (the owning
    instance's load is the one the caches, the DMA order and the race detector see)."""
    if mask is None:
        mask = _all(ptrs)
    if other is None:
        other = _zeros(ptrs.shape, np_dtype)
    sel, _ = _active(ptrs, mask)
    if not sel.size:
        return _cpu.load(ptrs, mask, other, np_dtype)
    itemsize = _itemsize(np_dtype)
    lo, hi = int(sel.min()), int(sel.max()) + itemsize
    _check(rt, base, sel, lo, hi, itemsize, lambda: f"load of {np.dtype(np_dtype).name}")
    rt.sched.point("load", int(sel[0]))     # still a scheduling point: the other core's poll loop runs here too
    out = _cpu.load(ptrs, mask, other, np_dtype)
    rt.spin_watch(("unowned", lo, hi), out, LOAD_SPIN, lo)
    return out


def load(ptrs: np.ndarray, mask, other, np_dtype, scalar: bool, base=None) -> np.ndarray:
    """mask None: every lane is active (an unmasked tl.load); other None: zeros."""
    rt = context.runtime()
    c = context.core()          # looked up once: the calling thread's core stays the same throughout
    if not _owned(core_split.LOAD, c):
        return _unowned_load(rt, ptrs, mask, other, np_dtype, base)
    if scalar and rt.memory.caches:
        return _scalar_load(rt, c, ptrs, mask, other, np_dtype, base)
    itemsize = _itemsize(np_dtype)
    sel, m = _active(ptrs, mask)
    if mask is None:
        mask = _all(ptrs)
    if other is None:
        other = _zeros(ptrs.shape, np_dtype)
    if not sel.size:
        rt.sched.point("load" if not scalar else "scalar load", 0)
        return _cpu.load(ptrs, mask, other, np_dtype)
    lo, hi = int(sel.min()), int(sel.max()) + itemsize
    _check(rt, base, sel, lo, hi, itemsize, lambda: f"load of {np.dtype(np_dtype).name}")
    if m is not None:       # a partial mask: the NPU compiler may read the whole tile (sim/widened_mask.py)
        widened_mask.check(rt, base, ptrs, m, sel.size, itemsize, "load", np.dtype(np_dtype).name)
    rt.sched.point("load" if not scalar else "scalar load", int(sel[0]))
    dma.depend(lo, hi, c)
    if c is not None and c.hazards:      # another core's store still in flight over these bytes?
        stale.check(rt, c, lo, hi, "tl.load", _site())
    if rt.heaps.poisoned:                # symmetric memory nothing wrote yet? (sim/initcheck.py)
        initcheck.check(rt, lo, sel, "tl.load", _site())
    out = _cpu.load(ptrs, mask, other, np_dtype)
    rt.sched.saw(out, m)            # the event log shows what it read (deterministic schedules)
    obs = rt.access_observers
    if obs is not None:
        obs.access(Access(rt, LOAD, MEMORY, KERNEL, scalar, lo, hi, sel, np.dtype(np_dtype), out, m, _site(), c))
    # a poll (sim/spin.py): spinning only if the core's whole state repeats
    rt.spin_watch(("load", lo, hi), out, LOAD_SPIN, lo, c)
    return out


def _scalar_load(rt, c, ptrs, mask, other, np_dtype, base):
    """A scalar tl.load: through the core's data cache (sim/cache.py)."""
    if mask is not None and not mask.item(0):
        return other if other is not None else _zeros(ptrs.shape, np_dtype)
    addr = ptrs.item(0)
    itemsize = _itemsize(np_dtype)
    hi = addr + itemsize
    _check(rt, base, None, addr, hi, itemsize, lambda: f"scalar load of {np.dtype(np_dtype).name}")
    rt.sched.point("scalar load", addr)
    dma.depend(addr, hi, c)
    if c is not None and c.hazards:
        stale.check(rt, c, addr, hi, "scalar tl.load", _site())
    if rt.heaps.poisoned:
        initcheck.check(rt, addr, None, "scalar tl.load", _site())
    out = rt.memory.scalar_load(addr, np_dtype)
    rt.sched.saw(out)
    res = np.empty(ptrs.shape, dtype=np_dtype)
    res.fill(out)
    obs = rt.access_observers
    if obs is not None:
        route = CACHE if c is not None else MEMORY
        obs.access(Access(rt, LOAD, route, KERNEL, True, addr, hi, ptrs.ravel()[:1], np.dtype(np_dtype), res, None,
                          _site(), c))
    rt.spin_watch(("cached", addr), out, PLAIN_SPIN, addr, c)
    return res


def store(ptrs: np.ndarray, value: np.ndarray, mask, scalar: bool, base=None) -> None:
    """mask None: every lane is active (an unmasked tl.store)."""
    rt = context.runtime()
    c = context.core()
    if not _owned(core_split.STORE, c):     # the other core's store (sim/core_split.py)
        return
    if scalar and rt.memory.caches:
        return _scalar_store(rt, c, ptrs, value, mask, base)
    itemsize = value.dtype.itemsize
    sel, m = _active(ptrs, mask)
    if not sel.size:                # every lane masked: nothing lands, but it counts as progress
        rt.sched.point("store" if not scalar else "scalar store", 0)
        rt.sched.wrote()
        rt.spin_reset(c)
        return
    lo, hi = int(sel.min()), int(sel.max()) + itemsize
    _check(rt, base, sel, lo, hi, itemsize, lambda: f"store of {value.dtype.name}")
    if m is not None and widened_mask.check(rt, base, ptrs, m, sel.size, itemsize, "store", value.dtype.name):
        # as the NPU runs it: the whole tile, masked-off lanes written back with what they hold now (a
        # program writing them meanwhile loses its write: the race detector sees a whole-tile store)
        value = np.where(m, value, _cpu.load(ptrs, _all(ptrs), _zeros(ptrs.shape, value.dtype), value.dtype))
        mask, m, sel = None, None, ptrs.ravel()
        lo, hi = int(sel.min()), int(sel.max()) + itemsize
    rt.sched.point("store" if not scalar else "scalar store", int(sel[0]))
    rt.sched.saw(value, m)          # the event log shows what it stores (deterministic schedules)
    rt.spin_wrote(c, lo, hi)        # progress, unless only a count of a spin's rounds (sim/spin.py)
    dma.depend(lo, hi, c)
    obs = rt.access_observers
    if c is not None and rt.memory.caches:
        # an MTE3 DMA: in flight until it lands (sim/dma.py); its own copy of the operands
        # (its site even with nobody taking accesses: a landing or a signal it is in flight at names it)
        a = Access(rt, STORE, DMA, KERNEL, scalar, lo, hi, sel, value.dtype, np.array(value),
                   None if m is None else np.array(m), _site(), c)
        a.ptrs = np.array(ptrs)
        dma.issue(c, lo, hi, a.land, a.site)
    else:
        _cpu.store(ptrs, value, mask if mask is not None else _all(ptrs))
        rt.sched.wrote()
        if obs is not None:
            a = Access(rt, STORE, MEMORY, KERNEL, scalar, lo, hi, sel, value.dtype, value, m, _site(), c)
    if obs is not None:
        obs.access(a)


def _scalar_store(rt, c, ptrs, value, mask, base):
    """A scalar tl.store: a 1-element DMA in flight (triton-ascend's lowering), or through the
    data cache under ascend-scalar-cache (sim/cache.py)."""
    if mask is not None and not mask.item(0):
        return
    addr = ptrs.item(0)
    dtype = value.dtype
    hi = addr + dtype.itemsize
    _check(rt, base, None, addr, hi, dtype.itemsize, lambda: f"scalar store of {dtype.name}")
    v = value.ravel()[0]                         # a numpy scalar: its own copy of the value
    rt.sched.point("scalar store", addr, _int(v))
    rt.spin_wrote(c, addr, hi)
    dma.depend(addr, hi, c)
    obs = rt.access_observers
    if rt.memory.cached_kernel_stores or c is None:
        rt.memory.scalar_store(addr, v)          # ascend-scalar-cache: through the data cache
        a = None if obs is None else \
            Access(rt, STORE, CACHE if c is not None else MEMORY, KERNEL, True, addr, hi, ptrs.ravel()[:1],
                   dtype, np.asarray(v), None, _site(), c)
    else:   # triton-ascend: a 1-element tensor store = an MTE3 DMA, in flight (sim/dma.py)
        site = _site()
        a = Access(rt, STORE, DMA, KERNEL, True, addr, hi, ptrs.ravel()[:1], dtype, np.asarray(v), None, site, c)
        dma.issue(c, addr, hi, a.land, site)
    if obs is not None:
        obs.access(a)


def atomic_rmw(op, ptrs, val, mask, sem, base=None):
    rt = context.runtime()
    if not _owned(core_split.ATOMIC):
        return _unowned_load(rt, ptrs, mask, np.zeros(ptrs.shape, dtype=val.dtype), val.dtype, base)
    itemsize = val.dtype.itemsize
    sel, m = _active(ptrs, mask)
    if sel.size:
        lo, hi = int(sel.min()), int(sel.max()) + itemsize
        _check(rt, base, sel, lo, hi, itemsize, lambda: f"atomic on {val.dtype.name}")
        if m is not None and op.name in _WIDENED_RMW:    # adds 0 on the masked-off lanes on the NPU
            widened_mask.check(rt, base, ptrs, m, sel.size, itemsize, "atomic_add", val.dtype.name)
        rt.sched.point("atomic", int(sel[0]))
        dma.depend(lo, hi)
        _atomic_order(rt, sel, lo, hi, sem, _RMW_NAMES.get(op.name, op.name.lower()))
    else:
        rt.sched.point("atomic", 0)
    obs = rt.access_observers
    if obs is None or not sel.size:
        out = _cpu.atomic_rmw(op, ptrs, val, mask, sem)
    else:
        a = Access(rt, ATOMIC, MEMORY, KERNEL, False, lo, hi, sel, val.dtype, None, m, _site())
        a.sync = sem != _RELAXED
        out = _performed(obs, a, ptrs, mask, lambda: _cpu.atomic_rmw(op, ptrs, val, mask, sem))
    _atomic_done(rt, sel, out, spin.rmw_changed(op.name, out, val, mask))
    return out


def atomic_cas(ptrs, cmp, val, sem, base=None):
    rt = context.runtime()
    if not _owned(core_split.ATOMIC):
        return _unowned_load(rt, ptrs, None, np.zeros(ptrs.shape, dtype=val.dtype), val.dtype, base)
    itemsize = val.dtype.itemsize
    sel = ptrs.ravel()
    lo, hi = int(sel.min()), int(sel.max()) + itemsize
    _check(rt, base, sel, lo, hi, itemsize, lambda: f"atomic_cas on {val.dtype.name}")
    rt.sched.point("atomic_cas", int(sel[0]))
    dma.depend(lo, hi)
    _atomic_order(rt, sel, lo, hi, sem, "cas")
    obs = rt.access_observers
    if obs is None:
        out = _cpu.atomic_cas(ptrs, cmp, val, sem)
    else:
        a = Access(rt, ATOMIC, MEMORY, KERNEL, False, lo, hi, sel, val.dtype, None, None, _site())
        a.sync = sem != _RELAXED
        out = _performed(obs, a, ptrs, None, lambda: _cpu.atomic_cas(ptrs, cmp, val, sem))
    _atomic_done(rt, sel, out, spin.cas_changed(out, cmp, val))
    return out


_WIDENED_RMW = frozenset(("ADD", "FADD"))     # DiscreteMaskAtomicAddConversion's ops (sim/widened_mask.py)
_RMW_NAMES = {"FADD": "add", "UMAX": "max", "UMIN": "min"}


def _atomic_order(rt, sel, lo, hi, sem, op):
    """An atomic and the core's stores in flight (sim/stale.py): a read of bytes another core's
    unordered store is still writing is reported; a releasing atomic completes the core's own
    stores (default model); stores it leaves in flight are remembered at its addresses."""
    if rt.heaps.poisoned:
        initcheck.check(rt, lo, sel, f"tl.atomic_{op}", _site())
    c = context.core()
    if c is None:
        return
    if c.hazards:
        stale.check(rt, c, lo, hi, f"tl.atomic_{op}", _site())
    if c.pending or rt.__dict__.get(stale.TABLE):
        stale.at_atomic(rt, c, sel, sem, f"tl.atomic_{op}", _site)


def _performed(obs, a, ptrs, mask, perform):
    """An atomic performed through the observers' around_atomic, then observed."""
    def run():
        out = perform()
        a.data, a.read = out, _read_by(ptrs, mask, out)
        return out
    out = obs.perform_atomic(a, run)
    obs.access(a)
    return out


def _atomic_done(rt, sel, out, changed: bool) -> None:
    """An atomic that changed memory is a write; one that did not (a failed atomic_cas, an
    atomic_add of 0) only read: polled in a loop it is a spin like a load's (issue 14 item 5)."""
    if changed:
        if sel.size:
            rt.spin_wrote(context.core(), int(sel.min()), int(sel.max()) + np.asarray(out).dtype.itemsize)
        else:
            rt.spin_reset()
        rt.sched.wrote()
    elif sel.size:
        a = int(sel[0])
        rt.spin_watch(("atomic", a, sel.size), np.asarray(out), ATOMIC_SPIN, a)


def _read_by(ptrs, mask, out) -> dict:
    """{address: the value the atomic read there}: an acquire synchronises with what was
    actually read (the first lane on an address read it first)."""
    p = np.asarray(ptrs).ravel()
    o = np.broadcast_to(np.asarray(out), np.asarray(ptrs).shape).ravel()
    m = np.ones(p.shape, dtype=bool) if mask is None else np.broadcast_to(mask, np.asarray(ptrs).shape).ravel()
    read = {}
    for a, v, on in zip(p.tolist(), o.tolist(), m.tolist()):
        if on and a not in read:
            read[a] = _int(v)
    return read


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


# ---- the device library's own accesses (sim/primitives.py; checked by the caller) -----------

def library_load(rt, addr: int, np_dtype):
    """A scalar load of the device library (a wait's poll, the barrier's counter): through the
    core's data cache.  A scheduling point."""
    itemsize = _itemsize(np_dtype)
    rt.sched.point("scalar load", addr)
    dma.depend(addr, addr + itemsize)     # the core's own store to it lands first
    if rt.heaps.poisoned:
        initcheck.check(rt, addr, None, current_call("the device library's read"))
    out = rt.memory.scalar_load(addr, np_dtype)
    rt.sched.saw(out)
    if rt.access_observers is not None:
        _library(rt, LOAD, CACHE, addr, itemsize, np_dtype, out)
    return out.item()


def library_store(rt, addr: int, value, np_dtype) -> None:
    """A scalar store of the device library (SET, the barrier's flag and counter): through the
    core's data cache; the caller dccis the line."""
    itemsize = _itemsize(np_dtype)
    rt.sched.point("scalar store", addr, int(value))
    dma.depend(addr, addr + itemsize)
    v = np.asarray(value, dtype=np_dtype)
    rt.memory.library_store(addr, v)
    if rt.access_observers is not None:
        _library(rt, STORE, CACHE, addr, itemsize, np_dtype, v)


def library_add(rt, addr: int, value: int, np_dtype) -> None:
    """Signal ADD: a hardware atomic add (UB->GM copy in atomic-add mode), bypassing the cache.
    The caller has made it a scheduling point and told the observers of the signal."""
    if rt.heaps.poisoned:
        initcheck.check(rt, addr, None, current_call("signal ADD"))
    old = memory.atomic_add(addr, value, np_dtype)
    rt.sched.wrote()
    if rt.access_observers is not None:
        _library(rt, ATOMIC, MEMORY, addr, _itemsize(np_dtype), np_dtype, np.asarray(old, dtype=np_dtype))


def library_copy(rt, dst: int, src: int, nbytes: int) -> None:
    """A DMA copy (putmem/getmem's MTE transfer GM -> UB -> GM), bypassing the data caches."""
    rt.sched.point("dma copy", dst, nbytes)
    dma.depend(src, src + nbytes)       # the core's own stores to either buffer land first
    dma.depend(dst, dst + nbytes)
    if rt.heaps.poisoned and nbytes:
        initcheck.check(rt, src, np.arange(src, src + nbytes, 8, dtype=np.uint64),
                        current_call("the transfer's read of its source"))
    memory.copy(dst, src, nbytes)
    rt.sched.wrote()
    if rt.access_observers is not None:
        site = _site()
        u8 = np.dtype(np.uint8)
        rt.access_observers.access(Access(rt, LOAD, MEMORY, LIBRARY, False, src, src + nbytes, None, u8, None, None,
                                          site))
        rt.access_observers.access(Access(rt, STORE, MEMORY, LIBRARY, False, dst, dst + nbytes, None, u8, None, None,
                                          site))


def _library(rt, kind, route, addr, itemsize, np_dtype, value):
    if context.core() is None:
        route = MEMORY
    rt.access_observers.access(Access(rt, kind, route, LIBRARY, True, addr, addr + itemsize,
                               np.array([addr], dtype=np.uint64), np.dtype(np_dtype), np.asarray(value), None,
                               _site()))
