"""triton-ascend's `cast(..., overflow_mode=)` on stock triton (installed with the simulator's
triton.language.extra.cann.extension, sim/compat/cann.py).

What triton-ascend does, read at triton-lang/triton-ascend a84b1eb52b6215e2c171632f2df0892f1003cfc8:
- third_party/ascend/language/cann/extension/vec_ops.py:508-544, `cast` (exported by the
  extension, and made `tl.tensor.cast` by its @_tensor_member_fn when the extension is imported,
  python/triton/language/core.py:90): overflow_mode is None, "trunc" or "saturate", anything else
  `ValueError("Unknown overflow_mode:... is found.")`; its docstring (:523-526): "trunc" cuts off
  (wraps), "saturate" gives the type's extreme value.  The cast itself is ascend_cast_impl
  (:382-505); with "saturate", an integer narrowing that involves an unsigned type goes through
  fp32 (:458-466) and the result is marked `annotation.mark {overflow_mode = "saturate"}`
  (:536-541, aux_ops.py:96-117), which the NPU compiler reads (what it does with it: inferred).
- python/triton/language/core.py:1956-1977, `tl.cast` (and `tensor.to`, :1110-1114): takes
  overflow_mode and does not pass it on: the plain cast, whatever the mode.

On the simulator "saturate" clamps to the target's range (integers: its min/max; floats: +-its
largest finite value, as triton-ascend's test_common.validate_cmp clamps, unittest/kernels/
test_common.py:16-28); NaN to an integer gives 0 (inferred, not verified).  "trunc" and no mode are
the plain cast.  Traced for the NPU (backend_ascend/frontend.py), the cast is emitted as
triton-ascend emits it (through fp32 where it does) and its result marked with the mode
(triton_dist/language/_ext_emit.annotation_mark -> `annotation.mark {overflow_mode = ...}`).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from triton_dist.language import _dispatch as D

OVERFLOW_MODES = ("trunc", "saturate")


def _check_mode(mode):
    mode = D.unwrap(mode)
    if mode is not None and mode not in OVERFLOW_MODES:
        raise ValueError(f"Unknown overflow_mode:{mode} is found.")       # vec_ops.py:543
    return mode


def _int_range(ty):
    bits = ty.int_bitwidth
    if ty.is_int_signed():
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _float_max(ty) -> float:
    if ty.is_bf16():
        return 3.3895313892515355e38
    from triton.runtime.interpreter import _get_np_dtype
    return float(np.finfo(_get_np_dtype(ty)).max)


def _saturated(x, dst, _semantic):
    """x cast to dst with values outside dst's range clamped (the simulator's "saturate")."""
    src = x.type.scalar
    if src == dst or dst.is_bool() or not (src.is_int() or src.is_floating()) or not (dst.is_int() or dst.is_floating()):
        return None
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    data = np.asarray(x.handle.data)
    ret_ty = x.type.with_element_ty(dst) if x.type.is_block() else dst
    if dst.is_int():
        lo, hi = _int_range(dst)
        if src.is_floating():
            wide = data.astype(np.float64)
            out = np.clip(np.trunc(np.nan_to_num(wide, nan=0.0, posinf=hi, neginf=lo)), lo, hi)
        else:
            out = np.clip(data.astype(object), lo, hi)
        return tl.tensor(TensorHandle(np.asarray(out).astype(_get_np_dtype(dst)), dst), ret_ty)
    m = _float_max(dst)
    if src.is_int():
        lo, hi = _int_range(src)
        clamped = np.clip(data, max(lo, -int(m)), min(hi, int(m))).astype(data.dtype)
    elif src.primitive_bitwidth > dst.primitive_bitwidth:
        clamped = np.where(np.isnan(data), data, np.clip(data, -m, m)).astype(data.dtype)
    else:
        return None
    return _semantic.cast(tl.tensor(TensorHandle(clamped, src), x.type), dst)


def _unsigned_narrowing(src, dst) -> bool:
    """vec_ops.py:458-460: the integer casts that go through fp32 under "saturate"."""
    return (src.is_int() and dst.is_int() and not dst.is_bool()
            and (src.is_int_unsigned() or dst.is_int_unsigned()) and src.int_bitwidth >= dst.int_bitwidth
            and (src.int_bitwidth != dst.int_bitwidth or src.int_signedness != dst.int_signedness))


def _interpreter_semantic():
    from triton.language.semantic import TritonSemantic
    from triton.runtime import interpreter
    return TritonSemantic(interpreter.interpreter_builder)


def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, overflow_mode=None, _semantic=None):
    """triton-ascend's extension cast (vec_ops.py:508): tl.cast with overflow_mode honoured."""
    mode = _check_mode(overflow_mode)
    if _semantic is None:       # the extension module is not one the interpreter patches: a simulator run
        _semantic = _interpreter_semantic()
    dtype, bitcast = D.unwrap(dtype), D.unwrap(bitcast)
    fp_downcast_rounding = D.unwrap(fp_downcast_rounding)
    input = _semantic.to_tensor(input)
    if bitcast:
        return _semantic.bitcast(input, dtype)
    interpreting = D.interpreting(_semantic)
    if mode == "saturate":
        dst = dtype.scalar if hasattr(dtype, "scalar") else dtype
        if interpreting:
            out = _saturated(input, dst, _semantic)
            if out is not None:
                return out
        elif _unsigned_narrowing(input.type.scalar, dst):
            input = _semantic.cast(input, tl.float32)
    out = _semantic.cast(input, dtype, fp_downcast_rounding)
    if mode is not None and not interpreting and out is not input:
        # vec_ops.py:536-541: the result marked with the mode, which the NPU compiler reads
        # (bishengir-compile 1.2.0 lowers a marked fp32 -> int8 cast with saturating conversions)
        from triton_dist.language import _ext_emit
        _ext_emit.annotation_mark(out, "overflow_mode", mode, _semantic)
    return out


setattr(cast, tl.core.TRITON_BUILTIN, True)


def _ignoring_overflow_mode(stock):
    """tl.cast / tensor.to as triton-ascend's core.py has them: overflow_mode taken, not used."""
    def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, overflow_mode=None, _semantic=None):
        _check_mode(overflow_mode)
        return stock(input, dtype, fp_downcast_rounding, bitcast, _semantic=_semantic)
    cast.__wrapped__ = stock
    cast.__doc__ = stock.__doc__
    setattr(cast, tl.core.TRITON_BUILTIN, True)
    return cast


def _to_ignoring_overflow_mode(stock_cast):
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, overflow_mode=None, _semantic=None):
        _check_mode(overflow_mode)
        return stock_cast(self, dtype, fp_downcast_rounding, bitcast, _semantic=_semantic)
    setattr(to, tl.core.TRITON_BUILTIN, True)
    return to


def install() -> None:
    """As importing triton-ascend's extension and its core.py make them: tl.tensor.cast is the
    extension's cast; tl.cast and tensor.to take overflow_mode (and drop it).  Idempotent."""
    core = tl.core
    if not getattr(core.cast, "_td_overflow_mode", False):
        stock = core.cast
        wrapped = _ignoring_overflow_mode(stock)
        wrapped._td_overflow_mode = True
        core.cast = wrapped
        tl.cast = wrapped
        core.tensor.to = _to_ignoring_overflow_mode(stock)

    def member(self, dtype, fp_downcast_rounding=None, bitcast=False, overflow_mode=None, _semantic=None):
        return cast(self, dtype, fp_downcast_rounding, bitcast, overflow_mode, _semantic=_semantic)
    setattr(member, tl.core.TRITON_BUILTIN, True)
    core.tensor.cast = member
