"""The state of one simulated rank (one OS process) and the running of a kernel launch."""
from __future__ import annotations

import threading
import time

import numpy as np

from triton_dist.backend import current_call
from triton_dist.errors import DeadlockError, LaunchTimeoutError, TritonDistError

from . import board as B
from . import context, core_split, device, grid_limits
from .compat import cann
from .memory import AddressSpace, Buffer
from .spin import LINE, PLAIN_SPIN, POLLING, SPINNING, SpinWatch


def _first(v):
    """A poll's value as one int for the board (the first lane of a block)."""
    try:
        return int(np.asarray(v).ravel()[0])
    except (TypeError, ValueError, OverflowError, IndexError):
        return 0


def _as_int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


class Aborted(BaseException):
    """Raised inside a core when another core of the launch failed: stop quietly."""


class CoreContext:
    """One program instance, running on one physical core with its own data cache.

    `core` is the program's linear index (GetBlockIdx on the NPU; `ncores` the grid size),
    `phys` the physical core it runs on (its status-board and schedule slot)."""
    __slots__ = ("rank", "core", "grid_idx", "grid_dim", "ncores", "cache", "kernel", "pending", "spin",
                 "phys", "sub_vec", "sub_blocks", "split", "hazards", "launch")

    def __init__(self, rank, core, grid_idx, grid_dim, cache, kernel, phys=None):
        self.rank, self.core, self.grid_idx, self.grid_dim = rank, core, grid_idx, grid_dim
        self.ncores = grid_dim[0] * grid_dim[1] * grid_dim[2]
        self.cache, self.kernel = cache, kernel
        self.pending = []        # non-blocking puts/gets not yet completed (quiet completes them)
        self.spin = None         # sim.spin.SpinWatch: is this core polling without progress?
        self.phys = core if phys is None else phys
        self.sub_vec = 0         # sub_vec_id(): which vector sub-core of its block (sim/compat/cann.py)
        self.sub_blocks = 1      # instances its block runs as (2: a mix kernel calling sub_vec_id)
        self.split = None        # core_split.Instance: this is the cube or a vector instance of its block
        self.hazards = None      # other cores' stores in flight it synchronised with through an atomic (sim/stale.py)
        self.launch = None       # the Dispatch it came from: how many cores run at once, looped or not


class Dispatch:
    """The programs of one launch, handed in order to physical cores as they free up: the
    NPU's runtime runs one block per core and delivers the rest "in a new round"
    (sim/device.py).  Schedulers run `ncores` core tasks, each calling next() until None."""

    def __init__(self, rt, kernel, grid, ncores, kind, sub_blocks=1, split_vec=0, looped=False):
        self.rt, self.kernel, self.grid = rt, kernel, grid
        # TRITON_ALL_BLOCKS_PARALLEL=1 (sim/grid_limits.py): no dispatch in order onto free cores,
        # core p runs programs p, p + ncores, ... one after another (AscendNPU-IR's blockify loop)
        self.looped = looped
        self._own = {}          # looped: core -> the next program it runs
        # a mix kernel calling sub_vec_id runs each block as `sub_blocks` (2) vector instances,
        # consecutive, with the block's program id (sim/compat/cann.py); a kernel handing
        # cube<->vector flags as a cube instance and `split_vec` vector instances (sim/core_split.py)
        self.split_vec = split_vec
        self.sub_blocks = 1 + split_vec if split_vec else sub_blocks
        self.nprog = grid[0] * grid[1] * grid[2] * self.sub_blocks
        self._blocks = {}
        self.ncores = max(1, min(ncores, self.nprog))
        self.kind = kind
        self._next = 0
        self._first = None      # the first round's programs not yet taken by their cores (first_round)
        self._lock = threading.Lock()

    def first_round(self) -> None:
        """Dispatch the first round now, program p to core p (the NPU starts a block on every
        core at once, sim/device.py), each taken by its core whenever that core first asks:
        a scheduler that starts its cores one at a time (sim/schedulers/free.py) keeps the
        mapping the NPU has.  The rest are handed out in order as cores free up."""
        rt = self.rt
        self._first = set(range(self.ncores))
        self._next = self.ncores
        for p in range(self.ncores):
            rt.board.dispatched(rt.rank, p, p)
            rt.board.set_state(rt.rank, p, B.RUNNING)   # started, as far as the watchdog goes

    def pending(self) -> bool:
        if self.looped:
            with self._lock:
                left = any(self._own.get(p, p) < self.nprog for p in range(self.ncores))
            return left and not self.rt.abort.is_set()
        return (self._next < self.nprog or bool(self._first)) and not self.rt.abort.is_set()

    def _next_looped(self, phys: int):
        """The core's own next program under the blockify loop, or None when it has run them all."""
        with self._lock:
            i = self._own.get(phys, phys)
            if self.rt.abort.is_set() or i >= self.nprog:
                self.rt.board.set_state(self.rt.rank, phys, B.DONE)
                return None
            self._own[phys] = i + self.ncores
            reserved = bool(self._first) and phys in self._first    # program p, on the board since first_round
            if reserved:
                self._first.discard(phys)
        return i, reserved

    def next(self, phys: int):
        """The next program, now on core `phys`; None when all are dispatched (or one failed)."""
        rt = self.rt
        if self.looped:
            got = self._next_looped(phys)
            return None if got is None else self._context(got[0], phys, got[1])
        with self._lock:
            reserved = bool(self._first) and phys in self._first    # on the board since first_round
            if rt.abort.is_set() or (self._next >= self.nprog and not reserved):
                # the core is done only now: between two programs it stays running, so the
                # watchdog never takes a core about to start its next program for a stuck one
                rt.board.set_state(rt.rank, phys, B.DONE)
                return None
            if reserved:
                self._first.discard(phys)
                i = phys
            else:
                i = self._next
                self._next += 1
        return self._context(i, phys, reserved)

    def _context(self, i: int, phys: int, reserved: bool):
        rt = self.rt
        g = self.grid
        block, sub = divmod(i, self.sub_blocks)
        x, rest = divmod(block, g[1] * g[2])
        y, z = divmod(rest, g[2])
        if not reserved:
            rt.board.dispatched(rt.rank, phys, i)
        c = CoreContext(rt.rank, i, (x, y, z), g, rt.memory.new_cache(), self.kernel, phys)
        c.launch = self
        if self.split_vec:
            with self._lock:
                b = self._blocks.pop(block, None) if sub == self.sub_blocks - 1 else None
                if b is None:
                    b = self._blocks.setdefault(block, core_split.Block((x, y, z), self.split_vec))
            c.ncores = self.nprog
            c.sub_vec = max(0, sub - 1)
            c.split = core_split.Instance(core_split.CUBE if sub == 0 else core_split.VECTOR, c.sub_vec, b)
            b.phys[(c.split.core_type, c.sub_vec)] = phys
        elif self.sub_blocks > 1:
            c.ncores, c.sub_vec, c.sub_blocks = self.nprog, sub, self.sub_blocks
        return c


class Waiter:
    """A task spinning in a primitive; what the deadlock report says about it."""
    __slots__ = ("op", "addr", "awaited", "seen", "rounds", "where", "target", "started", "looked", "silent_line")

    def __init__(self, op, addr, awaited, where, target):
        self.op, self.addr, self.awaited, self.where, self.target = op, addr, awaited, where, target
        self.silent_line = -1   # a spin whose only writes count its rounds: their cache line (sim/spin.py)
        self.seen = None
        self.rounds = 0
        self.started = time.monotonic()
        self.looked = None      # the board's write count before the spin's next poll


class SimRuntime:
    def __init__(self, rank, world_size, heaps, board, memory, scheduler, timeout, barrier_plus_one):
        self.rank, self.world_size = rank, world_size
        self.lone = False             # True: the lone rank of kernels launched outside any rank (sim/backend.py)
        self.heaps = heaps            # sim.backend.HeapSet
        self.board = board
        self.memory = memory
        self.sched = scheduler
        self.timeout = timeout
        self.barrier_plus_one = barrier_plus_one
        self.abort = threading.Event()
        self.tracer = None            # sim.trace.Tracer when the launch writes a trace
        self.observers = None         # sim.observers.Observers once anything subscribes (race check, prediction)
        self.access_observers = None  # the same bus once a subscriber takes accesses (sim/observers.py)
        self.evidence = None          # sim.evidence.board.EvidenceBoard: what the device model saw
        self.space = AddressSpace()
        for r, base in enumerate(heaps.bases):
            self.space.add(Buffer(base, base + heaps.size, f"symmetric heap of rank {r}", r, heaps))
        self._core_bar = threading.Condition()
        self._core_bars = {}            # barrier group -> [arrived, generation]

    # -- addresses ------------------------------------------------------------------------
    def heap_offset(self, addr: int, what: str) -> int:
        """Offset of a local symmetric address; error if it is not in this rank's heap.
        Errors name the call the kernel wrote (dl.notify, not the signal_op it runs)."""
        base = self.heaps.bases[self.rank]
        if not base <= addr < base + self.heaps.size:
            what = current_call(what)
            b = self.space.find(addr)
            where = context.kernel_line(3)
            if b is not None and b.heap_rank is not None:
                raise TritonDistError(
                    f"{where}: {what} got an address in the heap of rank {b.heap_rank}, not the local "
                    f"heap of rank {self.rank}: pass the local symmetric pointer and let {what} translate it")
            raise TritonDistError(
                f"{where}: {what} needs a pointer into the symmetric heap, got 0x{addr:x} "
                f"({'a ' + b.name if b else 'outside every known buffer'}); allocate it with "
                f"triton_dist.symm_tensor")
        return addr - base

    def translate(self, addr: int, pe: int, what: str) -> int:
        off = self.heap_offset(addr, what)
        self.check_pe(pe, what)
        return self.heaps.bases[pe] + off

    def check_pe(self, pe: int, what: str) -> None:
        if not 0 <= pe < self.world_size:
            n = self.world_size
            raise TritonDistError(
                f"{context.kernel_line(3)}: {current_call(what)} targets rank {pe}, but ranks are 0..{n - 1}; "
                f"pass a rank in that range (dl.rank(), dl.num_ranks() and (dl.rank() + k) % dl.num_ranks() "
                f"give ranks that exist)")

    # -- waiting ----------------------------------------------------------------------------
    def wait_until(self, op, addr, awaited, read, done, target=None, cond=B.COND_NONE, nbytes=0):
        """Spin: `v = read()` until `done(v)`; every round is a scheduling point.  cond/nbytes
        say what `done` awaits of the slot at addr (board.COND_*), so the free schedule's
        watchdog can re-read it before calling the wait stuck."""
        c = context.core()
        core_id = c.phys if c is not None else -1       # the board's slot
        track = c.core if c is not None else -1          # the trace's track: the program
        w = Waiter(op, addr, awaited, context.kernel_line(3), target or self.space.describe(addr))
        self.sched.point(op, addr, int(awaited))
        board = self.board
        looked = board.write_count()    # taken before each read: the read saw every write counted by then
        v = read()
        if done(v):
            return v
        w.seen = v
        board.set(self.rank, core_id, B.WAITING, op, w.where, w.target, addr, int(awaited), int(v), cond, nbytes)
        board.polled(self.rank, core_id, looked)
        if self.tracer:
            self.tracer.begin(op, track, target=w.target, awaited=int(awaited), seen=int(v), where=w.where)
        stuck = False
        try:
            while True:
                if self.abort.is_set():
                    raise Aborted()
                w.rounds += 1
                self.sched.spin(w)
                looked = board.write_count()
                v = read()
                if done(v):
                    w.seen = v          # the trace's end of the wait shows the value that satisfied it
                    return v
                if v != w.seen:
                    w.seen = v
                    board.seen(self.rank, core_id, int(v))
                board.polled(self.rank, core_id, looked)
                if time.monotonic() - w.started > self.timeout:
                    raise LaunchTimeoutError(
                        f"rank {self.rank} core {core_id}: {op} timed out after {self.timeout:g} s "
                        f"(the launch timeout) without its condition becoming true, while other tasks "
                        f"were still running (no deadlock was detected); give it more time with "
                        f"launch(..., timeout=SECONDS) or `--timeout SECONDS`",
                        self.board.report([self.rank]))
        except DeadlockError:
            stuck = True            # the board keeps saying where it waits: the launcher's report reads it
            raise
        finally:
            if not stuck:
                self.board.set_state(self.rank, core_id, B.RUNNING)
            if self.tracer:
                self.tracer.end(op, track, seen=int(w.seen) if w.seen is not None else 0,
                                rounds=w.rounds)

    # -- polls that can make no progress (sim/spin.py says when) --------------------------------
    def spin_watch(self, key, value, kind=PLAIN_SPIN, addr=0, c=context.HERE):
        """A kernel polled memory (`key`: kind and addresses) and read `value`.  Once the
        core comes back to this poll in exactly the same state (sim/spin.py), each further
        visit is a spin round: a scheduling point that yields, and a waiting state the
        deadlock watchdog can see.  A stale cache line or a flag nobody writes never ends it.
        `c`: the calling core, when the caller has looked it up already."""
        if c is context.HERE:
            c = context.core()
        if c is None:
            return
        sw = c.spin
        if sw is None:
            sw = c.spin = SpinWatch()
        if sw.silent is not None and sw.reads_own_count(addr):
            return                  # it reads back its own count of rounds: nothing another task did
        state = sw.observe(key, value)
        if state != SPINNING:
            if sw.waiter is not None:
                sw.waiter = None
                sw.silent = None
                self.board.set_state(self.rank, c.phys, B.RUNNING)
            if state == POLLING:        # no deadlock, but let every other runnable task go first
                if self.abort.is_set():
                    raise Aborted()
                self.sched.poll(key)
            return
        shown = _first(value)
        w = sw.waiter
        if w is None:
            w = sw.waiter = Waiter(kind, addr, 0, context.kernel_line(4), self.space.describe(addr))
            w.seen = shown
            op = kind
            if sw.pattern:          # it writes a count of its rounds nobody reads: silent from now on
                sw.silent = sw.pattern
                lo = min(k[0] for k in sw.pattern)
                w.silent_line = lo // LINE
                op = f"{kind}{B.COUNTING}"
            # a poll of memory ends when the value changes; a spin on a cached line sees no
            # other core's write, so memory cannot tell the watchdog it is over
            dt = np.asarray(value).dtype
            cond = B.COND_CHANGES if kind != PLAIN_SPIN and dt.kind in "iu" else B.COND_NONE
            self.board.set(self.rank, c.phys, B.WAITING, op, w.where, w.target, addr, 0, shown, cond, dt.itemsize)
        elif w.looked is not None:
            self.board.polled(self.rank, c.phys, w.looked)   # this poll read after that count
        if self.observers is not None:
            self.observers.spin_round(kind, addr, value)
        if self.abort.is_set():
            raise Aborted()
        w.rounds += 1
        self.sched.spin(w)
        w.looked = self.board.write_count()     # the next poll reads after it
        if time.monotonic() - w.started > self.timeout:
            raise LaunchTimeoutError(
                f"rank {self.rank} core {c.phys}: {kind} of {w.target} at {w.where} timed out after "
                f"{self.timeout:g} s (the launch timeout) without anything changing, while other tasks were "
                f"still running (no deadlock was detected); give it more time with launch(..., timeout=SECONDS) "
                f"or `--timeout SECONDS`", self.board.report([self.rank]))

    def spin_wrote(self, c, lo: int, hi: int) -> None:
        """The core's kernel wrote bytes [lo, hi) (a tl.store, an atomic that changed memory):
        progress, unless it is the write pattern of the poll it spins on (sim/spin.py)."""
        if c is None or c.spin is None:
            return
        if not c.spin.wrote(lo, hi) and c.spin.waiter is not None:
            c.spin.waiter = None
            c.spin.reset()
            self.board.set_state(self.rank, c.phys, B.RUNNING)

    def spin_reset(self, c=context.HERE):
        """The core wrote (a store, an atomic that changed memory, a primitive): it made progress."""
        if c is context.HERE:
            c = context.core()
        if c is not None and c.spin is not None:
            if c.spin.waiter is not None:
                c.spin.waiter = None
                self.board.set_state(self.rank, c.phys, B.RUNNING)
            c.spin.reset()

    def core_barrier(self, c: CoreContext, group: str = "all", parties: int | None = None, what: str = ""):
        """Barrier of the local cores of one launch (the hardware's SyncAll): all of them, or
        `parties` of them in `group` (the cube or the vector instances of split blocks)."""
        parties = c.ncores if parties is None else parties
        self.sched.point("core barrier", 0, c.core)
        with self._core_bar:
            state = self._core_bars.setdefault(group, [0, 0])
            gen = state[1]
            if self.observers is not None:
                self.observers.core_arrive(c, gen if group == "all" else (group, gen))
            state[0] += 1
            last = state[0] == parties
            if last:
                state[0] = 0
                state[1] += 1
            self.sched.wrote()          # an arrival is a change other cores wait to see (counted after it)
            if last:
                if self.observers is not None:
                    self.observers.core_depart(c, gen if group == "all" else (group, gen))
                return
        self.wait_until("local core barrier", 0, gen + 1, lambda: state[1],
                        lambda g: g != gen, target=what or f"the {parties} cores of rank {self.rank}")
        if self.observers is not None:
            self.observers.core_depart(c, gen if group == "all" else (group, gen))

    # -- kernel launch ------------------------------------------------------------------------
    def run_grid(self, fn, args, grid, tensors):
        from . import primitives
        kernel = getattr(fn, "__name__", "kernel")
        grid_limits.check(kernel, grid)    # the NPU's uint16 coreDim, before anything runs
        added = []
        seen_storage = set()
        for name, t in tensors:
            st = t.untyped_storage()
            start = st.data_ptr()
            if start in seen_storage or st.nbytes() == 0:
                continue
            seen_storage.add(start)
            gone = self.heaps.freed_tensor(t)
            if gone is not None:
                raise TritonDistError(
                    f"kernel {kernel}: argument {name!r} is {gone.label} of rank {self.rank}, which was freed "
                    f"(triton_dist.free at {gone.freed_at}); its memory may now hold another tensor. Launch "
                    f"kernels on a symmetric tensor only before it is freed: move the free after the last "
                    f"launch that uses it, or allocate a new one")
            if self.space.find(start) is None:
                b = Buffer(start, start + st.nbytes(), f"tensor argument {name!r} of {kernel}")
                self.space.add(b)
                added.append(b)
        looped = grid_limits.looped()
        dev = device.current()
        mix = device.uses_dot(fn, args)
        ncores, kind = dev.cores_for(mix)
        sub_blocks = 2 if mix and cann.calls_sub_vec_id(fn) else 1
        split_vec = 0
        if core_split.uses_block_flags(fn):     # cube and vector instances per block (sim/core_split.py)
            split_vec = 2 if cann.calls_sub_vec_id(fn) else 1
            # one block = one AI core: its cube instance and split_vec vector instances, each on a
            # core of that AI core, so dev.ai_cores blocks are resident (issue 32: counting
            # instances against the vector cores made 17-24 blocks a false deadlock)
            ncores, kind = min(dev.split_cores(split_vec), self.board.cores), f"{B.AI_BLOCKS}{1 + split_vec}c"
            if ncores < 1 + split_vec:
                raise TritonDistError(
                    f"kernel {kernel}: a block of it runs on {1 + split_vec} cores at once (it hands cube<->vector "
                    f"flags), but this launch has {self.board.cores}; raise TRITON_DIST_SIM_CORES")
        elif sub_blocks > 1:          # both vector cores of each AI core run the kernel: a block per AI core
            ncores, kind = min(dev.ai_cores * sub_blocks, self.board.cores), f"{B.AI_BLOCKS}{sub_blocks}"
        if ncores > self.board.cores:
            raise TritonDistError(
                f"kernel {kernel}: the device profile ({dev.name}) has more cores than this launch was "
                f"started with ({self.board.cores}); set TRITON_DIST_SIM_DEVICE / TRITON_DIST_SIM_CORES "
                f"before triton_dist.launch, not inside a rank")
        if getattr(fn, "programs_never_wait", False) and not split_vec and sub_blocks == 1:
            # the kernel backend knows no program of this launch can wait for another (backend hivm:
            # a compiled kernel with no device-library call and no while loop): its programs run on
            # one core, one after another, an order the NPU may run them in, with no thread started
            ncores = 1
        if looped:      # the board keeps 12 characters of it
            kind = grid_limits.LOOPED + ("vector" if kind.startswith("vector") else "AI")
        launch = Dispatch(self, kernel, grid, ncores, kind, sub_blocks, split_vec, looped)
        self.abort.clear()
        self._core_bars.clear()
        self.board.clear_cores(self.rank)
        self.board.kernel_begin(self.rank, launch.nprog, ncores, kind)
        self.board.set_state(self.rank, -1, B.IN_KERNEL)

        tr = self.tracer
        race = self.observers
        if race is not None:
            race.kernel_begin()

        def body(c):
            context.set_core(c)
            self.board.set_state(self.rank, c.phys, B.RUNNING)
            if race is not None:
                race.core_begin(c)
            if tr:
                tr.begin(f"kernel {kernel}", c.core, program=list(c.grid_idx))
            ended = False
            try:
                fn(**args)
                primitives.complete_pending(c)
                if c.split is not None:     # may report a flag set and never waited for
                    core_split.instance_end(c)
                if race is not None:
                    race.core_end(c)
                ended = True
            except DeadlockError:
                ended = True        # its record keeps saying where it waits (the launcher's report reads it)
                raise
            finally:
                if c.cache is not None:
                    if tr:
                        tr.instant("cache flush at kernel end", c.core,
                                   dirty_lines=sum(1 for e in c.cache.values() if e[1]))
                    self.memory.kernel_end(c.cache)
                if not ended:       # a program that ended takes the next one (Dispatch.next says DONE)
                    self.board.set_state(self.rank, c.phys, B.DONE)
                if tr:
                    tr.end(f"kernel {kernel}", c.core)
                context.set_core(None)

        try:
            errors = self.sched.run_kernel(self, launch, body)
            if race is not None:
                race.kernel_end()
        finally:
            for b in added:
                self.space.remove(b)
            self.board.set_state(self.rank, -1, B.RUNNING)
        real = [(c, e) for c, e in errors if not isinstance(e, Aborted)]
        if real:
            c, e = real[0]          # the first error of the launch (schedulers list them in time order)
            # as Triton's interpreter raises it (sim/kernel_error.py), with where it happened
            from .kernel_error import host_error
            out = host_error(e, kernel, c.grid_idx if c is not None else (0, 0, 0), self.rank)
            if out is not e and out.__cause__ is e:
                raise out from e
            raise out
