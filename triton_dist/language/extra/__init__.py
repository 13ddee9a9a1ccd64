"""Platform device libraries.  `libshmem_device` is a ModuleProxy: exactly one platform
module is active (chosen by the backend), and every attribute access or call is forwarded
to it at call time, so a kernel written once runs on whichever backend is active."""
from __future__ import annotations

import importlib
import sys
import types

# backend name -> platform module; the simulator models the Ascend NPU, so it uses the
# Ascend library too, and so does CUDA: Ascend's rules are the contract kernels are written
# to, and the CUDA device library defines the same aclshmem symbols.
_PLATFORM_MODULES = {"sim": "triton_dist.language.extra.ascend.libshmem_device",
                     "npu": "triton_dist.language.extra.ascend.libshmem_device",
                     "cuda": "triton_dist.language.extra.ascend.libshmem_device"}


class ModuleProxy(types.ModuleType):
    # Triton's compiler accepts a global in a kernel only if it is exactly a module or is
    # marked as a builtin; the proxy is a module subclass, so it says so.
    __triton_builtin__ = True

    def __init__(self, name, table):
        super().__init__(name)
        self._table = table

    def _target(self):
        from triton_dist.backend import resolve
        return importlib.import_module(self._table[resolve()])

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __dir__(self):
        return dir(self._target())


libshmem_device = ModuleProxy(__name__ + ".libshmem_device", _PLATFORM_MODULES)
sys.modules[libshmem_device.__name__] = libshmem_device
