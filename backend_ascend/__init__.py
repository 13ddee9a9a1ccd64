"""The Ascend NPU backend: the HIVM lowering (checkable on a CPU) and the NPU runtime.

    from backend_ascend import lower
    print(lower(kernel, {"sig": "*i32", "buf": "*fp32"}, {"N": 16}))

Nothing here imports CANN, torch_npu or shmem at import time (runtime.py and
npu_compile.py import them inside the functions that need them).
"""
from __future__ import annotations

from triton_dist.backend import is_ascend  # noqa: F401


def lower(fn, signature, constexprs=None, *, debug_info=False) -> str:
    """The TTIR of `fn` after ConvertTritonDistributedToHIVM, as text.

    fn: a @triton.jit kernel (also one defined while the simulator is active).
    signature: parameter name -> Triton type string, e.g. {"sig": "*i32", "buf": "*fp32"}.
    constexprs: values of the tl.constexpr parameters, e.g. {"BLOCK": 16}.
    debug_info: keep source locations in the printed module.
    """
    from .frontend import build_ttir
    from .hivm import DOT_OPS, LoweringError, convert_text
    from triton_dist.language._emit import CARRIER_LIBNAME, CARRIER_OP

    module, jit = build_ttir(fn, signature, constexprs)
    facts = {"dot": False, "carriers": 0}

    def visit(op):
        name = op.get_name()
        if name in DOT_OPS:
            facts["dot"] = True
        elif name == CARRIER_OP and op.get_str_attr("libname") == CARRIER_LIBNAME:
            facts["carriers"] += 1

    module.walk(visit)
    text = module.str() if debug_info else module.str_nodebug()
    out, count = convert_text(text, has_dot=facts["dot"])
    if count != facts["carriers"]:
        raise LoweringError(f"lowering {jit.__name__}: the module holds {facts['carriers']} distributed ops but "
                            f"{count} were found in its text; this is a bug in backend_ascend.hivm")
    return out


__all__ = ["lower", "is_ascend"]
