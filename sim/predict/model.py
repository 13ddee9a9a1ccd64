"""The timeline replay: one run's recorded op lists (record.py) on a device profile.

Launch i of every rank is replayed together (ranks run the same program, so their i-th
launches are the same collective kernel).  Each rank's programs are handed, in order, to
the profile's cores (AI/cube cores for a kernel with tl.dot, vector cores otherwise);
programs beyond the core count wait for a core to free up.  A program runs its ops in
order on four pipes that overlap: `mte` (local loads/stores), `cube` (tl.dot), `link`
(loads/stores of a peer's memory) and `dma` (putmem/getmem):
- a load costs latency + bytes / rate, the latency hidden when it streams right behind the
  previous access of its pipe; a store is posted (no latency) but waits for the
  data it stores (the loads and dots before it); a load that feeds a tl.dot (the next
  non-load op is a dot) reads from L2 and may run up to `pipeline_stages - 1` dots ahead;
- the rate of a transfer is the smallest of the core's own rate and, for each shared
  resource it uses (HBM of a rank, L2 of a rank, the link between two ranks), the
  resource's bandwidth divided by the transfers in flight on it when it starts;
- a dot costs FLOPs / (the dtype's peak x dot_efficiency / cube cores);
- a signal SET/ADD is issued once every pipe of the program is done (it follows a fence
  or carries a putmem's data) and is seen `signal latency` later; a wait ends when the
  releases it observed (record.py) are seen, or after one poll if they already were;
- quiet/fence waits for every pipe; a core barrier departs when every program arrived.
Ops are processed in order of start time across all ranks, so "in flight" is known.
`scale` multiplies costs by op class, to predict a larger problem from a smaller recorded
one: {"dot": FLOPs, "feed": loads feeding a dot, "mem": other loads/stores, "rma": puts/gets,
"steps": how many k-steps each recorded (operand loads, dot) stands for (they pipeline)}.
"""
from __future__ import annotations

import heapq

PIPES = ("mte", "cube", "link", "dma")


class _Res:
    __slots__ = ("cap", "ends")

    def __init__(self, cap):
        self.cap, self.ends = cap, []

    def share(self, t):
        ends = self.ends
        while ends and ends[0] <= t:
            heapq.heappop(ends)
        return self.cap / (len(ends) + 1)


class _Prog:
    __slots__ = ("rank", "idx", "ops", "feed", "i", "issue", "pipes", "last_load", "dot_ends", "busy", "wait",
                 "start", "end", "phys", "spans", "causes", "used", "last_sync", "feed_start")

    def __init__(self, rank, idx, ops):
        self.rank, self.idx, self.ops = rank, idx, ops
        self.feed = _feed_flags(ops)
        self.i = 0
        self.pipes = dict.fromkeys(PIPES, 0.0)
        self.last_load = 0.0
        self.dot_ends = []
        self.busy = dict.fromkeys(PIPES + ("sync",), 0.0)
        self.wait = 0.0
        self.start = self.end = self.issue = 0.0
        self.phys = -1
        self.spans = []           # (kind, start, end, pipe) per op, for the trace
        self.causes = {}          # op index -> (rank, prog, op index) of the release that ended a wait
        self.used = set()         # pipes that have run an access (a later one may stream behind it)
        self.last_sync = 0.0      # end of the last wait: the next load pays its latency
        self.feed_start = None    # start of the current run of loads feeding a dot


def _feed_flags(ops):
    """For each op: a load whose next non-load op is a dot (a GEMM operand)."""
    out = [False] * len(ops)
    nxt = None
    for j in range(len(ops) - 1, -1, -1):
        k = ops[j][0]
        if k == "L":
            out[j] = nxt == "D"
        else:
            nxt = k
    return out


class LaunchTimeline:
    """The replay of launch `index` of every rank (records: {rank: [launch, ...]})."""

    def __init__(self, records, index, prof, scale=None):
        self.prof = prof
        self.index = index
        self.scale = {"dot": 1.0, "feed": 1.0, "mem": 1.0, "rma": 1.0, "steps": 1.0, **(scale or {})}
        self.kernel = None
        self.progs = {}           # rank -> [_Prog] in program order
        self.rel_site = {}        # rid -> (rank, prog idx, op idx)
        self.rel_time = {}        # rid -> time the release is seen
        self.parked = {}          # rid or barrier key -> [_Prog]
        self.res = {}
        self.cores = {}
        self.barriers = {}        # (rank, gen) -> [arrival times]
        self._woken = []          # (time, program) made runnable by the op just processed
        for r, launches in records.items():
            if index >= len(launches):
                continue
            L = launches[index]
            self.kernel = self.kernel or L["kernel"]
            progs = [_Prog(r, k, L["progs"][k]) for k in sorted(L["progs"])]
            self.progs[r] = progs
            for p in progs:
                for j, op in enumerate(p.ops):
                    if op[0] == "R":
                        self.rel_site[op[1]] = (r, p.idx, j)
                    elif op[0] == "A" and op[4]:
                        self.rel_site[op[4]] = (r, p.idx, j)
        mix = any(op[0] == "D" for ps in self.progs.values() for p in ps for op in p.ops)
        self.mix = mix
        self.ncores = prof.cores(mix)
        self.grid = {r: len(ps) for r, ps in self.progs.items()}

    # -- shared resources ----------------------------------------------------------------------------
    def _r(self, key):
        res = self.res.get(key)
        if res is None:
            p = self.prof
            cap = {"hbm": p.hbm_bw, "l2": p.l2_bw, "link": p.link_bw}[key[0]]
            res = self.res[key] = _Res(cap)
        return res

    def _xfer(self, t, nbytes, keys, core_cap, lat):
        rate = core_cap
        rs = [self._r(k) for k in keys]
        for res in rs:
            rate = min(rate, res.share(t))
        end = t + lat + nbytes / rate
        for res in rs:
            heapq.heappush(res.ends, end)
        return end

    # -- the replay --------------------------------------------------------------------------------------
    def run(self):
        prof = self.prof
        t0 = prof.launch_device
        q = []
        seq = 0
        self.queue = {}
        for r, progs in self.progs.items():
            n = min(self.ncores, len(progs))
            for k, p in enumerate(progs[:n]):
                p.phys, p.start, p.issue = k, t0, t0
                p.pipes = dict.fromkeys(PIPES, t0)
                heapq.heappush(q, (t0, seq, p))
                seq += 1
            self.queue[r] = list(progs[n:])
        self.phys_last = {}
        while q:
            t, _, p = heapq.heappop(q)
            nxt = self._step(p, t)            # None: parked on a release or barrier, or finished
            if nxt is not None:
                seq += 1
                heapq.heappush(q, (max(nxt, t), seq, p))
            for w in self._woken:
                seq += 1
                heapq.heappush(q, (max(w[0], t), seq, w[1]))
            self._woken = []
        # anything still parked waited for a release nobody made in this launch: let it go
        self.unresolved = sum(len(v) for v in self.parked.values())
        return self

    def _start_next(self, p):
        """Program p finished: its core takes the next queued program of its rank."""
        self.phys_last.setdefault((p.rank, p.phys), []).append(p)
        queue = self.queue[p.rank]
        if queue:
            n = queue.pop(0)
            n.phys, n.start, n.issue = p.phys, p.end, p.end
            n.pipes = dict.fromkeys(PIPES, p.end)
            self._woken.append((p.end, n))

    def _step(self, p, t):
        """Process p's next op; return the time its following op may start, or None."""
        if p.i >= len(p.ops):
            p.end = max(p.issue, *p.pipes.values())
            self._start_next(p)
            return None
        prof, sc = self.prof, self.scale
        op = p.ops[p.i]
        k = op[0]
        r = p.rank
        pipes = p.pipes
        if k == "L" or k == "S":
            nbytes, owner = op[1], op[2]
            feed = p.feed[p.i]
            nbytes *= sc["feed"] if feed else sc["mem"]
            if owner == r:
                pipe = "mte"
                if feed:
                    keys, cap, lat = (("l2", r),), prof.l2_core_bw, prof.hbm_lat
                else:
                    keys, cap, lat = (("hbm", r),), prof.hbm_core_bw, prof.hbm_lat
            else:
                pipe = "link"
                keys = (("link", owner, r) if k == "L" else ("link", r, owner), ("hbm", owner))
                cap, lat = prof.link_core_store_bw, prof.link_lat
            if k == "L":
                # a load right behind the previous access of its pipe streams: its latency is
                # hidden (GPUs and MTEs keep several in flight); after a gap it is paid
                if pipe in p.used and pipes[pipe] >= max(p.issue, p.last_sync):
                    lat = 0.0
                start = max(pipes[pipe], p.issue)
                if feed and len(p.dot_ends) >= prof.stages - 1 > 0:
                    start = max(start, p.dot_ends[-(prof.stages - 1)])
                elif feed and prof.stages <= 1 and p.dot_ends:
                    start = max(start, p.dot_ends[-1])
            else:
                start = max(pipes[pipe], p.issue, p.last_load, pipes["cube"])
                lat = 0.0
            if start > t + 1e-12:
                return start
            end = self._xfer(start, nbytes, keys, cap, lat)
            pipes[pipe] = end
            p.used.add(pipe)
            if k == "L":
                p.last_load = max(p.last_load, end)
                if feed and p.feed_start is None:
                    p.feed_start = start
        elif k == "D":
            # a recorded dot may stand for `steps` k-steps (scale): the first step's operands are
            # in after 1/steps of its loads, and the last step's dot follows the last loads
            steps = sc["steps"]
            fs = p.last_load if p.feed_start is None else p.feed_start
            first = fs + (p.last_load - fs) / steps
            start = max(pipes["cube"], p.issue, first)
            if start > t + 1e-12:
                return start
            dur = op[1] * sc["dot"] / prof.dot_rate(op[2], prof.cube_cores)
            end = max(start + dur, p.last_load + dur / steps)
            p.feed_start = None
            pipe = "cube"
            pipes["cube"] = end
            p.dot_ends.append(end)
        elif k == "P":
            nbytes, peer, put, nbi = op[1] * sc["rma"], op[2], op[3], op[4]
            start = max(pipes["dma"], p.issue)
            if start > t + 1e-12:
                return start
            if peer == r:
                keys, cap = (("hbm", r),), prof.hbm_core_bw
            else:
                keys = (("hbm", r), ("link", r, peer) if put else ("link", peer, r), ("hbm", peer))
                cap = prof.link_core_put_bw
            end = self._xfer(start, nbytes, keys, cap, prof.link_lat if peer != r else prof.hbm_lat)
            pipe = "dma"
            pipes["dma"] = end
            if not nbi:
                p.issue = end
        elif k in ("R", "Q", "CA"):
            start = max(p.issue, *pipes.values())
            if start > t + 1e-12:
                return start
            end = start
            pipe = "sync"
            if k == "R":
                vis = start + (prof.signal_lat if op[2] != r else prof.signal_local_lat)
                self._resolve(op[1], vis)
            elif k == "CA":
                self.barriers.setdefault((r, op[1]), []).append(start)
                self._wake(("cb", r, op[1]), None)
            p.issue = end
        elif k in ("W", "A", "CD"):
            if k == "A":
                start = max(p.issue, pipes["mte"])
            else:
                start = p.issue
            if start > t + 1e-12:
                return start
            need, cause = self._need(p, op)
            if need is None:
                return None                   # parked until the release is replayed
            pipe = "sync"
            if k == "A":
                lat = prof.atomic_remote_lat if op[2] != r else prof.atomic_local_lat
                end = max(start + lat, need)
                if op[4]:
                    self._resolve(op[4], end)
            else:
                end = max(start + prof.poll, need)
            if need > start:
                p.wait += need - start
                if cause is not None:
                    p.causes[p.i] = cause
            p.issue = end
            p.last_sync = end + 1e-15
            for name in PIPES:
                pipes[name] = max(pipes[name], end)
        else:
            raise ValueError(f"unknown op {op!r}")
        p.busy[pipe] += end - start
        p.spans.append((k, start, end, pipe))
        p.i += 1
        return self._next_start(p)

    def _next_start(self, p):
        return p.issue if p.i < len(p.ops) else max(p.issue, *p.pipes.values())

    def _need(self, p, op):
        """(time the wait's condition holds, the release that decided it) or (None, None): parked."""
        if op[0] == "CD":
            key = ("cb", p.rank, op[1])
            arr = self.barriers.get((p.rank, op[1]), [])
            if len(arr) < self.grid[p.rank]:
                self.parked.setdefault(key, []).append(p)
                return None, None
            return max(arr) + self.prof.signal_local_lat, None
        groups = op[1] if op[0] == "W" else op[3]
        need, cause = 0.0, None
        for mode, rids in groups:
            mine = [x for x in rids if x in self.rel_site]
            if not mine:
                continue                      # written before this launch: already there
            known = [(self.rel_time[x], x) for x in mine if x in self.rel_time]
            if mode == "max" and len(known) < len(mine) or not known:
                missing = next(x for x in mine if x not in self.rel_time)
                self.parked.setdefault(missing, []).append(p)
                return None, None
            tv, rid = (max if mode == "max" else min)(known)
            if tv > need:
                need, cause = tv, self.rel_site[rid]
        return need, cause

    def _resolve(self, rid, t):
        self.rel_time[rid] = t
        self._wake(rid, t)

    def _wake(self, key, t):
        for w in self.parked.pop(key, ()):
            self._woken.append((w.issue if t is None else max(w.issue, t), w))
