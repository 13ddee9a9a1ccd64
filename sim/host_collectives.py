"""torch.distributed collectives called by rank host code are scheduling points.

Under random/pct exactly one task runs at a time; a rank that enters a gloo collective
while holding the baton would block inside gloo waiting for peers that never get the
baton ("launch timed out").  Upstream tutorials call dist.all_reduce / all_gather /
broadcast / barrier on the default group to build their references, so at init the
simulator wraps those functions (in the rank process only) to go through the same path
as triton_dist.barrier(): SimBackend._collective, which parks the baton while every rank
is in the collective, marks the host as blocked on the status board (the free
schedule's watchdog then sees it), and records the happens-before edge for the race
detector.  Calls made while already inside such a collective (torch's own nesting,
triton_dist's own collectives) go straight to torch.
"""
from __future__ import annotations

import functools
import threading

# Every collective of torch.distributed that blocks until all ranks of a group call it
# (new_group too: every rank of the world must call it, and it waits on the store).
NAMES = ("barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object",
         "all_gather_into_tensor", "broadcast", "broadcast_object_list", "reduce", "gather",
         "gather_object", "scatter", "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor",
         "all_to_all", "all_to_all_single", "new_group")
_local = threading.local()


class inside:
    """Context manager: the calling thread is inside a host collective (no nesting)."""

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc):
        _local.depth -= 1


def _busy() -> bool:
    return getattr(_local, "depth", 0) > 0


class _Done:
    """What an async_op=True call returns here: the collective already completed."""

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None


def _group_of(args, kwargs):
    import torch.distributed as dist
    g = kwargs.get("group")
    if g is None:
        g = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
    return g


def install(backend) -> None:
    """Wrap torch.distributed's collectives in this (rank) process; idempotent."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    for name in NAMES:
        for mod in (dist, c10d):
            orig = getattr(mod, name, None)
            if orig is None or getattr(orig, "_triton_dist_orig", None) is not None:
                continue
            setattr(mod, name, _wrap(backend, name, orig))


def _wrap(backend, name, orig):
    what = f"torch.distributed.{name}"

    @functools.wraps(orig)
    def collective(*args, **kwargs):
        from . import context
        rt = context._runtime
        if rt is None or _busy():
            return orig(*args, **kwargs)
        group = _group_of(args, kwargs)
        if group is not None and name != "new_group":
            import torch.distributed as dist
            if group is not dist.group.WORLD and dist.get_world_size(group) != rt.world_size:
                if rt.sched.name != "free":
                    from triton_dist.errors import TritonDistError
                    raise TritonDistError(
                        f"{what} on a subgroup of {dist.get_world_size(group)} of {rt.world_size} ranks: under "
                        f"schedule={rt.sched.name!r} a host collective is a scheduling point of every rank, "
                        f"so only collectives of the whole world run; use the default group, or "
                        f"schedule='free'")
                return orig(*args, **kwargs)
        if kwargs.get("async_op"):
            # it completes here, inside the schedule; the caller's wait() has nothing left to do
            kwargs["async_op"] = False
            backend._collective(what, lambda: orig(*args, **kwargs))
            return _Done()
        return backend._collective(what, lambda: orig(*args, **kwargs))

    collective._triton_dist_orig = orig
    return collective


def peer_lost(e: BaseException) -> bool:
    """Whether gloo's error says a peer went away (rather than a bad argument)."""
    text = str(e).lower()
    return any(w in text for w in ("connection closed", "connection reset", "broken pipe", "peer"))


def peer_gone(what: str, gone, cause=None):
    """The error of a host collective that a peer rank will never join."""
    from triton_dist.errors import TritonDistError
    who = (f"rank{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))} had already returned from its "
           f"host code" if gone else "a peer rank left it (returned, raised or died)")
    raw = f" (gloo: {str(cause).splitlines()[0][:200]})" if cause is not None and str(cause) else ""
    return TritonDistError(
        f"{what}: this host collective can never complete: {who}{raw}. Every rank must make the "
        f"same host collectives in the same order (triton_dist.barrier, symm_tensor, free and "
        f"torch.distributed collectives); look for one called by some ranks only")
