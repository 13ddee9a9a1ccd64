"""The device watch: what the device model sees as it happens, recorded on the EvidenceBoard.

A subscriber of the rank's observers (sim/observers.py), subscribed on every simulated rank
(sim/backend.py).  It implements only rare events, so the access path stays on its fast
path (no Access is built for a load or store: sim/observers.py `accesses`): a signal, a
satisfied wait, consume_token, a put, a store in flight landing, a dirty cache line written
back, a round of a spin on a cached line.  Only when a core has observed a signal that
overtook stores still in flight does `LoadWatch` subscribe to the rank's accesses, to see
the loads that follow.

What is found (kind: what it means on the NPU, the fix):
- FENCE: a core loaded bytes that another core's store still held in flight after a
  signal the loader observed: a tl.store is an MTE3 DMA and a signal a scalar store + dcci,
  so the signal overtook the data (docs/device_model.md); fix: libshmem_device.fence()
  between the store and the signal (or putmem_signal).  If the load's pointer did not go
  through dl.consume_token either, the finding says so (consume_token: the load may also be
  issued before the wait completes).
- CACHE LINE: a core's write-back of a 64-byte data-cache line (a SET's dcci, the kernel's
  end) wrote back bytes it had not written, reverting another task's update of the same
  line (sim/cache.py); fix: pad signal slots SIGNAL_SLOT_STRIDE elements (64 bytes) apart.
- STALE: a core polls a scalar tl.load that its data cache serves from a line memory has
  changed since (no dcci): the value it sees is stale and stays so; fix: dl.wait /
  signal_wait_until (they dcci every round).
- NEVER (sim/evidence/explain.py, at the failure): a wait on a slot nothing signalled.
"""
from __future__ import annotations

import ctypes

import numpy as np
from triton_dist.symbols import CACHE_LINE_BYTES

from .. import context, dma
from ..board import cut, text
from ..spin import PLAIN_SPIN
from .board import LANDED, NF, SITE

FENCE, CACHE_LINE, STALE, NEVER = "fence", "cache line", "stale", "never"


def _who(rank: int, core: int) -> str:
    return f"rank {rank} core {core}" if core >= 0 else f"rank {rank} host"


class CoreWatch:
    """A core's watch of the stores still in flight behind the signals it observed."""
    __slots__ = ("flights", "wait_where", "token", "consumed", "reported")

    def __init__(self):
        self.flights = []           # indices into EvidenceBoard.flights
        self.wait_where = ""
        self.token = False          # the last wait was a dl.wait (it returns a token)
        self.consumed = set()       # (heap offset lo, hi) of consume_token'd tensors
        self.reported = set()

    def arm(self, flights, where, token):
        for i in flights:
            if i not in self.flights:
                self.flights.append(i)
        self.wait_where = where
        self.token = token


class DeviceWatch:
    """The rank's subscriber (module docstring)."""

    def __init__(self, rt):
        self.rt = rt
        self.ev = rt.evidence
        self.flying = []            # [(core, lo, hi, flight index)]: this rank's stores registered at a signal
        self.watches = {}           # CoreContext -> CoreWatch
        self.loads = None           # the LoadWatch, once one core watches
        self.stale_told = set()     # (core, addr) of spins already reported

    # -- signals and the stores they may overtake ------------------------------------------
    def signal(self, addr, size, add, value) -> None:
        """A signal op on addr (before its store): remember it, and the signalling core's
        stores still in flight (sim/dma.py: they may land after the signal)."""
        rt, ev = self.rt, self.ev
        c = context.core()
        site = cut(context.kernel_line(2), SITE)
        sid = ev.signalled(addr, _int(value), bool(add), rt.rank, c.core if c is not None else -1, site)
        for s in dma.in_flight(c):
            i = ev.flight(addr, sid, s.lo, s.hi, rt.rank, c.core, cut(context.site_name(s.site), SITE), site, False)
            self.flying.append((c, s.lo, s.hi, i))

    def landed(self, a) -> None:
        """A store in flight reached memory: the signals it was registered at learn it."""
        if not self.flying:
            return
        keep = []
        done = False
        for f in self.flying:
            if not done and f[0] is a.core and f[1] == a.lo and f[2] == a.hi:
                self.ev.landing(f[3], LANDED)
                done = True
            else:
                keep.append(f)
        self.flying = keep

    def observed(self, addrs, values, size, token=False):
        """A wait of the calling core saw its values: if a signal on one of addrs was made
        while stores of its core were in flight that have not landed yet, this core's loads
        are watched from now on (LoadWatch)."""
        ev = self.ev
        c = context.core()
        if c is None or not int(ev.u[NF]):
            return None
        idx = []
        for addr in addrs:
            idx.extend(ev.in_flight_at(int(addr)).tolist())
        if not idx:
            return None
        w = self.watches.get(c)
        if w is None:
            w = self.watches[c] = CoreWatch()
        w.arm(idx, context.kernel_line(2), token)
        if self.loads is None:
            from ..observers import subscribe
            self.loads = LoadWatch(self)
            subscribe(self.rt, self.loads)
        return None

    def consume(self, value, token) -> None:
        """dl.consume_token(value, token): loads through value's tensor are ordered after the wait."""
        w = self.watches.get(context.core())
        data = getattr(getattr(value, "handle", None), "data", None)
        if w is None or data is None:
            return
        for a in np.unique(np.asarray(data).ravel())[:16].tolist():
            span = _tensor_span(self.rt, int(a))
            if span is not None:
                w.consumed.add(span)

    def rma(self, dst, src, nbytes, put, nbi, signal_addr=None, signal_size=4) -> None:
        """A put or get: its destination bytes were written (for NEVER)."""
        if nbytes and self.rt.space.heap_of(dst) is not None:
            c = context.core()
            self.ev.wrote(dst, dst + nbytes, "put" if put else "get", self.rt.rank, c.core if c is not None else -1,
                          cut(context.kernel_line(2), SITE))

    # -- the data cache ----------------------------------------------------------------------
    def written_back(self, base, lo, old: bytes, new: bytes, dirty: int, cause) -> None:
        """The calling core wrote its cached line at `base` back over [lo, lo + len(new)):
        `old` is what memory held, `dirty` the bytes (bit i: byte base + i) it wrote itself.
        Elements it had not written that memory held newer values of are lost updates."""
        rt = self.rt
        reverts, seen = [], set()
        for i in range(len(new)):
            if old[i] == new[i] or dirty >> (lo - base + i) & 1:
                continue
            b = rt.space.find(lo + i)
            a = b.heap.allocator.find(lo + i - b.start) if b is not None and b.heap is not None else None
            size = (a.itemsize or 4) if a is not None else 1
            start = (b.start + a.offset) if a is not None else lo
            e = lo + i - (lo + i - start) % size
            if e in seen or e < lo or e + size > lo + len(new):
                continue
            seen.add(e)
            j = e - lo
            reverts.append((e, size, int.from_bytes(old[j:j + size], "little"),
                            int.from_bytes(new[j:j + size], "little")))
        if not reverts:
            return
        cause = cause or f"at the dcci after its store at {context.kernel_line(2)}"
        c = context.core()
        core = c.core if c is not None else -1
        for addr, n, was, now in reverts:
            sig = self.ev.signal(addr)
            by = "" if sig is None or not int(sig["count"]) else \
                (f" (the signal {'ADD' if int(sig['add']) else 'SET'} of {_who(int(sig['rank']), int(sig['core']))} "
                 f"at {text(sig['site'])})")
            words = (f"{_who(rt.rank, core)}'s write-back of the 64-byte cache line holding "
                     f"{_name(rt, base, base + CACHE_LINE_BYTES)} ({cause}) wrote {now} over {was} at "
                     f"{_name(rt, addr, addr + n)}: that update{by} was lost. A core's data cache writes back whole "
                     f"lines, so tasks that update different bytes of one cache line revert each other. Fix: pad "
                     f"signal slots SIGNAL_SLOT_STRIDE elements (64 bytes) apart "
                     f"(libshmem_device.SIGNAL_SLOT_STRIDE_INT32 / _INT64)")
            self.ev.found(CACHE_LINE, rt.rank, core, addr, words)

    def spin_round(self, kind, addr, value) -> None:
        """A round of a spin on a poll: a plain scalar load spinning on its cached line while
        memory holds something else is told once (STALE)."""
        c = context.core()
        if kind != PLAIN_SPIN or c is None or (c, addr) in self.stale_told:
            return
        v = np.asarray(value).ravel()[:1]
        if not v.size:
            return
        now = np.frombuffer(ctypes.string_at(addr, v.dtype.itemsize), dtype=v.dtype)[0]
        if now == v[0]:
            return
        self.stale_told.add((c, addr))
        words = (f"{_who(self.rt.rank, c.core)} reads {_name(self.rt, addr, addr + 1)} at {context.kernel_line(2)} "
                 f"from its data cache, where the 64-byte line holds {v[0].item()}, while memory holds {now.item()}: "
                 f"a plain scalar tl.load hits the stale cached line and never sees another core's write (no dcci). "
                 f"Fix: poll with dl.wait or libshmem_device.signal_wait_until (they dcci the line every round)")
        self.ev.found(STALE, self.rt.rank, c.core, addr, words)


class LoadWatch:
    """Subscriber of a rank's accesses while some core watches: a load of bytes a watched
    store has not delivered yet is a FENCE finding."""

    def __init__(self, watch: DeviceWatch):
        self.watch = watch

    def access(self, a) -> None:
        if a.kind != "load" or a.core is None:
            return
        w = self.watch.watches.get(a.core)
        if w is None:
            return
        f = self.watch.ev.flights
        keep = []
        for i in w.flights:
            r = f[i]
            if int(r["landed"]) == LANDED:
                continue
            keep.append(i)
            lo, hi = max(a.lo, int(r["lo"])), min(a.hi, int(r["hi"]))
            if lo < hi and (i, a.site) not in w.reported:
                # the load is over (this runs after it) and the store has not landed: it read
                # bytes the store had not delivered
                w.reported.add((i, a.site))
                self._fence(a, w, r, lo, hi)
        w.flights = keep
        if not keep:
            del self.watch.watches[a.core]

    def _fence(self, a, w, r, lo, hi) -> None:
        rt = self.watch.rt
        words = (f"{_who(rt.rank, a.core.core)} loaded {_name(rt, lo, hi)} at {a.where()} while "
                 f"{_who(int(r['rank']), int(r['core']))}'s store of those bytes at {text(r['site'])} was "
                 f"still in flight: the signal at {text(r['sig_site'])}, which the wait at {w.wait_where} "
                 f"observed, overtook it (on the NPU a tl.store is an MTE3 DMA and a signal a scalar store + "
                 f"dcci: nothing orders them). Fix: call libshmem_device.fence() between the store and the "
                 f"signal (or send the data with putmem_signal)")
        if w.token and _tensor_span(rt, lo) not in w.consumed:
            words += (". The load's pointer did not go through dl.consume_token(ptr, token) of that wait "
                      "either: add it too, or the NPU may issue the load before the wait completes")
        self.watch.ev.found(FENCE, rt.rank, a.core.core, lo, words)


# ---- helpers ------------------------------------------------------------------------------------------

def _name(rt, lo: int, hi: int) -> str:
    b = rt.space.find(lo)
    if b is None or b.heap is None:
        return rt.space.describe(lo)
    a = b.heap.allocator.find(lo - b.start)
    if a is None:
        return rt.space.describe(lo)
    from .. import naming
    return naming.element(a.label, a.itemsize, b.heap_rank, lo - b.start - a.offset, hi - b.start - a.offset,
                          origin=a.origin)


def _tensor_span(rt, addr: int):
    """(heap offset lo, hi) of the symmetric tensor holding addr, on any rank."""
    b = rt.space.find(addr)
    if b is None or b.heap is None:
        return None
    a = b.heap.allocator.find(addr - b.start)
    return None if a is None else (a.offset, a.offset + a.nbytes)


def _int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0
