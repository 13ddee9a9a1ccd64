"""Who watches a rank: the subscribers to its memory accesses and synchronisation events.

The simulator hands what a rank does to `rt.observers`: None when nothing subscribed (the
fast path: no event is built, nothing is called), else an Observers bus that calls, for
each event, the method of that name of every subscriber that has one, in subscription
order.  The subscribers today: the race detector (sim/race/record.py), the performance
predictor (sim/predict/record.py), the trace (sim/trace.py) and the device watch
(sim/evidence/watch.py, on every rank); each implements only the events it needs.

The access events (access, around_atomic) are the hot path: the access path builds an
Access only when a subscriber implements one of them.  `rt.access_observers` is the bus
then, None otherwise (`subscribe` keeps it so), so a subscriber of rare events only (the
device watch) leaves every load and store on the fast path.  A new diagnostic subscribes with `subscribe(rt, obj)` and needs no
change anywhere else.

Accesses (sim/access.py builds one `Access` per access only when someone subscribed;
its fields are documented there: kind, route, origin, address range, active lanes,
values, core, kernel line):
  access(a)              a load, store or atomic has been performed -- or, for a store in
                         flight (a.route == DMA), issued: it lands later
  landed(a)              a store in flight reached memory (a.route == DMA), on its core's
                         thread, at the point it landed; a.site is still where it was issued
  around_atomic(a, perform) -> result
                         wraps the performing of an atomic: must call perform() exactly once
                         and return its result (the race detector performs a synchronising
                         atomic under its slot table's lock); nested in subscription order
Synchronisation (called by sim/primitives.py, sim/runtime.py, sim/backend.py):
  signal(addr, size, add, value)            a signal SET/ADD, before its store
  observed(addrs, values, size, token=False) -> token
                                            a wait saw values at addrs; the answer is the
                                            first non-None a subscriber returns (dl.wait's token)
  consume(value, token)                     dl.consume_token
  rma(dst, src, nbytes, put, nbi, signal_addr=None, signal_size=4)   putmem/getmem issued
  quiet()                                   quiet/fence/barrier/debug_barrier: every issued transfer is complete
  stores_landed()                           the calling core's stores in flight have all landed, its
                                            puts/gets not necessarily (a releasing atomic, sim/stale.py)
  dot(m, n, k, dtype, precision)            a tl.dot
  kernel_begin() / kernel_end()             a launch on this rank's host
  core_begin(c) / core_end(c)               a program starts / finishes on its core
  core_arrive(c, gen) / core_depart(c, gen) the local core barrier
  flag_set(c, keys) / flag_wait(c, keys)    a block's cube<->vector flag set / the wait it satisfied
                                            (sim/core_split.py): the wait with key k follows the set
                                            with key k
  collective_arrive() / collective_depart() a host collective
  p2p_send(src, dst, tag, seq) / p2p_recv(src, dst, tag, seq)
                                            a torch.distributed send / recv of rank host code
The data cache (sim/cache.py, sim/runtime.py):
  written_back(base, lo, old, new, dirty, cause)
                                            the calling core wrote its cached line at base back over
                                            [lo, lo + len(new)): old = the bytes memory held, dirty = the
                                            line's bytes it wrote itself (bit i: byte base + i); cause:
                                            words for why, None for a SET's dcci (only computed when
                                            someone subscribed: `wants`)
  spin_round(kind, addr, value)             a round of a poll found spinning (sim/spin.py): kind is its
                                            spin kind, value what the poll read at addr
  dump()                                    the rank's function returned: write what was recorded

To add an event: name it in EVENTS (with its answer rule if it returns one), call it at the
one place it happens, document it above.
"""
from __future__ import annotations

# every event a subscriber may implement; those with an answer return the first non-None
EVENTS = ("access", "landed", "signal", "observed", "consume", "rma", "quiet", "stores_landed", "dot", "kernel_begin",
          "kernel_end", "core_begin", "core_end", "core_arrive", "core_depart", "flag_set", "flag_wait", "collective_arrive",
          "collective_depart", "p2p_send", "p2p_recv", "written_back", "spin_round", "dump")
ANSWERING = frozenset({"observed"})


class Observers:
    """The bus: `bus.<event>(...)` calls that event on every subscriber that implements it."""

    def __init__(self):
        self.subscribers: list = []
        for name in EVENTS:
            setattr(self, name, _nobody)
        self._around = []
        self.accesses = False         # does a subscriber take the access events (the hot path)?

    def wants(self, event: str) -> bool:
        """Does a subscriber implement `event` (for events whose arguments cost to build)?"""
        return getattr(self, event) is not _nobody

    def add(self, sub) -> None:
        self.subscribers.append(sub)
        for name in EVENTS:
            fns = [getattr(s, name) for s in self.subscribers if callable(getattr(s, name, None))]
            setattr(self, name, _fan_out(fns, name in ANSWERING))
        self._around = [s.around_atomic for s in self.subscribers if callable(getattr(s, "around_atomic", None))]
        self.accesses = bool(self._around) or self.access is not _nobody

    def perform_atomic(self, a, perform):
        """Perform an atomic through every subscriber's around_atomic (outermost first)."""
        for wrap in reversed(self._around):
            perform = _wrapped(wrap, a, perform)
        return perform()

    def of(self, cls):
        """The subscriber of this class, if one subscribed (tests and tools look theirs up)."""
        for s in self.subscribers:
            if isinstance(s, cls):
                return s
        return None


def subscribe(rt, sub) -> None:
    """Make `sub` observe rank runtime `rt` from now on."""
    if rt.observers is None:
        rt.observers = Observers()
    rt.observers.add(sub)
    if rt.observers.accesses:
        rt.access_observers = rt.observers


def _nobody(*args, **kwargs):
    return None


def _wrapped(wrap, a, inner):
    return lambda: wrap(a, inner)


def _fan_out(fns, answering):
    if not fns:
        return _nobody
    if len(fns) == 1:
        return fns[0]
    if not answering:
        def call(*args, **kwargs):
            for f in fns:
                f(*args, **kwargs)
        return call

    def ask(*args, **kwargs):
        answer = None
        for f in fns:
            out = f(*args, **kwargs)
            if answer is None:
                answer = out
        return answer
    return ask
