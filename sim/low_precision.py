"""bfloat16 and float8 arithmetic as the NPU computes it: on the values, in float32, each
result rounded to nearest even back to the storage type.

Triton's interpreter keeps bfloat16 as uint16 and float8 as uint8 bit patterns and runs its
element-wise ops, reductions and scans on those integers (stock 3.5.1, 3.6.0 and 3.9.0 alike,
and triton-ascend's main line, whose interpreter is 3.5's): bf16 `x + y` of [1.5, -2, 0.25, 3]
and [2, 0.5, -1, 1] gives [nan, -1.7e38, -4.25e37, nan], a bf16 sort orders bit patterns.
float16 is a numpy float16 there: numpy computes each op in float32 and rounds once, which is
right, so float16 element-wise ops are left alone.

What the NPU does (AscendNPU-IR, commit 52f96a13):
- bfloat16: the `hfusion-legalize-bf16` pass (bishengir/lib/Dialect/HFusion/Transforms/
  LegalizeBF16.cpp :86-110, :242-278, :309-327) rewrites every linalg and HFusion structured op
  with a bf16 operand -- element-wise ops, compares, linalg.reduce, hfusion.cumsum, hfusion.sort,
  isnan/isinf -- into: cast the operands to f32, compute in f32 (a reduction's region too), cast
  the results back to bf16 (RINT: to nearest, ties to even, sim/float_casts.py).  Casts,
  copies, selects, broadcasts, transposes and matmuls keep bf16.  So a bf16 op is one f32 op
  rounded once, and a bf16 reduction or scan accumulates in f32 and rounds each result once.
  Those casts carry fastmath<contract>, and SimplifyOps (HFusion/Transforms/SimplifyOps.cpp
  :105-249: CastOpPattern; :256- LoopedCastOpPattern for loop-carried values) removes an
  f32 -> bf16 -> f32 pair whose down-cast is such a cast: a legalized op's f32 result feeds the
  next legalized op, a user's `.to(tl.float32)` and the next loop iteration unrounded; only
  what leaves the chain (a store, a select, a reshape or trans, a user's down-cast) is
  rounded (a broadcast keeps the f32 value: measured below).  Measured with bishengir-compile (ascendnpu-ir 1.2.0, --target=Ascend910B4, the
  IR after convert-hivm-to-std): bf16 `x * y + z` is vcast, vmul f32, vadd f32, one vcast back;
  `(a + b).to(tl.float32) * 3` multiplies the f32 sum, not the stored bf16; a bf16 accumulator
  `acc += tl.load(...)` in a loop is carried as f32 and rounded once at the store.  So each
  bf16 result here keeps its f32 value beside its bits (handle.attr[SHADOW]); the ops
  above read it, expand_dims/broadcast carry it (`h[None, :] * c` multiplies the f32 h), every
  other op (select, splat, reshape, trans, store, atomics, casts to other types: each measured
  or outside LegalizeBF16) sees the rounded bits.
- float8 (e5m2, e4m3fn): `hfusion-legalize-fp8` (LegalizeFP8.cpp) computes through f32 too,
  without contract flags; the simulator rounds every float8 result (the NPU's chains of float8
  ops: inferred, not verified; Ascend910B4 has no float8).
- float16: native on the vector unit (measured: `x * y + z` is vmul/vadd on half), except
  reductions and scans: a reduction whose combine adds is computed in f32 and rounded once
  (`NormalizeF16ReduceSum`, HFusion/Transforms/Normalize.cpp :7672-7718; measured: vcast, a f32
  reduce, one vcast back), and tl.cumsum is a f32 loop rounded once per element (measured).  The
  simulator reduces and scans float16 in f32 for every combine function (a product reduction,
  rounded per step on the NPU by that pattern's condition: inferred, not verified).

How: `install` wraps the interpreter builder's methods named in WRAPPED (and WRAPPED_IF_PRESENT),
adds the bf16/fp8 constant makers (CONSTANTS), and wraps the interpreter's reduce/scan entry
(ReduceOps.apply, ScanOps.apply).  Each element-wise wrapper looks at its first operand's numpy storage once:
anything not stored as unsigned integers (float32, float16, float64) goes straight to the
interpreter's own method, so float32 and integer kernels pay one attribute test per float op
and nothing per integer or pointer op (those methods are not wrapped).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _interp

from .float_casts import RAW_BITS, decode, encode

TensorHandle = _interp.TensorHandle


def _raw(h) -> bool:
    """True for a handle of bfloat16 / float8 (kept as raw unsigned bits by the interpreter)."""
    return h.data.dtype.kind == "u" and h.dtype in RAW_BITS


# a bf16 result's float32 value before its rounding (see above), kept in the handle's attributes
SHADOW = "td_f32"


def _value(h) -> np.ndarray:
    """The float32 values a legalized op reads from a bf16/fp8 handle: its unrounded f32 result
    where it has one, else its bits' values."""
    shadow = h.attr.get(SHADOW)
    return shadow if shadow is not None else decode(h.data, h.dtype)


def _result(values, dtype) -> TensorHandle:
    """A legalized op's result: rounded bits; a bf16 one keeps its f32 values as its shadow."""
    values = np.asarray(values, dtype=np.float32)
    h = TensorHandle(encode(values, dtype), dtype)
    if dtype == tl.bfloat16:
        h.attr[SHADOW] = values
    return h


def _wide(h) -> TensorHandle:
    return TensorHandle(_value(h), tl.float32)


# ---- element-wise ops: computed in f32 ------------------------------------------------------

def _rounded(orig, arity=None):
    """An op whose result has its operands' type: computed on the f32 values, rounded once.
    Unary and binary ops get a wrapper of their own arity (no *args packing: these are the
    calls a float32 kernel makes most)."""
    def slow(self, *args):
        dtype = args[0].dtype
        out = orig(self, *(_wide(a) if isinstance(a, TensorHandle) and _raw(a) else a for a in args))
        return _result(out.data, dtype)

    if arity == 1:
        def op(self, arg):
            if arg.data.dtype.kind != "u" or arg.dtype not in RAW_BITS:
                return orig(self, arg)
            return slow(self, arg)
    elif arity == 2:
        def op(self, lhs, rhs):
            if lhs.data.dtype.kind != "u" or lhs.dtype not in RAW_BITS:
                return orig(self, lhs, rhs)
            return slow(self, lhs, rhs)
    else:
        def op(self, *args):
            first = args[0]
            if first.data.dtype.kind != "u" or first.dtype not in RAW_BITS:
                return orig(self, *args)
            return slow(self, *args)
    op.__wrapped__ = orig
    return op


def _rounded_f16_too(orig):
    """As _rounded, and float16 computed in f32 and rounded once as well: the interpreter's own
    rounds twice in float16 (fma's product, rsqrt's square root) or fails (erf of float16 is
    computed in float64 and refused as too wide)."""
    rounded = _rounded(orig)

    def op(self, *args):
        first = args[0]
        if first.data.dtype != np.float16:
            return rounded(self, *args)
        out = orig(self, *(TensorHandle(a.data.astype(np.float32), tl.float32) if isinstance(a, TensorHandle) else a
                           for a in args))
        return TensorHandle(np.asarray(out.data).astype(np.float16), first.dtype)
    op.__wrapped__ = orig
    return op


def _compared(orig):
    """A comparison: on the f32 values, its result as for float32 operands."""
    def op(self, lhs, rhs):
        if lhs.data.dtype.kind != "u" or lhs.dtype not in RAW_BITS:
            return orig(self, lhs, rhs)
        return orig(self, _wide(lhs), _wide(rhs))
    op.__wrapped__ = orig
    return op


# ---- casts ----------------------------------------------------------------------------------

def _fp_trunc(orig):
    """float32/float64 -> bfloat16: to nearest even (the interpreter drops the low bits)."""
    def create_fp_trunc(self, src, dst_type):
        dst = dst_type.scalar
        if dst in RAW_BITS and src.dtype.scalar in (tl.float32, tl.float64):
            return TensorHandle(encode(np.asarray(src.data).astype(np.float32), dst), dst)
        return orig(self, src, dst_type)
    create_fp_trunc.__wrapped__ = orig
    return create_fp_trunc


def _fp_ext(orig):
    """bfloat16 -> float32: the exact value (of an unrounded legalized result: its f32 value,
    the NPU's compiler removes that cast pair, see above)."""
    def create_fp_ext(self, src, dst_type):
        if _raw(src):
            wide = _value(src)
            return TensorHandle(wide.astype(_interp._get_np_dtype(dst_type)), dst_type.scalar)
        return orig(self, src, dst_type)
    create_fp_ext.__wrapped__ = orig
    return create_fp_ext


def _int_to_fp(orig):
    """integer -> bfloat16: the integer's value, rounded (through float32, as torch does)."""
    def op(self, src, dst_type):
        dst = dst_type.scalar
        if dst in RAW_BITS:
            return TensorHandle(encode(np.asarray(src.data).astype(np.float32), dst), dst)
        return orig(self, src, dst_type)
    op.__wrapped__ = orig
    return op


def _fp_to_fp(orig):
    """Any float <-> float8, and down-casts to bfloat16 with a rounding mode the kernel chose:
    through the value, rounded as asked (the interpreter's own rounds ties away from zero on
    the bits).  A float8 value is exact in every wider format."""
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        dst = dst_type.scalar
        if not (_raw(src) or dst in RAW_BITS):
            return orig(self, src, dst_type, rounding_mode)
        value = decode(src.data, src.dtype) if _raw(src) else np.asarray(src.data).astype(np.float64)
        if dst in RAW_BITS:
            rtz = rounding_mode == _interp._ir.ROUNDING_MODE.RTZ
            return TensorHandle(encode(value, dst, rtz=rtz), dst)
        return TensorHandle(value.astype(_interp._get_np_dtype(dst_type)), dst)
    create_fp_to_fp.__wrapped__ = orig
    return create_fp_to_fp


# ---- sort (triton.language.extra.cann.extension.sort) -----------------------------------------

def _sort(orig):
    """bf16/float8 sorted by value (hfusion.sort is legalized to f32 like the rest); the result
    is a permutation of the input's bits, so nothing is rounded."""
    def create_sort(self, x, dim, descending):
        if not _raw(x):
            return orig(self, x, dim, descending)
        data = np.asarray(x.data)
        d = dim % data.ndim
        order = np.argsort(_value(x), axis=d, kind="stable")
        if descending:
            order = np.flip(order, axis=d)
        out = TensorHandle(np.take_along_axis(data, order, axis=d), x.dtype.scalar)
        if x.attr.get(SHADOW) is not None:
            out.attr[SHADOW] = np.take_along_axis(x.attr[SHADOW], order, axis=d)
        return out
    create_sort.__wrapped__ = orig
    return create_sort


# ---- atomic add of bf16 (the only atomic Triton allows on it) ---------------------------------

def _atomic_rmw(orig):
    """tl.atomic_add on bf16: the interpreter's C++ atomic has no bf16 add ("Unsupported data
    type"); each active lane is a compare-and-swap loop on its 16-bit word through the builder's
    own create_atomic_cas (the simulator's access path: its checks, ordering and schedule
    points), adding in f32 and rounding once.  The NPU adds bf16 atomically too (a bare atomic
    `hivm.store`, docs/device_model.md); its rounding there: inferred, not verified."""
    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        if not (_raw(val) and val.dtype == tl.bfloat16 and rmwOp == _interp._ir.ATOMIC_OP.FADD):
            return orig(self, rmwOp, ptr, val, mask, sem, scope)
        ptrs, vals = np.asarray(ptr.data), np.asarray(val.data)
        active = np.broadcast_to(np.asarray(mask.data, dtype=bool) if mask is not None else True, ptrs.shape)
        old = np.zeros(ptrs.shape, dtype=np.uint16)
        for i in zip(*np.nonzero(active)) if ptrs.ndim else [()]:
            lane = TensorHandle(ptrs[i].reshape(1), ptr.dtype, dict(getattr(ptr, "attr", {})))
            add = decode(vals[i].reshape(1), tl.bfloat16)
            seen = self.create_atomic_cas(lane, TensorHandle(np.zeros(1, np.uint16), tl.bfloat16),
                                          TensorHandle(np.zeros(1, np.uint16), tl.bfloat16), sem, scope).data
            while True:            # `seen` is the word's value; swap in seen + add unless it changed
                new = encode(decode(seen, tl.bfloat16) + add, tl.bfloat16)
                got = self.create_atomic_cas(lane, TensorHandle(seen.astype(np.uint16), tl.bfloat16),
                                             TensorHandle(new, tl.bfloat16), sem, scope).data
                if got[0] == seen[0]:
                    break
                seen = got
            old[i] = seen[0]
        return TensorHandle(old, val.dtype)
    create_atomic_rmw.__wrapped__ = orig
    return create_atomic_rmw


def _print(orig):
    """tl.device_print of bf16/fp8 shows the values (the interpreter printed the raw bits);
    hex=True still prints the bits."""
    def create_print(self, prefix, hex, values, isSigned):
        if not hex and any(_raw(v) for v in values):
            values = [TensorHandle(decode(v.data, v.dtype), tl.float32) if _raw(v) else v for v in values]
        return orig(self, prefix, hex, values, isSigned)
    create_print.__wrapped__ = orig
    return create_print


def _keeps_shadow(orig):
    """expand_dims and broadcast move a bf16 result's f32 value along with its bits (measured:
    `h[None, :] * c` of a bf16 sum h multiplies the f32 sum; a reshape or a trans rounds it first,
    so those drop it).  One dict look-up for every other handle (pointers among them)."""
    def op(self, arg, how):
        out = orig(self, arg, how)
        shadow = arg.attr.get(SHADOW)
        if shadow is not None:
            out.attr[SHADOW] = orig(self, TensorHandle(shadow, tl.float32), how).data
        return out
    op.__wrapped__ = orig
    return op


# which builder methods are wrapped, and how
_BINARY = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_precise_divf",
           "create_minimumf", "create_minnumf", "create_maximumf", "create_maxnumf")
_UNARY = ("create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt", "create_precise_sqrt",
          "create_sin", "create_cos", "create_floor", "create_ceil")
_ROUNDED_F16_TOO = ("create_fma", "create_rsqrt", "create_erf")
_COMPARED = tuple(f"create_fcmp{o}{c}" for o in "OU" for c in ("LT", "GT", "LE", "GE", "EQ", "NE"))
WRAPPED = {**{name: lambda orig: _rounded(orig, 2) for name in _BINARY},
           **{name: lambda orig: _rounded(orig, 1) for name in _UNARY}, "create_clampf": _rounded,
           **{name: _rounded_f16_too for name in _ROUNDED_F16_TOO},
           **{name: _compared for name in _COMPARED},
           "create_fp_trunc": _fp_trunc, "create_fp_ext": _fp_ext, "create_si_to_fp": _int_to_fp,
           "create_ui_to_fp": _int_to_fp, "create_fp_to_fp": _fp_to_fp, "create_atomic_rmw": _atomic_rmw,
           "create_print": _print, "create_expand_dims": _keeps_shadow, "create_broadcast": _keeps_shadow}
# wrapped where the builder has them (create_sort: stock triton gets it from sim/cann_device.py,
# triton-ascend brings its own, which sorts bit patterns as well)
WRAPPED_IF_PRESENT = {"create_sort": _sort,
                      # Triton 3.9's builder negates with its own op (np.negative of the bits) and
                      # has tl.math.fdiv's approximate division
                      "create_fneg": lambda orig: _rounded(orig, 1), "create_approx_divf": lambda orig: _rounded(orig, 2)}


# ---- scalar constants --------------------------------------------------------------------------
# `x + 2.0` with a bf16 `x` makes the constant with builder.get_bf16 (triton/language/semantic.py
# of 3.6.0, scalar_constant: getattr(builder, f"get_{dtype.name}")), which the interpreter's
# builder of 3.5/3.6 lacks (3.9 has it: create_fp_trunc of get_fp32); fp8 constants neither.

def _constant(dtype):
    def get(self, value):
        return TensorHandle(encode(np.array([value], dtype=np.float64), dtype), dtype)
    return get


CONSTANTS = {f"get_{dtype.name}": _constant(dtype) for dtype in RAW_BITS}


# ---- reductions and scans: accumulated in f32 -----------------------------------------------

# float16 too: measured, a float16 tl.sum is vcast to f32, a f32 reduce, one vcast back, and a
# float16 tl.cumsum a f32 loop with one vcast back per element (bishengir-compile, see above)
_WIDENED_REDUCE = RAW_BITS + (tl.float16,)
_WIDENED_SCAN = RAW_BITS + (tl.float16,)


def _widen_tensor(t):
    if t.dtype == tl.float16:
        data = np.asarray(t.handle.data).astype(np.float32)
    else:
        data = _value(t.handle)
    ty = tl.block_type(tl.float32, list(t.shape)) if t.type.is_block() else tl.float32
    return tl.core.tensor(TensorHandle(data, tl.float32), ty)


def _narrow_tensor(t, dtype):
    """A reduction's or scan's f32 result rounded to `dtype`.  A bf16 block result keeps its f32
    value (measured: tl.sum(x, 1) * 2 multiplies the f32 sums); a scalar one does not (measured:
    tl.sum(x) * 2 extracts the rounded bf16 scalar, then multiplies)."""
    data = np.asarray(t.handle.data, dtype=np.float32)
    if dtype == tl.float16:
        h = TensorHandle(data.astype(np.float16), dtype)
    elif t.type.is_block():
        h = _result(data, dtype)
    else:
        h = TensorHandle(encode(data, dtype), dtype)
    ty = tl.block_type(dtype, list(t.shape)) if t.type.is_block() else dtype
    return tl.core.tensor(h, ty)


def _in_f32(orig, widened):
    """ReduceOps/ScanOps.apply with the `widened` inputs given as f32 (the combine function
    too sees f32 values), each f32 result rounded back to its input's type."""
    def apply(self, input):
        if not isinstance(input, tuple):
            return apply(self, (input,))[0]
        kinds = [t.dtype if isinstance(t, tl.core.tensor) and t.dtype in widened else None for t in input]
        if not any(kinds):
            return orig(self, input)
        out = orig(self, tuple(_widen_tensor(t) if k else t for t, k in zip(input, kinds)))
        return tuple(_narrow_tensor(o, k) if k and isinstance(o, tl.core.tensor) and o.dtype == tl.float32 else o
                     for o, k in zip(out, list(kinds) + [None] * (len(out) - len(kinds))))
    apply.__wrapped__ = orig
    return apply


def entry_points(builder_class) -> tuple:
    """(owner, name) of what `install` wraps (tests/test_low_precision.py checks they exist on
    every supported triton)."""
    return tuple((builder_class, name) for name in WRAPPED) + \
        ((_interp.ReduceOps, "apply"), (_interp.ScanOps, "apply"))


def install(builder_class) -> None:
    """Wrap the interpreter's builder methods of WRAPPED (and WRAPPED_IF_PRESENT) on
    `builder_class` and its reduce/scan entry; run once, after the device ops are installed."""
    for name, wrap in WRAPPED.items():
        setattr(builder_class, name, wrap(getattr(builder_class, name)))
    for name, get in CONSTANTS.items():
        setattr(builder_class, name, get)           # where the builder has one, it rounds the same
    for name, wrap in WRAPPED_IF_PRESENT.items():
        if hasattr(builder_class, name):
            setattr(builder_class, name, wrap(getattr(builder_class, name)))
    _interp.ReduceOps.apply = _in_f32(_interp.ReduceOps.apply, _WIDENED_REDUCE)
    _interp.ScanOps.apply = _in_f32(_interp.ScanOps.apply, _WIDENED_SCAN)
