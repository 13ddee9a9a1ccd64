"""In which order a mix kernel's block runs its cube half and vector halves, and the ordering
hazard the compiler's split leaves between them.

hivm-split-mix-kernel (AscendNPU-IR v1.2.0, lib/Dialect/HIVM/Transforms/SplitMixKernel.cpp,
inferDistributedCoreType, lines 346-367, called at 382) keeps a copy of every CUBE_AND_VECTOR
aclshmem call in *both* halves.  For `tl.store(dl.symm_at(ws, dst) + ..., tl.dot(...));
shm.fence(); dl.notify(...)` the module after convert-hivm-to-std holds, with no
sync_block_set/wait anywhere (read from the module of tests/test_hivm_mix_order.py::dot_to_peer,
3.2.0 adapter + bishengir-compile 1.2.0):

    _mix_aic: nd2nz, nd2nz, mma_tile, aclshmem_ptr.cube, fixpipe_nz2nd (into the peer's ws),
              aclshmem_fence.cube, aclshmemx_signal_op.cube
    _mix_aiv: aclshmem_ptr.vector, aclshmem_fence.vector, aclshmemx_signal_op.vector

Nothing orders the vector's signal after the cube's fixpipe, so the NPU may run the vector half
to its signal before the cube's data lands (the same on the read side: a cube load after a wait
only the vector's copy blocks in; and between the two vector cores, each storing half a tile).
The runner (runner.run_block) therefore runs a block's halves in an order chosen by
TRITON_DIST_HIVM_MIX_ORDER:

  check (default)  deterministic, cube half first; a publishing or reading call that a flag does
                   not order against the other half's data is reported (MixOrderHazard), naming
                   the kernel line of the call and the fix (Clocks.hazards, Clocks.read)
  cube-first       deterministic, cube half first (the order the source implies); no report
  vector-first     deterministic, the vector halves first (an order the NPU permits when no
                   flag orders the halves): the hazard shows as wrong data, every run
  concurrent       all halves at once in threads (timing decides, as on the NPU)

"Deterministic" here: one half runs at a time, in the order's priority; it gives the turn up
only when it ends or waits for a cross-core flag that is not set, and the turn goes to the first
half (in priority) that can run.  When none can, the block deadlocks, reported at once.

Ordering is tracked as happens-before through the flags (Clocks), so the report does not
depend on the order the halves ran in.
"""
from __future__ import annotations

import ast
import bisect
import inspect
import os
import textwrap
from collections import deque

from triton_dist.errors import TritonDistError

ORDER_ENV = "TRITON_DIST_HIVM_MIX_ORDER"
ORDERS = ("check", "cube-first", "vector-first", "concurrent")

# the device-library calls of a vector half that make memory visible to peers or read it for them
# (triton_dist/symbols.py families): their data must be stored before they run
PUBLISHING = frozenset({"aclshmemx_signal_op", "aclshmem_p", "aclshmem_putmem", "aclshmem_putmem_nbi",
                        "aclshmem_putmem_signal", "aclshmem_putmem_signal_nbi", "aclshmem_barrier",
                        "aclshmem_barrier_all", "aclshmemx_barrier_all_vec", "aclshmemx_barrier_vec"})
BARRIERS = frozenset({"aclshmem_barrier", "aclshmem_barrier_all", "aclshmemx_barrier_all_vec", "aclshmemx_barrier_vec"})
# the source calls that compile to each (the report names their lines)
_SOURCE_NAMES = {"aclshmemx_signal_op": ("notify", "signal_op"), "aclshmem_p": ("notify", "p"),
                 "aclshmem_putmem": ("putmem", "put"), "aclshmem_putmem_nbi": ("putmem_nbi",),
                 "aclshmem_putmem_signal": ("putmem_signal",), "aclshmem_putmem_signal_nbi": ("putmem_signal_nbi",),
                 "aclshmem_barrier": ("barrier",), "aclshmem_barrier_all": ("barrier_all", "barrier"),
                 "aclshmemx_barrier_all_vec": ("barrier_all_vec", "barrier_all"),
                 "aclshmemx_barrier_vec": ("barrier_vec", "barrier"), "aclshmem_wait": ("wait",),
                 "aclshmem_signal_wait_until": ("signal_wait_until", "wait")}
# the device-library calls after which a half may read what peers published (they block until then)
ACQUIRING = frozenset({"aclshmem_wait", "aclshmem_signal_wait_until", "aclshmem_barrier", "aclshmem_barrier_all",
                       "aclshmemx_barrier_all_vec", "aclshmemx_barrier_vec"})
# global-memory stores (template calls; the destination is the second operand: the cube's fixpipe,
# the vectors' store_ubuf_to_gm) and the cube's loads (the source is the first)
CUBE_STORES = ("fixpipe_", "store_ubuf_to_gm_")
CUBE_LOADS = ("nd2nz_", "load_gm_to_")


class MixOrderHazard(TritonDistError):
    """A mix kernel's halves are not ordered where peers see it: a vector-half call publishes before
    the cube's (or the other vector core's) store, or the cube reads before the vector's wait."""


def order() -> str:
    o = os.environ.get(ORDER_ENV, "").strip() or "check"
    if o not in ORDERS:
        raise TritonDistError(f"{ORDER_ENV}={o!r} is not an order of a mix kernel's halves: use one of "
                              f"{', '.join(ORDERS)} (docs/ascend.md, 'Running the compiled kernel on the CPU')")
    return o


def cores(nvec: int, how: str) -> list:
    """The halves of a block as (kind, sub) in the order's priority."""
    vec = [("vector", v) for v in range(nvec)]
    return vec + [("cube", 0)] if how == "vector-first" else [("cube", 0)] + vec


class Turns:
    """One half of the block runs at a time (a deterministic order); None for 'concurrent'."""

    def __init__(self, priority):
        self.priority = list(priority)
        self.turn = self.priority[0]
        self.ended = set()
        self.blocked = {}            # core -> callable() telling whether its flag wait can go on

    def runnable(self, core) -> bool:
        if core in self.ended:
            return False
        test = self.blocked.get(core)
        return test is None or test()

    def pass_on(self):
        """Give the turn to the first half, in priority, that can run (None: nothing can)."""
        self.turn = next((c for c in self.priority if self.runnable(c)), None)


class Clocks:
    """Happens-before between the halves' global-memory accesses and the library calls that publish
    them to peers or wait for peers (the three hazards: hazards(), read).

    Both halves run the one source program, so the cube's own copy of the j-th publishing call
    marks where that call stands in the cube's program order: a cube store issued before the
    cube's j-th copy precedes the j-th call in the source and is data that call may publish; a
    store after it is not.  A cube->vector flag the vector waits for orders the cube's stores up
    to its set before the vector's later calls (the sets of a flag are taken in FIFO order)."""

    def __init__(self, nvec):
        self.stores = []             # per cube store: (cube publish copies before it, what)
        self.copies = 0              # publishing calls the cube's copy has reached
        self.vec_knows = [0] * nvec  # per vector: how many cube stores a flag has ordered before it
        self.publishes = [[] for _ in range(nvec)]   # per vector: (cube stores it knows of, family)
        self.sent = {}               # flag key -> FIFO of the cube store counts its sets carried
        # the vectors' own stores into shared memory: (publishing calls of that vector before it, what).
        # The compiler splits a mix kernel's vector work over both vector cores (hivm.hir.get_sub_block_idx,
        # each a half of the tile) and each core's copy of a publishing call follows only its own half
        self.vec_stores = [[] for _ in range(nvec)]

        # the read side: the cube's loads after its copy of a blocking call (wait, barrier) that only
        # a vector's copy makes wait here; a vector->cube flag set after the vector's call orders them
        self.acquired = [0] * nvec   # per vector: blocking calls it has returned from
        self.cube_acq = []           # the cube's copies of blocking calls (family), in order
        self.cube_knows = 0          # blocking calls some vector had returned from at a flag the cube took
        self.read = None             # the first cube load not so ordered: (family of the call, what)

    def on_set(self, setter, sub, keys):
        for k in keys:
            self.sent.setdefault(k, deque()).append(len(self.stores) if setter == "cube" else self.acquired[sub])

    def on_wait(self, waiter, sub, keys):
        for k in keys:
            q = self.sent.get(k)
            got = q.popleft() if q else 0
            if waiter == "vector":
                self.vec_knows[sub] = max(self.vec_knows[sub], got)
            else:
                self.cube_knows = max(self.cube_knows, got)

    def acquire(self, core, sub, family):
        if core == "aic":
            self.cube_acq.append(family)
        else:
            self.acquired[sub] += 1

    def cube_load(self, what):
        if self.read is None and len(self.cube_acq) > self.cube_knows:
            self.read = (self.cube_acq[self.cube_knows], what)

    def cube_store(self, what):
        self.stores.append((self.copies, what))

    def vector_store(self, sub, what):
        self.vec_stores[sub].append((len(self.publishes[sub]), what))

    def cube_copy(self):
        self.copies += 1

    def publish(self, sub, family):
        self.publishes[sub].append((self.vec_knows[sub], family))

    def hazards(self):
        """(vector, its publishing call, the first cube store before the call in program order that no
        flag ordered before it) for each such call."""
        out = []
        before = [c for c, _ in self.stores]            # nondecreasing
        for v, calls in enumerate(self.publishes):
            for j, (known, family) in enumerate(calls, 1):
                if bisect.bisect_left(before, j) > known:
                    out.append((v, family, self.stores[known][1]))
                # no flag joins two vector cores here: the other core's earlier stores are unordered with
                # this core's signal or put (a barrier is not: every vector core takes part in it, the
                # library's model, docs/device_model.md)
                other = next((w for u, st in enumerate(self.vec_stores) if u != v
                              for pos, w in st[:1] if pos < j), None)
                if other is not None and family not in BARRIERS:
                    out.append((v, family, other))
        return out


def source_calls(fn, family: str, _seen=None) -> str:
    """'dl.notify at file:line, ...': the calls that compile to `family` in the kernel and the @jit
    helpers it calls by name."""
    names = _SOURCE_NAMES.get(family, ())
    fn = getattr(fn, "fn", fn)
    seen = _seen if _seen is not None else set()
    if fn in seen:
        return ""
    seen.add(fn)
    try:
        src, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(src)))
        where = os.path.basename(inspect.getsourcefile(fn) or "?")
    except (OSError, TypeError, SyntaxError):
        return ""
    found, helpers = set(), []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr in names:
            found.add((first + n.lineno - 1, ast.unparse(n.func)))
        elif isinstance(n.func, ast.Name):
            inner = getattr(getattr(fn, "__globals__", {}).get(n.func.id), "fn", None)
            if callable(inner):
                helpers.append(inner)
    out = [f"{call} at {where}:{line}" for line, call in sorted(found)]
    out += [s for h in helpers for s in [source_calls(h, family, seen)] if s]
    return ", ".join(out)


_BARRIER_NOTE = (" (if the cube's copy of the barrier takes no part in it, as this backend and the simulator model the "
                 "library: sim/core_split.py library_owned; not verified on an NPU)")


def report(kernel, block, fn, hazards, read, access_lines) -> MixOrderHazard:
    """The hazard found first: a vector publishing before the cube's store (hazards), else the cube
    reading after a blocking call only the vector's copy waits in (read)."""
    head = f"kernel {kernel}, block {block}: mix-kernel ordering hazard: "
    access_lines = f" ({access_lines.strip().rstrip('.')})" if access_lines else ""
    split = ("hivm-split-mix-kernel leaves a copy of each aclshmem call in both halves (AscendNPU-IR v1.2.0 "
             "SplitMixKernel.cpp, inferDistributedCoreType) and adds no cross-core flag between them")
    # which ids: bishengir's cross-core sync solver hands out 0-13 to flags of its own (a bf16 dot's
    # module holds 0-8) and keeps 14-15 back (AscendNPU-IR v1.2.0 GraphSyncSolver/Utility.h:36-43)
    ids = (" with <id> 14 or 15 (the compiler's own cross-core flags take ids from 0-13; the kernel library "
           "uses 15 cube -> vector, 14 vector -> cube)")
    alt = ("; or TRITON_DIST_HIVM_MIX_ORDER=cube-first|vector-first|concurrent to run the halves in an order "
           "without this check (docs/ascend.md, 'What it runs, and the compiler findings').")
    if hazards and hazards[0][2].startswith("vector core"):
        v, family, what = hazards[0]
        at = source_calls(fn, family) or family
        return MixOrderHazard(
            f"{head}vector core {v}'s copy of {family} ({at}) publishes to peers, and {what}{access_lines} is not "
            f"ordered before it: the compiler splits the mix kernel's vector work over both vector cores (each "
            f"stores its half of the tile, hivm.hir.get_sub_block_idx) and gives each core a copy of the call after "
            f"its own half only; no flag joins the two vector cores, so on the NPU a peer can see one core's signal "
            f"before the other core's half lands.  Fix: let one vector core store and publish (`if sub_vec_id() == "
            f"0:` around both, triton.language.extra.cann.extension){alt}")
    if hazards:
        v, family, what = hazards[0]
        at = source_calls(fn, family) or family
        call = at.split(" at ")[0]
        return MixOrderHazard(
            f"{head}the vector half's copy of {family} ({at}; vector core {v}) publishes to peers, and the "
            f"cube half's {what}{access_lines} is not ordered before it by any cross-core flag.  {split}, so on "
            f"the NPU a peer can see the {'barrier complete' if family in BARRIERS else 'signal'} before the data "
            f"and read stale memory{_BARRIER_NOTE if family in BARRIERS else ''} (run with "
            f"TRITON_DIST_HIVM_MIX_ORDER=vector-first to see it).  Fix: order them in the kernel: after the store "
            f"al.sync_block_set(\"cube\", \"vector\", <id>), before the {call} "
            f"al.sync_block_wait(\"cube\", \"vector\", <id>) (triton.language.extra.cann.extension){ids}{alt}")
    family, what = read
    at = source_calls(fn, family) or family
    call = at.split(" at ")[0]
    return MixOrderHazard(
        f"{head}the cube half's {what}{access_lines} follows {family} ({at}) in the source, but only the vector "
        f"half's copy of that call waits for the peers here (the cube's copy answers at once: "
        f"backend_ascend/cpu_run/shmem.py, inferred, not verified on an NPU), and no cross-core flag orders the "
        f"cube's load after it.  {split}, so the cube can read the buffer before the peers have written it.  "
        f"Fix: order them in the kernel: after the {call} al.sync_block_set(\"vector\", \"cube\", <id>), "
        f"before the load al.sync_block_wait(\"vector\", \"cube\", <id>) "
        f"(triton.language.extra.cann.extension){ids}{alt}")


def observed(bare: str, fn):
    """The template/aclshmem binding `fn` of wrapper `bare`, telling the block's flags (runner.BlockFlags)
    of the cube's global-memory stores and loads and the halves' publishing and blocking library calls;
    `fn` itself for every other call."""
    from triton_dist import symbols as S
    from . import memory as M
    if bare.startswith(CUBE_STORES):
        def store(*args):
            out = fn(*args)
            s = M.state()
            if s.flags is not None and s.fault is None:
                s.flags.gm_store(s.core, s.sub_block, bare, M.view(args[1], 0, 1).aligned)
            return out
        return store
    if bare.startswith(CUBE_LOADS):
        def load(*args):
            s = M.state()
            if s.flags is not None and s.core == "aic":
                s.flags.cube_load(bare, M.view(args[0], 0, 1).aligned)
            return fn(*args)
        return load
    family = S.family_of(bare.rsplit(".", 1)[0])
    publishes, acquires = family in PUBLISHING, family in ACQUIRING
    if publishes or acquires:
        def call(*args):
            s = M.state()
            if publishes and s.flags is not None:
                s.flags.publish(s.core, s.sub_block, family)
            out = fn(*args)
            if acquires and s.flags is not None:
                s.flags.acquire(s.core, s.sub_block, family)
            return out
        return call
    return fn
