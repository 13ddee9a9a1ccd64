"""Test double of triton-ascend's python/triton/runtime/ascend_interpreter.py (triton-lang/
triton-ascend a84b1eb5): the class and method names and signatures of that file, bodies
written for the tests (tests/doubles/triton_ascend_main/README.md)."""
import contextlib

import numpy as np
import triton.language as tl

from .interpreter import InterpreterBuilder, TensorHandle


def _int(v):
    return int(np.asarray(v.data).ravel()[0]) if isinstance(v, TensorHandle) else int(v)


class AscendInterpreterBuilder(InterpreterBuilder):          # :70
    def __init__(self) -> None:
        super().__init__()
        self.sub_vec_id = 0
        self._sub_vec_simulation_enabled = False

    def to_int_val(self, val):
        return _int(val)

    def _patch_lang_ascend(self, fn):                         # scope/parallel/reduce, as :108
        @contextlib.contextmanager
        def _scope(*args, **kwargs):
            yield

        def _range(arg1, arg2=None, step=None, **kwargs):
            return range(0, arg1) if arg2 is None else range(arg1, arg2, step or 1)
        tl.extra.cann.extension.scope = _scope
        tl.extra.cann.extension.parallel = _range

    def get_additional_reserved_keywords(self):              # :126
        return ["multibuffer", "debug", "optimize_dynamic_offset", "enable_mixed_cv",
                "enable_auto_bind_sub_block", "sync_solver"]

    def patch_extensions(self, fn):                           # :148
        from .interpreter import _patch_builtin
        self._patch_lang_ascend(fn)
        for value in list(fn.__globals__.values()):
            if value is not None and hasattr(value, "__dict__") and not isinstance(value, type):
                try:
                    _patch_builtin(value, self)
                except Exception:
                    pass
        import triton.language.extra.cann.extension as extension
        _patch_builtin(extension, self)

    def execute_with_sub_vec_simulation(self, fn, args, grid):   # :188: the grid, then again with id 1
        self._sub_vec_simulation_enabled = False
        for self.sub_vec_id in (0, 1):
            for x in range(grid[0]):
                for y in range(grid[1]):
                    for z in range(grid[2]):
                        self.set_grid_idx(x, y, z)
                        fn(**args)
            if not self._sub_vec_simulation_enabled:
                break

    def create_extract_scalar(self, tensor_handle, indices):            # :224
        v = tensor_handle.data[tuple(_int(i) for i in indices)]
        return TensorHandle(np.array([v]), tensor_handle.dtype.scalar)

    def create_insert_slice(self, full_tensor, sub_tensor, offsets, sizes, strides):      # :252
        out = full_tensor.data.copy()
        out[tuple(slice(_int(o), _int(o) + n * s, s) for o, n, s in zip(offsets, sizes, strides))] = sub_tensor.data
        return TensorHandle(out, full_tensor.dtype.scalar)

    def create_extract_slice(self, full_tensor, offsets, sizes, strides):                 # :295
        sl = tuple(slice(_int(o), _int(o) + n * s, s) for o, n, s in zip(offsets, sizes, strides))
        return TensorHandle(full_tensor.data[sl], full_tensor.dtype.scalar)

    def create_index_select_simd(self, src_ptr, index_tensor, dim, src_shape, src_offset, read_shape,
                                 result_shape):                                         # :335
        raise AssertionError("the test double's index_select_simd must not be reached: the simulator routes it")

    def create_get_sub_vec_id(self):                                                      # :429
        self._sub_vec_simulation_enabled = True
        return TensorHandle(np.array([self.sub_vec_id], dtype=np.int64), tl.int64)

    def sync_block_set(self, sender, receiver, event_id, sender_pipe_value, receiver_pipe_value):   # :449
        pass

    def sync_block_wait(self, sender, receiver, event_id, sender_pipe_value, receiver_pipe_value):  # :459
        pass

    def sync_block_all(self, mode, event_id):                                            # :468
        pass

    def is_simt_mode(self):
        return False

    def create_sort(self, ptr_data, dim: int, descending: bool):
        out = np.sort(ptr_data.data, axis=dim)
        return TensorHandle(np.flip(out, axis=dim) if descending else out, ptr_data.dtype.scalar)

    def create_flip(self, ptr_data, dim):
        return TensorHandle(np.flip(ptr_data.data, axis=dim), ptr_data.dtype.scalar)

    def create_gather_out_to_ub(self, src_ptr, index_tensor, index_boundary, dim, src_stride, end_offset,
                                start_offset, other=None):                              # :531
        raise AssertionError("the test double's gather_out_to_ub must not be reached: the simulator routes it")

    def create_scatter_ub_to_out(self, dst_ptr, value_tensor, index_tensor, index_boundary, dim, dst_stride,
                                 end_offset, start_offset):
        raise AssertionError("the test double's scatter_ub_to_out must not be reached: the simulator routes it")

    def create_index_put(self, dst_ptr, index_tensor, value_tensor, dim, index_boundary, end_offset, start_offset,
                         dst_stride):
        raise AssertionError("the test double's index_put must not be reached: the simulator routes it")

    def get_str_attr(self, val):
        return str(val)

    def create_annotation_mark(self, ptr_data, hint_name: str, hint_val):
        pass
