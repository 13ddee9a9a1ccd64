"""Slices and element reads of a tile (triton-ascend's extract_slice, insert_slice and
get_element on stock triton): the builder methods sim/cann_device.py gives the interpreter, with
the bounds every index must keep.

Why bounds are checked here: triton-ascend's frontend checks ranks, sizes >= 1 and strides >= 0
only (third_party/ascend/language/cann/extension/vec_ops.py:47-51, 95-99, 136-137 at
triton-lang/triton-ascend a84b1eb5), and its interpreter slices with numpy
(python/triton/runtime/ascend_interpreter.py:224-310), which cuts a slice short at the tile's end
(stock Triton then reshapes or broadcasts the short result: `[6, 7, 6, 7]` for elements 6..9 of 8
on 3.9) and counts a negative index from the end.  MLIR leaves an out-of-bounds tensor.extract,
extract_slice or insert_slice undefined ("must be non-negative and within the bounds",
mlir/include/mlir/Dialect/Tensor/IR/TensorOps.td, llvm-project D156061; the static verifier that
checked it, llvm-project #130487, was reverted in f8fe920).  Measured with this repository's tools
(triton-adapter-opt 3.2.0, bishengir-compile 1.2.0, `triton-dist npu-compile`): extract_slice of
elements 6..9 of an 8-element tile and get_element at -1 or 9 are accepted; insert_slice at 6..9
of 8 is refused ("expected sizes to be non-negative, but got -2").  What an NPU then reads is
whatever lies next to the tile in the unified buffer (inferred, not verified).  The simulator
refuses all of them, naming the kernel line.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle

from triton_dist.errors import TritonDistError

from . import context

UNDEFINED = ("triton-ascend does not check it and its compiler accepts it; on an NPU the result is undefined "
             "(it reads past the tile in the unified buffer)")
INSERT_UNDEFINED = ("bishengir-compile refuses such a slice where its offsets are constants; where they are computed "
                    "at run time the NPU writes past the tile")


def int_of(v) -> int:
    """A slice offset, size or index as a Python int (a scalar tensor, a constexpr or an int)."""
    if isinstance(v, TensorHandle):
        return int(np.asarray(v.data).ravel()[0])
    if isinstance(v, tl.constexpr):
        return int(v.value)
    return int(v)


def check_slice(op, shape, offsets, sizes, strides, consequence=UNDEFINED) -> None:
    """Refuse a slice that reaches outside `shape`, naming the kernel line, the dimension, the
    elements it takes and what an NPU does with it."""
    for d, (dim, off, n, st) in enumerate(zip(shape, offsets, sizes, strides)):
        last = off + (int(n) - 1) * int(st)
        if not (0 <= off < dim and 0 <= last < dim):
            raise TritonDistError(
                f"{context.kernel_line()}: {op}: dimension {d} of the {list(shape)} tile has elements 0..{dim - 1}, "
                f"but offset {off}, size {n}, stride {st} take elements {off}..{last}; {consequence}.  Fix: keep "
                f"0 <= offset and offset + (size - 1) * stride <= {dim - 1} (a smaller size, or a larger tile)")


def check_element(op, shape, index) -> None:
    for d, (i, dim) in enumerate(zip(index, shape)):
        if not 0 <= i < dim:
            back = f", e.g. {dim + i} where Python's [{i}] was meant" if -dim <= i < 0 else ""
            raise TritonDistError(
                f"{context.kernel_line()}: {op}: index {i} of dimension {d} is outside the {list(shape)} tile "
                f"(0..{dim - 1}); {op} does not count from the end as Python does; {UNDEFINED}.  Fix: an index in "
                f"0..{dim - 1}{back}")


def check_inserted(shape, sizes) -> None:
    if list(shape) != [int(n) for n in sizes]:
        raise TritonDistError(f"{context.kernel_line()}: insert_slice: the inserted tile is {list(shape)}, the sizes "
                              f"say {[int(n) for n in sizes]}; they must be equal (MLIR's insert_slice verifier "
                              f"refuses "
                              f"them otherwise: 'size mismatch'; numpy would broadcast).  Fix: sizes = the inserted "
                              f"tile's shape")


def index(offsets, sizes, strides):
    """The numpy index of a slice: element i of dimension d is offsets[d] + i * strides[d] (a
    stride of 0, which triton-ascend allows, repeats one element; a numpy slice cannot say it)."""
    return np.ix_(*[off + np.arange(int(n)) * int(st) for off, n, st in zip(offsets, sizes, strides)])


# --- the builder methods (names and arguments of triton-ascend's interpreter builder) --------------

def create_extract_scalar(self, tensor_handle, indices):
    """ascend_interpreter.py :224 (get_element), an index outside the tile refused."""
    data = np.asarray(tensor_handle.data)
    idx = [int_of(i) for i in indices]
    check_element("get_element", data.shape, idx)
    return TensorHandle(np.array([data[tuple(idx)]], dtype=data.dtype), tensor_handle.dtype.scalar)


def create_insert_slice(self, full_tensor, sub_tensor, offsets, sizes, strides):
    """ascend_interpreter.py :252, a slice outside the tile, or a tile of another shape, refused."""
    out = np.array(full_tensor.data, copy=True)
    offsets, sub = [int_of(o) for o in offsets], np.asarray(sub_tensor.data)
    check_slice("insert_slice", out.shape, offsets, sizes, strides, INSERT_UNDEFINED)
    check_inserted(sub.shape, sizes)
    out[index(offsets, sizes, strides)] = sub
    return TensorHandle(out, full_tensor.dtype.scalar)


def create_extract_slice(self, full_tensor, offsets, sizes, strides):
    """ascend_interpreter.py :295, a slice outside the tile refused."""
    data, offsets = np.asarray(full_tensor.data), [int_of(o) for o in offsets]
    check_slice("extract_slice", data.shape, offsets, sizes, strides)
    return TensorHandle(np.ascontiguousarray(data[index(offsets, sizes, strides)]), full_tensor.dtype.scalar)


# --- tl.gather: stock Triton's interpreter takes numpy's take_along_axis (3.5.1, 3.6.0, 3.9.0:
# InterpreterBuilder.create_gather), so an index of -1 reads the last element of the axis and no
# error is raised; stock Triton's frontend checks shapes only (semantic.py gather).  What a GPU or
# an NPU reads at an index outside the axis is undefined (inferred, not verified: neither
# documents it, and neither compiler can see a run-time index).  The simulator refuses it.

def _checked_gather(orig):
    def create_gather(self, src, indices, axis):
        idx, n = np.asarray(indices.data), np.asarray(src.data).shape[axis]
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise TritonDistError(
                f"{context.kernel_line()}: tl.gather: index {int(idx[at])} (at {list(at)} of the index tile) is "
                f"outside 0..{n - 1}, the {n} elements of axis {axis} of the source; {int(bad.sum())} of {idx.size} "
                f"indices are.  "
                f"Triton's interpreter would count a negative index from the end; on a device what it reads is "
                f"undefined.  Fix: keep every index in 0..{n - 1} (clamp it, or mask the gathered value with tl.where)")
        return orig(self, src, indices, axis)
    create_gather.__wrapped__ = orig
    create_gather._td_checked = True
    return create_gather


def install(builder_class) -> None:
    """Bounds-check the interpreter builder's tl.gather (idempotent)."""
    have = getattr(builder_class, "create_gather", None)
    if have is not None and not getattr(have, "_td_checked", False):
        builder_class.create_gather = _checked_gather(have)


# --- triton-ascend's main line: its interpreter builder's own slices and element reads (numpy, as
# above) are kept, with the same bounds checked before them (sim/tritonapi/ascend.py) ---------------

def _checked_own(name, orig):
    def checked(self, *args):
        if name == "create_extract_scalar":
            tensor, indices = args
            check_element("get_element", np.asarray(tensor.data).shape, [int_of(i) for i in indices])
        elif name == "create_extract_slice":
            tensor, offsets, sizes, strides = args
            check_slice("extract_slice", np.asarray(tensor.data).shape, [int_of(o) for o in offsets], sizes, strides)
        else:
            full, sub, offsets, sizes, strides = args
            check_slice("insert_slice", np.asarray(full.data).shape, [int_of(o) for o in offsets], sizes, strides,
                        INSERT_UNDEFINED)
            check_inserted(np.asarray(sub.data).shape, sizes)
        return orig(self, *args)
    checked.__wrapped__ = orig
    checked._td_checked = True
    checked.__name__ = name
    return checked


def check_own(builder_class) -> None:
    """Bounds-check the builder's own create_extract_scalar / create_extract_slice /
    create_insert_slice (idempotent)."""
    for name in ("create_extract_scalar", "create_extract_slice", "create_insert_slice"):
        have = getattr(builder_class, name, None)
        if have is not None and not getattr(have, "_td_checked", False):
            setattr(builder_class, name, _checked_own(name, have))
