"""The one backend interface, and which backend this process uses.

Device side: `device_call(family, *args)` runs the aclshmem primitive of that symbol
family (triton_dist/symbols.py) for a kernel being interpreted; compiled kernels call the
device library directly.  Host side: init/finalize, symmetric alloc/free, host barrier.
The language layer (triton_dist.language) calls only this interface.
"""
from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod

from .errors import TritonDistError

BACKENDS = ("sim", "npu", "cuda", "auto")


def is_ascend() -> bool:
    return shutil.which("npu-smi") is not None


def is_cuda() -> bool:
    return shutil.which("nvidia-smi") is not None


def is_hip() -> bool:
    return shutil.which("rocm-smi") is not None


def is_maca() -> bool:
    return shutil.which("mx-smi") is not None


class Backend(ABC):
    name = "?"

    # device side
    @abstractmethod
    def device_call(self, family: str, *args): ...

    # host side
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


def resolve(name: str | None = None) -> str:
    name = (name or os.environ.get("TRITON_DIST_BACKEND", "auto")).lower()
    if name not in BACKENDS:
        raise TritonDistError(f"TRITON_DIST_BACKEND must be one of {', '.join(BACKENDS)}, got {name!r}")
    if name == "auto":
        if is_ascend():
            return "npu"
        return "cuda" if is_cuda() else "sim"
    return name


_active: Backend | None = None


def active() -> Backend:
    """The backend of this process, created on first use from TRITON_DIST_BACKEND."""
    global _active
    if _active is None:
        which = resolve()
        if which == "sim":
            from sim.backend import SimBackend
            _active = SimBackend()
        elif which == "cuda":
            from backend_cuda.runtime import CudaBackend
            _active = CudaBackend()
        else:
            from backend_ascend.runtime import NpuBackend
            _active = NpuBackend()
    return _active
