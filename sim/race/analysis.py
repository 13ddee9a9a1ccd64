"""Offline, in the launcher: happens-before over the ranks' logs, and the unordered conflicts.

Vector clocks are computed over the logs' synchronisation (FastTrack epochs: an access X
happens before Y iff epoch(X) <= clock(Y)[task(X)]); every pair of accesses to
overlapping bytes from different tasks with at least one write is checked, and the
unordered ones are reported once per distinct pair of kernel lines (reporting.py).
"""
from __future__ import annotations

import os
import pickle
from collections import defaultdict

import numpy as np

from triton_dist.errors import TritonDistError

from .events import OP_LOAD, OP_STORE, READ, SYNC_ADD, SYNC_WRITE
from .reporting import Race, _access, _describe, _missing

_WRITES = np.array([False, True, True, False, True, True])
_SYNCISH = np.array([False, False, True, True, True, True])   # atomics and signal ops: never race each other


class _Logs:
    def __init__(self, docs):
        self.docs = docs
        self.heaps = docs[0]["heaps"]
        self.reserved = docs[0]["reserved"]
        self.allocs = docs[0]["allocs"]
        self.lines: list = []
        index = {}
        self.line_map = []
        for d in docs:
            m = []
            for name in d["lines"]:
                if name not in index:
                    index[name] = len(self.lines)
                    self.lines.append(name)
                m.append(index[name])
            self.line_map.append(np.array(m, dtype=np.int64))


class _State:
    __slots__ = ("rank", "core", "ev", "pos", "own", "stream", "dstream", "dctr", "vc", "lvc", "ctr", "tokens",
                 "cons", "fver", "lver", "cver", "last_line")

    def __init__(self, rank, core, ev, own, stream, n, dstream=-1):
        self.rank, self.core, self.ev, self.pos = rank, core, ev, 0
        self.own, self.stream = own, stream
        self.dstream, self.dctr = dstream, 0     # the core's DMA stores in flight (sim/dma.py)
        self.last_line = -1                      # line of the signal op just logged (names a release)
        self.vc = np.zeros(n, dtype=np.int64)
        self.vc[own] = 1
        self.lvc = self.vc.copy()
        self.ctr = 0
        self.tokens = {}
        self.cons = {}
        self.fver = self.lver = -1
        self.cver = {}


def analyze(directory: str, world_size: int) -> list:
    """Read every rank's log from directory; return the races, one per distinct pair of lines."""
    docs = []
    for r in range(world_size):
        path = os.path.join(directory, f"rank{r}.pkl")
        if not os.path.exists(path):
            raise TritonDistError(f"race detector: rank {r} left no log (it did not finish)")
        with open(path, "rb") as f:
            docs.append(pickle.load(f))
    return _analyze(_Logs(docs))


def analyze_available(directory: str, world_size: int) -> tuple:
    """A launch that failed: analyse the logs the ranks left, each up to where the rank
    stopped.  Returns (races, ranks that left no log); races is None unless every rank left
    one: a release only a missing log holds would leave accesses it ordered unordered, a
    race the run did not have."""
    docs, missing = [], []
    for r in range(world_size):
        path = os.path.join(directory, f"rank{r}.pkl")
        try:
            with open(path, "rb") as f:
                docs.append(pickle.load(f))
        except (OSError, EOFError, pickle.UnpicklingError):
            missing.append(r)
    if missing:
        return None, missing
    return _analyze(_Logs(docs)), []


def _analyze(logs: _Logs) -> list:
    # components of the vector clocks: every task and every core's DMA queue
    comp = {}
    for d in logs.docs:
        for core in sorted(d["tasks"]):
            comp[(d["rank"], core, False)] = len(comp)
            if core >= 0:
                comp[(d["rank"], core, True)] = len(comp)
                comp[(d["rank"], core, "dma")] = len(comp)
    n = len(comp)
    groups = defaultdict(list)
    states = []
    for d in logs.docs:
        for core, ev in sorted(d["tasks"].items()):
            for e in ev:
                if e[0] == "r" and e[2] is not None:
                    groups[e[2]].append(e[1])
            st = _State(d["rank"], core, ev, comp[(d["rank"], core, False)],
                        comp.get((d["rank"], core, True), -1), n, comp.get((d["rank"], core, "dma"), -1))
            states.append(st)
    rel = {}
    logs.releases = defaultdict(list)    # own component -> [(its epoch at a release, signal line or -1)]
    clocks = []            # clock versions (rows)
    recs = []              # (tid, epoch, ver, fullver, kind, op, line, runs, t, rank, core, stream, issue_epoch, own)

    def full_ver(st):
        if st.fver < 0:
            st.fver = len(clocks)
            clocks.append(st.vc.copy())
        return st.fver

    def load_ver(st, cons):
        if cons >= 0 and cons in st.cons:
            key = cons
            v = st.cver.get(key)
            if v is None:
                v = st.cver[key] = len(clocks)
                clocks.append(np.maximum(st.lvc, st.cons[cons]))
            return v
        if st.lver < 0:
            st.lver = len(clocks)
            clocks.append(st.lvc.copy())
        return st.lver

    def changed(st):
        st.fver = -1
        st.lver = -1
        st.cver = {}

    def tick(st):
        st.vc[st.own] += 1
        st.lvc = st.vc.copy()            # a library call with write effects: loads are ordered too
        changed(st)

    def ready(e):
        if e[0] == "q":
            for d in e[1]:
                if d not in rel:
                    return False
            for g in e[2]:
                for d in groups.get(g, ()):
                    if d not in rel:
                        return False
        elif e[0] == "r":
            for d in e[4]:
                if d not in rel:
                    return False
        return True

    def step(st, e, force=False):
        k = e[0]
        rank_lines = logs.line_map[st.rank]
        if k == "a":
            _, kind, op, line, runs, t, cons = e
            ver = load_ver(st, cons) if kind == READ and op == OP_LOAD else full_ver(st)
            recs.append((st.own, int(st.vc[st.own]), ver, full_ver(st), kind, op, int(rank_lines[line]), runs, t,
                         st.rank, st.core, False, 0, st.own))
            st.last_line = int(rank_lines[line]) if kind in (SYNC_WRITE, SYNC_ADD) else -1
            return
        if k == "d":
            # a store in flight: done by the core's DMA-store stream, issued at the core's epoch now
            _, kind, op, line, runs, t, cons = e[1]
            st.dctr += 1
            fv = full_ver(st)
            recs.append((st.dstream, st.dctr, fv, fv, kind, op, int(rank_lines[line]), runs, t,
                         st.rank, st.core, True, int(st.vc[st.own]), st.own))
        elif k == "p":
            st.ctr += 1
            fv = full_ver(st)
            issue = int(st.vc[st.own])
            for _, kind, op, line, runs, t, cons in e[1]:
                recs.append((st.stream, st.ctr, fv, fv, kind, op, int(rank_lines[line]), runs, t,
                             st.rank, st.core, True, issue, st.own))
            tick(st)
        elif k == "r":
            _, rid, group, carry, chain = e
            snap = st.vc.copy()
            if carry and st.stream >= 0:
                snap[st.stream] = max(snap[st.stream], carry)
            for d in chain:
                if d in rel:
                    np.maximum(snap, rel[d], out=snap)
            rel[rid] = snap
            logs.releases[st.own].append((int(st.vc[st.own]), st.last_line))
            st.last_line = -1
            tick(st)
        elif k == "q":
            _, rids, grps, tok = e
            x = np.zeros(n, dtype=np.int64)
            for d in rids:
                if d in rel:
                    np.maximum(x, rel[d], out=x)
            for g in grps:
                for d in groups.get(g, ()):
                    if d in rel:
                        np.maximum(x, rel[d], out=x)
            np.maximum(st.vc, x, out=st.vc)
            if tok is None:
                st.lvc = st.vc.copy()
            else:
                st.tokens[tok] = x
            changed(st)
        elif k == "Q":
            if st.stream >= 0:
                st.vc[st.stream] = max(st.vc[st.stream], st.ctr)
            if st.dstream >= 0:
                st.vc[st.dstream] = max(st.vc[st.dstream], st.dctr)
            st.lvc = st.vc.copy()
            changed(st)
        elif k == "D":          # the DMA-store stream is complete (a releasing atomic), the put queue not
            if st.dstream >= 0:
                st.vc[st.dstream] = max(st.vc[st.dstream], st.dctr)
            st.lvc = st.vc.copy()
            changed(st)
        elif k == "c":
            _, lo, tok = e
            x = st.tokens.get(tok)
            if x is not None:
                st.cons[lo] = np.maximum(st.cons[lo], x) if lo in st.cons else x.copy()
            else:
                st.cons.setdefault(lo, np.zeros(n, dtype=np.int64))
            changed(st)

    pending = list(states)
    while pending:
        progressed = False
        for st in pending:
            ev = st.ev
            while st.pos < len(ev):
                e = ev[st.pos]
                if not ready(e):
                    break
                step(st, e)
                st.pos += 1
                progressed = True
        pending = [st for st in pending if st.pos < len(st.ev)]
        if pending and not progressed:
            # a release that no log holds (cannot happen when every rank finished): go on without it
            st = pending[0]
            step(st, st.ev[st.pos])
            st.pos += 1
    if not recs:
        return []
    return _conflicts(logs, recs, np.array(clocks), comp)


def _conflicts(logs, recs, C, comp) -> list:
    nrec = len(recs)
    tid = np.fromiter((r[0] for r in recs), dtype=np.int64, count=nrec)
    epoch = np.fromiter((r[1] for r in recs), dtype=np.int64, count=nrec)
    ver = np.fromiter((r[2] for r in recs), dtype=np.int64, count=nrec)
    kind = np.fromiter((r[4] for r in recs), dtype=np.int64, count=nrec)
    is_w = _WRITES[kind]
    syncish = _SYNCISH[kind]
    lens = np.fromiter((len(r[7]) for r in recs), dtype=np.int64, count=nrec)
    runs = np.concatenate([r[7] for r in recs])
    row_rec = np.repeat(np.arange(nrec), lens)
    bounds = np.unique(runs.ravel())
    s0 = np.searchsorted(bounds, runs[:, 0])
    s1 = np.searchsorted(bounds, runs[:, 1])
    cover = s1 - s0
    total = int(cover.sum())
    # expand every run into the elementary segments [bounds[k], bounds[k+1]) it covers
    seg = np.repeat(s0, cover) + (np.arange(total) - np.repeat(np.cumsum(cover) - cover, cover))
    rec_of = np.repeat(row_rec, cover)
    order = np.lexsort((rec_of, seg))
    seg, rec_of = seg[order], rec_of[order]
    starts = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))
    ends = np.concatenate((starts[1:], [len(seg)]))
    w_count = np.add.reduceat(is_w[rec_of].astype(np.int64), starts) if len(seg) else np.zeros(0)
    t_min = np.minimum.reduceat(tid[rec_of], starts) if len(seg) else np.zeros(0)
    t_max = np.maximum.reduceat(tid[rec_of], starts) if len(seg) else np.zeros(0)
    interesting = np.flatnonzero((w_count > 0) & (t_min != t_max))
    pairs = {}
    for i in interesting.tolist():
        members = np.unique(rec_of[starts[i]:ends[i]])
        lo, hi = int(bounds[seg[starts[i]]]), int(bounds[seg[starts[i]] + 1])
        mw = is_w[members]
        ms = syncish[members]
        mt = tid[members]
        for wi in np.flatnonzero(mw).tolist():
            a = int(members[wi])
            other = members[(mt != mt[wi]) & ~(ms & ms[wi])]
            for b in other.tolist():
                key = (a, b) if a < b else (b, a)
                p = pairs.get(key)
                if p is None:
                    pairs[key] = [lo, hi]
                else:
                    p[0] = min(p[0], lo)
                    p[1] = max(p[1], hi)
    if not pairs:
        return []
    keys = np.array(list(pairs.keys()), dtype=np.int64)
    a, b = keys[:, 0], keys[:, 1]
    ab = epoch[a] <= C[ver[b], tid[a]]
    ba = epoch[b] <= C[ver[a], tid[b]]
    racy = np.flatnonzero(~(ab | ba))
    by_lines = {}
    for i in racy.tolist():
        x, y = int(a[i]), int(b[i])
        if recs[y][8] < recs[x][8]:
            x, y = y, x
        rx, ry = recs[x], recs[y]
        if rx[11] and rx[5] == OP_STORE and rx[9] == ry[9] and rx[10] == ry[10]:
            continue    # a core's later access to the bytes of its own DMA store: the compiler syncs them
        key = tuple(sorted(((rx[6], rx[5]), (ry[6], ry[5]))))
        cur = by_lines.get(key)
        if cur is None:
            by_lines[key] = [x, y, pairs[(min(x, y), max(x, y))], 1]
        else:
            cur[3] += 1
            if rx[8] < recs[cur[0]][8]:
                cur[0], cur[1], cur[2] = x, y, pairs[(min(x, y), max(x, y))]
    races = []
    for x, y, (lo, hi), count in sorted(by_lines.values(), key=lambda v: recs[v[0]][8]):
        rx, ry = recs[x], recs[y]
        races.append(Race(_access(logs, rx), _access(logs, ry), _describe(logs, lo, hi, rx[8]),
                          _missing(logs, rx, ry, C, comp), count))
    return races
