"""triton_dist: Triton-distributed for Ascend NPUs, with a CPU simulator of the NPU.

Host API (inside ranks started by `launch`, `triton-dist run` or torchrun):
    init, finalize, rank, world_size, device, symm_tensor, free, barrier
and the launcher:
    launch(fn, *args, world_size=N, ...) -> LaunchResult

Importing triton_dist selects this process's backend (TRITON_DIST_BACKEND, default auto:
registered backends in triton_dist/registry.py); with the simulator, @triton.jit kernels
defined afterwards run on it.
"""
from __future__ import annotations

import os as _os


def _source_tree_subpackages() -> None:
    """Installed (pip install [-e] .), sim/, backend_ascend/ and backend_cuda/ are the
    subpackages triton_dist.sim, ... (pyproject.toml package-dir).  A source tree put on
    PYTHONPATH without an install finds them beside this package instead."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    root = _os.path.dirname(here)
    if _os.path.isfile(_os.path.join(here, "sim", "__init__.py")):
        return                                   # a wheel: they are inside this package
    if all(_os.path.isfile(_os.path.join(root, d, "__init__.py")) for d in ("sim", "backend_ascend", "backend_cuda")) \
            and _os.path.isfile(_os.path.join(root, "pyproject.toml")):
        __path__.append(root)                    # noqa: F821 - the package's own __path__


_source_tree_subpackages()

from . import requirements as _requirements  # noqa: E402

_requirements.check()          # torch / triton of the right kind, or an ImportError naming the extra

from . import backend as _backend  # noqa: E402
from .backend import is_ascend, is_cuda, is_hip, is_maca
from .errors import DeadlockError, LaunchTimeoutError, RaceError, RankError, TritonDistError
from .launcher import LaunchResult, launch, main_or_launch

__version__ = "0.1.0"


def init(**options):
    """Initialize this rank (idempotent).  Under torchrun: reads RANK/WORLD_SIZE/MASTER_*."""
    _backend.active().init(**options)


def finalize():
    _backend.active().finalize()


def rank() -> int:
    return _backend.active().rank()


def world_size() -> int:
    return _backend.active().world_size()


def device():
    """The device tensors live on: 'cpu' on the simulator."""
    return _backend.active().device()


def symm_tensor(shape, dtype):
    """Collective: a zero-filled tensor on the symmetric heap, at the same offset on every rank."""
    return _backend.active().symm_tensor(shape, dtype)


def free(t):
    """Collective: give a symmetric tensor back."""
    _backend.active().free(t)


def barrier():
    """Host barrier of all ranks."""
    _backend.active().barrier()


# The backend this process uses prepares for the kernels defined from now on (the
# simulator makes them interpreted).
_backend.backend_class().select()

__all__ = ["init", "finalize", "rank", "world_size", "device", "symm_tensor", "free", "barrier",
           "launch", "main_or_launch", "LaunchResult", "RankError", "DeadlockError", "LaunchTimeoutError", "RaceError",
           "TritonDistError",
           "is_ascend", "is_cuda", "is_hip", "is_maca"]
