"""triton-ascend's dtype rule for triton.language.math, applied to stock Triton's frontend.

Stock Triton refuses bfloat16 and float16 for tl.exp, tl.log, tl.sqrt and the other math
functions (triton/language/math.py of 3.5-3.9: `_check_dtype(dtypes=["fp32", "fp64"])`,
"Expected dtype ['fp32', 'fp64'] but got bf16"); triton-ascend accepts bf16, fp16, fp32, fp8e4nv,
fp8e5 and fp64 for exp, exp2, log, log2, cos, sin, sqrt, sqrt_rn, rsqrt, div_rn, erf and floor,
and checks nothing for ceil (triton-lang/triton-ascend a84b1eb5, python/triton/language/math.py
:99-248).  An Ascend kernel that calls tl.exp on a bf16 tensor is therefore refused by stock
Triton's frontend before the simulator sees it.

`install()` replaces those builtins (in triton.language and triton.language.math; the tl.tensor
methods `x.exp()` wrap the unchecked function already) by ones that apply triton-ascend's rule where triton_dist/language/ascend_shapes.py's
`applies()` says the calling thread runs triton-ascend's language (the simulator's program
instances, a trace under `ascend_language()`), and stock Triton's own check everywhere else,
so a kernel compiled for a GPU in the same process keeps stock Triton's refusal.  The function
behind the check is Triton's own: only the dtype list differs.
"""
from __future__ import annotations

import functools
import threading

# triton-ascend math.py :100-228 (one list for every checked function)
ASCEND_DTYPES = ("bf16", "fp16", "fp32", "fp8e4nv", "fp8e5", "fp64")
CHECKED = ("exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "div_rn", "erf", "floor")
UNCHECKED = ("ceil",)          # triton-ascend math.py :237-248: no _check_dtype

_lock = threading.Lock()
_installed = False


def _parts(builtin):
    """(stock check, unchecked function) of a stock math builtin: core.builtin(wraps(check)) of
    _check_dtype's `check`, itself wraps(fn); None where the installed triton has no check."""
    check = getattr(builtin, "__wrapped__", None)
    fn = getattr(check, "__wrapped__", None)
    if check is None or fn is None or getattr(check, "__name__", None) != builtin.__name__:
        return None
    return check, fn


def _ascend_rule(name, check, fn, dtypes):
    from . import ascend_shapes
    import triton.language as tl

    def dispatch(*args, **kwargs):
        if not ascend_shapes.applies():
            return check(*args, **kwargs)
        if dtypes is not None:
            for arg in list(args) + list(kwargs.values()):
                if isinstance(arg, tl.core.tensor) and arg.type.scalar.name not in dtypes:
                    raise ValueError(f"Expected dtype {list(dtypes)} but got {arg.type.scalar.name} "
                                     f"(tl.{name} as triton-ascend's frontend takes it)")
        return fn(*args, **kwargs)
    functools.update_wrapper(dispatch, fn)
    dispatch.__wrapped__ = check
    return tl.core.builtin(dispatch)


def install() -> None:
    """Put triton-ascend's dtype rule on stock Triton's math builtins (once per process; nothing
    where the installed triton's math functions carry no such check, e.g. triton-ascend's own)."""
    global _installed
    with _lock:
        if _installed:
            return
        import triton.language as tl
        for name in CHECKED + UNCHECKED:
            stock = getattr(tl.math, name, None)
            parts = _parts(stock) if stock is not None else None
            if parts is None:
                continue
            new = _ascend_rule(name, *parts, None if name in UNCHECKED else ASCEND_DTYPES)
            for owner in (tl.math, tl):
                if getattr(owner, name, None) is stock:
                    setattr(owner, name, new)
        _installed = True
