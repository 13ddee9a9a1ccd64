"""`triton.language.extra.cann.extension` on the simulator: the triton-ascend builtins that
upstream Ascend kernels import (docs/device_model.md, evidence C).

Installed into sys.modules by the sim backend's select() only when no
`triton.language.extra.cann` can be imported, so a real triton-ascend is never shadowed.

What each builtin means on an Atlas A2 and how the simulator models it:
- sub_vec_id(): which of the two vector sub-cores (AIV) of an AI core runs the code (int64,
  0 or 1).  A kernel with tl.dot is a mix kernel: a block is 1 cube core + 2 vector cores with
  the same program_id; calling sub_vec_id turns off the compiler's split of vector work, so
  both vector cores run all vector code.  The simulator runs such a kernel as 2 program
  instances per block, sub_vec_id 0 and 1 (sim/runtime.py); a kernel without tl.dot runs
  one instance per block (one vector core) and sub_vec_id() is 0 (inferred, not verified).
- sub_vec_num(): 2 (vector cores per AI core on A2/A3).
- sync_block_all(mode, event_id): the core's pipes drained, then a barrier: of the launch's
  cores ("all"), their cube or vector instances ("all_cube", "all_vector"; in a kernel not split
  into cube and vector instances, all of them), or each block's vector sub-cores
  ("all_sub_vector"); sim/cann_device.py cites what each mode is.
- sync_block_set / sync_block_wait: cube<->vector flags, counted; a kernel naming them runs
  each block as concurrent cube and vector instances (sim/core_split.py, sim/cann_device.py);
- scope(core_mode=...): the ops inside belong to that core (sim/core_split.py).
- debug_barrier, compile_hint, multibuffer: ordering inside one vector function and compiler
  hints: nothing to do in an interpreter (program order already holds).
- parallel: a range (traced for the NPU: a tl.range loop).  cast: overflow_mode as triton-ascend
  has it (sim/compat/ascend_cast.py).  atan2, isfinited, finitef: through numpy.
- the data ops extract_slice, insert_slice, get_element, sort, flip, gather_out_to_ub,
  scatter_ub_to_out, index_put, index_select_simd: triton-ascend's signatures and argument
  checks (its vec_ops.py / mem_ops.py at triton-lang/triton-ascend a84b1eb5), calling the
  builder methods its interpreter has, which the simulator provides (sim/cann_device.py).
  Traced for a device, each emits the markers of triton_dist/language/_ext_emit.py, which the
  Ascend pipeline turns into the op triton-ascend's frontend emits (backend_ascend/extension_ops.py).
Anything else of the module exists (imports succeed) and says it is not simulated when called.
"""
from __future__ import annotations

import enum
import inspect
import sys
import types

import numpy as np
import triton.language as tl
from triton.runtime.interpreter import TensorHandle   # the interpreter's own class (sim/interp.py re-exports it)

from triton_dist.errors import TritonDistError
from triton_dist.language import _dispatch as D

from .. import context

MODULE = "triton.language.extra.cann.extension"
PARENT = "triton.language.extra.cann"


def _builtin(fn):
    setattr(fn, tl.core.TRITON_BUILTIN, True)
    return fn


# --- enums (names and members as triton-ascend's core.py defines them) ---------------------------

class CORE(enum.Enum):
    VECTOR = "VECTOR"
    CUBE = "CUBE"
    CUBE_OR_VECTOR = "CUBE_OR_VECTOR"
    CUBE_AND_VECTOR = "CUBE_AND_VECTOR"


class PIPE(enum.Enum):
    PIPE_S = "PIPE_S"
    PIPE_V = "PIPE_V"
    PIPE_M = "PIPE_M"
    PIPE_MTE1 = "PIPE_MTE1"
    PIPE_MTE2 = "PIPE_MTE2"
    PIPE_MTE3 = "PIPE_MTE3"
    PIPE_ALL = "PIPE_ALL"
    PIPE_FIX = "PIPE_FIX"


class MODE(enum.Enum):
    SIMD = "SIMD"
    SIMT = "SIMT"
    MIX = "MIX"


class SYNC_IN_VF(enum.Enum):
    VV_ALL = "VV_ALL"
    VST_VLD = "VST_VLD"
    VLD_VST = "VLD_VST"
    VST_VST = "VST_VST"
    VS_ALL = "VS_ALL"
    VST_LD = "VST_LD"
    VLD_ST = "VLD_ST"
    VST_ST = "VST_ST"
    SV_ALL = "SV_ALL"
    ST_VLD = "ST_VLD"
    LD_VST = "LD_VST"
    ST_VST = "ST_VST"


# triton-ascend's enums live in triton.language.extra.cann.extension (its core.py); Triton's
# frontend lets a kernel read a module-level global whose __module__ starts with
# "triton.language" (code_generator.py global_lookup, stock 3.5-3.9 and triton-ascend alike), so
# `pipe = extension.PIPE` at module level works there: these stand-ins say the same module
for _enum in (CORE, PIPE, MODE, SYNC_IN_VF):
    _enum.__module__ = MODULE


# --- sub-cores ---------------------------------------------------------------------------------

@_builtin
def sub_vec_id(_semantic=None):
    """The index (0/1) of the vector sub-core running this instance (0 outside mix kernels)."""
    if not D.interpreting(_semantic):       # compiled: the Ascend lowering emits its HIVM op (backend_ascend/hivm.py)
        from triton_dist.language import _emit
        return _emit.emit("sub_vec_id", [], _semantic)
    return tl.tensor(_builder(_semantic, "sub_vec_id").create_get_sub_vec_id(), tl.int64)


@_builtin
def sub_vec_num(_semantic=None):
    return tl.constexpr(2)


_CALLS: dict = {}


def calls_sub_vec_id(fn) -> bool:
    """Whether a kernel, or a @jit helper it calls, names sub_vec_id: then the compiler does not
    split vector work between a block's two vector cores, and both run all of it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    if code not in _CALLS:
        _CALLS[code] = _names(fn, "sub_vec_id", set())
    return _CALLS[code]


# the walk over a kernel's code and its @jit helpers lives below this module, in core_split,
# which needs it too (core_split imported it from here while this module imported core_split)
from ..core_split import names_in as _names  # noqa: E402


# --- synchronisation -----------------------------------------------------------------------------

_SYNC_MODES = ("all_cube", "all_vector", "all", "all_sub_vector")
_UNITS = ("cube", "vector")


@_builtin
def sync_block_all(mode, event_id=0, _semantic=None):
    # triton-ascend: core.py :238 sync_block_all(mode, event_id, _semantic=None); event_id
    # defaults to 0 here, as kernels written for this module before it had one call it
    mode, event_id = D.unwrap(mode), D.unwrap(event_id)
    if not isinstance(event_id, int) or not 0 <= event_id < 16:
        raise TritonDistError(f"{context.kernel_line(2)}: sync_block_all: event_id must be 0..15, got {event_id!r}")
    if mode not in _SYNC_MODES:
        raise TritonDistError(f"{context.kernel_line(2)}: sync_block_all: mode must be one of "
                              f"{', '.join(_SYNC_MODES)}, got {mode!r}")
    b = _builder(_semantic, "sync_block_all")
    if b is None:
        return _device().sync_block_all(mode, event_id, _semantic)
    b.sync_block_all(mode, event_id)


def _sync_block(what, sender, receiver, event_id, _semantic, pipes=(None, None)):
    # triton-ascend: core.py create_sync_block (the unit pair and event id checks)
    sender, receiver, event_id = D.unwrap(sender), D.unwrap(receiver), D.unwrap(event_id)
    where = context.kernel_line(3)
    if sender not in _UNITS or receiver not in _UNITS or sender == receiver:
        raise TritonDistError(f"{where}: {what}: sender and receiver must be 'cube' -> 'vector' or 'vector' -> "
                              f"'cube', got {sender!r} -> {receiver!r}")
    if isinstance(event_id, int) and not 0 <= event_id < 16:
        raise TritonDistError(f"{where}: {what}: event_id must be 0..15, got {event_id}")
    b = _builder(_semantic, what)
    if b is None:
        return _device().sync_block(what[len("sync_block_"):], sender, receiver, event_id, *pipes, _semantic)
    getattr(b, what)(sender, receiver, event_id.handle if isinstance(event_id, tl.tensor) else event_id, None, None)


@_builtin
def sync_block_set(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    _sync_block("sync_block_set", sender, receiver, event_id, _semantic, (sender_pipe, receiver_pipe))


@_builtin
def sync_block_wait(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    _sync_block("sync_block_wait", sender, receiver, event_id, _semantic, (sender_pipe, receiver_pipe))


class scope:
    """`with al.scope(core_mode="cube"/"vector"):` (triton-ascend extension/scope.py :28-69, same
    arguments): the ops inside belong to that core.  In a block split into cube and vector
    instances (sim/core_split.py) only that core's instance performs them; elsewhere nothing."""

    def __init__(self, core_mode: str, _builder=None, _semantic=None, **kwargs):
        self.core_mode = D.unwrap(core_mode)
        if self.core_mode not in ("cube", "vector"):
            raise ValueError(f'core_mode must be "cube" or "vector", got {self.core_mode}')

    def __enter__(self):
        from .. import core_split
        core_split.enter_scope(self.core_mode)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        from .. import core_split
        core_split.exit_scope()
        return False


@_builtin
def debug_barrier(sync_mode=None, _semantic=None):
    pass


@_builtin
def compile_hint(ptr, hint_name, hint_val=None, _semantic=None):
    pass


@_builtin
def multibuffer(src, size, _semantic=None):
    pass


class parallel:
    """triton-ascend's extension.parallel (aux_ops.py:81-94 at a84b1eb5: a tl.range with
    bind_sub_block): a range whose iterations the compiler may run in parallel, in order here (as
    its interpreter does, ascend_interpreter.py _patch_lang_ascend).  A class, as there: Triton's
    cache key (jit.py DependenciesFinder) refuses a plain function a kernel refers to.  Traced for
    the NPU, backend_ascend/frontend.py makes it the tl.range loop it is (`__triton_ascend_parallel__`)."""
    __triton_ascend_parallel__ = True

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None, bind_sub_block=False):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self._range = range(int(D.unwrap(arg1)), int(D.unwrap(arg2)), 1 if step is None else int(D.unwrap(step)))
        self.bind_sub_block = bool(D.unwrap(bind_sub_block))

    def __iter__(self):
        return iter(self._range)


# --- data ops: triton-ascend's signatures (vec_ops.py, mem_ops.py at a84b1eb5), results from
# the builder methods of sim/cann_device.py --------------------------------------------------------

def _builder(_semantic, name):
    """The interpreter's builder (whose methods are the device ops); None when the kernel is traced
    for a device: then each op emits its markers (triton_dist/language/_ext_emit.py), which
    backend_ascend/extension_ops.py turns into the op triton-ascend's frontend emits."""
    if not D.interpreting(_semantic):
        return None
    from triton.runtime import interpreter
    return interpreter.interpreter_builder


def _device():
    from triton_dist.language import _ext_emit
    return _ext_emit


def _raw(values):
    """A list argument's entries as the kernel gave them (ints or scalar tensors), for the device trace."""
    return [D.unwrap(v) for v in D.unwrap(values)]


def _ints(values, what, name):
    out = []
    for v in values:
        v = D.unwrap(v)
        if isinstance(v, tl.tensor):
            v = v.handle
        elif not isinstance(v, int):
            raise TritonDistError(f"{context.kernel_line(3)}: {name}: {what} must be ints or scalar tensors, got {v!r}")
        out.append(v)
    return out


def _shape_args(ful, offsets, sizes, strides, name):
    offsets, sizes, strides = (list(D.unwrap(x)) for x in (offsets, sizes, strides))
    sizes, strides = [int(D.unwrap(x)) for x in sizes], [int(D.unwrap(x)) for x in strides]
    if not len(ful.shape) == len(offsets) == len(sizes) == len(strides):
        raise TritonDistError(f"{context.kernel_line(3)}: {name}: offsets, sizes and strides need one entry per "
                              f"dimension of the {len(ful.shape)}-d tensor, got {len(offsets)}, {len(sizes)}, "
                              f"{len(strides)}")
    if not all(n >= 1 for n in sizes) or not all(st >= 0 for st in strides):
        raise TritonDistError(f"{context.kernel_line(3)}: {name}: sizes must be >= 1 and strides >= 0, got "
                              f"{sizes}, {strides}")
    return _ints(offsets, "offsets", name), sizes, strides


@_builtin
def insert_slice(ful, sub, offsets, sizes, strides, _semantic=None, _generator=None):
    b = _builder(_semantic, "insert_slice")
    if len(ful.shape) != len(sub.shape):
        raise TritonDistError(f"{context.kernel_line(2)}: insert_slice: the tensors have different ranks "
                              f"({len(ful.shape)} and {len(sub.shape)})")
    raw = _raw(offsets)
    offsets, sizes, strides = _shape_args(ful, offsets, sizes, strides, "insert_slice")
    sub_shape = [int(D.unwrap(d)) for d in sub.shape]
    if sub_shape != sizes:      # MLIR's tensor.insert_slice verifier: "expected type to be 'tensor<2x2xf32>' or
        # a rank-reduced version. (size mismatch)" (measured through triton-adapter-opt 3.2.0); numpy would broadcast
        where = context.kernel_line(2)        # traced for a device: Triton's CompilationError shows the line
        raise TritonDistError(f"{'' if where == '<host>' else where + ': '}insert_slice: the inserted tile is "
                              f"{sub_shape}, the sizes say "
                              f"{sizes}; they must be equal (the compiler's insert_slice verifier refuses them "
                              f"otherwise: 'size mismatch').  Fix: sizes = the inserted tile's shape")
    if b is None:
        return _device().insert_slice(ful, sub, raw, sizes, strides, _semantic)
    return tl.tensor(b.create_insert_slice(ful.handle, sub.handle, offsets, sizes, strides),
                     tl.block_type(ful.type.scalar, list(ful.shape)))


@_builtin
def extract_slice(ful, offsets, sizes, strides, _semantic=None, _generator=None):
    b = _builder(_semantic, "extract_slice")
    raw = _raw(offsets)
    offsets, sizes, strides = _shape_args(ful, offsets, sizes, strides, "extract_slice")
    if b is None:
        return _device().extract_slice(ful, raw, sizes, strides, _semantic)
    return tl.tensor(b.create_extract_slice(ful.handle, offsets, sizes, strides),
                     tl.block_type(ful.type.scalar, sizes))


@_builtin
def get_element(src, indice, _semantic=None, _generator=None):
    b = _builder(_semantic, "get_element")
    indice = list(D.unwrap(indice))
    if len(src.shape) != len(indice):
        raise TritonDistError(f"{context.kernel_line(2)}: get_element: Indice's rank must be equal to src tensor's "
                              f"rank ({len(indice)} != {len(src.shape)})")
    values = _ints(indice, "indice", "get_element")
    if b is None:
        return _device().get_element(src, [D.unwrap(v) for v in indice], _semantic)
    return tl.tensor(b.create_extract_scalar(src.handle, values), src.type.scalar)


def _int_arg(v, what, name):
    v = D.unwrap(v)
    if not isinstance(v, int):
        raise TritonDistError(f"{context.kernel_line(3)}: {name}: {what} must be an integer (or tl.constexpr "
                              f"int), got {v!r}")
    return v


@_builtin
def flip(ptr, dim=-1, _semantic=None, _generator=None):
    b = _builder(_semantic, "flip")
    dim = _int_arg(dim, "dim", "flip")
    rank = len(ptr.shape)
    if not -rank <= dim < rank:
        raise TritonDistError(f"{context.kernel_line(2)}: ascend.flip got invalid dim={dim} for shape "
                              f"{tuple(ptr.shape)}")
    if b is None:
        return _device().flip(ptr, dim % rank, _semantic)
    return tl.tensor(b.create_flip(ptr.handle, dim % rank), ptr.type)


_SORT_TYPES = ("int8", "int16", "bf16", "fp16", "fp32", "int32", "int64", "fp8e4nv", "fp8e5")


@_builtin
def sort(ptr, dim=-1, descending=False, _semantic=None):
    b = _builder(_semantic, "sort")
    dim, descending = _int_arg(dim, "dim", "sort"), bool(D.unwrap(descending))
    if ptr.type.scalar.name not in _SORT_TYPES:
        raise TritonDistError(f"{context.kernel_line(2)}: ascend.sort only supports int8, int16, bfloat16, float16, "
                              f"float32, int32, int64, float8e4nv, float8e5 but got {ptr.type.scalar}")
    rank = len(ptr.shape)
    if dim % rank != rank - 1:
        raise TritonDistError(f"{context.kernel_line(2)}: ascend.sort only supports sorting along the last dimension "
                              f"(dim={rank - 1} or -1) for shape {tuple(ptr.shape)}, but got dim={dim}")
    if b is None:
        return _device().sort(ptr, rank - 1, descending, _semantic)
    return tl.tensor(b.create_sort(ptr.handle, rank - 1, descending), ptr.type)


def _mem_checks(name, ptr, index, dim, ranks, lists):
    where = context.kernel_line(3)
    if not index.type.scalar.is_int():
        raise TritonDistError(f"{where}: {name}: index must be an integer tensor, got {index.type.scalar}")
    if not ptr.type.scalar.element_ty.is_floating():
        raise TritonDistError(f"{where}: {name}: Expected dtype fp16/fp32/bf16, but got {ptr.type.scalar.element_ty}")
    lo, hi, rank = ranks
    if not lo <= rank <= hi:
        raise TritonDistError(f"{where}: {name}: rank must be in [{lo}, {hi}], got {rank}")
    for what, values in lists.items():
        if len(values) != rank:
            raise TritonDistError(f"{where}: {name}: {what} needs {rank} entries (one per dimension), got {len(values)}")
    return dim


def _indexed_args(name, ptr, index, index_boundary, dim, strides, end_offset, start_offset, _semantic):
    """gather_out_to_ub / scatter_ub_to_out: (builder, dim, boundary, [stride, end, start] as builder
    values), after triton-ascend's checks of them (mem_ops.py)."""
    b = _builder(_semantic, name)
    dim, bound = _int_arg(dim, "dim", name), _int_arg(index_boundary, "index_boundary", name)
    rank = len(index.shape)
    stride_name = "src_stride" if name == "gather_out_to_ub" else "dst_stride"
    lists = {stride_name: list(strides), "end_offset": list(end_offset), "start_offset": list(start_offset)}
    _mem_checks(name, ptr, index, dim, (1, 5, rank), lists)
    if not 0 <= dim < rank:
        raise TritonDistError(f"{context.kernel_line(3)}: {name}: dim must satisfy 0<=dim<index.rank ({rank}), "
                              f"got dim={dim}")
    if b is None:                           # traced for a device: the entries as given
        return b, dim, bound, [[D.unwrap(x) for x in v] for v in lists.values()]
    return b, dim, bound, [_ints(v, k, name) for k, v in lists.items()]


@_builtin
def gather_out_to_ub(src, index, index_boundary, dim, src_stride, end_offset, start_offset, other=None,
                     _semantic=None):
    b, dim, bound, lists = _indexed_args("gather_out_to_ub", src, index, index_boundary, dim, src_stride, end_offset,
                                         start_offset, _semantic)
    other = D.unwrap(other)
    if b is None:
        return _device().gather_out_to_ub(src, index, bound, dim, *lists, other, _semantic)
    ret = b.create_gather_out_to_ub(src.handle, index.handle, bound, dim, *lists,
                                    other.handle if isinstance(other, tl.tensor) else other)
    return tl.tensor(ret, tl.block_type(src.type.scalar.element_ty, list(index.shape)))


@_builtin
def scatter_ub_to_out(ptr, value, index, index_boundary, dim, dst_stride, end_offset, start_offset, _semantic=None):
    b, dim, bound, lists = _indexed_args("scatter_ub_to_out", ptr, index, index_boundary, dim, dst_stride, end_offset,
                                         start_offset, _semantic)
    value = D.unwrap(value)
    if b is None:
        if not isinstance(value, tl.tensor) or not value.type.is_block():     # a scalar: that value everywhere
            value = _semantic.full([int(D.unwrap(d)) for d in index.shape], value, ptr.type.scalar.element_ty)
        return _device().scatter_ub_to_out(ptr, value, index, bound, dim, *lists, _semantic)
    if not isinstance(value, tl.tensor) or not value.type.is_block():     # a scalar: that value everywhere
        data = np.full([int(D.unwrap(d)) for d in index.shape],
                       value.handle.data.ravel()[0] if isinstance(value, tl.tensor) else value)
        value = tl.tensor(TensorHandle(data, ptr.type.scalar.element_ty), index.type)
    b.create_scatter_ub_to_out(ptr.handle, value.handle, index.handle, bound, dim, *lists)


@_builtin
def index_put(ptr, index, value, dim, index_boundary, end_offset, start_offset, dst_stride, _semantic=None):
    b = _builder(_semantic, "index_put")
    dim, bound = _int_arg(dim, "dim", "index_put"), _int_arg(index_boundary, "index_boundary", "index_put")
    rank = len(value.shape)
    lists = {"end_offset": list(end_offset), "start_offset": list(start_offset), "dst_stride": list(dst_stride)}
    _mem_checks("index_put", ptr, index, dim, (2, 5, rank), lists)
    if not 0 <= dim < rank - 1:
        raise TritonDistError(f"{context.kernel_line(2)}: index_put: dim must satisfy 0<=dim<value.rank-1 "
                              f"({rank - 1}), got dim={dim}")
    n = 1
    for d in index.shape:
        n *= int(D.unwrap(d))
    if int(D.unwrap(value.shape[dim])) != n:
        raise TritonDistError(f"{context.kernel_line(2)}: index_put: index.numel must equal value.shape[dim], but got "
                              f"index.numel={n}, value.shape[dim]={value.shape[dim]}")
    if b is None:
        return _device().index_put(ptr, index, value, dim, bound, *([D.unwrap(x) for x in v] for v in lists.values()),
                                   _semantic)
    b.create_index_put(ptr.handle, index.handle, value.handle, dim, bound,
                       *(_ints(v, k, "index_put") for k, v in lists.items()))


@_builtin
def index_select_simd(src, dim, index, src_shape, src_offset, read_shape, _semantic=None):
    b = _builder(_semantic, "index_select_simd")
    dim = _int_arg(dim, "dim", "index_select_simd")
    src_shape, src_offset, read_shape = (list(D.unwrap(v)) for v in (src_shape, src_offset, read_shape))
    ndim, where = len(src_shape), context.kernel_line(2)
    if not len(src_offset) == len(read_shape) == ndim:
        raise TritonDistError(f"{where}: index_select_simd: src_offset and read_shape need {ndim} entries, got "
                              f"{len(src_offset)} and {len(read_shape)}")
    if not 0 <= dim < ndim - 1:
        raise TritonDistError(f"{where}: index_select_simd cannot support trailing dimension as dim={dim}, ndim={ndim}")
    if len(index.shape) != 1:
        raise TritonDistError(f"{where}: index_select_simd: index must be 1D tensor, got {len(index.shape)}D")
    read = [int(D.unwrap(r)) for r in read_shape]
    shape = [index.shape[0] if i == dim else read[i] for i in range(ndim)]
    if b is None:
        return _device().index_select_simd(src, index, dim, src_shape, src_offset, read, shape, _semantic)
    out = b.create_index_select_simd(src.handle, index.handle, dim, _ints(src_shape, "src_shape", "index_select_simd"),
                                     _ints(src_offset, "src_offset", "index_select_simd"), read, shape)
    return tl.tensor(out, tl.block_type(src.type.scalar.element_ty, shape))


from .ascend_cast import cast  # noqa: E402  (triton-ascend's cast with overflow_mode)


def _values_only(name, _semantic):
    """atan2, isfinited, finitef compute on the simulator's values; traced for a device they have no
    lowering here (triton-ascend's are @jit functions over its libdevice atan/isnan/isinf,
    extension/math_ops.py:11-57 at a84b1eb5), which is said instead of an AttributeError."""
    if not D.interpreting(_semantic):
        raise TritonDistError(f"{context.kernel_line(3)}: extension.{name} has no device lowering in triton_dist "
                              f"(triton-ascend builds it from its libdevice's atan/isnan/isinf); it runs on the "
                              f"simulator only.  For the NPU compile, write it with tl.where and tl.math")


@_builtin
def atan2(y, x, _semantic=None):
    _values_only("atan2", _semantic)
    a, b = np.asarray(y.handle.data), np.asarray(x.handle.data)
    return tl.tensor(TensorHandle(np.arctan2(a, b).astype(a.dtype), y.type.scalar), y.type)


@_builtin
def isfinited(x, _semantic=None):
    _values_only("isfinited", _semantic)
    data = np.isfinite(np.asarray(x.handle.data))
    ty = tl.block_type(tl.int1, list(x.shape)) if x.type.is_block() else tl.int1
    return tl.tensor(TensorHandle(data, tl.int1), ty)


finitef = isfinited


# The extension functions triton-ascend also makes tl.tensor methods (`v.get_element((i,))`,
# `v.extract_slice(...)`): its @_tensor_member_fn (python/triton/language/core.py:50-84 at
# triton-lang/triton-ascend a84b1eb5) on vec_ops.py:29 insert_slice, :77 extract_slice, :121
# get_element (:506 cast: sim/compat/ascend_cast.py), mem_ops.py:21 index_put, :161
# gather_out_to_ub, :313 scatter_ub_to_out, :466 index_select_simd, math_ops.py:11 atan2, :32
# isfinited, :44 finitef, aux_ops.py:21 sync_block_all, :39 sync_block_set, :60 sync_block_wait.
# Importing the extension attaches them there; install() does the same on stock triton.
TENSOR_MEMBERS = ("insert_slice", "extract_slice", "get_element", "index_put", "gather_out_to_ub",
                  "scatter_ub_to_out", "index_select_simd", "atan2", "isfinited", "finitef", "sync_block_all",
                  "sync_block_set", "sync_block_wait")


def _tensor_member(fn, name):
    """`x.name(...)` calls `name(x, ...)`; a builtin naming _semantic and _generator, so Triton's
    interpreter and code generator (which look for those names in the signature) hand them over as
    they do to the free function."""
    takes_generator = "_generator" in inspect.signature(fn).parameters

    def member(self, *args, _semantic=None, _generator=None, **kwargs):
        if takes_generator:
            kwargs["_generator"] = _generator
        return fn(self, *args, _semantic=_semantic, **kwargs)
    member.__name__ = member.__qualname__ = name
    member.__doc__ = fn.__doc__
    member._td_extension_member = True
    setattr(member, tl.core.TRITON_BUILTIN, True)
    return member


def install_tensor_members() -> None:
    """tl.tensor's extension methods, as importing triton-ascend's extension makes them (idempotent;
    a method stock Triton itself defines is left alone)."""
    for name in TENSOR_MEMBERS:
        have = tl.core.tensor.__dict__.get(name)
        if have is None or getattr(have, "_td_extension_member", False):
            setattr(tl.core.tensor, name, _tensor_member(globals()[name], name))


def _unsupported(name):
    def call(*args, **kwargs):
        raise TritonDistError(f"{context.kernel_line(2)}: triton.language.extra.cann.extension.{name} is not "
                              f"simulated (an Ascend memory-hierarchy or custom-op builtin); the simulator "
                              f"supports: {', '.join(SUPPORTED)}")
    call.__name__ = name
    setattr(call, tl.core.TRITON_BUILTIN, True)
    return call


SUPPORTED = ("sub_vec_id", "sub_vec_num", "sync_block_all", "sync_block_set", "sync_block_wait", "scope", "debug_barrier",
             "compile_hint", "multibuffer", "parallel", "get_element", "flip", "sort", "cast", "atan2",
             "isfinited", "finitef", "CORE", "PIPE", "MODE", "SYNC_IN_VF", "int64", "builtin", "is_builtin",
             "insert_slice", "extract_slice", "index_put", "gather_out_to_ub", "scatter_ub_to_out",
             "index_select_simd")
# the rest of triton-ascend's __all__ (evidence C): present so imports work, refused when called
UNSUPPORTED = ("ascend_address_space", "copy_from_ub_to_l1", "copy", "fixpipe", "FixpipeDMAMode",
               "FixpipeDualDstMode", "FixpipePreQuantMode", "FixpipePreReluMode", "custom",
               "custom_semantic", "register_custom_op")


def build() -> types.ModuleType:
    m = types.ModuleType(MODULE, __doc__)
    m.__file__ = __file__
    g = globals()
    for name in SUPPORTED:
        if name in g:
            setattr(m, name, g[name])
    m.int64 = tl.int64
    m.builtin = tl.core.builtin
    m.is_builtin = tl.core.is_builtin
    for name in UNSUPPORTED:
        setattr(m, name, _unsupported(name))
    m.__all__ = list(SUPPORTED) + list(UNSUPPORTED)
    return m


def install() -> bool:
    """Make `triton.language.extra.cann.extension` importable, unless something (triton-ascend)
    already provides `triton.language.extra.cann`.  Returns whether it installed ours."""
    import importlib.util
    if PARENT in sys.modules and not getattr(sys.modules[PARENT], "__triton_dist_sim__", False):
        return False
    try:
        if PARENT not in sys.modules and importlib.util.find_spec(PARENT) is not None:
            return False
    except (ImportError, ValueError):
        pass
    parent = sys.modules.get(PARENT)
    if parent is None:
        parent = types.ModuleType(PARENT, "triton-ascend's extension namespace, as the simulator provides it")
        parent.__path__ = []                     # a package: `import ...cann.extension` works
        parent.__triton_dist_sim__ = True
        sys.modules[PARENT] = parent
    from . import ascend_cast
    ascend_cast.install()                    # tl.tensor.cast, tl.cast, tensor.to as triton-ascend has them
    install_tensor_members()                 # v.get_element(...), v.extract_slice(...), ...
    ext = sys.modules.get(MODULE) or build()
    sys.modules[MODULE] = ext
    parent.extension = ext
    import triton.language.extra as extra
    extra.cann = parent
    return True
