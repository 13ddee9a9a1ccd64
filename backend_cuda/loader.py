"""Linking the device library into every CUDA kernel, and filling its state after each load.

Two hooks into stock Triton, both installed by `install()` (called from CudaBackend.init):
- the NVIDIA backend's option parsing adds the device library to `extern_libs`, so a kernel
  needs no extra launch argument (the bitcode file is part of Triton's cache key);
- `knobs.runtime.kernel_load_end_hook` copies the state (rank, PE count, heap bases, ...)
  into the module's `triton_dist_state` global with cuModuleGetGlobal + cuMemcpyHtoD: every
  compiled kernel has its own copy of that global, so every load is filled, and a new
  state (another init) is written into every module loaded so far.
The driver calls go through ctypes to libcuda: nothing here needs more than the driver.
"""
from __future__ import annotations

import ctypes

import numpy as np

from triton_dist.errors import TritonDistError

from . import devlib

CUDA_ERROR_NOT_FOUND = 500

_state: np.ndarray | None = None           # int64[STATE_SLOTS], this process's state
_modules: list = []                        # (module handle, device address of the global)
_names: list = []                          # module id -> kernel name (for reports)
_lib = {"path": None}
_installed = {"hook": False, "options": False, "previous_hook": None}
_cuda = None


def _driver():
    global _cuda
    if _cuda is None:
        try:
            _cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise TritonDistError(f"backend 'cuda' needs the NVIDIA driver (libcuda.so.1): {e}") from None
        _cuda.cuModuleGetGlobal_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                              ctypes.c_void_p, ctypes.c_char_p]
        _cuda.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        _cuda.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                  ctypes.c_uint64]
    return _cuda


def _global_of(module: int):
    """Device address and size of the module's state global, or None if it has none."""
    addr, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    rc = _driver().cuModuleGetGlobal_v2(ctypes.byref(addr), ctypes.byref(size), ctypes.c_void_p(module),
                                        devlib.STATE_SYMBOL.encode())
    if rc == CUDA_ERROR_NOT_FOUND:
        return None                 # this kernel calls no distributed op
    if rc != 0:
        raise TritonDistError(f"cuModuleGetGlobal({devlib.STATE_SYMBOL}) failed with CUDA error {rc}")
    if size.value != devlib.STATE_SLOTS * 8:
        raise TritonDistError(f"{devlib.STATE_SYMBOL} is {size.value} bytes, expected {devlib.STATE_SLOTS * 8}: "
                              f"the kernel was linked with another version of the device library")
    return addr.value


def _fill(addr: int, module_id: int) -> None:
    buf = _state.copy()
    buf[devlib.STATE_MODULE] = module_id
    rc = _driver().cuMemcpyHtoD_v2(addr, buf.ctypes.data, buf.nbytes)
    if rc != 0:
        raise TritonDistError(f"writing the device library state failed with CUDA error {rc}")


def _on_load(module, function, name, metadata_group, hash, *rest):
    prev = _installed["previous_hook"]
    if prev is not None:
        prev(module, function, name, metadata_group, hash, *rest)
    addr = _global_of(int(module))
    if addr is None:
        return
    module_id = len(_names)
    _names.append(str(name))
    _modules.append((int(module), addr))
    if _state is None:
        raise TritonDistError(f"kernel {name} calls distributed ops but triton_dist is not initialized on this "
                              f"rank: call triton_dist.init() (or start ranks with triton_dist.launch) first")
    _fill(addr, module_id)


def _patch_options(lib_path: str) -> None:
    from triton.backends.nvidia.compiler import CUDABackend
    if _installed["options"]:
        _lib["path"] = lib_path
        return
    original = CUDABackend.parse_options
    _lib["path"] = lib_path

    def parse_options(self, opts):
        libs = dict(opts.get("extern_libs") or {})
        libs.setdefault(devlib.LIBNAME, _lib["path"])
        return original(self, dict(opts, extern_libs=libs))

    CUDABackend.parse_options = parse_options
    _installed["options"] = True


def link_device_library() -> None:
    """Link the device library into every CUDA kernel compiled from now on in this process
    (what install() does first; alone, for compiling without a GPU: tests/test_cuda_lowering.py,
    tests/twin_backends.py)."""
    _patch_options(devlib.bitcode_path())


def install(state: np.ndarray) -> None:
    """Link the device library into kernels compiled from now on, and use `state` for them
    and for every module loaded before (re-initialization)."""
    global _state
    from triton import knobs
    link_device_library()
    _state = np.asarray(state, dtype=np.int64).copy()
    if not _installed["hook"]:
        _installed["previous_hook"] = knobs.runtime.kernel_load_end_hook
        knobs.runtime.kernel_load_end_hook = _on_load
        _installed["hook"] = True
    for module_id, (_, addr) in enumerate(_modules):
        _fill(addr, module_id)


def module_names() -> list:
    return list(_names)
