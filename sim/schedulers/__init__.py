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


# A schedule's seed is one unsigned 64-bit word of the ranks' shared state (deterministic.py
# SharedSchedule), and explore picks its member from it (explore.py): a seed outside this range
# would run as seed % 2**64 while the replay line and the member named said the seed as given.
SEED_MAX = (1 << 64) - 1


def seed_problem(seed) -> str | None:
    """Why `seed` cannot be a schedule's seed (None: it can; None itself means 'pick one')."""
    if seed is None:
        return None
    if not isinstance(seed, int) or isinstance(seed, bool):
        return f"must be an int, got {seed!r}"
    if not 0 <= seed <= SEED_MAX:
        return (f"must be in 0..2**64-1 ({SEED_MAX}), got {seed}: a schedule's seed is an unsigned "
                f"64-bit number; pick one in that range, e.g. 17")
    return None


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
