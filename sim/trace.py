"""Chrome / Perfetto trace of a run: one track per rank and core.

Each rank appends JSON events to its own file as they happen (so a rank that is killed
still leaves what it did); the launcher merges the files into one trace.  Under a
deterministic schedule the clock is the global step count, so two replays of a seed give
the same trace; in the free schedule it is microseconds since the launch started.  Besides the spans and
instants the simulator writes itself (kernels, waits, barriers, signals, collectives), the
tracer subscribes to the rank's observers: every store issued as a DMA and every store in
flight that lands is an instant (so a signal that overtook a store shows as the store
landing after it), and each signal starts a flow arrow that ends where a wait observed it
(the signal's id is the device watch's, sim/evidence/board.py, shared by the ranks).
"""
from __future__ import annotations

import json
import os
import time

from . import context


class Tracer:
    def __init__(self, directory: str, rank: int, t0: float, shared=None, evidence=None):
        self.rank = rank
        self.evidence = evidence
        self.t0 = t0
        self.shared = shared
        self.f = open(os.path.join(directory, f"rank{rank}.jsonl"), "a", buffering=1)

    def _ts(self):
        if self.shared is not None:
            return self.shared.steps()
        return (time.time() - self.t0) * 1e6

    def emit(self, ph, name, core=-1, args=None, cat="sim", **fields):
        ev = {"ph": ph, "name": name, "cat": cat, "pid": self.rank, "tid": core + 1, "ts": self._ts(), **fields}
        if ph == "i":
            ev["s"] = "t"
        if args:
            ev["args"] = args
        self.f.write(json.dumps(ev) + "\n")

    def begin(self, name, core=-1, **args):
        self.emit("B", name, core, args)

    def end(self, name, core=-1, **args):
        self.emit("E", name, core, args)

    def instant(self, name, core=-1, **args):
        self.emit("i", name, core, args)

    # -- a subscriber of the rank's observers (sim/observers.py) --------------------------------
    def access(self, a):
        """A kernel's store issued as a DMA (sim/dma.py): an instant; it lands later (landed)."""
        if a.route != "dma" or a.core is None:
            return
        v = a.values()
        self.instant("scalar store issued" if a.scalar else "store issued", a.core.core,
                     target=a.rt.space.describe(a.lo), bytes=a.hi - a.lo, value=_value(v))

    def signal(self, addr, size, add, value):
        """A signal SET/ADD: the start of a flow arrow to the wait that observes it."""
        r = self.evidence.signal(addr) if self.evidence is not None else None
        if r is not None:
            c = context.core()
            self.emit("s", "signal", c.core if c is not None else -1, cat="flow", id=int(r["id"]))

    def observed(self, addrs, values, size, token=False):
        """A wait saw its values: the arrow from the last signal on each slot ends here."""
        if self.evidence is None:
            return None
        c = context.core()
        for addr in addrs:
            r = self.evidence.signal(int(addr))
            if r is not None:
                self.emit("f", "signal", c.core if c is not None else -1, cat="flow", id=int(r["id"]), bp="e")
        return None

    def landed(self, a):
        """A kernel's store in flight reached memory (sim/dma.py): an instant on its program's
        track, naming the bytes and the line that issued it."""
        if a.origin != "kernel" or a.core is None:
            return
        self.instant("scalar store lands" if a.scalar else "store lands", a.core.core,
                     target=a.rt.space.describe(a.lo), bytes=a.hi - a.lo, issued_at=a.where(),
                     value=_value(a.values()))


def _value(v):
    """The first active lane's value, as JSON takes it."""
    if not v.size:
        return None
    x = v[0].item()
    return x if isinstance(x, (int, float, bool)) else str(x)


def merge(directory: str, out_path: str, world_size: int, unit_is_steps: bool) -> int:
    """Write one Chrome trace JSON from the ranks' files; returns the number of events."""
    events = []
    open_spans = {}                  # (pid, tid) -> names of spans begun and not yet ended
    last_ts = 0
    for r in range(world_size):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": 0, "args": {"name": "host"}})
        path = os.path.join(directory, f"rank{r}.jsonl")
        if not os.path.exists(path):
            continue
        cores = set()
        with open(path) as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue            # a line cut short by a kill
                events.append(ev)
                last_ts = max(last_ts, ev.get("ts", 0))
                if ev.get("tid", 0) > 0:
                    cores.add(ev["tid"])
                stack = open_spans.setdefault((ev["pid"], ev["tid"]), [])
                if ev["ph"] == "B":
                    stack.append(ev["name"])
                elif ev["ph"] == "E" and stack:
                    stack.pop()
        for tid in sorted(cores):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                           "args": {"name": f"core {tid - 1}"}})
    # a run that failed leaves spans open (the ranks were stopped inside them): close them
    # where the trace ends, marked, so every viewer shows them
    for (pid, tid), stack in open_spans.items():
        for name in reversed(stack):
            events.append({"ph": "E", "name": name, "cat": "sim", "pid": pid, "tid": tid, "ts": last_ts,
                           "args": {"unfinished": True}})
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"clock": "scheduler steps" if unit_is_steps else "microseconds"}}
    with open(out_path, "w") as f:
        json.dump(doc, f)
    return len(events)
