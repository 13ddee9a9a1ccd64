"""The `_mlir_ciface_aclshmem_*` wrappers a compiled module calls, bound to the backend interface.

After convert-hivm-to-std the distributed ops are calls of AscendNPU-IR's aclshmem wrappers
(bishengir/lib/Template/lib/Shmem/Shmem.cpp, v1.2.0; names in backend_ascend/aclshmem_wrappers.txt).
On the NPU a wrapper takes each memref by value (Shmem.cpp:97, `memref_t<__gm__ int32_t, 1>
sigAddr`); the CPU-lowered call passes a pointer to the descriptor (MLIR's C interface), so the
host side here reads the descriptor through that pointer.  Each call goes to
`triton_dist.backend.active().device_call(family, ...)` with pointers as `Ptr(address, dtype)`:
the interface the simulator implements for interpreted kernels, so a compiled kernel's
rank/notify/wait/put/get run on the same symmetric heaps and primitives (no import of the
simulator's code).
"""
from __future__ import annotations

import numpy as np

from triton_dist import backend, symbols as S

from . import memory as M

# aclshmem type name -> triton dtype name (symbols.TYPE_NAMES reversed)
_TRITON = {v: k for k, v in S.TYPE_NAMES.items()}
_ITEMSIZE = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "fp16": 2, "bf16": 2, "int32": 4, "uint32": 4,
             "fp32": 4, "int64": 8, "uint64": 8}


def _dtype_of(symbol: str) -> str:
    for part in symbol.split("_"):
        if part in _TRITON:
            return _TRITON[part]
    return "int32"          # the untyped signal ops work on int32 slots (symbols.notify_symbol)


def handler(symbol: str, params: list):
    """A callable for wrapper `symbol` (without _mlir_ciface_) taking the ctypes arguments of its
    LLVM declaration `params`, or None if it is not an aclshmem wrapper."""
    if not symbol.startswith(("aclshmem_", "aclshmemx_")):
        return None
    family = S.family_of(symbol)
    dtype = _dtype_of(symbol)
    itemsize = _ITEMSIZE[dtype]

    def call(*args):
        values = []
        for ty, a in zip(params, args):
            if ty == "ptr":         # a pointer to a rank-1 memref descriptor (the wrappers take 1-D views)
                v = M.view(a, 1, itemsize)
                values.append(backend.Ptr(v.aligned + v.offset * itemsize, dtype))
            else:
                values.append(int(a) if not isinstance(a, float) else a)
        with backend.calling(symbol):
            out = backend.active().device_call(family, *values)
        if isinstance(out, backend.Ptr):
            raise M.DeviceFault(f"{symbol}: a wrapper returning a pointer is not supported by the hivm backend yet")
        if isinstance(out, np.generic):
            out = out.item()
        return out
    return call
