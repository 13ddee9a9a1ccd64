"""Compiled mode on backend="cuda": each dl op / extern_call becomes a call of its aclshmem symbol.

The symbol is chosen exactly as the HIVM lowering chooses it (triton_dist/symbols.py:
`aclshmem_ptr_float`, `aclshmem_wait_int32`, `aclshmemx_signal_op` with SET=0/ADD=1, ...),
and defined for the GPU by devlib.py, which every kernel links (loader.py).  The call is a
`tt.extern_elementwise` on scalars, so every thread of the program makes it; devlib's
functions are written for that.  Calls that translate an address or wait get one more
argument, the kernel source line, for the timeout report.
"""
from __future__ import annotations

import sys

import triton.language as tl

from triton_dist import symbols as S
from triton_dist.errors import TritonDistError

from . import devlib


def _line() -> int:
    """The source line of the dl call being compiled (0 if it cannot be told)."""
    f = sys._getframe(2)
    while f is not None:
        gen = f.f_locals.get("self")
        if type(gen).__name__ == "CodeGenerator" and getattr(gen, "cur_node", None) is not None:
            return int(getattr(gen.cur_node, "lineno", 0) + getattr(gen, "begin_line", 0))
        f = f.f_back
    return 0


def _const(_semantic, value: int, dtype=tl.int32):
    return _semantic.to_tensor(value) if dtype == tl.int32 else _semantic.cast(_semantic.to_tensor(value), dtype)


def _as(x, dtype, _semantic, what):
    x = x.value if isinstance(x, tl.constexpr) else x
    if not isinstance(x, tl.tensor):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise TritonDistError(f"{what}: expected a number or a scalar tensor, got {x!r}")
        x = _semantic.to_tensor(x)
    if x.type.is_block():
        raise TritonDistError(f"{what}: expected a scalar, got a block {x.type}")
    return x if x.type.scalar == dtype else _semantic.cast(x, dtype)


def _type_name(dtype, what) -> str:
    name = S.TYPE_NAMES.get(dtype.name)
    if name is None:
        raise TritonDistError(f"{what}: no device-library symbol for element type {dtype}; supported: "
                              f"{', '.join(S.TYPE_NAMES)}")
    return name


def _call(_semantic, symbol, args, ret_ty, pure, line=None):
    if symbol not in devlib.SYMBOLS:
        raise TritonDistError(f"{symbol}: not defined by the CUDA device library (backend 'cuda' links "
                              f"backend_cuda/devlib.py, which defines the aclshmem symbols of "
                              f"triton_dist/symbols.py); use a libshmem_device function")
    if devlib.takes_site(symbol):
        args = list(args) + [_const(_semantic, line if line is not None else _line())]
    b = _semantic.builder
    ty = tl.int32 if ret_ty is None else ret_ty
    handle = b.create_extern_elementwise(devlib.LIBNAME, "", symbol, [a.handle for a in args], ty.to_ir(b),
                                         bool(pure))
    return None if ret_ty is None else tl.tensor(handle, ty)


def _depend(value, token, _semantic):
    """value + (token >> 31) * 16: the same value for every token dl.wait returns (0, and any
    non-negative int), but computed from the token, so no pass can move a load through the
    result above the wait; and, unlike an opaque call, it keeps what the compiler knows about
    the value's alignment (a multiple of 16 stays one), which vectorized and pipelined
    loads need."""
    zero = _semantic.mul(_semantic.ashr(token, _semantic.to_tensor(31)), _semantic.to_tensor(16), True)
    if value.type.scalar.is_int() and value.type.scalar != tl.int32:
        zero = _semantic.cast(zero, value.type.scalar)
    if value.type.is_block():
        zero = _semantic.broadcast_impl_shape(zero, value.shape)
    return _semantic.add(value, zero, True)


def emit(op, operands, _semantic, **attrs):
    """Emit dl.<op> (or an extern_call) into a kernel compiled for CUDA."""
    line = _line()
    if op in ("rank", "num_ranks"):
        return _call(_semantic, S.DL_OPS[op].symbol, [], tl.int32, True)
    if op == "symm_at":
        ptr, rank = operands
        sym = S.DL_OPS[op].symbol_for(_type_name(ptr.type.element_ty, "symm_at"))
        return _call(_semantic, sym, [ptr, _as(rank, tl.int32, _semantic, "symm_at rank")], ptr.type, False, line)
    if op == "notify":
        ptr, rank, signal = operands
        dtype = ptr.type.element_ty.name
        sym = S.notify_symbol(dtype, attrs["sig_op"])
        rank = _as(rank, tl.int32, _semantic, "notify rank")
        if sym == "aclshmemx_signal_op":
            args = [ptr, _as(signal, tl.int32, _semantic, "notify signal"),
                    _const(_semantic, S.SIG_OPS[attrs["sig_op"]]), rank]
        else:
            args = [ptr, _as(signal, tl.int64, _semantic, "notify signal"), rank]
        return _call(_semantic, sym, args, None, False, line)
    if op == "wait":
        ptr, n, wait_value = operands
        elem = ptr.type.element_ty
        try:                        # the rule every backend applies (triton_dist/symbols.py)
            sym = S.wait_symbol(elem.name)
        except ValueError as e:
            raise TritonDistError(f"dl.{e}") from None
        return _call(_semantic, sym,
                     [ptr, _as(n, tl.int32, _semantic, "wait numBarriers"),
                      _as(wait_value, elem, _semantic, "wait waitValue")], tl.int32, False, line)
    if op == "consume_token":
        value, token = operands
        value = value if isinstance(value, tl.tensor) else _semantic.to_tensor(value)
        token = _as(token, tl.int32, _semantic, "consume_token token")
        scalar = value.type.scalar
        if scalar.is_ptr() or scalar.is_int():
            return _depend(value, token, _semantic)
        if scalar.is_ptr():
            rank = len(value.shape) if value.type.is_block() else 1
            tn = f"{_type_name(scalar.element_ty, 'consume_token')}_ptr_{min(rank, 3)}d"
        else:
            tn = _type_name(scalar, "consume_token")
        if value.type.is_block():
            token = _semantic.broadcast_impl_shape(token, value.shape)
        return _call(_semantic, S.DL_OPS[op].symbol_for(tn), [value, token], value.type, True)
    if op == "extern_call":
        ret = attrs.get("ret")
        ret_ty = None if ret is None or ret == () else ret
        args = [a if isinstance(a, tl.tensor) else _semantic.to_tensor(a) for a in operands]
        return _call(_semantic, attrs["symbol"], args, ret_ty, bool(attrs.get("is_pure")), line)
    raise TritonDistError(f"dl.{op}: no compiled form is defined for this op on CUDA")
