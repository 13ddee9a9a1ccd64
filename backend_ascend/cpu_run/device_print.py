"""tl.device_print (Triton's `print` in a kernel) as the compiled kernel makes it: calls of the
template library's print functions, written to this process's stdout.

The 3.2.0 compilers emit, per printed value, `print_scalar_<T>_<gm|ubuf>(prefix, len, value, hex)`
or `print_<R>d_<T>_<gm|ubuf>(prefix, len, memref, hex)` (measured; Ascend/AscendNPU-IR at 52f96a13,
bishengir/lib/Template/include/Debug/DebugUtils.h:22-52 declares them, lib/Debug/Debug.cpp
implements them; read there, not at the v1.2.0 tag the other templates cite).  What each prints, from Debug.cpp (print_core_prefix_fmt, print_scalar_core,
print_nd_core_recursive, check_1d_rank_and_print_bracket):

- the `len` prefix characters, then a newline;
- a scalar with the element type's format (`%d` / `%lld` for signed, `%u` / `%llu` unsigned, `%f`
  for half/bfloat16/float through float32, `T`/`F` for bool; with hex: `%X` / `%llX`, `%A`), then
  a newline;
- init_debug / finish_debug around the kernel: nothing here (the text is written at each call);
- a tensor: its last axis as `[v,v,...,v]`; a rank-2 tensor's rows inside one more bracket, rows
  separated by `],\n` (`[[a,b],\n[c,d]]\n`); a rank > 2 tensor each last-two-axes slice headed by
  its leading indices, `(i, j, :, :):\n`.

On the NPU the text goes to a device buffer that the host prints after the kernel (triton-ascend
needs TRITON_DEVICE_PRINT=1 for it); here it is written at the call, to sys.stdout (what
contextlib.redirect_stdout in the rank captures).  The simulator prints in Triton's interpreter's
format instead: the lines differ in form, not in the values.
"""
from __future__ import annotations

import ctypes
import re
import sys

import numpy as np

from . import templates as T

_INT_FMT = {1: ("%d", "%X"), 2: ("%d", "%X"), 4: ("%d", "%X"), 8: ("%lld", "%llX")}


def _hexfloat(v: float) -> str:
    """C's %A of a float32 value (promoted to double, as printf's varargs do)."""
    h = float(v).hex()                     # '0x1.8000000000000p+1', '-0x0.0p+0', 'inf', 'nan'
    if "x" not in h:
        return h.upper()
    sign, rest = ("-", h[1:]) if h.startswith("-") else ("", h)
    mant, exp = rest[2:].split("p")
    return f"{sign}0X{mant.rstrip('0').rstrip('.').upper()}P{exp}"


def _formatter(dt, hex_: bool):
    """value -> text, as the template's printf format for element type dt prints it."""
    if dt is T.BF16 or np.dtype(dt).kind == "f":
        return _hexfloat if hex_ else (lambda v: "%f" % float(v))
    d = np.dtype(dt)
    if d.kind == "b":
        return lambda v: "T" if v else "F"
    bits = 8 * d.itemsize
    if hex_ or d.kind == "u":      # %X / %u read the value's bits as unsigned
        mask = (1 << bits) - 1
        return (lambda v: "%X" % (int(v) & mask)) if hex_ else (lambda v: "%d" % (int(v) & mask))
    return lambda v: "%d" % int(v)


def _prefix(ptr, n) -> str:
    return ctypes.string_at(ptr, int(n)).decode("utf-8", "replace") if ptr and n > 0 else ""


def _as_float(dt, v):
    if dt is T.BF16:
        return float(T.bf16_to_f32(np.array([v], dtype=np.uint16))[0])
    if dt is np.float16:
        return float(np.array([v], dtype=np.uint16).view(np.float16)[0])   # a half travels as its bits
    return v


def _tensor_text(a, fmt) -> str:
    """print_nd_core_recursive's output for the array `a` (its values already as printed)."""
    rank = a.ndim
    out = []

    def rec(dim, idx):
        if rank > 2 and dim == rank - 2:
            out.append("(" + "".join(f"{i}, " for i in idx) + ":, :):\n")
        if rank == 1 or rank - 2 <= dim <= rank - 1:
            out.append("[")
        if dim == rank - 1:
            out.append(",".join(fmt(v) for v in a[tuple(idx)]))
            if rank != 1 and dim != 0:
                out.append("],\n" if idx[-1] < a.shape[dim - 1] - 1 else "]")
        else:
            for i in range(a.shape[dim]):
                rec(dim + 1, idx + [i])
        if dim == rank - 2 or rank == 1:
            out.append("]\n")
    rec(0, [])
    return "".join(out)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def handler(name: str, params: list):
    """The implementation of print template `name`, or None."""
    if name in ("init_debug", "finish_debug"):
        # the device buffer the printed text goes through on the NPU (DebugUtils.h:163-166; the
        # InsertInitAndFinishForDebug pass puts them around a kernel that prints): nothing to set up here
        return lambda *_: None
    m = re.fullmatch(r"print_scalar_" + T._T + r"_(gm|ubuf)", name)
    if m:
        dt = T.DTYPES[m[1]]

        def print_scalar(prefix, n, value, hex_):
            v = _as_float(dt, value)
            _write(_prefix(prefix, n) + "\n" + _formatter(dt, bool(hex_))(v) + "\n")
        return print_scalar
    m = re.fullmatch(r"print_(\d)d_" + T._T + r"_(gm|ubuf)", name)
    if m:
        rank, dt, mem = int(m[1]), T.DTYPES[m[2]], m[3]
        c = T.Call(name, rank, dt)

        def print_tensor(prefix, n, desc, hex_):
            a = np.array(c.gm(desc, "read") if mem == "gm" else c.read(desc))
            if dt is T.BF16:
                a = T.bf16_to_f32(a)
            _write(_prefix(prefix, n) + "\n" + _tensor_text(a, _formatter(dt, bool(hex_))))
        return print_tensor
    return None
