"""schedule="aware": random choice, steered at the points where an interleaving shows.

Most scheduling points are steps nobody else can observe yet; the kernel library's bugs
(benchmarks/mutants/) show at a few kinds of points, and this strategy spends its
randomness there:
- signal-aware: right after a task accessed the cache line another task's wait polls (it
  released the signal, or stored next to it), run that waiter, 3 times in 4: it reads
  whatever the releasing core had not finished writing (a missing fence, an early signal);
- DMA- and cache-line-aware: while the running core has DMA stores in flight or holds a
  cache line it stored to but has not written back (a signal SET between its store and its
  dcci), run another task, 1 time in 2: a peer reads before the data lands, or two SETs into
  one line lose one;
- elsewhere it keeps the running task 3 times in 4, so one rank often runs far ahead of the
  others (a peer a call ahead: phase and epoch bugs), and picks uniformly otherwise.
DMA stores land lazily (at a point of their core, 1 time in 8, instead of random and
pct's 1 in 4), so they stay in flight across those switches.

Everything is drawn from the shared seeded generator: a seed replays exactly.
"""
from .. import context
from .deterministic import DeterministicScheduler

SIGNAL_FOLLOW = 3     # of 4: run the waiter polling the line just accessed
WINDOW_SWITCH = 1     # of 2: leave a core with DMA stores in flight or a dirty line
STAY = 3              # of 4: keep the running task at an ordinary point


class AwareScheduler(DeterministicScheduler):
    name = "aware"
    dma_odds = 8

    def choose(self, candidates, me):
        sh = self.sh
        r = self.rand()
        prev = int(sh.last_line[me]) if me >= 0 else -1
        if prev >= 0:
            waiters = candidates[(sh.waits_on[candidates] == prev) & (candidates != me)]
            if waiters.size and r % 4 < SIGNAL_FOLLOW:
                return int(waiters[(r >> 8) % waiters.size])
        mine = me >= 0 and bool((candidates == me).any())
        if mine and candidates.size > 1 and _open_window() and (r >> 16) % 2 < WINDOW_SWITCH:
            others = candidates[candidates != me]
            return int(others[(r >> 24) % others.size])
        if mine and (r >> 32) % 4 < STAY:
            return me
        return int(candidates[(r >> 40) % candidates.size])


def _open_window() -> bool:
    """Has the running core DMA stores in flight, or a cache line it stored to and not written back?"""
    c = context.core()
    if c is None:
        return False
    if c.pending:
        return True
    cache = c.cache
    return bool(cache) and any(e[1] for e in cache.values())

