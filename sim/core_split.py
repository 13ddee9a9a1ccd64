"""A block of a kernel that hands cube<->vector flags (sync_block_set / sync_block_wait) runs as
concurrent instances, one per core of its AI core: the cube core (AIC) and the vector core(s)
(AIV; 2 when the kernel names sub_vec_id, else 1 standing for the compiler's split of vector
work over both).  Every instance runs the whole program; each op takes effect only on the
instance of the core type that owns it (docs/device_model.md, "cube and vector instances"):

- inside `with al.scope(core_mode="cube"/"vector")` everything belongs to that core;
- elsewhere (a static reading of each @jit function's source, one table per function):
  a tl.load whose value reaches a tl.dot operand (through names, casts, transposes,
  reshapes) is a cube load; a tl.store whose value is a cube value (a tl.dot result, its
  casts, names holding only those, tl.zeros/tl.full accumulators a dot adds into) is a cube
  store; every other load, store and atomic belongs to the vector core;
- sync_block_set runs on the sender's core, sync_block_wait on the receiver's
  (triton-ascend ascend_ir.cc GetCore); sync_block_all("all") on both, "all_cube" /
  "all_vector" on that kind only;
- values (arithmetic, tl.dot itself, control flow) are computed by every instance: a
  non-owning instance reads memory silently for its loads (no cache, no DMA order, no race
  detector, no bounds report twice) and its stores and atomics do nothing.

Flags are counters per (sender, receiver, event_id) and receiving core: a cube->vector set
adds one to the flag of every vector instance of the block, a vector->cube set to the cube's
flag of that vector instance; a wait takes one (the cube's: one of each vector instance) and
blocks its instance until there is one -- a scheduling point of the launch's scheduler, seen by
the deadlock watchdog.  A wait whose sender core has ended, and, when the block's instances
have all ended, a flag set and never waited for, are reported with rank, block, core, line
and flag.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import threading
import types

from triton_dist.errors import TritonDistError

from . import context, dma

CUBE, VECTOR = "cube", "vector"
LOAD, STORE, ATOMIC = "load", "store", "atomic"
MAX_PENDING = 15     # CANN CrossCoreWaitFlag: a flagId's counter "can be set for a maximum of 15 times"

_USES: dict = {}


def names_in(fn, name, seen) -> bool:
    """Whether a kernel's code, or a @jit helper it names (by global or module attribute), names
    `name` (sub_vec_id, sync_block_set, ...); `seen`: the code objects already walked."""
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    g = getattr(fn, "__globals__", {})
    stack = [code]
    while stack:
        c = stack.pop()
        if name in c.co_names:
            return True
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        for n in c.co_names:          # helpers: @jit functions among the globals (and modules') it names
            for cand in (g.get(n), *(getattr(m, n, None) for m in g.values() if isinstance(m, types.ModuleType))):
                inner = getattr(cand, "fn", None)
                if inner is not None and callable(inner) and names_in(inner, name, seen):
                    return True
    return False


def uses_block_flags(fn) -> bool:
    """Whether a kernel, or a @jit helper it calls, names sync_block_set or sync_block_wait."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    if code not in _USES:
        _USES[code] = names_in(fn, "sync_block_set", set()) or names_in(fn, "sync_block_wait", set())
    return _USES[code]


class Block:
    """The flags and the instances of one block (shared by its cube and vector instances)."""

    def __init__(self, grid_idx, nvec: int):
        self.grid_idx, self.nvec = grid_idx, nvec
        self.lock = threading.Lock()
        self.count: dict = {}       # (receiving core, sender, receiver, event, vector instance) -> pending sets
        self.sets: dict = {}        # the same key -> sets so far (the n-th wait takes the n-th set)
        self.waits: dict = {}       # the same key -> waits satisfied so far
        self.set_at: dict = {}      # the same key -> the kernel line of its latest set
        self.running = {CUBE: 1, VECTOR: nvec}
        self.ended = 0
        self.phys: dict = {}        # (core type, vector index) -> the physical core running that instance


class Instance:
    """One core's instance of a split block (CoreContext.split)."""
    __slots__ = ("core_type", "vec", "block", "scopes")

    def __init__(self, core_type, vec, block):
        self.core_type, self.vec, self.block = core_type, vec, block
        self.scopes = []            # al.scope(core_mode=...) regions entered, innermost last

    def name(self) -> str:
        return "cube core" if self.core_type == CUBE else f"vector core {self.vec}"


# ---- who owns an op ---------------------------------------------------------------------------

def owns(c, kind: str) -> bool:
    """Whether instance c performs a load/store/atomic made at the calling kernel line."""
    s = c.split
    if s.scopes:
        return s.scopes[-1] == s.core_type
    if kind == ATOMIC:
        return s.core_type == VECTOR
    f = context.kernel_frame(2)
    if f is None:
        return s.core_type == VECTOR
    loads, stores = _classified(f.f_code)
    cube = f.f_lineno in (loads if kind == LOAD else stores)
    return (s.core_type == CUBE) == cube


_TABLES: dict = {}
_CAST_LIKE = {"to", "cast", "trans", "permute", "reshape", "view", "broadcast_to", "expand_dims"}
_NEUTRAL = {"zeros", "full", "zeros_like", "full_like"}
_DOTS = {"dot", "dot_scaled"}


def _classified(code):
    t = _TABLES.get(code)
    if t is None:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
        except (OSError, TypeError, SyntaxError):
            tree = None
        t = _TABLES[code] = _classify(tree, code.co_firstlineno - 1) if tree is not None else (frozenset(), frozenset())
    return t


def _callee(node):
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return None


def _lines(node, off):
    return range(node.lineno + off, (node.end_lineno or node.lineno) + off + 1)


def _classify(tree, off):
    """(lines of cube loads, lines of cube stores) of one function's source (module docstring)."""
    assigns: dict = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    assigns.setdefault(t.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and isinstance(n.target, ast.Name) and n.value is not None:
            assigns.setdefault(n.target.id, []).append(n.value)

    cube_names: set = set()

    def cube_valued(e) -> bool:
        name = _callee(e)
        if name in _DOTS:
            return True
        if name in _CAST_LIKE:
            cands = ([e.func.value] if isinstance(e.func, ast.Attribute) else []) + list(e.args[:1])
            return any(cube_valued(x) for x in cands)
        if isinstance(e, ast.Attribute) and e.attr == "T":
            return cube_valued(e.value)
        return isinstance(e, ast.Name) and e.id in cube_names

    changed = True
    while changed:          # a name is a cube value when every value it is given is one (or a constant fill)
        changed = False
        for name, values in assigns.items():
            if name in cube_names:
                continue
            if any(cube_valued(v) for v in values) and all(cube_valued(v) or _callee(v) in _NEUTRAL for v in values):
                cube_names.add(name)
                changed = True

    loads, stores, seen = set(), set(), set()

    def feeds_dot(e):
        name = _callee(e)
        if name == "load":
            loads.update(_lines(e, off))
        elif name in _CAST_LIKE:
            for x in ([e.func.value] if isinstance(e.func, ast.Attribute) else []) + list(e.args[:1]):
                feeds_dot(x)
        elif isinstance(e, ast.Attribute) and e.attr == "T":
            feeds_dot(e.value)
        elif isinstance(e, ast.Name) and e.id not in seen:
            seen.add(e.id)
            for v in assigns.get(e.id, ()):
                feeds_dot(v)

    for n in ast.walk(tree):
        name = _callee(n)
        if name in _DOTS:
            for a in n.args[:2]:
                feeds_dot(a)
        elif name == "store":
            value = n.args[1] if len(n.args) > 1 else next((k.value for k in n.keywords if k.arg == "value"), None)
            if value is not None and cube_valued(value):
                stores.update(_lines(n, off))
    return frozenset(loads), frozenset(stores)


# ---- the device library (sim/primitives.py) ---------------------------------------------------

# queries with no effect: every instance answers them (the values may steer control flow)
PURE_LIBRARY = frozenset({"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_team_my_pe", "aclshmem_team_n_pes",
                          "aclshmem_team_translate_pe", "aclshmem_ptr"})
UNOWNED_RESULT = {"aclshmem_wait": 0, "aclshmem_signal_wait_until": 0}


def library_owned(c, family: str) -> bool:
    """The device library runs on the vector cores (its barrier shares the PEs among the vector
    cores: docs/device_model.md); the cube instance answers only its queries."""
    return family in PURE_LIBRARY or c.split.core_type == VECTOR


def library_cores(c):
    """(this core's index among the launch's library cores, their count, the core barrier's group):
    outside split blocks every instance; in split blocks the vector instances only."""
    s = c.split
    if s is None:
        return c.core, c.ncores, "all"
    nvec = s.block.nvec
    nblocks = c.grid_dim[0] * c.grid_dim[1] * c.grid_dim[2]
    return (c.core // (1 + nvec)) * nvec + s.vec, nblocks * nvec, "library"


# ---- scope ---------------------------------------------------------------------------------------

def enter_scope(core_mode: str) -> None:
    c = context.core()
    if c is not None and c.split is not None:
        c.split.scopes.append(core_mode)


def exit_scope() -> None:
    c = context.core()
    if c is not None and c.split is not None and c.split.scopes:
        c.split.scopes.pop()


# ---- flags --------------------------------------------------------------------------------------

def _flag(sender, receiver, event) -> str:
    return f"sync_block_set({sender!r}, {receiver!r}, {event})"


def _where(c) -> str:
    rt = context.runtime()
    return f"rank {rt.rank} block {tuple(c.grid_idx)} {c.split.name()}"


def _counters(s, sender, receiver, event) -> list:
    """The counters (receiving core, sender, receiver, event, vector instance) a set of instance s
    adds to, or a wait of s takes from: the cube's reach every vector instance, a vector's its own."""
    vecs = range(s.block.nvec) if s.core_type == CUBE else (s.vec,)
    return [(receiver, sender, receiver, event, v) for v in vecs]


def block_set(c, sender, receiver, event, where) -> None:
    """sync_block_set on instance c (a no-op unless c is the sender's core)."""
    s = c.split
    if s.core_type != sender:
        return
    b = s.block
    rt = context.runtime()
    rt.sched.point("sync_block_set", 0, event)
    # the set is issued on the sender's store pipe (PIPE_FIX / PIPE_MTE3) after its stores: they land first
    if dma.in_flight(c):
        dma.drain()
        if rt.observers is not None:
            rt.observers.stores_landed()
    keys = _counters(s, sender, receiver, event)
    with b.lock:
        for k in keys:
            if b.count.get(k, 0) >= MAX_PENDING:
                raise TritonDistError(
                    f"{where}: {_flag(sender, receiver, event)} of {_where(c)}: the flag already holds "
                    f"{MAX_PENDING} sets its {receiver} core has not waited for (the hardware counter's limit: "
                    f"CANN CrossCoreWaitFlag); wait for each set before setting it again (sync_block_wait"
                    f"({sender!r}, {receiver!r}, {event}) on the {receiver} side)")
        seq = []
        for k in keys:
            b.count[k] = b.count.get(k, 0) + 1
            b.set_at[k] = where
            seq.append((k, b.sets.get(k, 0)))
            b.sets[k] = seq[-1][1] + 1
    if rt.observers is not None:       # the race detector: the n-th wait of a flag is ordered after its n-th set
        rt.observers.flag_set(c, [(tuple(c.grid_idx),) + k for k in seq])
    rt.sched.wrote()            # a set is a change a waiting instance waits to see
    rt.spin_reset()


def block_wait(c, sender, receiver, event, where) -> None:
    """sync_block_wait on instance c (a no-op unless c is the receiver's core): a blocking wait."""
    s = c.split
    if s.core_type != receiver:
        return
    b = s.block
    rt = context.runtime()
    keys = _counters(s, sender, receiver, event)
    taken = []

    def read():
        with b.lock:
            n = min(b.count.get(k, 0) for k in keys)
            if n > 0:
                for k in keys:
                    b.count[k] -= 1
                    taken.append((k, b.waits.get(k, 0)))
                    b.waits[k] = taken[-1][1] + 1
                return n
            return -1 if b.running[sender] == 0 else 0     # -1: the sender's core has ended

    op = f"sync_block_wait({sender!r}, {receiver!r}, {event})"      # the board keeps 40 characters
    got = rt.wait_until(op, 0, 1, read, lambda n: n != 0,
                        target=f"flag {sender}->{receiver} {event}, {s.name()} of block {tuple(c.grid_idx)}")
    if got == -1:
        raise TritonDistError(
            f"deadlock: {_where(c)} at {where}: {op} awaits 1 set of flag {sender}->{receiver} {event}, sees 0, "
            f"and the block's {sender} core has ended without setting it, so on the NPU the {receiver} core "
            f"would wait forever: put the matching {_flag(sender, receiver, event)} on the {sender} side "
            f"(before this wait in the {sender}'s order), or remove the wait")
    if rt.observers is not None:
        rt.observers.flag_wait(c, [(tuple(c.grid_idx),) + k for k in taken])


def instance_end(c) -> None:
    """Instance c ended its program; the last of its block reports flags set and never waited for."""
    s = c.split
    b = s.block
    with b.lock:
        b.running[s.core_type] -= 1
        b.ended += 1
        last = b.ended == 1 + b.nvec
        left = sorted((k, n) for k, n in b.count.items() if n > 0) if last else []
    context.runtime().sched.wrote()     # a waiter on this core's flags can now tell it never comes
    if left:
        rt = context.runtime()
        lines = []
        for (recv, sender, receiver, event, v), n in left:
            who = "cube core" if recv == CUBE else f"vector core {v}"
            lines.append(f"  sync_block_set({sender!r}, {receiver!r}, event_id={event}) at "
                         f"{b.set_at[(recv, sender, receiver, event, v)]}: set {n} time{'s' if n > 1 else ''} more "
                         f"than sync_block_wait({sender!r}, {receiver!r}, {event}) waited (on the block's {who})")
        (recv, sender, receiver, event, v), _ = left[0]
        phys = b.phys.get((recv, v if recv == VECTOR else 0), c.phys)
        raise TritonDistError(
            f"unpaired sync_block_set at the end of the kernel: rank {rt.rank} core {phys} (block "
            f"{tuple(c.grid_idx)}, its {'cube core' if recv == CUBE else f'vector core {v}'}) ends with flags set and "
            f"never waited for:\n" + "\n".join(lines) +
            f"\nOn the NPU the flag stays set after the kernel, so the next kernel's sync_block_wait on that event "
            f"returns at once, before its data is ready (msSanitizer's synccheck reports it).  Fix: add the matching "
            f"sync_block_wait({sender!r}, {receiver!r}, {event}) on the {receiver} side of this block, or remove "
            f"the extra set.")
