"""Test double of third_party/ascend/language/cann/extension/__init__.py (triton-ascend a84b1eb5):
the names the simulator's tests import, from the same submodules.  Not doubled: the affine
bindings (triton._C.libtriton.ascend), custom ops, math_ops, fixpipe/copy."""
from .core import (CORE, MODE, PIPE, SYNC_IN_VF, builtin, debug_barrier, int64, is_builtin, sub_vec_id,
                   sub_vec_num, sync_block_all, sync_block_set, sync_block_wait)
from .scope import scope
from .aux_ops import compile_hint, multibuffer, parallel
from .vec_ops import extract_slice, flip, get_element, insert_slice, sort
from .mem_ops import gather_out_to_ub, index_put, index_select_simd, scatter_ub_to_out
