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

In a mix kernel each half holds a copy of each CUBE_AND_VECTOR call (hivm-split-mix-kernel:
`<name>.cube` / `<name>.vector`).  Which core's copy acts is the simulator's model of the device
library (sim/core_split.py, library_owned: the library runs on the vector cores, the cube
answers only queries; one vector instance stands for the compiler's split over both): the cube's
and the second vector core's copies answer queries, waits and consume_token only; the first
vector core's copy does the rest.  Inferred, not verified on an NPU (where both copies are built
from the same Shmem.cpp).
"""
from __future__ import annotations

import ctypes

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


# the calls every core of a mix kernel's block answers itself: queries without effects (as
# sim/core_split.py's PURE_LIBRARY lists them); and the waits, which the second vector core also makes
CUBE_ANSWERS = frozenset({"aclshmem_my_pe", "aclshmem_n_pes", "aclshmem_team_my_pe", "aclshmem_team_n_pes",
                          "aclshmem_team_translate_pe", "aclshmem_ptr"})
WAITS = frozenset({"aclshmem_wait", "aclshmem_signal_wait_until"})

# MLIR element type -> triton dtype name (signless integers read as signed)
_FROM_MLIR = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "i8": "int8", "i16": "int16", "i32": "int32",
              "i64": "int64"}


def handler(symbol: str, params: list, elem_types=None):
    """A callable for wrapper `symbol` (without _mlir_ciface_) taking the ctypes arguments of its
    LLVM declaration `params`, or None if it is not an aclshmem wrapper.  elem_types: the MLIR
    element type of each memref parameter of its declaration (stages.extern_types)."""
    if not symbol.startswith(("aclshmem_", "aclshmemx_")):
        return None
    family = S.family_of(symbol)
    default = _dtype_of(symbol)
    elem_types = list(elem_types or [])
    result = bool(elem_types) and str(elem_types[0]).startswith("result:")
    if result:
        elem_types = elem_types[1:]
    ptr_types = [_FROM_MLIR.get(t, default) for t in elem_types if t is not None]

    def call(*args):
        values = []
        ptrs = iter(ptr_types)
        out_desc = None
        if result:                  # the memref it returns: a descriptor the caller passes first
            out_desc, args, params_ = args[0], args[1:], params[1:]
        else:
            params_ = params
        for ty, a in zip(params_, args):
            if ty == "ptr":         # a pointer to a rank-1 memref descriptor (the wrappers take 1-D views)
                dtype = next(ptrs, default)
                itemsize = _ITEMSIZE[dtype]
                v = M.view(a, 1, itemsize)
                values.append(backend.Ptr(v.aligned + v.offset * itemsize, dtype))
            else:
                values.append(int(a) if not isinstance(a, float) else a)
        st = M.state()
        if (st.core == "aic" or (st.core == "aiv" and st.sub_block > 0)) and family not in CUBE_ANSWERS:
            if family == "aclshmem_consume_token":
                out = values[0]
            elif family in WAITS and st.core == "aiv":
                with backend.calling(symbol):
                    out = backend.active().device_call(family, *values)
            else:
                return 0 if family in WAITS else None
        else:
            with backend.calling(symbol):
                out = backend.active().device_call(family, *values)
        if isinstance(out, backend.Ptr):
            if out_desc is None:
                raise M.DeviceFault(f"{symbol}: the simulator returned a pointer for a wrapper declared without one")
            src = M.view(args[0], 1, _ITEMSIZE[out.dtype])
            _write_descriptor(out_desc, out.addr, src.sizes[0], src.strides[0])
            _peer_buffer(values[0].addr, out.addr, values[-1])
            return None
        if isinstance(out, np.generic):
            out = out.item()
        return out
    return call


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]


def _write_descriptor(addr: int, ptr: int, size: int, stride: int) -> None:
    """As ACLSHMEM_PTR_WRAPPER fills symmPtr (Shmem.cpp:75-87, v1.2.0): aligned = the peer's address,
    offset 0.  The CPU lowering owns a returned memref (buffer-deallocation-pipeline frees its
    `allocated` pointer), so `allocated` is a byte of our own malloc, never the peer's heap."""
    p = (ctypes.c_int64 * 5).from_address(addr)
    p[0] = _libc.malloc(1)
    p[1] = ptr
    p[2], p[3], p[4] = 0, size, stride


def _peer_buffer(local: int, remote: int, pe) -> None:
    """The peer's copy of the symmetric buffer `local` lies in: a live buffer of this block from now on."""
    s = M.state()
    for b in list(s.buffers):
        if b.start <= local < b.end:
            delta = remote - local
            if delta and not any(o.start == b.start + delta for o in s.buffers):
                s.buffers.append(M.Buffer(b.start + delta, b.end + delta, f"{b.label} on rank {pe}", b.arg))
            return
