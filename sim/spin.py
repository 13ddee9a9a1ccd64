"""Is a core spinning?  One question, asked at every poll of memory by a kernel.

A core spins when it can make no progress by itself: it polls memory (a scalar or block
load, or an atomic that leaves memory unchanged: `atomic_cas` that fails, `atomic_add(p, 0)`)
and comes back to the same poll in exactly the same state.  Precisely, a visit of a poll
P repeats the previous visit of P when, in between,
- the core wrote nothing (no store, no atomic that changed memory, no primitive call:
  `reset()` is called on each), and
- P read the same value(s) from the same address(es), and
- every kernel frame on the core's stack is at the same instruction with equal locals.
Everything the core computes between two such visits is a function of that state and of
memory, so the next round repeats too until some other task writes: the core is blocked
until someone writes (what the deterministic schedules and the free watchdog treat it as).

"Equal locals" leaves out the locals that the loops around the poll assign but never
branch on (sim/loop_state.py): a poll that counts its rounds (`rounds += 1`) spins all the
same, since nothing it will do depends on the count (issue 26 item 2).

Reading one address twice is NOT spinning: a loop that re-reads a scale factor changes its
loop counter or accumulator every round, so its state never repeats (issue 14 item 2;
a false alarm is worse than a late report).  Python keeps a `for` loop's iterator on the
frame's value stack, out of reach; a loop over identical items (`for x in (a, a, a)`) could
look like a repeat, so a spin is declared only after SPIN_REPEATS identical visits in a row.

Writes that only count (issue 32): a poll loop that also writes, every round, the same few
bytes of one cache line that it never branches on (`tl.atomic_add(counter, 1)`, `tl.store(n,
tl.load(n) + 1)`: a count of its rounds nobody reads) changes nothing its own future depends
on.  So a visit also repeats when the writes since the previous visit of that poll are the
same address ranges as the writes before that one, all inside one 64-byte line: the loop's
write pattern.  The core then spins with that pattern `silent`: its writes in the pattern are
not writes to the schedules (nobody is woken by them; deterministic schedules and the free
watchdog can call it blocked), any other write ends the spin as before.  "Nobody reads" is
checked where it can be: another task's access to that line wakes the spinner and makes its
next writes count (sim/schedulers/deterministic.py), and under the free schedule the
watchdog re-reads a waiter's slot (a reader of the counter sees it move, so is never stuck).
Writes through the device library (a signal, a put) always count as progress.

A weaker state, POLLING: the core comes back to the same poll seeing the same value, with
no write and no other fresh read in between (every read since repeated its own last
value), but some local it branches on moves (`while flag == 0 and rounds < LIMIT`).  It
may still get out by itself, so it is no deadlock; but it only polls, so the deterministic
schedules run every other runnable task before it (PCT must not starve the task it waits
for behind its priority: issue 26 item 2).
"""
from __future__ import annotations

import numpy as np

from triton_dist.symbols import CACHE_LINE_BYTES

from . import context, loop_state

# what the status board calls a core spinning on each kind of poll (board.report words each)
PLAIN_SPIN = "spin on plain loads"
LOAD_SPIN = "spin on loads"
ATOMIC_SPIN = "spin on atomic polls"

SPIN_REPEATS = 16      # identical consecutive visits of one poll before the core counts as spinning
MAX_POLLS = 64         # distinct polls remembered per core (a loop over many addresses forgets)
MAX_WRITES = 64        # distinct written ranges remembered per core (a loop writing many addresses is progress)
LINE = CACHE_LINE_BYTES  # a write pattern is silent only inside one line (the deterministic schedules' unit)

try:
    from triton.language import core as _tlc
    _TENSOR, _CONSTEXPR = _tlc.tensor, _tlc.constexpr
except Exception:  # noqa: BLE001 - only used to compare values
    _TENSOR = _CONSTEXPR = ()


PROGRESS, POLLING, SPINNING = range(3)    # what observe() says about a visit


class SpinWatch:
    """Per core: the last visit of each poll, and how often it repeated."""
    __slots__ = ("first", "visits", "waiter", "fresh", "written", "nwrites", "pattern", "silent")

    def __init__(self):
        self.first = set()     # poll keys seen once (no state taken yet: cheap for loops over addresses)
        # (key, point) -> [value, snapshot, repeats, loose repeats, fresh reads then,
        #                  writes counted then, the write pattern before that visit]
        self.visits = {}
        self.waiter = None     # the runtime's Waiter while the core counts as spinning
        self.fresh = 0         # reads that saw a new address or a new value
        self.written = {}      # (lo, hi) -> the write count when the core last wrote those bytes
        self.nwrites = 0       # kernel writes so far (since the last reset)
        self.pattern = frozenset()   # the write pattern of the latest visit (observe)
        self.silent = None     # while spinning: the pattern its writes repeat (frozenset), else None

    def reset(self) -> None:
        self.first.clear()
        self.visits.clear()
        self.written.clear()
        self.silent = None

    def wrote(self, lo: int, hi: int) -> bool:
        """The core's kernel wrote bytes [lo, hi): True when it is a silent write (the core
        spins and this is its write pattern's), else it is recorded (the caller ends a spin)."""
        key = (lo, hi)
        if key not in self.written and len(self.written) >= MAX_WRITES:
            self.reset()
        self.written[key] = self.nwrites
        self.nwrites += 1
        return self.silent is not None and key in self.silent

    def reads_own_count(self, addr: int) -> bool:
        """While spinning silently: does a read at addr read the spin's own write pattern?"""
        return any(lo <= addr < hi for lo, hi in self.silent)

    def _pattern(self, since: int):
        """The ranges written since write count `since`; None when they cannot be silent
        (more than one line)."""
        if self.nwrites == since:
            return frozenset()
        p = frozenset(k for k, n in self.written.items() if n >= since)
        lines = {k[0] // LINE for k in p} | {(k[1] - 1) // LINE for k in p}
        return p if len(lines) == 1 else None

    def observe(self, key, value) -> int:
        """A poll `key` (hashable: kind and addresses) read `value`: SPINNING when this visit
        is the SPIN_REPEATS-th identical repeat in a row (or later), POLLING when it is such a
        repeat of the value and of every read since but some branched-on local moved."""
        if key not in self.first:
            if len(self.first) >= MAX_POLLS:
                self.reset()
            self.first.add(key)
            self.fresh += 1
            return PROGRESS
        frames = _kernel_frames()
        point = tuple((f.f_code, f.f_lasti) for f in frames)
        snap = [_branched_on_locals(f) for f in frames]
        k = (key, point)
        v = self.visits.get(k)
        pattern = None                  # the writes since v's visit (taken only where it can matter)
        if v is not None and same(v[0], value):
            pattern = self._pattern(v[5])
        elif v is not None and self.nwrites == v[5]:
            pattern = frozenset()
        if v is not None and pattern is not None and pattern == v[6] and same(v[0], value):
            v[5] = self.nwrites
            self.pattern = pattern
            v[3] = v[3] + 1 if v[4] == self.fresh else 0
            v[4] = self.fresh
            if all(_same_locals(a, b) for a, b in zip(v[1], snap)):
                v[2] += 1
                if v[2] >= SPIN_REPEATS:
                    return SPINNING
            else:
                v[1], v[2] = snap, 0
            return POLLING if v[3] >= SPIN_REPEATS else PROGRESS
        self.fresh += 1
        if len(self.visits) >= MAX_POLLS:
            self.visits.clear()
        # the write pattern this visit starts from: the next visit repeats it or not
        self.visits[k] = [value, snap, 0, 0, self.fresh, self.nwrites,
                          pattern if pattern is not None else (frozenset() if v is None else None)]
        return PROGRESS


ORDERING_ONLY = frozenset({"aclshmem_fence", "aclshmem_quiet"})


def primitive_writes(family: str, c) -> bool:
    """Is a device-library call on core c progress (it writes)?  A fence or quiet completes the
    core's stores and puts in flight and writes back its dirty cache lines: with none of them
    it changes nothing, so a poll loop that fences every round still spins (issue 32: such a
    loop starved its producer under pct and timed out instead of a deadlock)."""
    if family not in ORDERING_ONLY or c is None:
        return True
    return bool(c.pending) or any(e[1] for e in (c.cache or {}).values())


def silent_now() -> bool:
    """Is the calling core spinning with a silent write pattern?  Its writes now are that
    pattern's (any other ended the spin when it was issued): the schedules do not count them."""
    c = context.core()
    sw = c.spin if c is not None else None
    return sw is not None and sw.silent is not None and sw.waiter is not None


def _branched_on_locals(f) -> dict:
    """The frame's locals, less those its loops assign but never branch on (sim/loop_state.py)."""
    loc = f.f_locals
    ignored = loop_state.ignored_locals(f.f_code, f.f_lineno, f.f_globals)
    if not ignored:
        return dict(loc)
    return {k: v for k, v in loc.items() if k not in ignored}


def _kernel_frames():
    f = context.kernel_frame(3)
    out = []
    while f is not None:
        if f.f_code in context.KERNEL_CODES:
            out.append(f)
        f = f.f_back
    return out


def _same_locals(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    big = []
    for name, x in a.items():           # cheap values first: a loop counter differs at once
        y = b[name]
        if x is y:
            continue
        if isinstance(x, _TENSOR) and isinstance(y, _TENSOR):
            big.append((x, y))
        elif not same(x, y):
            return False
    big.sort(key=lambda xy: getattr(getattr(xy[0].handle, "data", None), "size", 0))
    return all(same(x, y) for x, y in big)


def same(x, y) -> bool:
    """Equal values (tensors by content); anything not comparable counts as different."""
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    if isinstance(x, _TENSOR):
        return x.type == y.type and same(x.handle, y.handle)
    if isinstance(x, _CONSTEXPR):
        return same(x.value, y.value)
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    data = getattr(x, "data", None)
    if isinstance(data, np.ndarray):                    # the interpreter's TensorHandle
        return x.dtype == y.dtype and same(data, y.data)
    if isinstance(x, np.ndarray):
        return x.dtype == y.dtype and x.shape == y.shape and bool(np.array_equal(x, y))
    try:
        r = x == y
        return r is True or (isinstance(r, np.bool_) and bool(r))
    except Exception:  # noqa: BLE001
        return False


# ---- atomics: did this one change memory? -------------------------------------------------------

def rmw_changed(op_name: str, old, val, mask) -> bool:
    """Whether an atomic read-modify-write that returned `old` wrote a different value
    (`atomic_add(p, 0)`, `atomic_max` below the current value... change nothing)."""
    try:
        old = np.asarray(old)
        val = np.broadcast_to(np.asarray(val), old.shape)
        m = np.ones(old.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask), old.shape)
        if op_name in ("ADD", "FADD"):
            diff = val != 0
        elif op_name == "XOR":
            diff = val != 0
        elif op_name == "AND":
            diff = (old & val) != old
        elif op_name == "OR":
            diff = (old | val) != old
        elif op_name == "XCHG":
            diff = val != old
        elif op_name == "MAX":
            diff = val > old
        elif op_name == "MIN":
            diff = val < old
        elif op_name in ("UMAX", "UMIN"):
            u = np.dtype(f"u{old.dtype.itemsize}")
            o, w = old.view(u), np.ascontiguousarray(val).view(u)
            diff = (w > o) if op_name == "UMAX" else (w < o)
        else:
            return True
        return bool((diff & m).any())
    except Exception:  # noqa: BLE001 - when in doubt it wrote (no spin is ever inferred from it)
        return True


def cas_changed(old, cmp, val) -> bool:
    try:
        old = np.asarray(old)
        cmp = np.broadcast_to(np.asarray(cmp), old.shape)
        val = np.broadcast_to(np.asarray(val), old.shape)
        return bool(((old == cmp) & (val != cmp)).any())
    except Exception:  # noqa: BLE001
        return True
