"""The low-precision float formats Triton's interpreter stores as raw bits, and their exact
conversions to and from float32.

Triton's interpreter keeps bfloat16 as uint16 and the float8 formats as uint8 bit patterns
(triton/runtime/interpreter.py of 3.5.1, 3.6.0 and 3.9.0, `_get_np_dtype`), and its
element-wise ops run numpy on those integers; sim/low_precision.py computes them on the
values instead, through `decode` and `encode` here.  float16 is a numpy float16 there (its
ops are numpy's, computed in float32 and rounded once) and needs nothing from this module.

Rounding to a narrower format is to nearest, ties to even, unless a kernel asks for another
mode (triton/language/semantic.py of 3.6.0, `cast`: "For fp downcasting default rounding
mode should be RTNE").  The GPU does so (`cvt.rn.bf16.f32`), and so does the NPU's compiler:
AscendNPU-IR's `selectRoundMode` (bishengir/include/bishengir/Dialect/Utils/Util.h :186-197,
commit 52f96a13) picks RINT, "round to nearest, tie to even" (HFusionEnums.td :122-135), for
every float32 -> bf16/f16 cast and back.  Triton's interpreter rounds a float32 -> bfloat16
cast toward zero instead (`cast_impl` :461-469, `_convert_float` :202-242, which drops the
low 16 bits; found by the GPU run's --compare-backends, docs/cuda.md "Differential testing").

float8: e5m2 and e4m3fn are the two formats the NPU's compiler legalizes (AscendNPU-IR
bishengir/lib/Dialect/HFusion/Transforms/LegalizeFP8.cpp :33-68, RINT both ways).  What an
out-of-range value becomes is taken from torch (e5m2: inf, as IEEE rounding says; e4m3fn,
which has no inf: saturated to +-448, as torch and the GPU's `cvt.rn.satfinite` do): the
NPU's own choice is inferred, not verified.  The other float8 formats of Triton (fp8e4b8,
fp8e5b16, fp8e4b15: AMD's and older NVIDIA's) are left to the interpreter.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl


# ---- bfloat16 ------------------------------------------------------------------------------

def f32_to_bf16_rtne(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of float32 `values`, rounded to nearest, ties to even;
    NaNs stay quiet NaNs of the same sign (adding the rounding bias could carry a NaN into inf)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if np.any(nan):
        rounded = np.where(nan, ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), rounded)
    return rounded


def f32_to_bf16_rtz(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 `values`, rounded toward zero (the low 16 bits dropped;
    a NaN is kept quiet, which dropping its payload could turn into inf)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    out = (bits >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(values)
    if np.any(nan):
        out = np.where(nan, out | np.uint16(0x0040), out)
    return out


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (exact: bfloat16 is float32's upper half)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


# ---- float8 (e5m2, e4m3fn) ---------------------------------------------------------------

class Fp8:
    """One float8 format: sign, `exp_bits` exponent bits of bias 2**(exp_bits-1)-1, `man_bits`
    mantissa bits; IEEE specials (inf, NaN) when `ieee`, else e4m3fn's (only S.1111.111 is
    NaN, no inf; overflow saturates).  Conversions by table: the 256 codes decoded once."""

    def __init__(self, exp_bits: int, man_bits: int, ieee: bool):
        self.man_bits, self.ieee = man_bits, ieee
        bias = (1 << (exp_bits - 1)) - 1
        codes = np.arange(256, dtype=np.uint32)
        e = (codes >> man_bits) & ((1 << exp_bits) - 1)
        f = codes & ((1 << man_bits) - 1)
        mag = np.where(e == 0, f * 2.0 ** (1 - bias - man_bits), (1 + f / 2.0 ** man_bits) * 2.0 ** (e.astype(np.float64) - bias))
        top = e == (1 << exp_bits) - 1
        if ieee:
            mag = np.where(top & (f == 0), np.inf, np.where(top, np.nan, mag))
        else:
            mag = np.where(top & (f == (1 << man_bits) - 1), np.nan, mag)
        self.table = np.where(codes & 0x80, -mag, mag).astype(np.float32)
        # the finite non-negative values in code order (increasing), then the value the next
        # code would have: a magnitude that rounds to it has overflowed
        finite = mag[:128][np.isfinite(mag[:128])]
        self.ladder = np.append(finite, 2 * finite[-1] - finite[-2])
        self.max_code = len(finite) - 1
        self.nan_code = 0x7F
        self.inf_code = 0x7C if ieee else None

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(codes, dtype=np.uint8)]

    def encode(self, values: np.ndarray, rtz: bool = False) -> np.ndarray:
        x = np.asarray(values, dtype=np.float64)
        a = np.abs(x)
        ladder, top = self.ladder, self.max_code + 1
        if rtz:
            code = np.clip(np.searchsorted(ladder, a, side="right") - 1, 0, self.max_code)
        else:
            hi = np.clip(np.searchsorted(ladder, a, side="left"), 1, top)
            lo = hi - 1
            d_lo, d_hi = a - ladder[lo], ladder[hi] - a
            code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
        over = (code >= top) | (a > ladder[-1]) | np.isinf(a)
        if np.any(over):     # IEEE formats overflow to inf (toward zero: to the largest finite)
            code = np.where(over, self.inf_code if self.ieee and not rtz else self.max_code, code)
            if self.ieee and rtz:
                code = np.where(np.isinf(a), self.inf_code, code)
        code = code.astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
        nan = np.isnan(x)
        if np.any(nan):
            code = np.where(nan, np.uint8(self.nan_code) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8), code)
        return code.astype(np.uint8)


FP8 = {tl.float8e5: Fp8(5, 2, ieee=True), tl.float8e4nv: Fp8(4, 3, ieee=False)}

# the formats whose values the interpreter keeps as raw bits and sim/low_precision.py computes on
RAW_BITS = (tl.bfloat16,) + tuple(FP8)


def decode(bits: np.ndarray, dtype) -> np.ndarray:
    """float32 values of the raw bits of a bfloat16 / float8 tensor of Triton type `dtype`."""
    if dtype == tl.bfloat16:
        return bf16_to_f32(bits)
    return FP8[dtype].decode(bits)


def encode(values: np.ndarray, dtype, rtz: bool = False) -> np.ndarray:
    """Raw bits of `values` (float32 or float64) in `dtype`, to nearest even (toward zero if `rtz`)."""
    if dtype == tl.bfloat16:
        v = np.asarray(values, dtype=np.float32)
        return f32_to_bf16_rtz(v) if rtz else f32_to_bf16_rtne(v)
    return FP8[dtype].encode(values, rtz)
