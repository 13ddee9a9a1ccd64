"""The words of a race: what each access was (RaceAccess), where, and the missing edge (Race).

The analysis (analysis.py) builds Race objects from its access records; str(race) is one
line of the report (triton_dist.errors.race_report).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import naming
from .events import (NOUNS, OP_HOST_READ, OP_HOST_WRITE, OP_LOAD, OP_STORE, OPS, READ, SYNC_ADD, SYNC_READ,
                     SYNC_WRITE, WRITE)


@dataclass
class RaceAccess:
    rank: int
    core: int
    op: str            # e.g. "loads", "putmem writes"
    where: str         # kernel line: "file.py:LINE (kernel)"
    in_flight: bool    # done by the core's DMA queue (a put/get not yet completed)

    @property
    def who(self) -> str:
        return f"rank {self.rank} core {self.core}" if self.core >= 0 else f"rank {self.rank} host"


@dataclass
class Race:
    first: RaceAccess      # the earlier of the two in the run that was checked
    second: RaceAccess
    target: str            # symmetric tensor + bytes, e.g. "symm tensor #1 (float32[8]) of rank 1 [0:32]"
    missing: str           # the missing happens-before edge, in words
    count: int = 1         # how many unordered pairs of accesses these two lines gave

    def __str__(self) -> str:
        more = f" ({self.count} unordered pairs of accesses)" if self.count > 1 else ""
        return (f"{self.first.who} {self.first.op} {self.target} at {self.first.where}; "
                f"{self.second.who} {self.second.op} it at {self.second.where}: {self.missing}{more}")



_DTYPE_SIZES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
                "int64": 8, "uint8": 1, "bool": 1, "uint16": 2, "uint32": 4, "uint64": 8}
_LABEL = re.compile(r"\((\w+)\[")


def _describe(logs, lo: int, hi: int, t_ns: int) -> str:
    """The bytes [lo, hi) as every message names them (sim/naming.py): the tensor live at t_ns.
    logs: the analysis's _Logs (analysis.py; not imported: the analysis imports this module)."""
    for b, e, r in logs.heaps:
        if b <= lo < e:
            off, end = lo - b, hi - b
            best = None
            for rec in logs.allocs:
                a_off, nbytes, _, t0, t1 = rec[:5]
                if a_off <= off < a_off + nbytes and t0 <= t_ns and (t1 is None or t_ns < t1):
                    best = rec
            if best is None:
                for rec in logs.allocs:
                    if rec[0] <= off < rec[0] + rec[1]:
                        best = rec
            if best is not None:
                a_off, _, label, _, _, itemsize, origin = best
                if not itemsize:
                    m = _LABEL.search(label)
                    itemsize = _DTYPE_SIZES.get(m.group(1), 0) if m else 0
                return naming.element(label, itemsize, r, off - a_off, max(end - a_off, off - a_off + 1),
                                      origin=origin)
            if off < logs.reserved:
                return f"device-library state of rank {r} + {off}"
            return f"the symmetric heap of rank {r} + {off} (bytes [{off}:{end}])"
    return f"0x{lo:x}..0x{hi:x}"


def _access(logs, r) -> RaceAccess:
    return RaceAccess(rank=r[9], core=r[10], op=OPS[r[5]], where=logs.lines[r[6]], in_flight=r[11])


def _missing(logs, x, y, C, comp) -> str:
    """Why x (the earlier access) is not ordered before y, in words."""
    ax, ay = _access(logs, x), _access(logs, y)
    kx, ky = x[4], y[4]
    # (tid, epoch, ver, fullver, kind, op, line, runs, t, rank, core, stream, issue_epoch, own)
    dma_x = x[11] and x[5] == OP_STORE          # a store in flight (sim/dma.py)
    dma_y = y[11] and y[5] == OP_STORE
    host_x, host_y = x[5] in (OP_HOST_READ, OP_HOST_WRITE), y[5] in (OP_HOST_READ, OP_HOST_WRITE)
    if host_x or host_y:
        return _missing_host(ax, ay, x, y, host_x, host_y)
    # first the edge that is really missing: when y's full clock (every acquire, the waits'
    # included) already orders x -- the store was fenced or the put quieted before the signal
    # -- only the load's own clock lacks it: the wait's token, i.e. consume_token
    if ky == READ and y[5] == OP_LOAD and x[1] <= C[y[3], x[0]]:
        return (f"{ay.who} loads it after a dl.wait that orders the write, but the load's pointer did "
                f"not go through dl.consume_token(ptr, token) of that wait, so the load may be "
                f"issued before the wait completes")
    if dma_x and x[12] <= C[y[3], x[13]]:
        sig = _signal_after(logs, x, y, C)
        at = f"the signal at {sig}" if sig else "the signal (or release) that orders it"
        return (f"{ax.who}'s store at {ax.where} is a DMA that had not completed when {at} was set: "
                f"put libshmem_device.fence() (or quiet(), or tl.debug_barrier()) between them (only "
                f"fence/quiet, tl.debug_barrier(), a barrier, putmem_signal, a release or acq_rel tl.atomic_* "
                f"under the default memory model, and the end of the kernel complete a store)")
    if x[11] and not dma_x:
        if ay.rank == ax.rank and ay.core == ax.core and (not y[11] or dma_y):
            return (f"{ay.who} {'reads' if ky == READ else 'writes'} it while its own {NOUNS[x[5]]} may "
                    f"still be in flight: call quiet (or fence) in between")
        if x[12] <= C[y[3], x[13]]:
            return (f"the {NOUNS[x[5]]} was issued before the signal or barrier that orders {ay.who}, "
                    f"but it was not complete then: without quiet/fence between the put and the signal "
                    f"the data may land after it (putmem_signal orders its own data before its signal)")
        return (f"{ay.who} did not wait on a signal set after that {NOUNS[x[5]]} completed (quiet, "
                f"putmem_signal) nor meet {ax.who} at a barrier in between")
    if kx in (SYNC_WRITE, SYNC_ADD) and ky in (READ, WRITE):
        what = "reads the signal with a plain load" if ky == READ else "writes the signal with a plain store"
        return (f"{ay.who} {what}, which is not ordered after {ax.who}'s signal op: observe a signal "
                f"with dl.wait or signal_wait_until")
    if ky in (SYNC_WRITE, SYNC_ADD, SYNC_READ) and kx in (READ, WRITE):
        return (f"{ax.who}'s plain {NOUNS[x[5]]} of the signal is not ordered with {ay.who}'s "
                f"{NOUNS[y[5]]} on it: observe a signal with dl.wait or signal_wait_until, and reset "
                f"it only after something orders the reset with every signal op on it")
    if ax.rank == ay.rank and (not y[11] or dma_y):
        return (f"cores {min(ax.core, ay.core)} and {max(ax.core, ay.core)} of rank {ax.rank} do not "
                f"synchronise between these "
                f"accesses (no barrier_all, signal or sync_block_set/wait from one to the other)")
    return (f"{ay.who} did not wait on a signal set after that {NOUNS[x[5]]} "
            f"(nor meet {ax.who} at a barrier in between)")


def _missing_host(ax, ay, x, y, host_x, host_y) -> str:
    """Why a host access (torch on a symmetric tensor) and another access are unordered."""
    verb = {OP_HOST_READ: "reads", OP_HOST_WRITE: "writes"}
    if host_x and host_y:
        return (f"the host code of ranks {ax.rank} and {ay.rank} touch it with no host collective between "
                f"({ax.who} {verb[x[5]]} it, then {ay.who} {verb[y[5]]} it): call triton_dist.barrier() in between")
    if host_y:
        return (f"the host code of rank {ay.rank} {verb[y[5]]} it (torch) with nothing ordering {ax.who}'s {NOUNS[x[5]]} "
                f"before: a kernel's end orders only what its own cores did and waited for, and none of "
                f"them waited on a signal set after that {NOUNS[x[5]]}; wait for that signal in the kernel "
                f"(a dl.wait covering every slot a peer signals) or call triton_dist.barrier() before the host "
                f"touches it")
    # the host's access came first in time; the peer's kernel may have been launched after it
    # or before it (then this rank's kernel ended without waiting for the peer's signal): which
    # one depends on the timing, so both fixes are named
    return (f"the host code of rank {ax.rank} {verb[x[5]]} it (torch) while {ay.who}'s {NOUNS[y[5]]} may still run: nothing "
            f"orders the two (a kernel launched after the host access orders only its own rank's cores, and a "
            f"kernel's end only what its own cores did and waited for); call triton_dist.barrier() between the "
            f"host access and the peer's kernel, or, if the peer's kernel runs before the host access, wait in "
            f"this rank's kernel for the signal the peer sets after its {NOUNS[y[5]]} (a dl.wait covering every "
            f"slot a peer signals)")


def _signal_after(logs, x, y, C) -> str:
    """The kernel line of the first signal the storing core set after the DMA store x was
    issued that y is ordered after (analysis.py keeps each core's releases), or ''."""
    own, issue, seen = x[13], x[12], C[y[3], x[13]]
    for epoch, line in getattr(logs, "releases", {}).get(own, ()):
        if issue <= epoch <= seen and line >= 0:
            return logs.lines[line]
    return ""
