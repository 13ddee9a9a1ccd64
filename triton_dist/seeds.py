"""The range of a schedule's seed, checked in one place by every way a seed comes in (launch,
the CLI, the pytest plugin's --sim-seed/--sim-seeds, explore's member choice).

A schedule's seed is one unsigned 64-bit word of the ranks' shared state (sim/schedulers/
deterministic.py SharedSchedule), and explore picks its member from it (sim/schedulers/explore.py):
a seed outside this range would run as seed % 2**64 while the replay line and the member named
said the seed as given.  It lives in the core, not in sim/, because the pytest plugin checks the
options before any backend is chosen, and the core imports no backend.
"""
from __future__ import annotations

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
