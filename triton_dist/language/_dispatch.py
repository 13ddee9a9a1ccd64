"""How a distributed op runs: interpreted (the simulator) or compiled (IR for a device).

Interpreted: the arguments become plain Python values (pointers become `Ptr(addr,
dtype)`), the active backend runs the primitive of the op's aclshmem symbol family, and
the result is wrapped back into an interpreter tensor.  Compiled: the op is emitted into
the kernel's IR by triton_dist.language._emit (used by the Ascend lowering).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from triton.runtime import interpreter as _interpreter

from triton_dist import backend
from triton_dist.backend import Ptr
from triton_dist.errors import TritonDistError

_TL_NP = {"int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
          "fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "bf16": np.float32}


def interpreting(_semantic) -> bool:
    """True when a builtin is run by Triton's interpreter (the simulator), not compiled."""
    return _semantic is None or isinstance(getattr(_semantic, "builder", None), _interpreter.InterpreterBuilder)


def unwrap(x):
    return x.value if isinstance(x, tl.constexpr) else x


def is_pointer(x) -> bool:
    return isinstance(x, tl.tensor) and x.type.scalar.is_ptr()


def pointer_dtype(x) -> tl.dtype:
    return x.type.scalar.element_ty


def to_py(x, what="argument"):
    """An interpreter value as a Python value; pointers as triton_dist.backend.Ptr."""
    x = unwrap(x)
    if isinstance(x, tl.tensor):
        data = x.handle.data
        if x.type.is_block() or data.size != 1:
            raise TritonDistError(f"{what}: expected a scalar, got a block of shape {list(x.shape)}")
        if x.type.scalar.is_ptr():
            return Ptr(int(data.ravel()[0]), x.type.scalar.element_ty.name)
        return data.ravel()[0].item()
    return x


def scalar(value, dtype: tl.dtype):
    return tl.tensor(_interpreter.TensorHandle(np.array([value], dtype=_TL_NP[dtype.name]), dtype), dtype)


def pointer(addr: int, ptr_ty: tl.pointer_type):
    return tl.tensor(_interpreter.TensorHandle(np.array([addr], dtype=np.uint64), ptr_ty), ptr_ty)


def run(family: str, *args):
    return backend.active().device_call(family, *args)
