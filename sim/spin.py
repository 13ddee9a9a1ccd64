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

Reading one address twice is NOT spinning: a loop that re-reads a scale factor changes its
loop counter or accumulator every round, so its state never repeats (issue 14 item 2;
a false alarm is worse than a late report).  Python keeps a `for` loop's iterator on the
frame's value stack, out of reach; a loop over identical items (`for x in (a, a, a)`) could
look like a repeat, so a spin is declared only after SPIN_REPEATS identical visits in a row.
"""
from __future__ import annotations

import numpy as np

from . import context

SPIN_REPEATS = 16      # identical consecutive visits of one poll before the core counts as spinning
MAX_POLLS = 64         # distinct polls remembered per core (a loop over many addresses forgets)

try:
    from triton.language import core as _tlc
    _TENSOR, _CONSTEXPR = _tlc.tensor, _tlc.constexpr
except Exception:  # noqa: BLE001 - only used to compare values
    _TENSOR = _CONSTEXPR = ()


class SpinWatch:
    """Per core: the last visit of each poll, and how often it repeated."""
    __slots__ = ("first", "visits", "waiter")

    def __init__(self):
        self.first = set()     # poll keys seen once (no state taken yet: cheap for loops over addresses)
        self.visits = {}       # (key, point) -> [value, snapshot, repeats]
        self.waiter = None     # the runtime's Waiter while the core counts as spinning

    def reset(self) -> None:
        self.first.clear()
        self.visits.clear()

    def observe(self, key, value) -> bool:
        """A poll `key` (hashable: kind and addresses) read `value`; True when this visit is
        the SPIN_REPEATS-th identical repeat in a row (or later)."""
        if key not in self.first:
            if len(self.first) >= MAX_POLLS:
                self.reset()
            self.first.add(key)
            return False
        frames = _kernel_frames()
        point = tuple((f.f_code, f.f_lasti) for f in frames)
        snap = [dict(f.f_locals) for f in frames]
        k = (key, point)
        v = self.visits.get(k)
        if v is not None and same(v[0], value) and all(_same_locals(a, b) for a, b in zip(v[1], snap)):
            v[2] += 1
            return v[2] >= SPIN_REPEATS
        if len(self.visits) >= MAX_POLLS:
            self.visits.clear()
        self.visits[k] = [value, snap, 0]
        return False


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
