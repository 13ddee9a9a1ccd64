"""Deterministic schedules: exactly one task runs at a time, across all ranks.

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
again before that can only see the same value (this is also what lets PCT's priorities
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
import threading

import multiprocess as mp
import numpy as np

from triton_dist.errors import DeadlockError, TritonDistError

MAX_CORES = 64               # cores per rank per launch under a deterministic schedule
EVENTS = 4096                # size of the shared event ring
FREE, RUNNABLE, BLOCKED, DONE, COLLECTIVE = range(5)
MASK64 = (1 << 64) - 1

HEADER = np.dtype([
    ("current", "i8"), ("rng", "u8"), ("steps", "u8"), ("digest", "u8"), ("epoch", "u8"),
    ("arrived", "i8"), ("leaving", "i8"), ("switches", "u8"), ("min_prio", "i8"), ("seed", "u8"),
])
SLOT = np.dtype([("state", "i4"), ("spinning", "i4"), ("poll_epoch", "u8"), ("prio", "i8"),
                 ("live_cores", "i4"), ("host", "i4")])
EVENT = np.dtype([("step", "u8"), ("rank", "i4"), ("core", "i4"), ("op", "S28"), ("where", "S64"),
                  ("heap", "i4"), ("addr", "u8"), ("value", "i8")])


def splitmix64(state: int):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class SharedSchedule:
    """Created by the launcher before it forks the ranks: state, semaphores and a lock."""

    def __init__(self, world_size: int, seed: int):
        self.world_size = world_size
        self.per_rank = MAX_CORES + 1
        n = world_size * self.per_rank
        size = HEADER.itemsize + SLOT.itemsize * n + EVENT.itemsize * EVENTS
        self._mm = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        self.head = np.frombuffer(self._mm, dtype=HEADER, count=1)[0:1]
        off = HEADER.itemsize
        self.slots = np.frombuffer(self._mm, dtype=SLOT, count=n, offset=off)
        off += SLOT.itemsize * n
        self.events = np.frombuffer(self._mm, dtype=EVENT, count=EVENTS, offset=off)
        self.sems = [mp.get_context("fork").Semaphore(0) for _ in range(n)]
        self.lock = mp.get_context("fork").Lock()
        h = self.head
        h["current"] = -1
        h["rng"] = seed & MASK64
        h["seed"] = seed & MASK64
        h["digest"] = 0xCBF29CE484222325
        self.slots["host"] = [(i % self.per_rank) == 0 for i in range(n)]

    def slot_of(self, rank: int, core: int) -> int:
        return rank * self.per_rank + (0 if core < 0 else 1 + core)

    def who(self, slot: int):
        rank, k = divmod(slot, self.per_rank)
        return rank, k - 1

    def last_events(self, n: int = 40):
        steps = int(self.head["steps"][0])
        ev = self.events
        rows = sorted((e for e in ev if e["op"]), key=lambda e: int(e["step"]))[-n:]
        out = []
        for e in rows:
            core = int(e["core"])
            who = f"rank {int(e['rank'])} " + ("host" if core < 0 else f"core {core}")
            heap = int(e["heap"])
            addr = f"heap of rank {heap} + {int(e['addr'])}" if heap >= 0 else \
                (f"0x{int(e['addr']):x}" if int(e["addr"]) else "-")
            out.append(f"  step {int(e['step']):>7}  {who:14s} {e['op'].decode():26s} "
                       f"{e['where'].decode():44s} {addr} = {int(e['value'])}")
        return f"last {len(out)} of {steps} steps:\n" + "\n".join(out)


class DeterministicScheduler:
    """Baton passing over SharedSchedule; subclasses choose the next task (pick)."""
    name = "?"

    def __init__(self, shared: SharedSchedule, rank: int, board=None):
        self.sh = shared
        self.rank = rank
        self.board = board
        self._local = threading.local()
        self.aborting = False       # a core of this rank failed: unblock and stop the others

    # ---- strategy hooks ---------------------------------------------------------------
    def on_new_task(self, slot: int) -> None:
        pass

    def on_spin(self, slot: int) -> None:
        pass

    def choose(self, candidates: np.ndarray, me: int) -> int:
        raise NotImplementedError

    # ---- shared helpers ------------------------------------------------------------------
    def rand(self) -> int:
        h = self.sh.head
        state, out = splitmix64(int(h["rng"][0]))
        h["rng"] = state
        return out

    def _my_slot(self) -> int:
        s = getattr(self._local, "slot", None)
        return self.sh.slot_of(self.rank, -1) if s is None else s

    def _record(self, slot, op, addr=0, value=0, where=None):
        from sim import context
        if where is None:
            where = context.kernel_line(3) if context.core() is not None else ""
        heap = -1
        if addr:
            b = context.runtime().space.find(addr)
            if b is not None and b.heap_rank is not None:   # heap offsets replay exactly; addresses don't
                heap, addr = b.heap_rank, addr - b.start
        h = self.sh.head
        step = int(h["steps"][0])
        e = self.sh.events[step % EVENTS]
        rank, core = self.sh.who(slot)
        e["step"], e["rank"], e["core"] = step, rank, core
        e["op"] = op.encode()[:28]
        e["where"] = where.encode()[:64]
        e["heap"], e["addr"], e["value"] = heap, addr, value

    def _deadlock(self, why):
        from sim import board as B  # noqa: F401
        report = self.board.report() if self.board is not None else ""
        raise DeadlockError(f"{why} (schedule={self.name}, seed={int(self.sh.head['seed'][0])})",
                            report + "\n" + self.sh.last_events())

    def _next(self, me: int) -> int:
        sl = self.sh.slots
        cand = np.flatnonzero(sl["state"] == RUNNABLE)
        if cand.size == 0:
            self._deadlock("no task can run: every unfinished task is blocked")
        # A task spinning in a wait is blocked until something is written somewhere: polling
        # again before that can only see the same value.
        epoch = self.sh.head["epoch"][0]
        stuck = (sl["spinning"][cand] != 0) & (sl["poll_epoch"][cand] == epoch)
        if stuck.all():
            self._deadlock("every runnable task is spinning and nothing has been written since each "
                           "last looked: none of them can ever see a change (deadlock or livelock)")
        cand = cand[~stuck]
        nxt = int(self.choose(cand, me))
        h = self.sh.head
        h["steps"] += 1
        h["digest"] = ((int(h["digest"][0]) ^ (nxt + 1)) * 0x100000001B3) & MASK64
        return nxt

    def _switch(self, me: int, nxt: int, wait: bool = True) -> None:
        """Hand the baton to nxt; if wait, block until it comes back to me."""
        if nxt == me:
            return
        self.sh.head["current"] = nxt
        self.sh.head["switches"] += 1
        self.sh.sems[nxt].release()
        if wait:
            self._acquire(me)

    def _acquire(self, me: int) -> None:
        self.sh.sems[me].acquire()
        if self.aborting and not self.sh.slots[me]["host"]:
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
        me = self.sh.slot_of(self.rank, -1)
        self.sh.slots[me]["state"] = RUNNABLE
        self._collective_enter(me, first=True)
        self._collective_leave(me)

    def point(self, op="access", addr=0, value=0):
        me = self._my_slot()
        sl = self.sh.slots[me]
        if sl["spinning"]:
            sl["spinning"] = 0
        if self.sh.slots[me]["host"]:
            self.sh.head["epoch"] += 1          # host code may have written anything
        self._record(me, op, addr, value)
        self._switch(me, self._next(me))

    def wrote(self):
        self.sh.head["epoch"] += 1

    def spin(self, waiter):
        me = self._my_slot()
        sl = self.sh.slots[me]
        sl["spinning"] = 1
        sl["poll_epoch"] = self.sh.head["epoch"][0]
        self.on_spin(me)
        self._record(me, "spin " + waiter.op, waiter.addr, int(waiter.seen or 0), waiter.where)
        self._switch(me, self._next(me))

    def digest(self) -> str:
        return f"{int(self.sh.head['digest'][0]):016x}"

    def run_kernel(self, rt, cores, body):
        if len(cores) > MAX_CORES:
            raise TritonDistError(f"a deterministic schedule runs at most {MAX_CORES} program instances "
                                  f"per rank per launch, this grid has {len(cores)}; use schedule='free'")
        host = self.sh.slot_of(self.rank, -1)
        errors = []
        slots = [self.sh.slot_of(self.rank, c.core) for c in cores]
        for s in slots:
            self.sh.slots[s]["state"] = RUNNABLE
            self.sh.slots[s]["spinning"] = 0
            self.on_new_task(s)
        self.sh.slots[host]["live_cores"] = len(cores)
        self.sh.slots[host]["state"] = BLOCKED

        def run(c, s):
            self._local.slot = s
            try:
                self._acquire(s)
                body(c)
            except SystemExit:
                return
            except BaseException as e:  # noqa: BLE001
                errors.append((c, e))
                rt.abort.set()
                self._abort_local([x for x in slots if x != s], host)
                return
            finally:
                self._local.slot = None
            self.sh.slots[s]["state"] = DONE
            self.sh.head["epoch"] += 1
            hs = self.sh.slots[host]
            hs["live_cores"] -= 1
            if hs["live_cores"] == 0:
                hs["state"] = RUNNABLE
            if self.aborting:
                return
            try:
                self._switch(s, self._next(s), wait=False)
            except DeadlockError as e:
                errors.append((c, e))
                rt.abort.set()
                self._abort_local([x for x in slots if x != s], host)

        threads = [threading.Thread(target=run, args=(c, s), daemon=True, name=f"core{c.core}")
                   for c, s in zip(cores, slots)]
        for t in threads:
            t.start()
        self._switch(host, self._next(host))
        for t in threads:
            t.join()
        for s in slots:
            self.sh.slots[s]["state"] = FREE
        if self.aborting:
            self.aborting = False
            self.sh.slots[host]["state"] = RUNNABLE
        return errors

    # ---- host collectives --------------------------------------------------------------------
    def _collective_enter(self, me, first=False):
        sh = self.sh
        with sh.lock:
            sh.slots[me]["state"] = COLLECTIVE
            sh.head["arrived"] += 1
            everyone = int(sh.head["arrived"][0]) == sh.world_size
            if everyone:
                if first:   # every host joins: give them their strategy state in rank order
                    for r in range(sh.world_size):
                        self.on_new_task(sh.slot_of(r, -1))
                sh.head["arrived"] = 0
                sh.head["leaving"] = sh.world_size
                sh.head["current"] = -1          # the baton is parked
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

    def _collective_leave(self, me):
        sh = self.sh
        with sh.lock:
            sh.slots[me]["state"] = RUNNABLE
            sh.head["leaving"] -= 1
            last = int(sh.head["leaving"][0]) == 0
        if last:
            # which rank leaves last is timing, not schedule: decide as if nobody were running
            self._switch(me, self._next(-1))
        else:
            self._acquire(me)

    @contextlib.contextmanager
    def host_call(self, what):
        me = self.sh.slot_of(self.rank, -1)
        self._record(me, "host " + what)
        self._collective_enter(me)
        try:
            yield
        finally:
            self._collective_leave(me)

    def finish(self):
        """The rank's host code is done: leave the schedule and pass the baton on."""
        me = self.sh.slot_of(self.rank, -1)
        if self.sh.head["current"][0] in (me, -1) or self.sh.slots[me]["state"] == RUNNABLE:
            self.sh.slots[me]["state"] = DONE
            self.sh.head["epoch"] += 1
            cand = np.flatnonzero(self.sh.slots["state"] == RUNNABLE)
            if cand.size:
                self._switch(me, self._next(me), wait=False)
