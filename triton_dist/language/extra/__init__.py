"""Platform device libraries.  `libshmem_device` is a ModuleProxy: exactly one platform
module is active (the backend's `libshmem_device_module`), and every attribute access or
call is forwarded to it at call time, so a kernel written once runs on whichever backend
is active."""
from __future__ import annotations

import importlib
import sys
import types


class ModuleProxy(types.ModuleType):
    # Triton's compiler accepts a global in a kernel only if it is exactly a module or is
    # marked as a builtin; the proxy is a module subclass, so it says so.
    __triton_builtin__ = True

    def __init__(self, name, attribute):
        super().__init__(name)
        self._attribute = attribute      # the Backend class attribute naming the platform module

    def _target(self):
        from triton_dist.backend import backend_class
        return importlib.import_module(getattr(backend_class(), self._attribute))

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __dir__(self):
        return dir(self._target())


libshmem_device = ModuleProxy(__name__ + ".libshmem_device", "libshmem_device_module")
sys.modules[libshmem_device.__name__] = libshmem_device
