"""launch(backend="cuda"): one forked rank per GPU.

Ranks are forked from the caller, warm (torch and triton imported), as on the simulator.
CUDA does not survive a fork, so the caller must not have initialized it: the ranks
initialize it themselves (CudaBackend.init picks GPU r for rank r).  A rank's return value
comes back with its tensors moved to the CPU, so the caller never touches CUDA either.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback

from triton_dist.errors import DeadlockError, TritonDistError


def to_cpu(value):
    """value with every tensor in it (lists, tuples, dicts) moved to the CPU."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)):
        out = [to_cpu(v) for v in value]
        return type(value)(out) if not hasattr(value, "_fields") else type(value)(*out)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def _rank_main(rank, world_size, listener, timeout, fn, args, kwargs, conn):
    import dill
    import faulthandler
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):
        pass
    be = None
    try:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                          LOCAL_WORLD_SIZE=str(world_size), TRITON_DIST_BACKEND="cuda")
        from triton_dist import backend
        from triton_dist.launcher import pack_value, rank_store
        store = rank_store(rank, world_size, listener, timeout)
        be = backend.active()
        be.init(rank, world_size, store=store, timeout=timeout)
        value = fn(*args, **kwargs)
        import torch
        torch.cuda.synchronize()
        be.check()                  # a device-side wait that gave up fails the rank
        result = pack_value(rank, to_cpu(value))
    except DeadlockError as e:
        result = dill.dumps(("deadlock", e.message, e.report))
    except BaseException as e:  # noqa: BLE001 - everything is reported to the launcher
        result = dill.dumps(("err", type(e).__name__, str(e), traceback.format_exc()))
    try:
        conn.send_bytes(result)
        conn.close()
    finally:
        os._exit(0)                 # no CUDA or gloo teardown: the launcher needs only the result


def launch(fn, *args, world_size, timeout=60.0, **kwargs) -> list:
    """Run fn(*args, **kwargs) in `world_size` GPU ranks; their values in rank order."""
    import multiprocess as mp
    import torch

    from triton_dist.launcher import collect, teardown

    from .runtime import missing, ranks_fit
    need = missing()
    if need:
        raise TritonDistError(f"launch(backend='cuda') needs {', '.join(need)}")
    if torch.cuda.is_initialized():
        raise TritonDistError("launch(backend='cuda'): this process has initialized CUDA, and forked ranks cannot "
                              "use it then; launch before any CUDA work here (keep the caller on the CPU), or "
                              "start the ranks with torchrun")
    why = ranks_fit(world_size)
    if why:
        raise TritonDistError(f"launch(world_size={world_size}, backend='cuda'): {why}")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    ctx = mp.get_context("fork")
    procs, pipes = [], []
    start = time.monotonic()
    try:
        for r in range(world_size):
            rd, wr = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_main, name=f"triton_dist-cuda-rank{r}",
                            args=(r, world_size, listener, float(timeout), fn, args, kwargs, wr))
            p.daemon = True
            p.start()
            wr.close()
            procs.append(p)
            pipes.append(rd)
        outcomes = collect(procs, pipes, None, timeout, start)
    finally:
        teardown(procs, pipes, listener)
    return [rest[0] for _, *rest in outcomes]
