"""The state of one simulated rank (one OS process) and the running of a kernel launch."""
from __future__ import annotations

import threading
import time

from triton_dist.errors import DeadlockError, TritonDistError

from . import board as B
from . import context
from .memory import AddressSpace, Buffer


SPIN_REPEATS = 16
PLAIN_SPIN = "spin on plain loads"


def _as_int(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return 0


class Aborted(BaseException):
    """Raised inside a core when another core of the launch failed: stop quietly."""


class CoreContext:
    """One program instance = one AI core with its own data cache."""
    __slots__ = ("rank", "core", "grid_idx", "grid_dim", "ncores", "cache", "kernel", "pending", "spin")

    def __init__(self, rank, core, grid_idx, grid_dim, cache, kernel):
        self.rank, self.core, self.grid_idx, self.grid_dim = rank, core, grid_idx, grid_dim
        self.ncores = grid_dim[0] * grid_dim[1] * grid_dim[2]
        self.cache, self.kernel = cache, kernel
        self.pending = []        # non-blocking puts/gets not yet completed (quiet completes them)
        self.spin = None         # [addr, value, repeats, Waiter]: a loop of plain scalar loads


class Waiter:
    """A task spinning in a primitive; what the deadlock report says about it."""
    __slots__ = ("op", "addr", "awaited", "seen", "rounds", "where", "target", "started")

    def __init__(self, op, addr, awaited, where, target):
        self.op, self.addr, self.awaited, self.where, self.target = op, addr, awaited, where, target
        self.seen = None
        self.rounds = 0
        self.started = time.monotonic()


class SimRuntime:
    def __init__(self, rank, world_size, heaps, board, memory, scheduler, timeout, barrier_plus_one):
        self.rank, self.world_size = rank, world_size
        self.heaps = heaps            # sim.backend.HeapSet
        self.board = board
        self.memory = memory
        self.sched = scheduler
        self.timeout = timeout
        self.barrier_plus_one = barrier_plus_one
        self.abort = threading.Event()
        self.tracer = None            # sim.trace.Tracer when the launch writes a trace
        self.race = None              # sim.race.RaceRecorder when the launch checks for races
        self.space = AddressSpace()
        for r, base in enumerate(heaps.bases):
            self.space.add(Buffer(base, base + heaps.size, f"symmetric heap of rank {r}", r, heaps))
        self._core_bar = threading.Condition()
        self._core_bar_state = [0, 0]   # arrived, generation

    # -- addresses ------------------------------------------------------------------------
    def heap_offset(self, addr: int, what: str) -> int:
        """Offset of a local symmetric address; error if it is not in this rank's heap."""
        base = self.heaps.bases[self.rank]
        if not base <= addr < base + self.heaps.size:
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
            raise TritonDistError(
                f"{context.kernel_line(3)}: {what} targets rank {pe}, but ranks are 0..{self.world_size - 1}")

    # -- waiting ----------------------------------------------------------------------------
    def wait_until(self, op, addr, awaited, read, done, target=None):
        """Spin: `v = read()` until `done(v)`; every round is a scheduling point."""
        c = context.core()
        core_id = c.core if c is not None else -1
        w = Waiter(op, addr, awaited, context.kernel_line(3), target or self.space.describe(addr))
        self.sched.point(op, addr, int(awaited))
        v = read()
        if done(v):
            return v
        w.seen = v
        self.board.set(self.rank, core_id, B.WAITING, op, w.where, w.target, addr, int(awaited), int(v))
        if self.tracer:
            self.tracer.begin(op, core_id, target=w.target, awaited=int(awaited), seen=int(v), where=w.where)
        try:
            while True:
                if self.abort.is_set():
                    raise Aborted()
                w.rounds += 1
                self.sched.spin(w)
                v = read()
                if done(v):
                    return v
                if v != w.seen:
                    w.seen = v
                    self.board.seen(self.rank, core_id, int(v))
                if time.monotonic() - w.started > self.timeout:
                    raise DeadlockError(
                        f"rank {self.rank} core {core_id}: {op} waited {self.timeout:.0f} s "
                        f"(the timeout) without its condition becoming true",
                        self.board.report([self.rank]))
        finally:
            self.board.set_state(self.rank, core_id, B.RUNNING)
            if self.tracer:
                self.tracer.end(op, core_id, seen=int(w.seen) if w.seen is not None else 0,
                                rounds=w.rounds)

    # -- spinning on plain loads -------------------------------------------------------------
    def spin_watch(self, addr, value):
        """A core that loads the same scalar again and again, seeing the same value, is
        spinning: each further load is a spin round (a scheduling point that yields, and a
        state the deadlock watchdog can see).  Through a stale cache line it never ends."""
        c = context.core()
        if c is None:
            return
        st = c.spin
        if st is None or st[0] != addr or st[1] != value:
            if st is not None and st[3] is not None:
                self.board.set_state(self.rank, c.core, B.RUNNING)
            c.spin = [addr, value, 1, None]
            return
        st[2] += 1
        if st[2] < SPIN_REPEATS:
            return
        w = st[3]
        if w is None:
            w = st[3] = Waiter(PLAIN_SPIN, addr, 0, context.kernel_line(4), self.space.describe(addr))
            w.seen = value
            self.board.set(self.rank, c.core, B.WAITING, PLAIN_SPIN, w.where, w.target, addr, 0, _as_int(value))
        if self.abort.is_set():
            raise Aborted()
        w.rounds += 1
        self.sched.spin(w)
        if time.monotonic() - w.started > self.timeout:
            raise DeadlockError(
                f"rank {self.rank} core {c.core}: spun on plain loads of {w.target} at {w.where} for "
                f"{self.timeout:.0f} s (the timeout)", self.board.report([self.rank]))

    def spin_reset(self):
        c = context.core()
        if c is not None and c.spin is not None:
            if c.spin[3] is not None:
                self.board.set_state(self.rank, c.core, B.RUNNING)
            c.spin = None

    def core_barrier(self, c: CoreContext):
        """Barrier of the local cores of one launch (the hardware's SyncAll)."""
        self.sched.point("core barrier", 0, c.core)
        with self._core_bar:
            gen = self._core_bar_state[1]
            if self.race is not None:
                self.race.core_arrive(c, gen)
            self._core_bar_state[0] += 1
            self.sched.wrote()          # an arrival is a change other cores wait to see
            if self._core_bar_state[0] == c.ncores:
                self._core_bar_state[0] = 0
                self._core_bar_state[1] += 1
                if self.race is not None:
                    self.race.core_depart(c, gen)
                return
        self.wait_until("local core barrier", 0, gen + 1, lambda: self._core_bar_state[1],
                        lambda g: g != gen, target=f"the {c.ncores} cores of rank {self.rank}")
        if self.race is not None:
            self.race.core_depart(c, gen)

    # -- kernel launch ------------------------------------------------------------------------
    def run_grid(self, fn, args, grid, tensors):
        from . import primitives
        kernel = getattr(fn, "__name__", "kernel")
        added = []
        seen_storage = set()
        for name, t in tensors:
            st = t.untyped_storage()
            start = st.data_ptr()
            if start in seen_storage or st.nbytes() == 0:
                continue
            seen_storage.add(start)
            if self.space.find(start) is None:
                b = Buffer(start, start + st.nbytes(), f"tensor argument {name!r} of {kernel}")
                self.space.add(b)
                added.append(b)
        cores = []
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    cid = (x * grid[1] + y) * grid[2] + z
                    cores.append(CoreContext(self.rank, cid, (x, y, z), grid, self.memory.new_cache(), kernel))
        self.abort.clear()
        self._core_bar_state[:] = [0, 0]
        self.board.clear_cores(self.rank)
        self.board.set_state(self.rank, -1, B.IN_KERNEL)

        tr = self.tracer
        race = self.race
        if race is not None:
            race.kernel_begin()

        def body(c):
            context.set_core(c)
            self.board.set_state(self.rank, c.core, B.RUNNING)
            if race is not None:
                race.core_begin(c)
            if tr:
                tr.begin(f"kernel {kernel}", c.core, program=list(c.grid_idx))
            try:
                fn(**args)
                primitives.complete_pending(c)
                if race is not None:
                    race.core_end(c)
            finally:
                if c.cache is not None:
                    if tr:
                        tr.instant("cache flush at kernel end", c.core,
                                   dirty_lines=sum(1 for e in c.cache.values() if e[1]))
                    self.memory.kernel_end(c.cache)
                self.board.set_state(self.rank, c.core, B.DONE)
                if tr:
                    tr.end(f"kernel {kernel}", c.core)
                context.set_core(None)

        try:
            errors = self.sched.run_kernel(self, cores, body)
            if race is not None:
                race.kernel_end()
        finally:
            for b in added:
                self.space.remove(b)
            self.board.set_state(self.rank, -1, B.RUNNING)
        real = [(c, e) for c, e in errors if not isinstance(e, Aborted)]
        if real:
            c, e = min(real, key=lambda ce: ce[0].core)
            if isinstance(e, (TritonDistError, DeadlockError)):
                raise e
            where = f"in kernel {kernel}, program {c.grid_idx} of rank {self.rank}: {e}"
            try:
                wrapped = type(e)(where)
            except Exception:  # noqa: BLE001 - an exception type that takes other arguments
                wrapped = RuntimeError(f"{type(e).__name__} {where}")
            raise wrapped from e
