"""The status board: one record per task (a rank's host code, or one core of its kernel).

It lives in memory shared with the launcher, so when the ranks stop making progress the
launcher can say exactly where each one is stuck without asking them: the primitive, the
kernel line, the address and the value awaited versus seen.  A wait updates its record
when it starts and whenever the value it sees changes, never on every spin round.
"""
from __future__ import annotations

import mmap

import numpy as np

IDLE, RUNNING, WAITING, HOST_COLLECTIVE, IN_KERNEL, DONE = range(6)
STATE_NAMES = {IDLE: "idle", RUNNING: "running", WAITING: "waiting",
               HOST_COLLECTIVE: "in a host collective", IN_KERNEL: "in a kernel", DONE: "done"}
# States in which a task makes no progress by itself.
BLOCKED = (WAITING, HOST_COLLECTIVE, IN_KERNEL, DONE, IDLE)

MAX_CORES = 512
HOST = MAX_CORES  # slot index of the rank's host task

RECORD = np.dtype([
    ("state", "i4"), ("gen", "u4"), ("addr", "u8"), ("awaited", "i8"), ("seen", "i8"),
    ("op", "S40"), ("where", "S120"), ("target", "S80"),
])


class Board:
    def __init__(self, world_size: int, buf=None):
        self.world_size = world_size
        nbytes = RECORD.itemsize * world_size * (MAX_CORES + 1)
        self._mm = buf if buf is not None else mmap.mmap(-1, nbytes, flags=mmap.MAP_SHARED)
        self.rec = np.frombuffer(self._mm, dtype=RECORD, count=world_size * (MAX_CORES + 1)).reshape(
            world_size, MAX_CORES + 1)

    def slot(self, rank: int, core: int):
        return self.rec[rank, HOST if core < 0 else core % MAX_CORES]

    def set(self, rank, core, state, op="", where="", target="", addr=0, awaited=0, seen=0):
        r = self.rec[rank, HOST if core < 0 else core % MAX_CORES]
        r["op"] = op.encode()[:40]
        r["where"] = where.encode()[:120]
        r["target"] = target.encode()[:80]
        r["addr"] = addr
        r["awaited"] = awaited
        r["seen"] = seen
        r["gen"] += 1
        r["state"] = state

    def set_state(self, rank, core, state):
        r = self.rec[rank, HOST if core < 0 else core % MAX_CORES]
        r["gen"] += 1
        r["state"] = state

    def seen(self, rank, core, value):
        self.rec[rank, HOST if core < 0 else core % MAX_CORES]["seen"] = value

    def clear_cores(self, rank):
        self.rec[rank, :MAX_CORES]["state"] = IDLE

    def snapshot(self):
        return self.rec[["state", "gen", "seen"]].copy()

    def report(self, ranks=None) -> str:
        lines = []
        for rank in (range(self.world_size) if ranks is None else ranks):
            host = self.rec[rank, HOST]
            hs = int(host["state"])
            if hs == DONE:
                lines.append(f"rank {rank}: finished")
                continue
            if hs == HOST_COLLECTIVE:
                lines.append(f"rank {rank} host: blocked in {host['op'].decode()} "
                             f"at {host['where'].decode()}")
                continue
            if hs == RUNNING:
                lines.append(f"rank {rank} host: running host code")
                continue
            cores = np.nonzero(self.rec[rank, :MAX_CORES]["state"] != IDLE)[0]
            waiting = [c for c in cores if self.rec[rank, c]["state"] == WAITING]
            lines.append(f"rank {rank}: in a kernel, {len(waiting)} of {len(cores)} running cores waiting")
            for c in cores:
                r = self.rec[rank, c]
                st = int(r["state"])
                if st == WAITING and r["op"].decode().startswith("spin on plain loads"):
                    lines.append(
                        f"  rank {rank} core {c}: spins on plain scalar loads at {r['where'].decode()}: "
                        f"{r['target'].decode()} (0x{int(r['addr']):x}) sees {int(r['seen'])} every time "
                        f"(a load through the data cache never sees another core's write without dcci: "
                        f"use dl.wait / signal_wait_until)")
                elif st == WAITING:
                    lines.append(
                        f"  rank {rank} core {c}: {r['op'].decode()} at {r['where'].decode()}: "
                        f"{r['target'].decode()} (0x{int(r['addr']):x}) awaits {int(r['awaited'])}, "
                        f"sees {int(r['seen'])}")
                elif st == DONE:
                    lines.append(f"  rank {rank} core {c}: finished")
                else:
                    lines.append(f"  rank {rank} core {c}: {STATE_NAMES.get(st, st)}")
        return "\n".join(lines)
