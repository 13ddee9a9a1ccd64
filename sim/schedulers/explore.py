"""schedule="explore": a portfolio of strategies, one per seed.

No single strategy finds every bug of the kernel library quickly (benchmarks/mutants/,
docs/guide.md "Schedule explorers"): PCT keeps one task running and so misses bugs that need many
interleavings in a short window (two SETs into one cache line), uniform random choice
rarely lets one rank run a whole call ahead of the others, and both land a DMA store
soon after its issue.  Seed s runs member MEMBERS[s % len(MEMBERS)], seeded with s, so
any run of consecutive seeds tries every member in turn.  A schedule is still a seed:
replaying seed s of explore runs the same member with the same seed, and the failure
names the member.

The members (each a strategy of its own file, configured here):
- aware: random choice steered at signal, DMA and cache-line points (aware.py);
- random: uniform (random_walk.py);
- pct with a step estimate k that fits the library's launches (hundreds to a few thousand
  steps: today's default of 4000 puts most change points after a short run ends) at depth 3,
  and at depth 2 with lazy DMA stores (pct.py).
"""
from __future__ import annotations

from triton_dist.seeds import seed_problem   # from its home: the package re-exports it, and imports this module

from .aware import AwareScheduler
from .deterministic import SEED
from .pct import PCTScheduler
from .random_walk import RandomScheduler

# (strategy, attributes): the k of each PCT member is scaled by the seed (below)
MEMBERS = (
    (AwareScheduler, {}),
    (PCTScheduler, dict(depth=3, steps_estimate=400)),
    (RandomScheduler, {}),
    (AwareScheduler, {}),
    (PCTScheduler, dict(depth=2, steps_estimate=1600, dma_odds=8)),
)


def member(seed: int):
    """(strategy class, its attributes) that seed `seed` of explore runs."""
    why = seed_problem(seed)
    if why is not None:         # launch and the CLI refuse such seeds first; never guess a member
        raise ValueError(f"explore: seed {why}")
    cls, attrs = MEMBERS[seed % len(MEMBERS)]
    attrs = dict(attrs)
    if "steps_estimate" in attrs:     # every other round of the portfolio doubles k
        attrs["steps_estimate"] <<= (seed // len(MEMBERS)) % 2
    return cls, attrs


def describe(seed: int) -> str:
    cls, attrs = member(seed)
    args = ", ".join(f"{k}={v}" for k, v in attrs.items())
    return f"{cls.name}({args})" if args else cls.name


def make(shared, rank, board):
    """The scheduler of one rank for seed shared.u[SEED] (every rank picks the same member)."""
    seed = int(shared.u[SEED])
    cls, attrs = member(seed)
    s = cls(shared, rank, board)
    for k, v in attrs.items():
        setattr(s, k, v)
    s.name = "explore"
    s.member = describe(seed)
    return s
