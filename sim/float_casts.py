"""Float down-casts as the compiled kernel does them.

Triton's semantics round a float down-cast to nearest, ties to even, unless the kernel asks for
another mode (triton/language/semantic.py of 3.6.0, `cast`: "For fp downcasting default rounding
mode should be RTNE", then `create_fp_trunc`), and the GPU does so (`cvt.rn.bf16.f32`).  Triton's
interpreter implements `create_fp_trunc` to bfloat16 with its `_convert_float(..., None)`
(triton/runtime/interpreter.py of 3.6.0, `cast_impl` :461-469, `_convert_float` :202-242), which
drops the low 16 bits: rounding toward zero.  The GPU run of tests/test_kernels.py with
`--compare-backends sim,cuda` found it (bf16 all_reduce/reduce_scatter/gemm_rs results one ulp
smaller in magnitude on the simulator; docs/cuda.md, "Differential testing").  On the NPU,
triton-ascend lowers the same cast to an `hfusion.cast` whose default mode is taken to be
round-to-nearest-even as well (inferred, not verified).
Every other down-cast keeps the interpreter's own (numpy's astype rounds to nearest even).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl


def f32_to_bf16_rtne(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 `values`, rounded to nearest, ties to even;
    NaNs stay quiet NaNs of the same sign (adding the rounding bias could carry a NaN into inf)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if np.any(nan):
        rounded = np.where(nan, ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), rounded)
    return rounded


def rounding_fp_trunc(orig):
    """The builder's create_fp_trunc, rounding to bfloat16 to nearest even (see above)."""
    def create_fp_trunc(self, src, dst_type):
        dst = dst_type.scalar
        if dst == tl.bfloat16 and src.dtype.scalar in (tl.float32, tl.float64):
            data = f32_to_bf16_rtne(np.asarray(src.data).astype(np.float32))
            return type(src)(data, dst)
        return orig(self, src, dst_type)
    return create_fp_trunc
