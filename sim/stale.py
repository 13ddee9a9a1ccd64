"""Atomics and the stores in flight: which atomic completes them, and the stale read when
none did (issue 26 item 6).

A kernel's tl.store is a DMA in flight until something completes it (sim/dma.py).  Under
the default memory model ("ascend") an atomic with release or acq_rel semantics (acq_rel is
tl.atomic_*'s default) completes the calling core's stores in flight before it performs:
Triton's memory model (a release orders the program's earlier writes before it).  On the
NPU, triton-ascend lowers atomic_cas, atomic_xchg, and/or/xor and any atomic whose old
value is used to a locked sequence whose unlock begins with `pipe_barrier(PIPE_ALL)`, which
completes every earlier transfer of the core; the bare hardware atomic store (add/max/min
with the result unused) has no barrier and relies on the MTE3 queue's order, which no
source states (docs/device_model.md has the citations).  "ascend-weak-atomics" keeps the
older, stricter reading: no atomic completes a store.  tl.debug_barrier() is
`hivm.pipe_barrier[PIPE_ALL]` on the NPU and completes everything in flight under every
model (sim/interp.py).

When an atomic leaves stores in flight, they are remembered at the atomic's addresses; a
core whose atomic later reads one of those addresses inherits them; a load or atomic of
that core touching bytes of such a store before it lands reads stale data, and is
reported (StaleReadError) instead of silently returning the old bytes -- on plain tensors
as on symmetric memory.  Loads of the storing core itself are ordered by dma.depend().
"""
from __future__ import annotations

from triton._C.libtriton import interpreter as _cpu

from triton_dist.errors import TritonDistError

from . import context, dma

_S = _cpu.MEM_SEMANTIC
RELEASING = frozenset({_S.RELEASE, _S.ACQUIRE_RELEASE})
SEM_NAMES = {_S.RELAXED: "relaxed", _S.ACQUIRE: "acquire", _S.RELEASE: "release", _S.ACQUIRE_RELEASE: "acq_rel"}
TABLE = "_stale_reads"     # per-rank {address: Unordered} on the SimRuntime
_MAX_ADDRS = 256            # addresses of one block atomic remembered


class StaleReadError(TritonDistError):
    """A kernel read bytes another core's store was still writing, after synchronising with
    that core only through an atomic that did not complete the store."""


class Unordered:
    """Stores a core left in flight at an atomic on some address."""
    __slots__ = ("core", "stores", "atomic_site", "sem", "op")

    def __init__(self, core, stores, atomic_site, sem, op):
        self.core, self.stores, self.atomic_site, self.sem, self.op = core, stores, atomic_site, sem, op


def at_atomic(rt, c, addrs, sem, op: str, site) -> None:
    """Core c is about to perform atomic `op` (sem: the interpreter's MEM_SEMANTIC) on
    `addrs` (1-D, active lanes).  `site()` gives its kernel line (called only if needed)."""
    if c is None or not rt.memory.caches:
        return
    table = rt.__dict__.get(TABLE)
    if c.pending and sem in RELEASING and rt.memory.release_completes_stores:
        if dma.in_flight(c):
            dma.drain()
            if rt.observers is not None:
                rt.observers.stores_landed()
    if table:
        _inherit(table, c, addrs)
    left = dma.in_flight(c)
    if left:
        if table is None:
            table = rt.__dict__[TABLE] = {}
        rec = Unordered(c, left, site(), sem, op)
        for a in _addresses(addrs):
            table[a] = rec
    elif table:
        for a in _addresses(addrs):
            table.pop(a, None)


def _addresses(addrs):
    a = addrs.ravel()
    return (int(x) for x in (a if a.size <= _MAX_ADDRS else a[:_MAX_ADDRS]))


def _inherit(table, c, addrs) -> None:
    for a in _addresses(addrs):
        rec = table.get(a)
        if rec is None or rec.core is c:
            continue
        live = [s for s in rec.stores if not s.landed]
        if not live:
            del table[a]
            continue
        rec.stores = live
        hz = c.hazards
        if hz is None:
            hz = c.hazards = []
        if rec not in hz:
            hz.append(rec)


def check(rt, c, lo: int, hi: int, what: str, site) -> None:
    """Core c reads [lo, hi) (a load, or an atomic's read): if a store it inherited through an
    atomic is still in flight over those bytes, the read is stale: report it."""
    hz = c.hazards
    live = []
    for rec in hz:
        rec.stores = [s for s in rec.stores if not s.landed]
        if rec.stores:
            live.append(rec)
    c.hazards = live or None
    for rec in live:
        for s in rec.stores:
            if s.lo < hi and lo < s.hi:
                raise StaleReadError(_report(rt, c, rec, s, lo, hi, what, site))


def _report(rt, c, rec, store, lo, hi, what, site) -> str:
    name = context.site_name
    w = rec.core
    model = rt.memory.name
    if rt.memory.release_completes_stores:
        why = (f"under memory_model={model!r} only an atomic with sem='release' or 'acq_rel' (tl.atomic_*'s "
               f"default) completes its core's earlier stores")
        fix = (f"give that {rec.op} sem='release' or 'acq_rel', or put tl.debug_barrier() (a pipe barrier) "
               f"between the store and the {rec.op}")
    else:
        why = f"under memory_model={model!r} no atomic completes its core's earlier stores"
        fix = (f"put tl.debug_barrier() (a pipe barrier) or libshmem_device.fence() between the store and the "
               f"{rec.op}, or run under the default memory_model='ascend' (Triton's memory model)")
    lo_b, hi_b = max(lo, store.lo), min(hi, store.hi)
    return (f"stale read: rank {rt.rank} core {c.phys} (program {tuple(c.grid_idx)}): {what} at {name(site)} reads "
            f"{rt.space.describe(lo_b)} ({hi_b - lo_b} bytes) while the store of core {w.phys} (program "
            f"{tuple(w.grid_idx)}) at {name(store.site)} to those bytes is still in flight (a DMA that has not "
            f"landed), so it reads the old bytes.  Core {c.phys} is ordered after core {w.phys} only by core "
            f"{w.phys}'s {rec.op} at {name(rec.atomic_site)} (sem={SEM_NAMES.get(rec.sem, rec.sem)!r}), which an "
            f"atomic of core {c.phys} read; {why}.  Fix: {fix}.")
