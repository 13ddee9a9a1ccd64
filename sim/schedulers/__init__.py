"""Schedulers decide which task runs.  A scheduler is one small interface; one file each.

- run_kernel(rt, cores, body): run the program instances of one launch of one rank;
  return [(core, exception)] for the ones that raised;
- point(): called before every device memory access and primitive (a scheduling point);
- spin(waiter): called after every failed round of a wait; may raise when nothing can
  ever change what the waiter sees;
- host_call(what): context manager around a blocking host call (collectives);
- digest(): a string that identifies the decisions taken so far.
"""
from __future__ import annotations


def make(name: str, seed, world_size: int, shared=None):
    from triton_dist.errors import TritonDistError
    if name == "free":
        from .free import FreeScheduler
        return FreeScheduler()
    if name in ("random", "pct"):
        raise NotImplementedError(f"schedule={name!r} arrives with the device-model issue; use 'free'")
    raise TritonDistError(f"schedule must be one of free, random, pct; got {name!r}")
