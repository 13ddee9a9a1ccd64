"""Deterministic schedules: exactly one task runs at a time, across all ranks.

Why over 400 lines: the baton protocol (shared state, hand-off, blocking points, the
parent-death checks and the DMA coin) is one piece of shared-memory synchronisation;
the strategies themselves are one small file each.

A task is a rank's host code (between two calls into triton_dist) or one program
instance (core) of a rank's kernel.  Every device memory access, every primitive and
every round of a wait is a scheduling point: the running task asks the strategy (random
or PCT, one file each) which runnable task runs next and hands it the baton.  The
decisions come from a seeded generator kept in memory shared by all ranks, so the same
program and seed give the same execution on any machine; `digest()` hashes the
decisions so two runs can be compared.

Host collectives (gloo) need every rank at once: when the last rank arrives, the baton
is parked, all ranks run the collective together, and the last one to leave hands the
baton on.  No kernel runs then (every host is in the collective), so nothing escapes
the schedule.

A task spinning in a wait counts as blocked until something is written anywhere: polling
again before that can only see the same value (a spin whose only writes count its rounds,
sim/spin.py, writes nothing that counts here: `silent_line` holds that count's cache line
while it spins, and another task's access to the line wakes it and makes its next writes
count, so a task that does read the count is never left waiting for it) (this is also what lets PCT's priorities
starve a waiter long enough to expose bugs like the barrier's missing +1 rule).
Deadlock and livelock: when no task is runnable, or every runnable task is spinning
and each has polled since the last write anywhere (so nothing can ever change what it
sees), the task that finds out raises DeadlockError with the status board's report.
Every event is also written to a ring in shared memory, for replay reports.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading

import multiprocess as mp
import numpy as np

from triton_dist import lifeline
from triton_dist.errors import DeadlockError, TritonDistError
from triton_dist.symbols import CACHE_LINE_BYTES

from .. import affinity, dma
from ..board import cut, text
from ..spin import silent_now

EVENTS = 4096                # size of the shared event ring
FREE, RUNNABLE, BLOCKED, DONE, COLLECTIVE = range(5)
P2P_TAGS = 8                 # torch.distributed send/recv are counted per tag modulo this
LINE_BYTES = CACHE_LINE_BYTES  # last_line and waits_on hold addresses // this
SPINS, POLLS = 1, 2          # sh.spinning: blocked until a write (spin); only polling (sim/spin.py)
MASK64 = (1 << 64) - 1
SPIN_BEFORE_SLEEP = 200     # sched_yield polls for the baton before sleeping on the semaphore ...
WAKE_CHECK_SECONDS = 0.5     # a task sleeping for the baton checks this often that its launcher lives
# words of the shared header (uint64): generator state, decision hash, counters
RNG, DIGEST, SEED, STEPS, EPOCH, SWITCHES, RECORDS = range(7)
# signed words: who holds the baton, collective bookkeeping
CURRENT, ARRIVED, LEAVING, SILENT = range(4)     # SILENT: slots with a silent_line

# value: a signal value above 2**63 (uint64 signals) is kept as its int64 bit pattern, wide = 1
# seen: what a load read or a wait saw when it was satisfied (has_seen: filled in after the
# point, by `saw`); seq orders the records (a landing shares its point's step)
EVENT = np.dtype([("seq", "u8"), ("step", "u8"), ("rank", "i4"), ("core", "i4"), ("op", "S28"), ("where", "S64"),
                  ("heap", "i4"), ("buf", "S40"), ("addr", "u8"), ("value", "i8"), ("wide", "u1"),
                  ("seen", "i8"), ("seen_f", "f8"), ("has_seen", "u1")])    # has_seen: 1 int, 2 float
# The same record as struct formats over the mapping (numpy's record is packed, no padding):
# a record is written at every scheduling point, and struct.pack_into costs a fraction of a
# numpy record assignment from a tuple.
_EVENT_PACK = struct.Struct("<QQii28s64si40sQqB")          # seq .. wide (seen* zeroed apart)
_SEEN_PACK = struct.Struct("<qdB")                          # seen, seen_f, has_seen
_SEQ = struct.Struct("<Q")
_SEEN_AT = EVENT.fields["seen"][1]
assert _EVENT_PACK.size == _SEEN_AT and _SEEN_AT + _SEEN_PACK.size == EVENT.itemsize
_NOT_SEEN = _SEEN_PACK.pack(0, 0.0, 0)


def _int64(v) -> int:
    """A value as the ring's i8 holds it (floats truncated, uint64 as their bit pattern)."""
    v = int(np.asarray(v).ravel()[0]) if np.ndim(v) else int(v)
    v %= 1 << 64
    return v - (1 << 64) if v >= 1 << 63 else v


_CUTS: dict = {}


def _cut(text: str, nbytes: int) -> bytes:
    """board.cut, remembered: a few dozen op names and kernel lines recur at every point."""
    key = (text, nbytes)
    b = _CUTS.get(key)
    if b is None:
        if len(_CUTS) > 4096:
            _CUTS.clear()
        b = _CUTS[key] = cut(text, nbytes)
    return b


def splitmix64(state: int):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class SharedSchedule:
    """Created by the launcher before it forks the ranks: state, semaphores and a lock.

    Plain arrays (not records) over one shared mapping: this is read and written at every
    scheduling point, and a numpy record field costs several times a plain element."""

    def __init__(self, world_size: int, seed: int, cores: int | None = None):
        if cores is None:               # one task slot per physical core of the device profile
            from .. import device
            cores = device.current().max_cores
        self.world_size = world_size
        self.per_rank = cores + 1
        n = self.n = world_size * self.per_rank
        layout = [("u", np.uint64, 8), ("i", np.int64, 4), ("state", np.int64, n), ("spinning", np.int64, n),
                  ("poll_epoch", np.uint64, n), ("polled_at", np.uint64, n), ("prio", np.int64, n),
                  ("last_line", np.int64, n), ("waits_on", np.int64, n), ("live_cores", np.int64, n),
                  ("silent_line", np.int64, n), ("silent_read", np.int64, n)]
        size = sum(np.dtype(t).itemsize * k for _, t, k in layout) + EVENT.itemsize * EVENTS \
            + 8 * 2 * world_size * world_size * P2P_TAGS
        self._mm = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        off = 0
        for name, t, k in layout:
            setattr(self, name, np.frombuffer(self._mm, dtype=t, count=k, offset=off))
            off += np.dtype(t).itemsize * k
        self.events = np.frombuffer(self._mm, dtype=EVENT, count=EVENTS, offset=off)
        self._events_at = off           # where the ring starts in the mapping (write_event writes there)
        off += EVENT.itemsize * EVENTS
        # posted torch.distributed sends / receives: [send or receive, src, dst, tag % P2P_TAGS]
        self.p2p = np.frombuffer(self._mm, dtype=np.int64, count=2 * world_size * world_size * P2P_TAGS,
                                 offset=off).reshape(2, world_size, world_size, P2P_TAGS)
        self.is_host = np.array([(i % self.per_rank) == 0 for i in range(n)])
        self.sems = [mp.get_context("fork").Semaphore(0) for _ in range(n)]
        self.lock = mp.get_context("fork").Lock()
        self.i[CURRENT] = -1
        self.silent_line[:] = -1
        self.u[RNG] = self.u[SEED] = seed & MASK64
        self.u[DIGEST] = 0xCBF29CE484222325

    def write_event(self, seq: int, *fields) -> None:
        """Record number seq (fields: seq + 1 .. wide of EVENT, in order), nothing seen yet."""
        at = self._events_at + (seq % EVENTS) * EVENT.itemsize
        _EVENT_PACK.pack_into(self._mm, at, *fields)
        self._mm[at + _SEEN_AT:at + EVENT.itemsize] = _NOT_SEEN

    def write_seen(self, seq: int, seen: int, seen_f: float, kind: int) -> None:
        """What record seq's access read (kind 1: the int seen, 2: the float seen_f), if the
        ring still holds that record."""
        at = self._events_at + (seq % EVENTS) * EVENT.itemsize
        if _SEQ.unpack_from(self._mm, at)[0] == seq + 1:
            _SEEN_PACK.pack_into(self._mm, at + _SEEN_AT, seen, seen_f, kind)

    def slot_of(self, rank: int, core: int) -> int:
        return rank * self.per_rank + (0 if core < 0 else 1 + core)

    def who(self, slot: int):
        rank, k = divmod(slot, self.per_rank)
        return rank, k - 1

    def digest(self) -> str:
        return f"{int(self.u[DIGEST]):016x}"

    def steps(self) -> int:
        return int(self.u[STEPS])

    def switches(self) -> int:
        return int(self.u[SWITCHES])

    def last_events(self, n: int = 40, name=None):
        """The last n records of the event ring, one line each.  name(rank, offset): the words
        for an offset into the heap of a rank (sim/naming.py; the launcher and the ranks pass
        theirs), else 'heap of rank R + OFFSET'."""
        rows = sorted((e for e in self.events if e["op"]), key=lambda e: int(e["seq"]))[-n:]
        out = []
        for e in rows:
            core = int(e["core"])
            who = f"rank {int(e['rank'])} " + ("host" if core < 0 else f"core {core}")
            heap = int(e["heap"])
            if heap >= 0:
                addr = _heap_name(name, heap, int(e["addr"]))
            elif e["buf"]:
                addr = f"{text(e['buf'])} + {int(e['addr'])}"
            else:
                addr = f"0x{int(e['addr']):x}" if int(e["addr"]) else "-"
            value = int(e["value"]) + ((1 << 64) if int(e["wide"]) else 0)
            kind = int(e["has_seen"])
            # a tile load or store has no operand of its own (value 0): only the data it moved is
            # shown ('= 0, saw 100' read as if 0 had been stored); host steps have neither
            parts = [] if (kind and value == 0) or (not kind and value == 0 and addr == "-") else [f"value {value}"]
            if kind:
                parts.append(f"saw {int(e['seen'])}" if kind == 1 else f"saw {float(e['seen_f']):g}")
            out.append(f"  step {int(e['step']):>7}  {who:14s} {text(e['op']):26s} "
                       f"{text(e['where']):44s} {addr}  {', '.join(parts)}".rstrip())
        head = (f"  {'(step)':>12}  {'who':14s} {'op':26s} {'kernel line':44s} address  "
                f"value (a signal's, the awaited one, a scalar stored), saw (what a load or wait read, "
                f"or a store wrote: the first element)")
        return f"last {len(out)} of {self.steps()} steps:\n" + head + "\n" + "\n".join(out)


def _rank_namer():
    """name(rank, offset) of the calling rank's runtime (its allocator is every rank's)."""
    from triton_dist.sim import context
    def name(r, off):
        rt = context.runtime()
        return rt.space.describe(rt.heaps.bases[r] + off)
    return name


def _heap_name(name, rank: int, off: int) -> str:
    if name is not None:
        try:
            return name(rank, off)
        except Exception:  # noqa: BLE001 - a log line must not fail the report it is part of
            pass
    return f"heap of rank {rank} + {off}"


def _spins_before_sleep() -> int:
    """... but on an overloaded machine (more runnable tasks than CPUs) none: each yield then
    hands the CPU to another process for a whole time slice, while a task woken from its
    semaphore is scheduled promptly (measured: 10 seeds of `triton-dist explore` at load
    60-70 on 2 cores took 8.7-15.9 s without the polls, 13.8-18.8 s with them)."""
    try:
        overloaded = os.getloadavg()[0] > (os.cpu_count() or 1)
    except OSError:
        overloaded = False
    return 0 if overloaded else SPIN_BEFORE_SLEEP


class DeterministicScheduler:
    """Baton passing over SharedSchedule; subclasses choose the next task (choose)."""
    name = "?"
    dma_odds = 4                # a DMA store in flight lands at a point of its core one time in this
    at_op, at_addr = "", 0      # the scheduling point being decided: what the task is about to access

    def __init__(self, shared: SharedSchedule, rank: int, board=None):
        self.sh = shared
        self.rank = rank
        self.board = board
        self.host_slot = shared.slot_of(rank, -1)
        self._local = threading.local()
        self.aborting = False       # a core of this rank failed: unblock and stop the others
        self.spins = _spins_before_sleep()

    # ---- strategy hooks ---------------------------------------------------------------
    def on_new_task(self, slot: int) -> None:
        pass

    def choose(self, candidates: np.ndarray, me: int) -> int:
        raise NotImplementedError

    # ---- shared helpers ------------------------------------------------------------------
    def rand(self) -> int:
        u = self.sh.u
        state, out = splitmix64(int(u[RNG]))
        u[RNG] = state
        return out

    def _my_slot(self) -> int:
        s = getattr(self._local, "slot", None)
        return self.host_slot if s is None else s

    def _record(self, slot, op, addr=0, value=0, where=None):
        from triton_dist.sim import context
        if where is None:
            c = context.core()
            where = context.kernel_line(3) if c is not None else ""
            if where == "<host>" and c is not None:     # the core's own end: its drain and flush
                where = f"end of {c.kernel} (core {c.core})"
        heap, buf = -1, b""
        if addr:
            # offsets into named buffers replay exactly; raw addresses don't
            b = context.runtime().space.find(addr)
            if b is not None:
                if b.heap_rank is not None:
                    heap = b.heap_rank
                else:
                    buf = _cut(b.name, 40)
                addr = addr - b.start
        sh = self.sh
        u = sh.u
        step = int(u[STEPS])
        rank, core = divmod(slot, sh.per_rank)
        value, wide = int(value), 0
        if not -(1 << 63) <= value < 1 << 63:       # a uint64 signal value
            value %= 1 << 64
            if value >= 1 << 63:
                value, wide = value - (1 << 64), 1
        seq = int(u[RECORDS])
        u[RECORDS] = seq + 1
        sh.write_event(seq, seq + 1, step, rank, core - 1, _cut(op, 28), _cut(where, 64), heap, buf, addr, value, wide)
        self._local.last = seq

    def saw(self, value, mask=None) -> None:
        """The access of the calling task's last point read `value` (its active lanes: mask;
        the event log shows the first)."""
        seq = getattr(self._local, "last", None)
        if seq is None:
            return
        v = np.asarray(value)
        if mask is not None and v.ndim:
            v = v[np.broadcast_to(mask, v.shape)]
            if not v.size:
                return
            first = v[0]
        else:
            if not v.size:
                return
            first = v.flat[0]
        if v.dtype.kind == "f":
            self.sh.write_seen(seq, 0, float(first), 2)
        else:
            try:
                self.sh.write_seen(seq, _int64(first), 0.0, 1)
            except (TypeError, ValueError, OverflowError, struct.error):
                pass

    def landed(self, a) -> None:
        """Observer (sim/observers.py): a store in flight reached memory: a record of its own."""
        if a.core is None:
            return
        self._record(self._my_slot(), "scalar store lands" if a.scalar else "store lands", a.lo,
                     0, where=f"{a.where()} (issued there)")
        self.saw(a.values())

    def _deadlock(self, why):
        report = self.board.report() if self.board is not None else ""
        if self.board is not None:      # programs that cannot start while the running ones wait
            co = [f"rank {r}: {c}" for r in range(self.sh.world_size) if (c := self.board.coresidency(r))]
            why += "".join("; " + c for c in co[:1])
        raise DeadlockError(f"{why} (schedule={self.name}, seed={int(self.sh.u[SEED])})",
                            report + "\n" + self.sh.last_events(name=_rank_namer()))

    def _next(self, me: int) -> int:
        sh = self.sh
        cand = np.flatnonzero(sh.state == RUNNABLE)
        if cand.size == 0:
            self._deadlock("no task can run: every unfinished task is blocked")
        if sh.spinning[cand].any():
            cand = self._not_stuck(cand)
        nxt = int(self.choose(cand, me))
        u = sh.u
        u[STEPS] += 1
        u[DIGEST] = ((int(u[DIGEST]) ^ (nxt + 1)) * 0x100000001B3) & MASK64
        return nxt

    def _not_stuck(self, cand):
        """The candidates less those spinning with nothing written since they looked."""
        sh = self.sh
        # A task spinning in a wait is blocked until something is written somewhere: polling
        # again before that can only see the same value.
        unchanged = sh.poll_epoch[cand] == sh.u[EPOCH]
        stuck = (sh.spinning[cand] == SPINS) & unchanged
        if stuck.any():
            if stuck.all():
                self._deadlock("every runnable task is spinning and nothing has been written since "
                               "each last looked: none of them can ever see a change (deadlock or livelock)")
            cand, unchanged = cand[~stuck], unchanged[~stuck]
        # A task that only polls (sim/spin.py POLLING) may still get out by itself, but
        # every other runnable task goes first: no priority lets it starve the one it waits for.
        # When only pollers are left, they take turns (the one that polled longest ago runs):
        # two loops that each re-read unchanged memory -- a bounded wait and the producer's
        # loop over the same data -- both get on (CHESS's fair scheduling of yields).
        polling = (sh.spinning[cand] == POLLS) & unchanged
        if polling.any():
            if not polling.all():
                cand = cand[~polling]
            else:
                cand = cand[[int(sh.polled_at[cand].argmin())]]
        return cand

    def _switch(self, me: int, nxt: int, wait: bool = True) -> None:
        """Hand the baton to nxt; if wait, block until it comes back to me."""
        if nxt == me:
            return
        self.sh.u[SWITCHES] += 1
        self.sh.sems[nxt].release()     # before CURRENT: a poller that sees CURRENT finds it released
        self.sh.i[CURRENT] = nxt
        if wait:
            # a thread of this process holds it now: polling would only fight it for the GIL
            self._acquire(me, poll=nxt // self.sh.per_rank != self.rank)

    def _acquire(self, me: int, poll: bool = True) -> None:
        sem = self.sh.sems[me]
        if not sem.acquire(False):
            # Waking a sleeping process costs ~40 us; the baton usually comes back within a
            # few steps, so first poll the shared word with sched_yield (which also lets
            # the CPU go to whoever holds the baton), then sleep.  Not when the baton went to
            # another thread of this process: each poll takes the GIL back from the thread
            # that holds the baton (4 cores of one rank under random: a round of the block
            # loop cost 1.3x as much CPU with the polls as without, benchmarks/bench_access.py).
            cur = self.sh.i
            for _ in range(self.spins if poll else 0):
                if cur[CURRENT] == me:
                    break
                os.sched_yield()
            # Never an unbounded wait: a rank whose launcher died exits (the launcher's own
            # timeout ends every other way this could block forever).
            while not sem.acquire(True, WAKE_CHECK_SECONDS):
                lifeline.exit_if_orphaned()
        if self.aborting and me != self.host_slot:
            raise SystemExit(0)

    def _abort_local(self, slots, host):
        """A core failed: wake this rank's other cores (they stop) and its host (it reports)."""
        self.aborting = True
        for s in slots:
            self.sh.sems[s].release()
        self.sh.sems[host].release()

    # ---- the scheduler interface -------------------------------------------------------------
    def start(self):
        """Called by every rank after init: join the schedule (a collective)."""
        self.sh.state[self.host_slot] = RUNNABLE
        self._collective_enter(self.host_slot, first=True)
        self._collective_leave(self.host_slot)

    def point(self, op="access", addr=0, value=0):
        me = self._my_slot()
        sh = self.sh
        sh.spinning[me] = 0
        if sh.i[SILENT]:
            self._silent_point(me, addr)
        if me == self.host_slot:
            sh.u[EPOCH] += 1          # host code may have written anything
        self._record(me, op, addr, value)
        if me != self.host_slot:
            dma.at_point(self)        # the core's DMA stores in flight may land now (self.coin)
        self.at_op, self.at_addr = op, addr       # what the task is about to do (for choose)
        nxt = self._next(me)
        sh.last_line[me] = addr // LINE_BYTES if addr else -1
        self._switch(me, nxt)

    def coin(self) -> bool:
        """A seeded yes, one time in dma_odds (does a DMA store land at this point? sim/dma.py),
        drawn from the shared generator and folded into the digest: a seed replays it exactly."""
        u = self.sh.u
        bit = int(self.rand() % self.dma_odds == 0)
        u[DIGEST] = ((int(u[DIGEST]) ^ (0x10000 | bit)) * 0x100000001B3) & MASK64
        return bool(bit)

    def wrote(self):
        # a spin's count of its rounds wakes nobody, unless another task read it (sim/spin.py)
        if silent_now() and not self.sh.silent_read[self._my_slot()]:
            return
        self.sh.u[EPOCH] += 1

    def _set_silent(self, me: int, line: int) -> None:
        sh = self.sh
        was = sh.silent_line[me] >= 0
        sh.silent_line[me] = line
        sh.i[SILENT] += int(line >= 0) - int(was)

    def _silent_point(self, me: int, addr: int) -> None:
        """A point of task me: it no longer spins silently; an access of a line another task
        spins silently on (it counts its rounds there) wakes that task: someone reads the count."""
        sh = self.sh
        if sh.silent_line[me] >= 0:
            self._set_silent(me, -1)
        if addr and sh.i[SILENT]:
            hit = (sh.silent_line == addr // LINE_BYTES) & (sh.spinning == SPINS) & (sh.state == RUNNABLE)
            hit[me] = False
            if hit.any():
                sh.silent_read[hit] = 1
                sh.u[EPOCH] += 1

    def spin(self, waiter):
        dma.drain()                   # a waiting core's pipes drain (sim/dma.py)
        me = self._my_slot()
        sh = self.sh
        line = getattr(waiter, "silent_line", -1)
        if line >= 0 or sh.silent_line[me] >= 0:
            self._set_silent(me, line)
        # a task already waiting on that line reads the count: its writes count, and it is no
        # spinner (it runs on, its next write wakes the reader)
        read = line >= 0 and bool(((sh.waits_on == line) & (sh.spinning == SPINS) & (sh.state == RUNNABLE)).any())
        sh.silent_read[me] = int(read)
        sh.spinning[me] = 0 if read else SPINS
        sh.poll_epoch[me] = sh.u[EPOCH]
        sh.waits_on[me] = waiter.addr // LINE_BYTES if waiter.addr else -1
        self._record(me, "spin " + waiter.op, waiter.addr, int(waiter.seen or 0), waiter.where)
        self.at_op, self.at_addr = "spin", waiter.addr
        self._switch(me, self._next(me))

    def poll(self, key):
        me = self._my_slot()
        sh = self.sh
        sh.spinning[me] = POLLS
        sh.poll_epoch[me] = sh.u[EPOCH]
        sh.polled_at[me] = sh.u[STEPS]
        self._switch(me, self._next(me))

    # ---- torch.distributed point-to-point (sim/host_p2p.py) -----------------------------------
    def p2p_posted(self, kind, src, dst, tag):
        """This host posted a send (kind 0) or receive (1) from src to dst: count it."""
        self.sh.p2p[kind, src, dst, tag % P2P_TAGS] += 1
        self.wrote()                    # a partner spinning for it looks again

    def p2p_wait(self, what, where, kind, src, dst, tag, seq):
        """Pass the baton until the partner has posted the seq-th matching call: gloo's wait
        then completes by itself, so the baton is never held in a blocking gloo call."""
        from ..runtime import Waiter
        sh = self.sh
        other, peer = (1, dst) if kind == 0 else (0, src)
        count = sh.p2p[other, src, dst, tag % P2P_TAGS:tag % P2P_TAGS + 1]
        w = None
        while int(count[0]) < seq:
            if sh.state[sh.slot_of(peer, -1)] == DONE:
                from ..host_p2p import partner_gone
                raise partner_gone(what, where, kind, peer)
            if w is None:
                w = Waiter(what, 0, seq, where, f"rank {peer}")
            w.rounds += 1
            self.spin(w)

    def digest(self) -> str:
        return self.sh.digest()

    def run_kernel(self, rt, launch, body):
        """One task per physical core (sim/device.py); a core that finishes its program takes
        the next undispatched one (a new task for the strategy), in order."""
        if launch.ncores > self.sh.per_rank - 1:
            raise TritonDistError(f"this launch runs {launch.ncores} cores per rank but the schedule was "
                                  f"started with {self.sh.per_rank - 1}: set TRITON_DIST_SIM_DEVICE / "
                                  f"TRITON_DIST_SIM_CORES before triton_dist.launch, not inside a rank")
        sh = self.sh
        host = self.host_slot
        errors = []
        slots = [sh.slot_of(self.rank, p) for p in range(launch.ncores)]
        for s in slots:
            sh.state[s] = RUNNABLE
            sh.spinning[s] = 0
            sh.last_line[s] = sh.waits_on[s] = -1
            if sh.silent_line[s] >= 0:      # left by a core that failed while it spun
                self._set_silent(s, -1)
            self.on_new_task(s)
        sh.live_cores[host] = len(slots)
        sh.state[host] = BLOCKED

        def fail(c, e, s):
            errors.append((c, e))
            rt.abort.set()
            self._abort_local([x for x in slots if x != s], host)

        cpu = affinity.kernel_cpu(len(slots))     # warm hand-offs between them (sim/affinity.py)

        def run(phys, s):
            self._local.slot = s
            affinity.pin(cpu)
            c = None
            try:
                self._acquire(s)
                while True:
                    c = launch.next(phys)
                    if c is None:
                        break
                    body(c)
                    if launch.pending():       # the core takes the next program: a new task
                        sh.u[EPOCH] += 1       # (its end wrote its cache back)
                        sh.spinning[s] = 0
                        self.on_new_task(s)
                        self._switch(s, self._next(s))
            except SystemExit:
                return
            except BaseException as e:  # noqa: BLE001
                fail(c, e, s)
                return
            finally:
                self._local.slot = None
            if sh.silent_line[s] >= 0:
                self._set_silent(s, -1)
            sh.state[s] = DONE
            sh.u[EPOCH] += 1
            sh.live_cores[host] -= 1
            if sh.live_cores[host] == 0:
                sh.state[host] = RUNNABLE
            if self.aborting:
                return
            try:
                self._switch(s, self._next(s), wait=False)
            except DeadlockError as e:
                fail(c, e, s)

        threads = [threading.Thread(target=run, args=(p, s), daemon=True, name=f"core{p}")
                   for p, s in enumerate(slots)]
        for t in threads:
            t.start()
        self._switch(host, self._next(host))
        for t in threads:
            t.join()
        for s in slots:
            sh.state[s] = FREE
        if self.aborting:
            self.aborting = False
            sh.state[host] = RUNNABLE
        return errors

    # ---- host collectives --------------------------------------------------------------------
    def _collective_enter(self, me, first=False, what="collective"):
        sh = self.sh
        gone = [r for r in range(sh.world_size) if sh.state[sh.slot_of(r, -1)] == DONE]
        if gone:      # a peer returned from its host code: this collective can never complete
            from ..host_collectives import peer_gone
            raise peer_gone(what, gone)
        with sh.lock:
            sh.state[me] = COLLECTIVE
            sh.i[ARRIVED] += 1
            everyone = int(sh.i[ARRIVED]) == sh.world_size
            if everyone:
                if first:   # every host joins: give them their strategy state in rank order
                    for r in range(sh.world_size):
                        self.on_new_task(sh.slot_of(r, -1))
                sh.i[ARRIVED] = 0
                sh.i[LEAVING] = sh.world_size
                sh.i[CURRENT] = -1          # the baton is parked
        if everyone:
            for r in range(sh.world_size):
                s = sh.slot_of(r, -1)
                if s != me:
                    sh.sems[s].release()
            return
        if first:
            self._acquire(me)
        else:
            self._switch(me, self._next(me))
            gone = [r for r in range(sh.world_size) if sh.state[sh.slot_of(r, -1)] == DONE]
            if gone:  # woken by finish(): a peer returned instead of joining
                from ..host_collectives import peer_gone
                raise peer_gone(what, gone)

    def _collective_leave(self, me):
        sh = self.sh
        with sh.lock:
            sh.state[me] = RUNNABLE
            sh.i[LEAVING] -= 1
            last = int(sh.i[LEAVING]) == 0
        if last:
            # which rank leaves last is timing, not schedule: decide as if nobody were running
            self._switch(me, self._next(-1))
        else:
            self._acquire(me)

    @contextlib.contextmanager
    def host_call(self, what):
        me = self.host_slot
        self._record(me, "host " + what)
        self._collective_enter(me, what=what)
        try:
            yield
        finally:
            self._collective_leave(me)

    def finish(self):
        """The rank's host code is done: leave the schedule and pass the baton on."""
        sh = self.sh
        me = self.host_slot
        sh.state[me] = DONE
        sh.u[EPOCH] += 1
        if (sh.state == RUNNABLE).any():
            self._switch(me, self._next(me), wait=False)
            return
        # Nothing can run: a host waiting in a collective would wait forever for this one;
        # hand it the baton so it reports the collective this rank did not join.
        hosts = [sh.slot_of(r, -1) for r in range(sh.world_size)]
        stuck = [s for s in hosts if sh.state[s] == COLLECTIVE]
        if stuck:
            self._switch(me, stuck[0], wait=False)
