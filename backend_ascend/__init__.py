"""The Ascend NPU backend: the HIVM lowering (checkable on a CPU) and the NPU runtime.

    from triton_dist.backend_ascend import lower
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
    from .hivm import LoweringError, convert_text, module_facts

    module, jit = build_ttir(fn, signature, constexprs)
    has_dot, carriers = module_facts(module)
    text = module.str() if debug_info else module.str_nodebug()
    out, count = convert_text(text, has_dot=has_dot)
    if count != carriers:
        raise LoweringError(f"lowering {jit.__name__}: the module holds {carriers} distributed ops but "
                            f"{count} were found in its text; this is a bug in backend_ascend.hivm")
    return out


__all__ = ["lower", "is_ascend"]
