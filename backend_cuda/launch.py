"""launch(backend="cuda"): one forked rank per GPU.

Ranks are forked from the caller, warm (torch and triton imported), as on the simulator.
CUDA does not survive a fork, so the caller must not have initialized it: the ranks
initialize it themselves (CudaBackend.init picks GPU r for rank r).  A rank's return value
comes back with its tensors moved to the CPU, so the caller never touches CUDA either.
"""
from __future__ import annotations

import time

from triton_dist import launcher as L
from triton_dist.errors import TritonDistError


def to_cpu(value):
    """value with every tensor in it (lists, tuples, dicts) moved to the CPU, with its attributes."""
    import torch
    if isinstance(value, torch.Tensor):
        out = value.detach().cpu()
        # the tensor's own attributes (triton_dist.testing's bit_identical mark) come along
        for k, v in vars(value).items():
            setattr(out, k, v)
        return out
    if isinstance(value, (list, tuple)):
        out = [to_cpu(v) for v in value]
        return type(value)(out) if not hasattr(value, "_fields") else type(value)(*out)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def _rank_main(rank, world_size, listener, timeout, fn, args, kwargs, conn):
    L.install_stack_dump()
    try:
        L.set_rank_environment(rank, world_size, "cuda")
        from triton_dist import backend
        store = L.rank_store(rank, world_size, listener, timeout)
        be = backend.active()
        be.init(rank, world_size, store=store, timeout=timeout)
        value = fn(*args, **kwargs)
        import torch
        torch.cuda.synchronize()
        be.check()                  # a device-side wait that gave up fails the rank
        result = L.pack_value(rank, to_cpu(value))
    except BaseException as e:  # noqa: BLE001 - everything is reported to the launcher
        result = L.pack_error(e)
    L.report(conn, result)          # no CUDA or gloo teardown: the launcher needs only the result


def launch(fn, args, kwargs, *, world_size, timeout=60.0, machine) -> L.LaunchResult:
    """Run fn(*args, **kwargs) in `world_size` GPU ranks; their values in rank order.

    machine: what this host has, `missing()` and `ranks_fit(n)` (the Backend class of
    runtime.py, which calls this; handed in because runtime imports this module)."""
    import torch

    need = machine.missing()
    if need:
        raise TritonDistError(f"launch(backend='cuda') needs {', '.join(need)}")
    if torch.cuda.is_initialized():
        raise TritonDistError("launch(backend='cuda'): this process has initialized CUDA, and forked ranks cannot "
                              "use it then; launch before any CUDA work here (keep the caller on the CPU), or "
                              "start the ranks with torchrun")
    why = machine.ranks_fit(world_size)
    if why:
        raise TritonDistError(f"launch(world_size={world_size}, backend='cuda'): {why}")
    listener = L.listen_socket()
    procs, pipes = [], []
    start = time.monotonic()
    try:
        procs, pipes = L.fork_ranks(world_size, _rank_main, (world_size, listener, float(timeout), fn, args, kwargs),
                                    name="triton_dist-cuda-rank")
        outcomes = L.collect(procs, pipes, timeout, start)
    finally:
        L.teardown(procs, pipes, listener)
    return L.LaunchResult(values=L.values_of(outcomes), wall_seconds=time.monotonic() - start)
