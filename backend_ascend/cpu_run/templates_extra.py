"""Template-library functions templates.py does not have yet, found missing by the differential
run of --compare-backends sim,hivm (docs/ascend.md, "What it runs, and the compiler findings").
Consulted after templates.handler (runner.Native), in its style: numpy over the operands'
checked views (templates.Call), each citing AscendNPU-IR v1.2.0's bishengir/lib/Template.

- vshls_vs / vshrs_vs_<R>d_<T>: element-wise shift by a scalar (VecUtils.h:1621-1629 (1-D),
  1778- (2-D): DECLARE_ELTWISE_VS(vshls, VectorOpTy::VSHL, ...), (vshrs, VectorOpTy::VSHR, ...),
  for int16/uint16/int32/uint32).  The right shift of a signed type is taken as arithmetic, as
  arith.shrsi (what Triton's >> on a signed int lowers to) defines it; the vector unit's VSHR on
  signed types is inferred to match, not verified.
"""
from __future__ import annotations

import re

import numpy as np

from . import templates as T

_SHIFTS = {"shls": np.left_shift, "shrs": np.right_shift}     # numpy's >> is arithmetic on signed types


def handler(name: str, params: list):
    """The Python implementation of template function `name`, or None."""
    m = re.fullmatch(r"v(shls|shrs)_vs_(\d)d_" + T._T, name)
    if m:
        f, rank, dt = _SHIFTS[m[1]], int(m[2]), T.DTYPES[m[3]]
        c = T.Call(name, rank, dt)
        bits = np.dtype(dt).itemsize * 8

        def shift(a, s, dst, _tmp=None):
            n = int(s)
            x = c.read(a)
            if n >= bits:       # a shift by the width or more: what arith.shli/shrsi leave undefined
                out = np.zeros_like(x) if m[1] == "shls" or x.dtype.kind == "u" else np.where(x < 0, -1, 0)
            else:
                out = f(x, np.array(n, dtype=x.dtype))
            c.write(dst, out.astype(x.dtype))
        return shift
    return None
