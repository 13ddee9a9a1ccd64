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
- sync_block_all(mode, event_id): a barrier of the launch's cores ("all", "all_vector",
  "all_cube": the simulator's cores are all of them); "all_sub_vector" is not modelled.
- sync_block_set / sync_block_wait: cube<->vector flags.  The simulator runs no separate
  cube instance (each vector instance computes its dots itself), so a flag between them is
  always satisfied: no-ops.
- debug_barrier, compile_hint, multibuffer: ordering inside one vector function and compiler
  hints: nothing to do in an interpreter (program order already holds).
- parallel: a range.  get_element, flip, sort, cast, atan2, isfinited, finitef: their
  triton.language counterparts.
Anything else of the module exists (imports succeed) and says it is not simulated when called.
"""
from __future__ import annotations

import enum
import sys
import types

import numpy as np
import triton.language as tl

from triton_dist.errors import TritonDistError
from triton_dist.language import _dispatch as D

from .. import context
from ..interp import TensorHandle

MODULE = "triton.language.extra.cann.extension"
PARENT = "triton.language.extra.cann"


def _builtin(fn):
    setattr(fn, tl.core.TRITON_BUILTIN, True)
    return fn


def _core_or_error(what):
    c = context.core()
    if c is None:
        raise TritonDistError(f"{what} is a device builtin: call it inside a @triton.jit kernel")
    return c


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


# --- sub-cores ---------------------------------------------------------------------------------

@_builtin
def sub_vec_id(_semantic=None):
    """The index (0/1) of the vector sub-core running this instance (0 outside mix kernels)."""
    c = _core_or_error("sub_vec_id()")
    return D.scalar(int(getattr(c, "sub_vec", 0) or 0), tl.int64)


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


def _names(fn, name, seen) -> bool:
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    g = getattr(fn, "__globals__", {})
    stack = [code]
    while stack:
        c = stack.pop()
        if name in c.co_names:
            return True
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        for n in c.co_names:          # helpers: @jit functions among the globals (and modules') it names
            for cand in (g.get(n), *(getattr(m, n, None) for m in g.values() if isinstance(m, types.ModuleType))):
                inner = getattr(cand, "fn", None)
                if inner is not None and callable(inner) and _names(inner, name, seen):
                    return True
    return False


# --- synchronisation -----------------------------------------------------------------------------

_SYNC_MODES = ("all_cube", "all_vector", "all", "all_sub_vector")


@_builtin
def sync_block_all(mode, event_id=0, _semantic=None):
    mode = D.unwrap(mode)
    if mode not in _SYNC_MODES:
        raise TritonDistError(f"{context.kernel_line(2)}: sync_block_all: mode must be one of "
                              f"{', '.join(_SYNC_MODES)}, got {mode!r}")
    if mode == "all_sub_vector":
        raise TritonDistError(f"{context.kernel_line(2)}: sync_block_all('all_sub_vector') (a barrier of the "
                              f"two vector sub-cores of each block) is not modelled by the simulator")
    c = _core_or_error("sync_block_all")
    context.runtime().core_barrier(c)


@_builtin
def sync_block_set(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    _core_or_error("sync_block_set")     # a cube<->vector flag: no separate cube instance here


@_builtin
def sync_block_wait(sender, receiver, event_id, sender_pipe=None, receiver_pipe=None, _semantic=None):
    _core_or_error("sync_block_wait")


@_builtin
def debug_barrier(sync_mode=None, _semantic=None):
    pass


@_builtin
def compile_hint(ptr, hint_name, hint_val=None, _semantic=None):
    pass


@_builtin
def multibuffer(src, size, _semantic=None):
    pass


def parallel(arg1, arg2=None, step=None, **compiler_hints):
    """A range whose iterations the compiler may run in parallel: in order, here."""
    if arg2 is None:
        arg1, arg2 = 0, arg1
    return range(int(D.unwrap(arg1)), int(D.unwrap(arg2)), 1 if step is None else int(D.unwrap(step)))


# --- element-wise helpers, through triton.language -------------------------------------------------

def get_element(src, indice):
    return src[tuple(indice)] if isinstance(indice, (list, tuple)) else src[indice]


def flip(x, dim=None):
    return tl.flip(x, dim)


def sort(x, dim=None, descending=False):
    return tl.sort(x, dim=dim, descending=descending)


def cast(x, dtype, **kwargs):
    return x.to(dtype, **kwargs)


@_builtin
def atan2(y, x, _semantic=None):
    a, b = np.asarray(y.handle.data), np.asarray(x.handle.data)
    return tl.tensor(TensorHandle(np.arctan2(a, b).astype(a.dtype), y.type.scalar), y.type)


@_builtin
def isfinited(x, _semantic=None):
    data = np.isfinite(np.asarray(x.handle.data))
    ty = tl.block_type(tl.int1, list(x.shape)) if x.type.is_block() else tl.int1
    return tl.tensor(TensorHandle(data, tl.int1), ty)


finitef = isfinited


def _unsupported(name):
    def call(*args, **kwargs):
        raise TritonDistError(f"{context.kernel_line(2)}: triton.language.extra.cann.extension.{name} is not "
                              f"simulated (an Ascend memory-hierarchy or custom-op builtin); the simulator "
                              f"supports: {', '.join(SUPPORTED)}")
    call.__name__ = name
    setattr(call, tl.core.TRITON_BUILTIN, True)
    return call


SUPPORTED = ("sub_vec_id", "sub_vec_num", "sync_block_all", "sync_block_set", "sync_block_wait", "debug_barrier",
             "compile_hint", "multibuffer", "parallel", "get_element", "flip", "sort", "cast", "atan2",
             "isfinited", "finitef", "CORE", "PIPE", "MODE", "SYNC_IN_VF", "int64", "builtin", "is_builtin")
# the rest of triton-ascend's __all__ (evidence C): present so imports work, refused when called
UNSUPPORTED = ("ascend_address_space", "copy_from_ub_to_l1", "copy", "fixpipe", "FixpipeDMAMode",
               "FixpipeDualDstMode", "FixpipePreQuantMode", "FixpipePreReluMode", "scope", "custom",
               "custom_semantic", "register_custom_op", "insert_slice", "extract_slice", "index_put",
               "gather_out_to_ub", "scatter_ub_to_out", "index_select_simd")


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
    ext = sys.modules.get(MODULE) or build()
    sys.modules[MODULE] = ext
    parent.extension = ext
    import triton.language.extra as extra
    extra.cann = parent
    return True
