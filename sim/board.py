"""The status board: one record per task (a rank's host code, or one core of its kernel).

It lives in memory shared with the launcher, so when the ranks stop making progress the
launcher can say exactly where each one is stuck without asking them: the primitive, the
kernel line, the address and the value awaited versus seen.  A wait updates its record
when it starts and whenever the value it sees changes, never on every spin round.

Slots are physical cores (sim/device.py), not programs: a rank has one record per core of
the device profile plus one for its host code, and a core's record names the program it
runs.  At most that many programs run at once, so no program ever shares another's record
(issue 14 item 1: 512 fixed slots indexed by program % 512 used to alias).  The host
record of a rank in a kernel also says how many programs the grid has and how many have
been dispatched, so a kernel whose running programs wait for one that cannot start (every
core busy) is reported as exactly that.
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np

IDLE, RUNNING, WAITING, HOST_COLLECTIVE, IN_KERNEL, DONE = range(6)
# What a waiting record awaits, so the watchdog can re-read the slot from the heap and tell
# whether the wait is already over (its task just has not run since): NONE where memory
# cannot tell (a local core barrier, a spin on a cached line), CHANGES for a poll (any value
# but `seen`), EQ_OR_NEXT for the barrier's +1 rule; the others compare with `awaited`.
COND_NONE, COND_EQ, COND_NE, COND_GT, COND_GE, COND_LT, COND_LE, COND_EQ_OR_NEXT, COND_CHANGES = range(9)
UNKNOWN = -1          # `polled` of a record whose task has not yet looked after a write
STATE_NAMES = {IDLE: "idle", RUNNING: "running", WAITING: "waiting",
               HOST_COLLECTIVE: "in a host collective", IN_KERNEL: "in a kernel", DONE: "done"}
# States in which a task makes no progress by itself.
BLOCKED = (WAITING, HOST_COLLECTIVE, IN_KERNEL, DONE, IDLE)

# prog: on a core, the program (linear index) it runs; on the host record, the grid size.
# ndisp (host record): programs dispatched so far; ncores/kind: the cores the kernel runs on.
# awaited/seen hold any signal value, int64 or uint64: one above 2**63 is stored as its int64
# bit pattern with its bit set in `wide` (AWAITED_WIDE, SEEN_WIDE); value() reads it back.
# cond/nbytes: what a wait awaits (COND_*) in a slot of that many bytes; polled: the board's
# write count when the waiting task last looked and still waited (UNKNOWN: not since it began).
RECORD = np.dtype([
    ("state", "i4"), ("gen", "u4"), ("addr", "u8"), ("awaited", "i8"), ("seen", "i8"),
    ("prog", "i8"), ("ndisp", "i8"), ("ncores", "i4"), ("wide", "u1"), ("cond", "i2"), ("nbytes", "i2"),
    ("polled", "i8"),
    ("op", "S40"), ("where", "S120"), ("target", "S200"), ("kind", "S12"),
])
WIDE = {"awaited": 1, "seen": 2}
# `kind` of a kernel whose blocks each take a whole AI core as several instances: this prefix,
# then the instances per block and "c" when one of them is the cube core's ("AI cores/3c": cube +
# 2 vector, sim/core_split.py; "AI cores/2": the 2 vector sub-cores of a mix kernel naming
# sub_vec_id); prog counts instances
AI_BLOCKS = "AI cores/"
from .grid_limits import LOOPED    # kind prefix: the cores loop over programs (TRITON_ALL_BLOCKS_PARALLEL=1)
# appended to the op of a core spinning on a poll whose only writes count its rounds (sim/spin.py)
COUNTING = ", counting"


def put_value(rec, field: str, v) -> None:
    """Store a signal value in an i8 field: -2**63..2**64-1 (int64 and uint64 signals)."""
    v = int(v)
    bit = WIDE[field]
    if not -(1 << 63) <= v < 1 << 63:
        v %= 1 << 64                 # a uint64 value (beyond it: wrapped, as the slot would)
    if v >= 1 << 63:
        rec[field] = v - (1 << 64)
        rec["wide"] = int(rec["wide"]) | bit
    else:
        rec[field] = v
        rec["wide"] = int(rec["wide"]) & ~bit


def value(rec, field: str) -> int:
    v = int(rec[field])
    return v + (1 << 64) if int(rec["wide"]) & WIDE[field] else v


def probe(keys, addr: int, insert: bool, shift: int) -> int:
    """Open addressing over a shared table of nonzero keys (power-of-two length): the index
    of addr, inserting it if `insert`; -1 when it is absent (not inserting) or the table is
    full.  The status board's neighbours use it: sim/race/slots.py, sim/evidence/board.py."""
    n = len(keys)
    i = ((addr >> 2) * 0x9E3779B97F4A7C15 >> shift) & (n - 1)
    for _ in range(n):
        k = int(keys[i])
        if k == addr:
            return i
        if k == 0:
            if not insert:
                return -1
            keys[i] = addr
            return i
        i = (i + 1) & (n - 1)
    return -1


def cut(text: str, nbytes: int) -> bytes:
    """text as UTF-8 in at most nbytes, never cutting a character in two (a file or kernel
    name in any script: a cut inside a letter would make the report unreadable)."""
    b = text.encode()
    if len(b) <= nbytes:
        return b
    return b[:nbytes].decode("utf-8", "ignore").encode()


def text(field) -> str:
    return bytes(field).decode("utf-8", "replace")


class Board:
    def __init__(self, world_size: int, cores: int | None = None):
        if cores is None:
            from . import device
            cores = device.current().max_cores
        self.world_size = world_size
        self.cores = cores
        self.host = cores           # slot index of a rank's host task
        n = world_size * (cores + 1)
        self._mm = mmap.mmap(-1, RECORD.itemsize * n + 8, flags=mmap.MAP_SHARED)
        self.rec = np.frombuffer(self._mm, dtype=RECORD, count=n).reshape(world_size, cores + 1)
        # how many writes to device memory every rank made so far (the free schedule counts
        # them): a waiting task that looked before the latest one may yet see a change
        # the write count, as a ctypes integer: wrote() runs at every write of every task, and
        # `+= 1` on a ctypes value costs a fraction of a numpy element's round trip
        self._writes = ctypes.c_int64.from_buffer(self._mm, RECORD.itemsize * n)

    def _index(self, core: int) -> int:
        if core < 0:
            return self.host
        if core >= self.cores:      # a bug in the simulator, never a user's grid
            raise IndexError(f"status board: core {core} of {self.cores}")
        return core

    def slot(self, rank: int, core: int):
        return self.rec[rank, self._index(core)]

    def set(self, rank, core, state, op="", where="", target="", addr=0, awaited=0, seen=0, cond=COND_NONE,
            nbytes=0):
        r = self.rec[rank, self._index(core)]
        r["op"] = cut(op, 40)
        r["where"] = cut(where, 120)
        r["target"] = cut(target, 200)
        r["addr"] = addr
        put_value(r, "awaited", awaited)
        put_value(r, "seen", seen)
        r["cond"] = cond
        r["nbytes"] = nbytes
        r["polled"] = UNKNOWN
        r["gen"] += 1
        r["state"] = state

    # -- what waiting tasks have looked at (the free schedule's watchdog judges by it) -------------
    def wrote(self):
        """A task wrote device memory."""
        self._writes.value += 1

    def write_count(self) -> int:
        return self._writes.value

    def polled(self, rank, core, count: int):
        """A waiting task looked again after the board's write count was `count`, and still waits."""
        self.rec[rank, self._index(core)]["polled"] = count

    def set_state(self, rank, core, state):
        r = self.rec[rank, self._index(core)]
        r["gen"] += 1
        r["state"] = state

    def seen(self, rank, core, value):
        put_value(self.rec[rank, self._index(core)], "seen", value)

    def clear_cores(self, rank):
        self.rec[rank, :self.cores]["state"] = IDLE

    # -- programs and cores --------------------------------------------------------------------
    def kernel_begin(self, rank, nprog: int, ncores: int, kind: str):
        h = self.rec[rank, self.host]
        h["prog"], h["ndisp"], h["ncores"], h["kind"] = nprog, 0, ncores, cut(kind, 12)

    def dispatched(self, rank, core: int, prog: int):
        """Program `prog` starts on `core` (in order: it is also the count dispatched - 1)."""
        self.rec[rank, core]["prog"] = prog
        self.rec[rank, self.host]["ndisp"] = prog + 1

    def coresidency(self, rank) -> str | None:
        """The line for a rank whose every running core waits while programs wait to be
        dispatched (they never start on the NPU: each core runs one program at a time)."""
        h = self.rec[rank, self.host]
        nprog, ndisp = int(h["prog"]), int(h["ndisp"])
        if text(h["kind"]).startswith(LOOPED):      # TRITON_ALL_BLOCKS_PARALLEL=1 (sim/grid_limits.py)
            return self._looped_residency(rank, h)
        if int(h["state"]) != IN_KERNEL or ndisp >= nprog:
            return None
        cores = np.nonzero(self.rec[rank, :self.cores]["state"] == WAITING)[0]
        if (self.rec[rank, :self.cores]["state"] == RUNNING).any() or len(cores) == 0:
            return None
        waiting = sorted(int(self.rec[rank, c]["prog"]) for c in cores)
        kind = text(h["kind"])
        note = ""
        if any("sync_block_all" in text(self.rec[rank, c]["target"]) for c in cores):
            from .grid_limits import SYNC_ALL_NOTE as note      # triton-ascend #1738's words and the fix
        if kind.startswith(AI_BLOCKS):
            spec = kind[len(AI_BLOCKS):]
            return _block_residency(int(spec.rstrip("c")), spec.endswith("c"), nprog, ndisp, int(h["ncores"]),
                                    waiting) + note
        later = f"program {ndisp} waits" if ndisp == nprog - 1 else f"programs {ndisp}-{nprog - 1} wait"
        now = f"program {waiting[0]} waits" if len(waiting) == 1 else f"programs {_ranges(waiting)} wait"
        return (f"grid of {nprog} programs on {int(h['ncores'])} {text(h['kind'])} cores: "
                f"{now}; {later} to be dispatched (a core runs one program at a time and takes the next one only "
                f"when its program ends, so on the NPU the running programs wait forever for a "
                f"program that cannot start: launch at most {int(h['ncores'])} programs that wait "
                f"for each other, or make no program wait for a later one)") + note

    def _looped_residency(self, rank, h) -> str | None:
        from .grid_limits import looped_line
        st = self.rec[rank, :self.cores]["state"]
        if int(h["state"]) != IN_KERNEL or (st == RUNNING).any() or not (st == WAITING).any():
            return None
        names = {WAITING: "waiting", DONE: "finished"}
        cores = [(c, int(self.rec[rank, c]["prog"]), names.get(int(st[c]), "")) for c in range(int(h["ncores"]))]
        sync = any("sync_block_all" in text(self.rec[rank, c]["target"]) for c, _, s in cores if s == "waiting")
        return looped_line(int(h["prog"]), int(h["ncores"]), text(h["kind"])[len(LOOPED):], cores, sync)

    def snapshot(self):
        return self.rec[["state", "gen", "seen", "wide"]].copy()

    def condition_holds(self, rank, core, read) -> bool | None:
        """Whether the wait of record (rank, core) is already over by memory: `read(addr, nbytes)`
        gives the slot's value now (None where it cannot be read); None where memory cannot tell."""
        r = self.rec[rank, self._index(core)]
        cond, n = int(r["cond"]), int(r["nbytes"])
        if cond == COND_NONE or n <= 0:
            return None
        v = read(int(r["addr"]), n)
        if v is None:
            return None
        want, seen = int(r["awaited"]), int(r["seen"])
        m = (1 << (8 * n)) - 1                      # equality modulo the slot's width: signed or not
        return {COND_EQ: (v - want) & m == 0, COND_NE: (v - want) & m != 0, COND_GT: v > want,
                COND_GE: v >= want, COND_LT: v < want, COND_LE: v <= want,
                COND_EQ_OR_NEXT: (v - want) & m in (0, 1), COND_CHANGES: (v - seen) & m != 0}.get(cond)

    def report(self, ranks=None) -> str:
        lines = []
        for rank in (range(self.world_size) if ranks is None else ranks):
            host = self.rec[rank, self.host]
            hs = int(host["state"])
            if hs == DONE:
                lines.append(f"rank {rank}: finished")
                continue
            if hs == HOST_COLLECTIVE:
                lines.append(f"rank {rank} host: blocked in {text(host['op'])} "
                             f"at {text(host['where'])}")
                continue
            if hs == RUNNING:
                lines.append(f"rank {rank} host: running host code")
                continue
            cores = np.nonzero(self.rec[rank, :self.cores]["state"] != IDLE)[0]
            waiting = [c for c in cores if self.rec[rank, c]["state"] == WAITING]
            lines.append(f"rank {rank}: in a kernel, {len(waiting)} of {len(cores)} running cores waiting")
            co = self.coresidency(rank)
            if co is not None:
                lines.append(f"  rank {rank}: {co}")
            for c in cores:
                r = self.rec[rank, c]
                st = int(r["state"])
                who = f"rank {rank} core {c}" + (f" (program {int(r['prog'])})" if int(r["prog"]) != c else "")
                op = text(r["op"])
                where, target, seen = text(r["where"]), text(r["target"]), value(r, "seen")
                if st == WAITING and op.startswith("spin on plain loads"):
                    lines.append(
                        f"  {who}: spins on plain scalar loads at {where}: "
                        f"{target} (0x{int(r['addr']):x}) sees {seen} every time "
                        f"(a load through the data cache never sees another core's write without dcci: "
                        f"use dl.wait / signal_wait_until)")
                elif st == WAITING and op.startswith("spin on"):
                    what = "atomics" if "atomic" in op else "loads"
                    writes = "writing only a count of its rounds, which nothing reads" if op.endswith(COUNTING) \
                        else "writing nothing"
                    lines.append(
                        f"  {who}: polls with {what} at {where}: "
                        f"{target} (0x{int(r['addr']):x}) sees {seen} every time, "
                        f"{writes} (it waits for another task to change it)")
                elif st == WAITING:      # address 0: a wait on no memory (a core barrier, a block flag)
                    at = f" (0x{int(r['addr']):x})" if int(r["addr"]) else ""
                    lines.append(
                        f"  {who}: {op} at {where}: "
                        f"{target}{at} awaits {value(r, 'awaited')}, "
                        f"sees {seen}")
                elif st == DONE:
                    lines.append(f"  {who}: finished")
                else:
                    lines.append(f"  {who}: {STATE_NAMES.get(st, st)}")
        return "\n".join(lines)


def _block_residency(per: int, cube: bool, nprog: int, ndisp: int, ncores: int, waiting) -> str:
    """coresidency's line for a kernel whose block takes an AI core whole, as `per` instances
    (cube: its cube core and per - 1 vector cores, else per vector cores): in blocks and AI
    cores, as the NPU counts them."""
    nblocks, ai = nprog // per, max(1, ncores // per)
    first = ndisp // per            # blocks with no instance started yet: first..nblocks-1
    blocks = sorted({p // per for p in waiting})
    later = f"block {first} waits" if first == nblocks - 1 else f"blocks {first}-{nblocks - 1} wait"
    now = f"block {blocks[0]} waits" if len(blocks) == 1 else f"blocks {_ranges(blocks)} wait"
    how = (f"its cube core and {per - 1} vector core{'s' if per > 2 else ''}, as it hands cube<->vector flags"
           if cube else f"its {per} vector cores, as it runs tl.dot and names sub_vec_id")
    return (f"grid of {nblocks} blocks on {ai} AI cores (a block of this kernel takes a whole AI core: {how}): {now}; "
            f"{later} for an AI core (an AI core runs one block at a time and takes the next one only when its "
            f"block ends, so on the NPU the running blocks wait forever for a block that cannot start: launch at "
            f"most {ai} blocks that wait for each other, or make no block wait for a later one)")


def _ranges(xs) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)
