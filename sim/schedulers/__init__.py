"""Schedulers decide which task runs.  A scheduler is one small interface; one file each.

- run_kernel(rt, cores, body): run the program instances of one launch of one rank;
  return [(core, exception)] for the ones that raised;
- point(): called before every device memory access and primitive (a scheduling point);
- spin(waiter): called after every failed round of a wait; may raise when nothing can
  ever change what the waiter sees;
- poll(key): called when a core re-polls without progress but may still get out by itself
  (sim/spin.py POLLING): let every other runnable task run first;
- host_call(what): context manager around a blocking host call (collectives);
- p2p_posted(kind, src, dst, tag) / p2p_wait(what, where, kind, src, dst, tag, seq): a
  torch.distributed send or receive was posted / is about to wait for its partner
  (sim/host_p2p.py);
- digest(): a string that identifies the decisions taken so far.
"""
from __future__ import annotations


NAMES = ("free", "random", "pct", "aware", "explore")


def check(name: str) -> None:
    if name not in NAMES:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(f"schedule must be one of {', '.join(NAMES)}; got {name!r}")


# the seed range: one check for every way a seed comes in (triton_dist/seeds.py)
from triton_dist.seeds import SEED_MAX, seed_problem  # noqa: E402,F401


def make(name: str, rank: int = 0, shared=None, board=None):
    """The scheduler of one rank.  Deterministic ones need the launcher's shared state."""
    check(name)
    if name == "free":
        from .free import FreeScheduler
        return FreeScheduler(board)
    if shared is None:
        from triton_dist.errors import TritonDistError
        raise TritonDistError(f"schedule={name!r} needs ranks started by triton_dist.launch or "
                              f"`triton-dist run`, which share the schedule's state; under torchrun "
                              f"only schedule='free' is available")
    if name == "random":
        from .random_walk import RandomScheduler
        return RandomScheduler(shared, rank, board)
    if name == "aware":
        from .aware import AwareScheduler
        return AwareScheduler(shared, rank, board)
    if name == "explore":
        from . import explore
        return explore.make(shared, rank, board)
    from .pct import PCTScheduler
    return PCTScheduler(shared, rank, board)


def describe(name: str, seed) -> str:
    """Which strategy a seed of a portfolio runs ('' for a single strategy)."""
    if name != "explore" or seed is None:
        return ""
    from . import explore
    return explore.describe(int(seed))
