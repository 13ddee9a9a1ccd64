"""What a prediction says: per launch the time per rank and per core, the busiest pipe,
the time spent waiting and the critical path; a table; a Perfetto trace on the predicted clock."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .model import PIPES

# a core's tracks in a trace: its programs, then one per pipe (PIPES, and "sync" for signals,
# waits, fences and barriers)
_PIPE_TRACKS = PIPES + ("sync",)
TRACKS_PER_CORE = 1 + len(_PIPE_TRACKS)

_NAMES = {"L": "load", "S": "store", "D": "dot", "P": "putmem/getmem", "R": "signal", "W": "wait",
          "A": "atomic", "Q": "quiet/fence", "CA": "core barrier", "CD": "core barrier"}


@dataclass
class LaunchPrediction:
    index: int
    kernel: str
    us: float                                   # the launch, from its start to its last program's end
    rank_us: dict                               # rank -> us
    core_us: dict                               # (rank, physical core) -> busy-until us
    busiest_pipe: str
    pipe_share: dict                            # pipe -> share of (cores x time) it was busy
    wait_us: float                              # summed over programs: time blocked in waits
    critical_path: list = field(default_factory=list)   # strings, first segment first
    programs: int = 0                           # per rank (the grid)
    cores: int = 0
    unresolved: int = 0


@dataclass
class Prediction:
    """The predicted times of one run on `device` (LaunchResult.prediction)."""
    device: str
    launches: list
    host_per_call_us: float
    timelines: list = field(default_factory=list, repr=False)

    @property
    def total_us(self) -> float:
        """All launches one after another, each paying the device's launch cost."""
        return sum(x.us for x in self.launches)

    def back_to_back_us(self, launches_per_call: int = 1) -> float:
        """Per call of a repeated op of `launches_per_call` launches: the device time, or the
        host's cost of a call where that is larger (calls are issued faster than they run)."""
        calls = max(1, len(self.launches) // max(1, launches_per_call))
        return max(self.host_per_call_us, self.total_us / calls)

    def table(self) -> str:
        lines = [f"predicted on {self.device} (no device ran this; see docs/prediction.md)",
                 "| # | kernel | programs / cores | predicted us | per rank us | busiest pipe | waiting us |",
                 "| ---: | --- | ---: | ---: | --- | --- | ---: |"]
        for x in self.launches:
            ranks = " ".join(f"{v:.1f}" for _, v in sorted(x.rank_us.items()))
            share = x.pipe_share.get(x.busiest_pipe, 0.0)
            lines.append(f"| {x.index} | {x.kernel} | {x.programs} / {x.cores} | {x.us:.1f} | {ranks} | "
                         f"{x.busiest_pipe} ({share:.0%}) | {x.wait_us:.1f} |")
        lines.append(f"total {self.total_us:.1f} us over {len(self.launches)} launch(es)")
        return "\n".join(lines)

    def write_trace(self, path: str) -> int:
        """A Chrome/Perfetto trace whose clock is the predicted time (us): one track per rank and core."""
        events = []
        offset = 0.0
        named = set()

        def track(r, phys, pipe=None):
            # a core's pipes run at once, so their ops overlap in time: one track per pipe keeps
            # each track's slices nested (ops of one pipe follow each other), the program's
            # slice on the core's own track
            tid = (phys + 1) * TRACKS_PER_CORE + (0 if pipe is None else 1 + _PIPE_TRACKS.index(pipe))
            if (r, tid) not in named:
                named.add((r, tid))
                events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                               "args": {"name": f"core {phys}" + ("" if pipe is None else f" {pipe}")}})
                events.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid,
                               "args": {"sort_index": tid}})
            return tid

        for tl, lp in zip(self.timelines, self.launches):
            for r, progs in tl.progs.items():
                if (r, -1) not in named:
                    named.add((r, -1))
                    events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
                for p in progs:
                    events.append({"ph": "X", "name": f"{lp.kernel} program {p.idx}", "cat": "program", "pid": r,
                                   "tid": track(r, p.phys), "ts": offset + p.start * 1e6,
                                   "dur": (p.end - p.start) * 1e6})
                    for k, s, e, pipe in p.spans:
                        if e > s or k in ("R", "W"):
                            events.append({"ph": "X", "name": _NAMES.get(k, k), "cat": "op", "pid": r,
                                           "tid": track(r, p.phys, pipe), "ts": offset + s * 1e6,
                                           "dur": max(0.0, (e - s) * 1e6)})
            offset += lp.us
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns",
                       "otherData": {"clock": f"predicted microseconds on {self.device}"}}, f)
        return len(events)


def summarize(tl) -> LaunchPrediction:
    """A LaunchPrediction from a replayed LaunchTimeline."""
    rank_us, core_us, busy = {}, {}, dict.fromkeys(PIPES, 0.0)
    wait = 0.0
    last = None
    nprog = 0
    for r, progs in tl.progs.items():
        end = tl.prof.launch_device
        for p in progs:
            nprog += 1
            end = max(end, p.end)
            core_us[(r, p.phys)] = max(core_us.get((r, p.phys), 0.0), p.end * 1e6)
            for k in PIPES:
                busy[k] += p.busy[k]
            wait += p.wait
            if last is None or p.end > last.end:
                last = p
        rank_us[r] = end * 1e6
    us = max(rank_us.values()) if rank_us else 0.0
    ncores = sum(min(tl.ncores, len(ps)) for ps in tl.progs.values())
    span = max(us * 1e-6 - tl.prof.launch_device, 1e-12)
    share = {k: v / (ncores * span) for k, v in busy.items()} if ncores else {}
    busiest = max(share, key=share.get) if share and max(share.values()) > 0 else "none"
    return LaunchPrediction(tl.index, tl.kernel or "?", us, rank_us, core_us, busiest, share, wait * 1e6,
                            critical_path(tl, last), max(tl.grid.values(), default=0), tl.ncores, tl.unresolved)


def critical_path(tl, last, most=12) -> list:
    """Walk back from the program that ends last: along its own ops, across a wait to the
    release that ended it, and from a program's start to the program before it on its core."""
    if last is None:
        return []
    segs = []
    p, j = last, len(last.spans) - 1
    by_idx = {(r, q.idx): q for r, ps in tl.progs.items() for q in ps}
    seen = 0
    while p is not None and seen < 10000:
        seen += 1
        hi = p.end if j == len(p.spans) - 1 else p.spans[j][2]
        jump = None
        kinds = {}
        k = j
        while k >= 0:
            kind, s, e, _pipe = p.spans[k]
            if k in p.causes:            # a wait that ended when a release was seen: follow it
                jump = p.causes[k]
                break
            kinds[kind] = kinds.get(kind, 0.0) + (e - s)
            k -= 1
        lo = p.spans[k][2] if k >= 0 else p.start
        top = max(kinds, key=kinds.get) if kinds else "idle"
        segs.append(f"rank {p.rank} program {p.idx} (core {p.phys}): {lo * 1e6:.1f}-{hi * 1e6:.1f} us, "
                    f"mostly {_NAMES.get(top, top)}" + (", after waiting for the release before" if jump else ""))
        if jump is not None:
            r, idx, opj = jump
            p = by_idx.get((r, idx))
            j = _span_of(p, opj) if p is not None else -1
            continue
        prev = [q for q in tl.phys_last.get((p.rank, p.phys), []) if q.end <= p.start + 1e-15 and q is not p]
        p = max(prev, key=lambda q: q.end) if prev and p.start > tl.prof.launch_device else None
        j = len(p.spans) - 1 if p is not None else -1
    segs.reverse()
    if len(segs) > most:
        segs = segs[:most // 2] + [f"... {len(segs) - most} more segments ..."] + segs[-most // 2:]
    return segs


def _span_of(p, op_index):
    """spans are appended once per processed op, in op order: the index is the op's."""
    return min(op_index, len(p.spans) - 1)
