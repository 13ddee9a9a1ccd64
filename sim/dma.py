"""A kernel's stores to global memory are DMAs: in flight until something completes them.

Where the rule comes from: docs/device_model.md (the rows on DMA stores) and docs/semantics.md §1.
On an Atlas A2 a block `tl.store` (and triton-ascend's scalar `tl.store`, which becomes a
1-element tensor store) is an MTE3 transfer UB -> GM, while a signal (`notify`, `signal_op`,
`int_p`) is a scalar store + dcci on the scalar pipe with no pipe barrier before it, and
HIVM's sync insertion treats different GM buffers as independent.  So nothing but the
program orders the data before the signal: a peer may see the signal and read stale data.

Under the `ascend` memory models (rt.memory.caches; not under `coherent`) a kernel's store
is queued on its core (in `CoreContext.pending`, the core's DMA queue, beside the non-blocking
puts) and reaches memory only when it completes:
- at quiet/fence, barrier_all/barrier_all_vec/barrier(team), putmem_signal(_nbi)'s own
  quiet/fence, tl.debug_barrier() (a pipe barrier, sim/interp.py) and the end of the core's
  program (primitives.complete_pending); at a release/acq_rel tl.atomic_* under the default
  models (sim/stale.py, which also reports a read of another core's store still in flight);
- before a later access by the same core to overlapping bytes (depend(): a stand-in for
  the compiler's set_flag/wait_flag between two accesses of one buffer), completing the
  queue's DMA stores in order up to the last overlapping one (one MTE3 pipe, in order);
- when its core waits (a round of a device wait or a spin: the pipes drain meanwhile);
- under random/pct, at any scheduling point of its core, by the schedule's seeded coin
  (sched.coin(), yes one time in four: drawn from the shared generator and folded into
  the digest, so both orders are explored and a seed replays exactly), and at the latest
  MAX_AGE points after its issue or when more than MAX_IN_FLIGHT are in flight;
- under the free schedule, after FREE_DELAY further scheduling points of its core: a
  bounded delay (a DMA takes microseconds; it never waits for a sync that may not come),
  long enough that a signal's store and dcci can pass it.
Only a core's own thread ever completes its DMAs, so a store's own-cache effects (the
ascend model's "a core reads its own scalar stores") happen in the right context.
"""
from __future__ import annotations

from . import context

FREE_DELAY = 4      # free schedule: scheduling points of its core before a DMA store lands
MAX_AGE = 16        # random/pct: a DMA store lands at the latest this many points of its core after issue
MAX_IN_FLIGHT = 8   # random/pct: at most this many DMA stores in flight per core (older ones land)


class DmaStore:
    """One store in flight: the bytes [lo, hi) it covers, how to perform it, where it was
    issued (site: (code, line) of the kernel line) and whether it has landed."""
    __slots__ = ("lo", "hi", "_perform", "age", "site", "landed")

    def __init__(self, lo: int, hi: int, perform, site=None):
        self.lo, self.hi, self._perform, self.site = lo, hi, perform, site
        self.age = 0
        self.landed = False

    def perform(self):
        self.landed = True
        self._perform()

    def __call__(self):         # the core's pending queue completes entries by calling them
        self.perform()


def enabled(rt) -> bool:
    """Are a kernel's stores DMAs in flight?  Under the ascend models, inside a core."""
    return rt.memory.caches and context.core() is not None


def issue(c, lo: int, hi: int, perform, site=None) -> None:
    """Queue a store of bytes [lo, hi) on core c; `perform()` writes it to memory."""
    c.pending.append(DmaStore(lo, hi, perform, site))


def in_flight(c) -> list:
    """The DMA stores core c has issued that have not landed, oldest first."""
    return [e for e in c.pending if isinstance(e, DmaStore)] if c is not None and c.pending else []


def _complete(c, upto: int) -> None:
    """Complete, in issue order, the DMA stores among c.pending[:upto + 1]; other entries
    (non-blocking puts and gets) stay for quiet."""
    head = c.pending[:upto + 1]
    done = [e for e in head if isinstance(e, DmaStore)]
    if not done:
        return
    if len(done) == len(head):
        del c.pending[:upto + 1]
    else:
        c.pending[:upto + 1] = [e for e in head if not isinstance(e, DmaStore)]
    for e in done:
        e.perform()


def depend(lo: int, hi: int, c=context.HERE) -> None:
    """The calling core (c: its CoreContext, None on the host) is about to access [lo, hi): a
    DMA store of its own to overlapping bytes completes first (the compiler orders two
    accesses of one buffer)."""
    if c is context.HERE:
        c = context.core()
    if c is None or not c.pending:
        return
    last = -1
    for i, e in enumerate(c.pending):
        if isinstance(e, DmaStore) and e.lo < hi and lo < e.hi:
            last = i
    if last >= 0:
        _complete(c, last)


def drain() -> None:
    """The calling core waits: every DMA store it issued lands."""
    c = context.core()
    if c is not None and c.pending:
        _complete(c, len(c.pending) - 1)


def at_point(sched) -> None:
    """A scheduling point of the calling core: maybe complete some of its DMA stores.
    Deterministic schedules flip their seeded coin (oldest first, while it says yes);
    the free schedule completes those FREE_DELAY points old."""
    c = context.core()
    if c is None or not c.pending:
        return
    coin = getattr(sched, "coin", None)
    if coin is not None:
        stores = [e for e in c.pending if isinstance(e, DmaStore)]
        for e in stores:
            e.age += 1
        # the oldest lands when the coin says so (then the next may too), or when the queue
        # is long or old: a DMA is never postponed for ever, and the queue stays short
        forced = len(stores) > MAX_IN_FLIGHT or (stores and stores[0].age > MAX_AGE)
        while stores and (forced or coin()):
            e = stores.pop(0)
            c.pending.remove(e)
            e.perform()
            forced = len(stores) > MAX_IN_FLIGHT or (stores and stores[0].age > MAX_AGE)
        return
    last = -1
    for i, e in enumerate(c.pending):
        if isinstance(e, DmaStore):
            e.age += 1
            if e.age >= FREE_DELAY:
                last = i
    if last >= 0:
        _complete(c, last)
