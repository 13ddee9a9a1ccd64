"""Backend "hivm": the simulator's ranks, heaps and primitives, with each kernel launch run as the
Ascend compiler made it (native code on this CPU) instead of interpreted.

    TRITON_DIST_BACKEND=hivm python my_test.py      pytest --backend sim,hivm      --compare-backends sim,hivm

The host side (symm_tensor, barrier, ...) and the device library (device_call) are the
simulator's: a compiled kernel's aclshmem calls reach them through the backend interface
(shmem.py).  The kernel side: at each launch (the simulator publishes it through
triton_dist.kernel_launches), the kernel is compiled by the npu-compile pipeline and JIT-ed
once per signature (stages.py, runner.py); the simulator's grid then dispatches the programs
onto the device model's physical cores as the NPU does (sim/device.py, sim/runtime.py
Dispatch), and each program, instead of the kernel's Python function, runs the native block
with its block index.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import threading

from triton_dist import kernel_launches, registry

# The simulator, found by name as every backend is (no package imports another backend package:
# tests/test_registry.py).  hivm is the simulator with compiled kernels: its host side, heaps and
# device library are the simulator's, and it reads the simulator's per-thread program (which
# block a core thread runs) from that backend's own package.
SimBackend = registry.backend_class("sim")


def _sim_context():
    return importlib.import_module(SimBackend.__module__.rpartition(".")[0] + ".context")

LOG_ENV = "TRITON_DIST_HIVM_LOG"     # path: one JSON line per kernel built (its stage, cached or not)

_natives: dict = {}            # (fn, signature, constexprs) -> runner.Native
_pending = threading.local()   # the launch the simulator published, until its grid runs
_installed = [False]
STAGES: dict = {}              # kernel name -> the stage it ran at, in this process


class HivmBackend(SimBackend):
    name = "hivm"
    auto_priority = None       # never chosen by `auto`: asked for by name
    # pytest's `backend` fixture takes it only where asked for (--backend sim,hivm): the default
    # suite asserts what the simulator does, and kernels the 3.2.0 compilers refuse cannot run here
    tested_by_default = False
    rank_modules = SimBackend.rank_modules + ("llvmlite.binding", "triton_dist.backend_ascend.cpu_run.runner",
                                              "triton_dist.backend_ascend.pipeline")

    @classmethod
    def missing(cls) -> list:
        from ..toolchain import find
        out = list(find().missing)
        try:
            import llvmlite.binding  # noqa: F401
        except ImportError:
            out.append("llvmlite (pip install llvmlite: the JIT of the compiled kernel)")
        return out

    @classmethod
    def prepare(cls) -> None:
        super().prepare()
        if not _installed[0]:
            kernel_launches.subscribe(_on_launch)
            _installed[0] = True

    def __init__(self):
        super().__init__()
        self.prepare()


def _on_launch(launch) -> None:
    """Kept for the grid that follows in this thread; the rank's runtime learns to run it natively."""
    from triton_dist import backend
    if not issubclass(backend.kernel_backend_class(), HivmBackend):
        return
    rt = _sim_context().current()
    if rt is not None and not getattr(rt, "_hivm_wrapped", False):
        rt.run_grid = _native_grid(rt.run_grid)
        rt._hivm_wrapped = True
    # compiled here, before the simulator patches the language for the grid (the frontend needs
    # Triton's own), as the npu-compile launch check does
    _pending.launch = (launch, _native_for(launch))


def _native_grid(run_grid):
    def run(fn, args, grid, tensors):
        pending = getattr(_pending, "launch", None)
        _pending.launch = None
        if pending is None or pending[0].fn is not getattr(fn, "fn", fn):
            return run_grid(fn, args, grid, tensors)
        return run_grid(_program(*pending, grid), args, grid, tensors)
    return run


def _native_for(launch):
    from triton_dist.backend_ascend.compile_check import signature_of

    from triton_dist.backend_ascend.source_key import source_key

    from . import runner, stages, waits
    sig, consts = signature_of(launch)
    # source_key: a helper or a constant the kernel reads, rebound in this process, is a new kernel
    key = (launch.fn, source_key(launch.fn, consts), tuple(sig.items()),
           tuple(sorted((k, repr(v)) for k, v in consts.items())))
    native = _natives.get(key)
    if native is None:
        built = stages.build(launch.fn, sig, consts)
        native = _natives[key] = runner.Native(built)
        # no program of it can wait for another: the simulator runs them on one core (waits.py)
        native.never_wait = not (native.mix or waits.calls_library(built.ll)
                                 or waits.may_spin(launch.fn, tuple(consts.values())))
        STAGES[built.kernel] = built.stage
        _log({"kernel": built.kernel, "stage": built.stage, "cached": built.cached, "signature": sig,
              "constexprs": {k: repr(v) for k, v in consts.items()}, "pid": os.getpid()})
    return native, sig


def _log(record) -> None:
    path = os.environ.get(LOG_ENV, "").strip()
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    if os.environ.get("TRITON_DIST_HIVM_VERBOSE"):
        print(f"[hivm] kernel {record['kernel']} runs the module after {record['stage']}"
              f"{' (cached)' if record['cached'] else ''}", file=sys.stderr)


def _program(launch, built, grid):
    """What the simulator's core runs for each program: the native block of that program."""
    context = _sim_context()

    from .runner import LaunchArgs
    native, sig = built
    args = LaunchArgs(native, launch.fn, launch.args, sig, grid)
    fn = launch.fn
    gx, gy, gz = grid
    blocks = gx * gy * gz

    def program(**_interpreted_args):
        c = context.core()
        split = getattr(c, "split", None)
        if native.mix and ((split is not None and split.core_type != "cube") or getattr(c, "sub_vec", 0)):
            return      # the simulator made one instance per core of the block: the native block runs once, in the first
        x, y, z = c.grid_idx
        args.run_block(x * gy * gz + y * gz + z, blocks, getattr(c, "sub_vec", 0), getattr(c, "sub_blocks", 1),
                       thread_init=lambda: context.set_core(c), where=f"rank {c.rank} core {c.phys}")

    # the simulator reads the kernel's source through these (mix kernel? sub_vec_id? sync_block flags?)
    for attr in ("__code__", "__globals__", "__name__", "__qualname__", "__module__", "__defaults__"):
        try:
            setattr(program, attr, getattr(fn, attr))
        except (AttributeError, TypeError, ValueError):
            pass
    program.__wrapped__ = fn
    program.programs_never_wait = getattr(native, "never_wait", False)
    return program
