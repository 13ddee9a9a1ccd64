"""What the device model saw, kept in memory the launcher shares with the ranks.

The launcher creates one EvidenceBoard before it forks the ranks (like the status board and
the race detector's slot table), so whatever a rank saw survives the rank (killed, stuck,
torn down) and the launcher can put it into the failure it raises.  Four small tables:

- `signals`: every address a signal op (SET, ADD: notify, signal_op, int_p, putmem_signal's
  signal) targeted during the launch, with the last writer and value: a wait on an address
  that is not there was never signalled;
- `writes`: a ring of the puts and gets (their destination bytes), which a wait may await
  too, for the same question;
- `flights`: the stores of a core still in flight (sim/dma.py) when it set a signal, and
  whether each has landed since: a core that observed the signal and then loads those
  bytes before they land reads stale data (the missing fence);
- `findings`: what the watchers found (sim/evidence/watch.py), already in words, with the
  rank, core and address that tell which failure they explain.

Plus the symmetric allocations (rank 0 writes them; every rank allocates the same), so the
launcher names addresses as the ranks do (sim/naming.py).

Every write takes one process-shared lock; none is on the hot path of loads and stores
(signals, puts and findings are rare next to them).  The ranks write it through their
device watch (sim/evidence/watch.py, an observer) and, for the allocations, sim/backend.py.
"""
from __future__ import annotations

import mmap

import numpy as np

from ..board import cut, probe, text

NSIGNALS = 8192          # distinct signalled addresses remembered (open addressing)
NWRITES = 2048           # ring of puts / gets
NFLIGHTS = 4096          # ring of stores in flight at a signal
NFINDINGS = 256          # ring of findings
NALLOCS = 1024           # ring of symmetric allocations
SITE = 96                # bytes of a kernel line's words

SIGNAL = np.dtype([("addr", "u8"), ("count", "u8"), ("value", "i8"), ("id", "u8"), ("rank", "i4"),
                   ("core", "i4"), ("add", "u1"), ("site", f"S{SITE}")])
WRITE = np.dtype([("lo", "u8"), ("hi", "u8"), ("rank", "i4"), ("core", "i4"), ("what", "S16"),
                  ("site", f"S{SITE}")])
FLIGHT = np.dtype([("sig", "u8"), ("sig_id", "u8"), ("lo", "u8"), ("hi", "u8"), ("rank", "i4"), ("core", "i4"),
                   ("landed", "u1"), ("put", "u1"), ("site", f"S{SITE}"), ("sig_site", f"S{SITE}")])
FINDING = np.dtype([("seq", "u8"), ("kind", "S12"), ("rank", "i4"), ("core", "i4"), ("addr", "u8"),
                    ("text", "S1400")])
ALLOC = np.dtype([("offset", "u8"), ("nbytes", "u8"), ("itemsize", "u4"), ("live", "u1"), ("label", "S80"),
                  ("origin", "S120")])
IN_FLIGHT, LANDING, LANDED = 0, 1, 2       # flights["landed"]
# counters (u8): next signal id, writes, flights, findings, allocations
SIG_IDS, NW, NF, NFD, NA = range(5)


class EvidenceBoard:
    """The shared tables (module docstring).  `local=True`: a board of this process only
    (a rank started by torchrun has no launcher to share one)."""

    def __init__(self, local: bool = False):
        self.local = local
        layout = [("u", np.uint64, 8), ("signals", SIGNAL, NSIGNALS), ("writes", WRITE, NWRITES),
                  ("flights", FLIGHT, NFLIGHTS), ("findings", FINDING, NFINDINGS), ("allocs", ALLOC, NALLOCS)]
        size = sum(np.dtype(t).itemsize * k for _, t, k in layout)
        self._mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE if local else mmap.MAP_SHARED)
        off = 0
        for name, t, k in layout:
            setattr(self, name, np.frombuffer(self._mm, dtype=t, count=k, offset=off))
            off += np.dtype(t).itemsize * k
        if local:
            import threading
            self.lock = threading.Lock()
        else:
            import multiprocess as mp
            self.lock = mp.get_context("fork").Lock()

    # -- signals -----------------------------------------------------------------------------
    def _slot(self, addr: int, insert: bool) -> int:
        # full: -1, the address is forgotten (the `never` check then says it cannot tell)
        return probe(self.signals["addr"], addr, insert, 19)

    def signalled(self, addr: int, value: int, add: bool, rank: int, core: int, site: bytes) -> int:
        """A signal op targeted addr; returns its id (for flights and trace flows)."""
        with self.lock:
            self.u[SIG_IDS] += 1
            sid = int(self.u[SIG_IDS])
            i = self._slot(addr, True)
            if i >= 0:
                r = self.signals[i]
                r["count"] += 1
                r["value"] = _i64(value)
                r["id"], r["rank"], r["core"], r["add"], r["site"] = sid, rank, core, add, site
        return sid

    def signal(self, addr: int):
        """The record of the last signal op on addr, or None if none targeted it."""
        i = self._slot(addr, False)
        return None if i < 0 else self.signals[i]

    def signalled_near(self, lo: int, hi: int) -> list:
        """Records of signalled addresses in [lo, hi)."""
        keys = self.signals["addr"]
        idx = np.flatnonzero((keys >= lo) & (keys < hi))
        return [self.signals[i] for i in idx]

    def full(self) -> bool:
        return bool((self.signals["addr"] != 0).all())

    # -- puts and gets, which a wait may await too ---------------------------------------------------
    def wrote(self, lo: int, hi: int, what: str, rank: int, core: int, site: bytes) -> None:
        with self.lock:
            i = int(self.u[NW]) % NWRITES
            self.writes[i] = (lo, hi, rank, core, cut(what, 16), site)
            self.u[NW] += 1

    def writes_covering(self, addr: int) -> tuple:
        """(the records of puts/gets that wrote addr, whether the ring forgot some)."""
        n = min(int(self.u[NW]), NWRITES)
        w = self.writes[:n]
        idx = np.flatnonzero((w["lo"] <= addr) & (w["hi"] > addr))
        return [w[i] for i in idx], int(self.u[NW]) > NWRITES

    # -- stores in flight at a signal ---------------------------------------------------------------
    def flight(self, sig: int, sig_id: int, lo: int, hi: int, rank: int, core: int, site: bytes,
               sig_site: bytes, put: bool) -> int:
        with self.lock:
            k = int(self.u[NF])
            self.u[NF] += 1
        i = k % NFLIGHTS
        self.flights[i] = (sig, sig_id, lo, hi, rank, core, 0, put, site, sig_site)
        return i

    def landing(self, i: int, state: int) -> None:
        """A store registered at a signal starts landing (LANDING, before its bytes are written)
        or has landed (LANDED, after)."""
        self.flights["landed"][i] = state

    def in_flight_at(self, sig: int) -> np.ndarray:
        """Indices of stores not landed yet that were in flight when a signal op on sig was made."""
        n = min(int(self.u[NF]), NFLIGHTS)
        f = self.flights[:n]
        return np.flatnonzero((f["sig"] == sig) & (f["landed"] != LANDED))

    # -- findings ------------------------------------------------------------------------------------
    def found(self, kind: str, rank: int, core: int, addr: int, words: str) -> None:
        with self.lock:
            k = int(self.u[NFD])
            self.u[NFD] += 1
            self.findings[k % NFINDINGS] = (k + 1, cut(kind, 12), rank, core, addr, cut(words, 1400))

    def all_findings(self) -> list:
        """[(seq, kind, rank, core, addr, words)], oldest first."""
        n = min(int(self.u[NFD]), NFINDINGS)
        rows = sorted((r for r in self.findings[:NFINDINGS] if int(r["seq"])), key=lambda r: int(r["seq"]))
        return [(int(r["seq"]), text(r["kind"]), int(r["rank"]), int(r["core"]), int(r["addr"]), text(r["text"]))
                for r in rows[-n:]]

    # -- allocations (named as the ranks name them) ----------------------------------------------------
    def allocated(self, a) -> None:
        with self.lock:
            i = int(self.u[NA]) % NALLOCS
            self.allocs[i] = (a.offset, a.nbytes, a.itemsize, 1, cut(a.label, 80), cut(a.origin, 120))
            self.u[NA] += 1

    def freed(self, offset: int) -> None:
        live = np.flatnonzero((self.allocs["offset"] == offset) & (self.allocs["live"] == 1))
        for i in live:
            self.allocs["live"][i] = 0

    def allocation(self, offset: int):
        """(label, itemsize, start offset, origin, nbytes) of the live allocation holding a heap
        offset, or None."""
        a = self.allocs
        idx = np.flatnonzero((a["live"] == 1) & (a["offset"] <= offset) & (a["offset"] + a["nbytes"] > offset))
        if not idx.size:
            return None
        r = a[idx[-1]]
        return text(r["label"]), int(r["itemsize"]), int(r["offset"]), text(r["origin"]), int(r["nbytes"])


def _i64(v) -> int:
    v = int(v)
    return v - (1 << 64) if v >= 1 << 63 else v
