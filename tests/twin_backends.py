"""Two backends for the tests of per-launch kernel modes and differential testing (issue 23),
registered as a real distribution by tests/test_backend_variants.py (entry points, as a
third party registers one):

- "sm90": its ranks compile every kernel they launch with stock Triton for an H100/H200
  (sm_90) on the CPU, linking backend cuda's device library, instead of running it; its
  LaunchResult says what was compiled (`compiled`: per rank, one record per launch with the
  kernel's name, PTX and whether the rank interpreted anything).  The kernel object is the
  one the simulator interprets in the same session.  A stand-in for Triton's CUDA driver
  answers the target and takes the "launch" (no GPU: nothing runs).
- "simtwin": the simulator under another name (a subclass), so two backends that really run
  kernels can be compared on a machine without a GPU.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from triton_dist import launcher as L
from triton_dist.backend import Backend
from triton_dist.sim.backend import SimBackend

TARGET = ("cuda", 90, 32)       # an H100/H200, as tests/test_cuda_lowering.py compiles for


class SimTwinBackend(SimBackend):
    name = "simtwin"


@dataclass
class CompiledLaunch(L.LaunchResult):
    compiled: list = field(default_factory=list)    # per rank: {kernels: [{kernel, ttir, ptx, arch, backend}], interpreted}


def _driver():
    """A stand-in for Triton's CUDA driver: the sm_90 target, device 0, and a "launch" that
    records what Triton compiled."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class Launcher:
        def __init__(self, src, metadata):
            self.name = getattr(src, "name", "?")

        def __call__(self, *args):
            pass                # no GPU: the kernel was compiled, nothing runs

    class Utils:
        @staticmethod
        def get_device_properties(device):
            return {"max_shared_mem": 232448, "multiprocessor_count": 132, "sm_clock_rate": 1980000,
                    "mem_clock_rate": 2619000, "mem_bus_width": 5120}

        @staticmethod
        def load_binary(name, kernel, shared, device):
            return 0, 0, 0, 0, 1024

    class CompileOnlyDriver(DriverBase):
        utils = Utils()
        launcher_cls = Launcher

        @classmethod
        def is_active(cls):
            return True

        def map_python_to_cpp_type(self, ty):
            return ty

        def get_current_target(self):
            return GPUTarget(*TARGET)

        def get_active_torch_device(self):
            import torch
            return torch.device("cpu")

        def get_benchmarker(self):
            raise NotImplementedError("the sm90 test backend compiles only")

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def set_current_device(self, device):
            pass

    return CompileOnlyDriver()


def _rank_main(rank, world_size, fn, args, kwargs, conn):
    try:
        L.set_rank_environment(rank, world_size, "sm90")
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction

        from triton_dist.backend_cuda import loader
        from triton_dist.sim import interp
        loader.link_device_library()
        driver.set_active(_driver())
        made = []               # interpreted forms made in this rank (must stay empty)
        original = interp.interpreted
        interp.interpreted = lambda jit: made.append(jit.__name__) or original(jit)
        kernels = []
        original_run = JITFunction.run

        def run(self, *a, grid, warmup, **kw):
            kernel = original_run(self, *a, grid=grid, warmup=warmup, **kw)
            kernels.append((self.__name__, kernel))
            return kernel
        JITFunction.run = run
        value = fn(*args, **kwargs)
        records = [{"kernel": name, "ttir": k.asm.get("ttir"), "ptx": k.asm.get("ptx"), "arch": k.metadata.target.arch,
                    "backend": k.metadata.target.backend} for name, k in kernels if k is not None]
        L.report(conn, L.pack_value(rank, {"value": value, "compiled": records, "interpreted": made}))
    except BaseException as e:  # noqa: BLE001 - everything is reported to the launcher
        L.report(conn, L.pack_error(e))


class Sm90CompileBackend(Backend):
    """Ranks are forked processes with CPU tensors; kernels are compiled for sm_90, never run."""
    name = "sm90"

    @classmethod
    def launch(cls, fn, args, kwargs, *, world_size, timeout, **options):
        procs, pipes = L.fork_ranks(world_size, _rank_main, (world_size, fn, args, kwargs), name="sm90-rank")
        try:
            outcomes = L.collect(procs, pipes, timeout, time.monotonic())
        finally:
            L.teardown(procs, pipes, None)
        values = L.values_of(outcomes)
        return CompiledLaunch(values=[v["value"] for v in values],
                              compiled=[{"kernels": v["compiled"], "interpreted": v["interpreted"]} for v in values])

    def device_call(self, family, *args):
        raise AssertionError(f"the sm90 test backend interpreted a distributed op ({family}): it must compile")

    def init(self, rank=None, world_size=None, **options):
        pass

    def finalize(self):
        pass

    def rank(self):
        return int(os.environ["RANK"])

    def world_size(self):
        return int(os.environ["WORLD_SIZE"])

    def device(self):
        import torch
        return torch.device("cpu")

    def symm_tensor(self, shape, dtype):
        import torch
        return torch.zeros(shape, dtype=dtype)

    def free(self, t):
        pass

    def barrier(self):
        pass


# ---- the kernel the tests run on both kinds of backend ---------------------------------------
# (a module-level @triton.jit kernel: one JITFunction, whatever runs it)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import triton_dist  # noqa: E402
import triton_dist.language as dl  # noqa: E402
from triton_dist.language.extra import libshmem_device as shm  # noqa: E402

N = 16


@triton.jit
def _scaled(x, k):
    return x * k


@triton.jit
def ring_kernel(buf, sig, out, N: tl.constexpr):
    """Rank r writes r + 1 into the next rank's buf, fences, signals it, waits for its own
    signal, and stores 10 * buf + the sum of buf (a @jit helper and triton's own tl.sum inside)."""
    me = dl.rank()
    n = dl.num_ranks()
    o = tl.arange(0, N)
    tl.store(dl.symm_at(buf, (me + 1) % n) + o, tl.zeros((N,), tl.float32) + me + 1.0)
    shm.fence()                 # the remote store lands before the signal (without it, the simulator
    dl.notify(sig, (me + 1) % n, signal=1, sig_op="set")       # finds buf still 0 now and then)
    dl.wait(sig, 1, "sys", "acquire", waitValue=1)
    v = tl.load(buf + o)
    tl.store(out + o, _scaled(v, 10.0) + tl.sum(v, axis=0))


@triton.jit
def plain_kernel(x, out, N: tl.constexpr):
    o = tl.arange(0, N)
    v = tl.load(x + o)
    tl.store(out + o, _scaled(v, 10.0) + tl.sum(v, axis=0) + dl.rank() + dl.num_ranks())


def ring_body():
    import torch
    buf = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((N,), torch.int32)
    out = torch.zeros(N, device=triton_dist.device())
    ring_kernel[(1,)](buf, sig, out, N=N)
    return out


def ring_expected(world_size):
    """What rank r's out holds: its left neighbour wrote left + 1 into every element."""
    import torch
    outs = []
    for r in range(world_size):
        v = torch.full((N,), float((r - 1) % world_size + 1))
        outs.append(v * 10 + v.sum())
    return outs


# the symbols the dl ops of ring_kernel compile to on CUDA (docs/cuda.md, backend_cuda/emit.py)
RING_SYMBOLS = {"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_ptr_float", "aclshmem_fence", "aclshmemx_signal_op",
                "aclshmem_wait_int32"}
