"""The one backend interface, and which backend this process uses.

A backend is a `Backend` subclass registered by name (triton_dist/registry.py).  What it
provides:

- class side (no instance, nothing initialized): `launch` (run a function in N ranks and
  return a LaunchResult), `interprets_kernels` (whether @triton.jit kernels launched in its
  ranks run on the simulator's interpreter or are compiled by Triton for a device), `warm()` (import before the fork what a rank needs: `rank_modules`),
  `launch_options` (the options of triton_dist.launch it accepts beyond world_size and timeout), `missing()` (why it cannot run on this machine),
  `detected()` / `auto_priority` (for TRITON_DIST_BACKEND=auto), `select()` (called once
  at `import triton_dist` for the process's default backend), `ranks_fit(n)` /
  `max_ranks()` (devices per rank);
- device side: `device_call(family, *args)` runs the aclshmem primitive of that symbol
  family (triton_dist/symbols.py) for a kernel being interpreted, with pointers passed as
  `Ptr`; compiled kernels call the device library directly.  While it runs,
  `current_call()` names the call the kernel wrote (`dl.notify`,
  `libshmem_device.putmem`), for the backend's messages: several calls share a family;
- host side, inside a rank: init/finalize, rank/world_size/device, symmetric alloc/free,
  host barrier.

The language layer and the host API call only this interface.

Which backend runs the kernels of a launch is decided per launch, not per process (issue
23): a @triton.jit kernel is one JITFunction, which Triton compiles in the ranks of a
compiled backend (cuda, npu) and the simulator interprets in its own ranks.  A rank knows
its backend (`activate`, called as the rank starts); a process that is no rank launches
kernels on its default backend (TRITON_DIST_BACKEND, `kernel_backend_class`).
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
from abc import ABC, abstractmethod
from typing import NamedTuple

from . import registry
from .errors import TritonDistError


class Ptr(NamedTuple):
    """A pointer argument of an interpreted distributed op: its address and Triton element dtype name."""
    addr: int
    dtype: str         # triton element dtype name, e.g. "int32", "fp32"


def is_ascend() -> bool:
    return shutil.which("npu-smi") is not None


def is_cuda() -> bool:
    return shutil.which("nvidia-smi") is not None


def is_hip() -> bool:
    return shutil.which("rocm-smi") is not None


def is_maca() -> bool:
    return shutil.which("mx-smi") is not None


_CALL = threading.local()


def current_call(default: str | None = None) -> str | None:
    """The language-level call (`dl.notify`, `libshmem_device.remote_ptr`, ...) whose primitive
    the calling thread is running, or `default` outside one.  Messages name it: the user wrote
    it, while the primitive (aclshmemx_signal_op, aclshmem_ptr) serves several calls."""
    return getattr(_CALL, "name", None) or default


class calling:
    """`with calling("libshmem_device.putmem"): ...` names the call for the device calls made
    inside it (current_call).  The outermost name wins: it is the call the kernel wrote."""
    __slots__ = ("name", "outer")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.outer = getattr(_CALL, "name", None)
        if self.outer is None:
            _CALL.name = self.name
        return self

    def __exit__(self, *exc):
        _CALL.name = self.outer
        return False


class Backend(ABC):
    name = "?"
    # options of triton_dist.launch this backend accepts besides world_size and timeout
    launch_options: frozenset = frozenset()
    # TRITON_DIST_BACKEND=auto picks the detected backend of highest priority (None: never)
    auto_priority: int | None = None
    # True: kernels launched in this backend's ranks (and, for the process's default backend,
    # outside any rank) run on the simulator's interpreter (sim/interp.py); False: Triton
    # compiles them for the device, and the interpreter is never involved
    interprets_kernels = False
    # what `triton_dist.language.extra.libshmem_device` forwards to.  Ascend's library is the
    # contract kernels are written to: the simulator models the NPU, and the CUDA device
    # library defines the same aclshmem symbols, so every built-in backend keeps it.
    libshmem_device_module = "triton_dist.language.extra.ascend.libshmem_device"

    # -- class side -----------------------------------------------------------------------------
    @classmethod
    def detected(cls) -> bool:
        """Whether this machine looks like one this backend is for (for `auto`)."""
        return False

    @classmethod
    def missing(cls) -> list:
        """What this machine lacks for this backend, in words (empty: it can run here)."""
        return []

    @classmethod
    def select(cls) -> None:
        """Called once at `import triton_dist` when this is the process's default backend (the one
        launch() and torchrun scripts use when none is named)."""

    @classmethod
    def ranks_fit(cls, world_size: int) -> str | None:
        """None if `world_size` ranks can run here, else why not."""
        return None

    @classmethod
    def max_ranks(cls) -> int | None:
        """How many ranks this machine can run at most (None: no limit)."""
        return None

    # modules a rank of this backend imports (its host API, its launch skeleton): warm()
    # imports them before the ranks are forked
    rank_modules: tuple = ("torch", "torch.distributed", "dill", "multiprocess", "triton_dist.launcher")

    @classmethod
    def warm(cls, extra=()) -> None:
        """Import, before the ranks are forked, what a rank will need (rank_modules, then the
        modules named in `extra`), so every rank starts warm: forked ranks share what the
        launcher imported, and a rank that imports torch itself pays ~2.5 s (issue 25).
        Called by triton_dist.launch and by the `triton-dist` subcommands that start ranks.
        A module that fails to import is left to the rank (which imports it again and reports
        the error where it is needed)."""
        import importlib
        for name in (*cls.rank_modules, *extra):
            if name in sys.modules:
                continue
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - see above
                pass

    @classmethod
    @abstractmethod
    def launch(cls, fn, args, kwargs, *, world_size: int, timeout: float, **options):
        """Run fn(*args, **kwargs) in `world_size` ranks; a triton_dist.launcher.LaunchResult.
        `options` holds only names from `launch_options`, each given (not None)."""

    # -- device side ----------------------------------------------------------------------------
    @abstractmethod
    def device_call(self, family: str, *args): ...

    def kernel_line(self, depth: int = 2) -> str:
        """'file.py:LINE (kernel)' of the kernel code calling, for error messages."""
        return "<kernel>"

    # -- host side ------------------------------------------------------------------------------
    @abstractmethod
    def init(self, rank=None, world_size=None, **options): ...

    @abstractmethod
    def finalize(self): ...

    @abstractmethod
    def rank(self) -> int: ...

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def device(self): ...

    @abstractmethod
    def symm_tensor(self, shape, dtype): ...

    @abstractmethod
    def free(self, t): ...

    @abstractmethod
    def barrier(self): ...


def names() -> list:
    """Registered backend names, and 'auto'."""
    return registry.backend_names() + ["auto"]


def resolve(name: str | None = None) -> str:
    """The backend `name` (default: TRITON_DIST_BACKEND, else auto) stands for on this machine."""
    name = (name or os.environ.get("TRITON_DIST_BACKEND", "auto")).lower()
    if name != "auto":
        if name not in registry.backend_names():
            raise TritonDistError(f"TRITON_DIST_BACKEND must be one of {', '.join(names())}, got {name!r}")
        return name
    if _auto:
        return _auto[0]
    best, best_priority = registry.DEFAULT_BACKEND, None
    for candidate in registry.backend_names():
        try:
            cls = registry.backend_class(candidate)
            priority = cls.auto_priority
            if priority is None or not cls.detected():
                continue
        except TritonDistError:
            continue           # a backend that cannot even be imported here is not the one
        if best_priority is None or priority > best_priority:
            best, best_priority = candidate, priority
    _auto.append(best)       # the machine does not change under a running process
    return best


_auto: list = []

def backend_class(name: str | None = None):
    """The Backend subclass of `name` (default: this process's backend)."""
    return registry.backend_class(resolve(name))


_active: Backend | None = None


def active() -> Backend:
    """The backend of this process, created on first use from TRITON_DIST_BACKEND (a rank's
    own backend once `activate` has named it)."""
    global _active
    if _active is None:
        _active = backend_class()()
    return _active


def activate(name: str) -> Backend:
    """Make `name` this process's backend: called first thing in a rank that a launch of
    that backend forked.  The rank may inherit another backend's instance from the process
    that forked it (a session that launched on the simulator, then forks cuda ranks): the
    rank's own replaces it, so its kernels and host calls go to the right one."""
    global _active
    os.environ["TRITON_DIST_BACKEND"] = name
    _active = registry.backend_class(name)()
    return _active


def kernel_backend_class():
    """The Backend subclass that runs the kernels launched in this process now: the rank's
    backend in a rank, else the process's default backend."""
    return type(_active) if _active is not None else backend_class()
