"""schedule="pct": Probabilistic Concurrency Testing (Burckhardt et al., ASPLOS 2010).

Every task gets a random priority when it is created; the highest-priority runnable task
always runs.  At d-1 change points, chosen uniformly among the first k steps, the running
task drops to a priority below every initial one.  For n tasks and k steps this finds a
bug of depth d with probability at least 1/(n k^(d-1)) per run.  A task spinning in a wait
is treated as blocked until the next write (deterministic.py), as PCT assumes blocking
waits, so a spinning high-priority task cannot starve the one it waits for.

d and k are DEPTH and STEPS_ESTIMATE unless an instance is given its own (the explore
portfolio, explore.py, runs PCT at several depths and step estimates).
"""
from .deterministic import SEED, STEPS, DeterministicScheduler

DEPTH = 3            # d: bugs that need up to 2 forced preemptions
STEPS_ESTIMATE = 4000  # k: the change points fall among the first k steps


class PCTScheduler(DeterministicScheduler):
    name = "pct"
    depth = None             # None: DEPTH
    steps_estimate = None    # None: STEPS_ESTIMATE

    def _d(self) -> int:
        return self.depth or DEPTH

    def _change_points(self):
        cp = getattr(self, "_cp", None)
        if cp is None:
            # derived from the seed alone, so every rank computes the same points
            from .deterministic import splitmix64
            state = int(self.sh.u[SEED]) ^ 0x5DEECE66D
            d, k = self._d(), self.steps_estimate or STEPS_ESTIMATE
            cp = {}
            for i in range(d - 1):
                state, r = splitmix64(state)
                cp[r % k] = d - 1 - i   # lower than every initial priority
            self._cp = cp
        return cp

    def on_new_task(self, slot):
        # initial priorities are above d; random, so the order of tasks is random
        self.sh.prio[slot] = self._d() + 1 + (self.rand() % (1 << 40))

    def choose(self, candidates, me):
        step = int(self.sh.u[STEPS])
        new = self._change_points().get(step)
        if new is not None and me in candidates:
            self.sh.prio[me] = new
        prio = self.sh.prio[candidates]
        return int(candidates[int(prio.argmax())])
