"""Test double of extension/aux_ops.py (triton-ascend a84b1eb5): parallel (:81, a tl.range there),
compile_hint (:118), multibuffer (:136)."""
from triton.language.core import builtin, range as _tl_range


class parallel(_tl_range):
    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 bind_sub_block: bool = False):
        super().__init__(arg1, arg2, step, num_stages, loop_unroll_factor)


@builtin
def compile_hint(ptr, hint_name, hint_val=None, _semantic=None):
    _semantic.builder.create_annotation_mark(ptr.handle, hint_name, hint_val)


@builtin
def multibuffer(src, size, _semantic=None):
    pass
