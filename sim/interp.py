"""Every patch of Triton's interpreter lives here, and nowhere else.

What the simulator needs from the interpreter, and what is changed to get it:
- kernels defined after `install()` are interpreted (knobs.runtime.interpret);
- a launch runs its program instances as concurrent tasks (GridExecutor.__call__), not
  one after another, and without the interpreter's copy of every argument's storage to
  a host buffer and back (that copy would undo a peer's writes into the symmetric heap);
- tl.program_id / tl.num_programs answer for the calling task (thread-local);
- every load, store and atomic goes through the access path (sim/access.py), told whether
  the pointer is a scalar (data cache) or a block (DMA);
- the code objects of interpreted functions are recorded, so a report can name the
  kernel line.
How each Triton release does these things differs; sim/tritonapi/ holds one adapter per
API generation (chosen by feature detection) and this module asks only `API`.  The canary
test (tests/test_canary.py) checks that the live adapter's entry points exist.
"""
from __future__ import annotations

import functools
import inspect
import threading
import types

import numpy as np
import triton
from triton.language import semantic as _semantic_mod
from triton.runtime import interpreter as _interp

from triton_dist import kernel_launches

from . import access, context, memory
from .tritonapi import detect

# The adapter of the installed triton's interpreter generation (sim/tritonapi/): every
# difference between Triton releases is answered there; this module asks only it.
API = detect()
_installed = False
_patch_lang = _interp._patch_lang      # the original, used by the grid executor
_access = threading.local()   # .scalar: is the current tl.load/tl.store on a scalar pointer

# Entry points the simulator relies on on this triton; the canary test asserts all of them exist.
REQUIRED = API.entry_points()

TensorHandle = _interp.TensorHandle
np_dtype_of = _interp._get_np_dtype


def interpreting(_semantic) -> bool:
    """True when a builtin is being run by the interpreter (the simulator), not compiled."""
    return _semantic is None or isinstance(getattr(_semantic, "builder", None), _interp.InterpreterBuilder)


# ---- builder overrides ------------------------------------------------------------------

def _program_id(self, axis):
    c = context.core()
    idx = c.grid_idx if c is not None else self.grid_idx
    return TensorHandle(np.array([idx[axis]], dtype=np.int32), triton.language.int32)


def _grid_idx_of_caller():
    """The builder's `grid_idx` answers for the calling core: the interpreter's own methods
    that read it (create_print: device_print's "(x, y, z)" prefix) see the program of the
    thread that calls them; the grid executor's set_grid_idx writes the host's value."""
    def get(self):
        c = context.core()
        return c.grid_idx if c is not None else self.__dict__.get("_host_grid_idx")

    def put(self, value):
        self.__dict__["_host_grid_idx"] = value
    return property(get, put)


def _debug_barrier(self):
    """tl.debug_barrier(): on the NPU gpu.barrier becomes hfusion.barrier, then
    hivm.pipe_barrier[PIPE_ALL] (AscendNPU-IR GPUToHFusion.cpp, HFusionToHIVM.cpp): every pipe
    of the core drains, so its stores, puts and gets in flight complete -- quiet without its
    dcci (docs/device_model.md).  Triton's own interpreter runs programs one by one and makes it
    a no-op."""
    c = context.core()
    if c is None:
        return
    from . import primitives
    primitives.complete_pending(c)
    obs = context.runtime().observers
    if obs is not None:
        obs.quiet()


def _num_programs(self, axis):
    c = context.core()
    dim = c.grid_dim if c is not None else self.grid_dim
    return TensorHandle(np.array([dim[axis]], dtype=np.int32), triton.language.int32)


def _mask(m):
    """A mask as numpy: a TensorHandle's data, or the bare array the tensor-descriptor ops pass
    (TensorDescHandle.materialize_pointers returns the mask as an ndarray)."""
    return m.data if isinstance(m, TensorHandle) else np.asarray(m)


# The trailing arguments are the access's cache policy and volatility, which the memory model
# does not use: (cache_modifier, eviction_policy, is_volatile) up to 3.8, (cache_policy,
# is_volatile) from 3.9; the tensor-descriptor load passes them by name.
def _masked_load(self, ptrs, mask, other, *_policy, **_named_policy):
    dtype_tt = ptrs.get_element_ty()
    dtype_np = np_dtype_of(dtype_tt)
    if other is None:
        other = TensorHandle(np.zeros_like(ptrs.data, dtype=dtype_np), dtype_tt)
    scalar = getattr(_access, "scalar", False)
    return TensorHandle(access.load(ptrs.data, _mask(mask), other.data, dtype_np, scalar, _base(ptrs)), dtype_tt)


def _masked_store(self, ptrs, value, mask, *_policy, **_named_policy):
    return access.store(ptrs.data, value.data, _mask(mask), getattr(_access, "scalar", False), _base(ptrs))


def _atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
    op = self.ir_rmw_op_to_interpreter_rmw_op[rmwOp]
    sem = self.ir_sem_to_interpreter_sem[sem]
    return TensorHandle(access.atomic_rmw(op, ptr.data, val.data, mask.data, sem, _base(ptr)), val.dtype.scalar)


def _atomic_cas(self, ptr, cmp, val, sem, scope):
    sem = self.ir_sem_to_interpreter_sem[sem]
    return TensorHandle(access.atomic_cas(ptr.data, cmp.data, val.data, sem, _base(ptr)), cmp.dtype.scalar)


# ---- pointer provenance: which tensor a pointer was derived from ---------------------------
# An access must stay inside the tensor its pointer came from (issue 14 item 4): a[128] of a
# 16-element tensor lands in the next tensor, whose bytes are valid on their own.  addptr
# records on its result the bounds of the allocation its base pointer lies in (attr
# "td_base", see memory.base_of); ops that only move pointers around keep it; a load or
# store through such a pointer is checked against it (memory.check_base).
_BASE = "td_base"


def _addptr(orig):
    def addptr(self, ptr, offset):
        out = orig(self, ptr, offset)
        base = ptr.attr.get(_BASE) or memory.base_of(ptr.data)
        if base is not None:
            out.attr[_BASE] = base
        return out
    return addptr


def _keeps_base(orig, *pos):
    """A pointer-moving op (splat, broadcast, reshape, ...): the result keeps the base of its
    pointer operands at positions `pos` when they agree."""
    def op(self, *args):
        out = orig(self, *args)
        bases = {_operand_base(args[i]) for i in pos}
        if len(bases) == 1 and None not in bases and isinstance(out, TensorHandle):
            out.attr[_BASE] = bases.pop()
        return out
    return op


def _operand_base(h):
    """The base of a pointer operand; a scalar pointer (a kernel argument, splat in every
    round of a loop) learns its own once, so no round looks it up again."""
    attr = getattr(h, "attr", None)
    if attr is None:
        return None
    base = attr.get(_BASE)
    if base is None and getattr(h.data, "size", 0) == 1 and getattr(h.dtype, "is_ptr", lambda: False)():
        base = memory.base_of(h.data)
        if base is not None:
            attr[_BASE] = base
    return base


def _base(h):
    return h.attr.get(_BASE) if h is not None else None


def _bf16_to_f32(data):
    """bfloat16 is kept as its uint16 bit pattern; these are the top half of an fp32."""
    return (data.astype(np.uint32) << 16).view(np.float32)


def _dot(orig):
    # triton 3.6's interpreter multiplies bf16 operands as their raw uint16 bit patterns
    # (a 16x16 dot comes out ~1e10 off); widen them to fp32 first, as the hardware does.
    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        obs = getattr(context._runtime, "observers", None)     # issue 17: sim/predict records the dot's FLOPs
        c = context.core()
        if obs is not None and (c is None or c.split is None or c.split.core_type == "cube"):   # the cube's dot only
            obs.dot(a.data.size // a.data.shape[-1], b.data.shape[-1], a.data.shape[-1], a.dtype.scalar,
                    input_precision)
        if a.dtype.scalar == triton.language.bfloat16:
            a = TensorHandle(_bf16_to_f32(a.data), triton.language.float32)
        if b.dtype.scalar == triton.language.bfloat16:
            b = TensorHandle(_bf16_to_f32(b.data), triton.language.float32)
        return orig(self, a, b, d, input_precision, max_num_imprecise_acc)
    return dot


_launches_running = [0]
# _patch_lang patches the triton.language modules it finds in a function's globals; a
# stand-in whose globals hold both lets a launch patch everything once, up front, for the
# kernel and for every helper it calls (triton's own included, which use tl.core).
_ALL_LANG = types.FunctionType((lambda: None).__code__, {"tl": triton.language, "core": triton.language.core})


def _patch_lang_outside_launches(orig):
    # A call of a @jit helper inside a kernel re-runs _patch_lang, which briefly puts
    # triton's own tl.tensor.__index__ back while other cores run (numpy >= 2.4 then fails
    # `range(tensor)` in them).  During a launch everything is patched already.
    def patch(fn):
        if _launches_running[0]:
            return API.empty_scope()
        return orig(fn)
    return patch


def _flag_scalar(orig):
    def wrapper(self, ptr, *args, **kwargs):
        if not isinstance(self.builder, _interp.InterpreterBuilder):
            return orig(self, ptr, *args, **kwargs)
        prev = getattr(_access, "scalar", False)
        _access.scalar = not ptr.type.is_block()
        try:
            return orig(self, ptr, *args, **kwargs)
        finally:
            _access.scalar = prev
    return wrapper


def _recording_rewrite(orig):
    def rewrite(self):
        fn = orig(self)
        context.KERNEL_CODES.add(fn.__code__)
        return fn
    return rewrite


# ---- the launch ---------------------------------------------------------------------------

def _is_tensor(x) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "untyped_storage")


def _tensors_in(name: str, a):
    """The tensors a kernel argument reaches memory through, with how to name each: the
    argument itself, the members of a tuple (at any depth), the base of a host tensor
    descriptor (triton.tools.tensor_descriptor.TensorDescriptor), as the interpreter's own
    _init_args_hst walks them."""
    t = _interp._unwrap_tensor(a)
    if _is_tensor(t):
        yield name, t
    elif isinstance(a, (tuple, list)):
        for i, x in enumerate(a):
            yield from _tensors_in(f"{name}[{i}]", x)
    elif hasattr(a, "base") and hasattr(a, "block_shape"):
        yield from _tensors_in(f"{name}.base", a.base)


def _grid_call(self, *args_dev, **kwargs):
    from triton_dist.errors import TritonDistError
    rt = context.runtime()
    argspec = inspect.getfullargspec(self.fn)
    kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
    tensors = []
    for name, a in list(zip(self.arg_names, args_dev)) + list(kwargs.items()):
        for what, t in _tensors_in(name, a):
            if t.device.type != "cpu":
                raise TritonDistError(
                    f"kernel {self.fn.__name__}: argument {what!r} is on {t.device}; the simulator "
                    f"runs on the CPU, so pass tensors from triton_dist.symm_tensor or on 'cpu'")
            tensors.append((what, t))
    for hook in API.pre_run_hooks(self):
        hook(*args_dev, **kwargs)
    # the launch's observers (e.g. the NPU compile check), before the language is patched for the run
    kernel_launches.launched(self.fn, inspect.getcallargs(self.fn, *args_dev, **kwargs), self.constexprs)
    patch_scope = API.patch_lang(_patch_lang, _ALL_LANG)
    _launches_running[0] += 1
    try:
        args = inspect.getcallargs(self.fn, *args_dev, **kwargs)
        args = {n: a if n in self.constexprs else _interp._implicit_cvt(a) for n, a in args.items()}
        grid = self.grid(args) if callable(self.grid) else self.grid
        grid = tuple(int(g) for g in grid)
        if not 1 <= len(grid) <= 3 or min(grid) < 0:
            raise TritonDistError(f"kernel {self.fn.__name__}: grid must be 1 to 3 non-negative sizes, got {grid}")
        grid = grid + (1,) * (3 - len(grid))
        _interp.interpreter_builder.set_grid_dim(*grid)
        rt.run_grid(self.fn, args, grid, tensors)
    finally:
        _launches_running[0] -= 1
        patch_scope.restore()


def _index(self):
    # Triton's own tl.tensor.__index__ is int(array) of a shape-(1,) array up to 3.6, which numpy
    # >= 2.4 refuses for ndim > 0; `range(dl.num_ranks())` in a kernel needs it.
    return int(self.handle.data.ravel()[0])


def _interpret_triton_stdlib() -> None:
    """triton.language's own @jit helpers (tl.zeros, tl.sum, tl.cdiv, ...) were compiled-mode
    JITFunctions when triton was imported; make them interpreted, as TRITON_INTERPRET=1 at
    import would have.  They are looked up through their modules at call time."""
    import sys
    from triton.runtime.jit import JITFunction
    done = {}

    def interpreted(value):
        if id(value) not in done:
            done[id(value)] = _interp.InterpretedFunction(value.fn, **_jit_kwargs(value))
        return done[id(value)]

    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                setattr(module, attr, interpreted(value))
            elif isinstance(value, type) and value.__module__.startswith("triton.language"):
                # the same helpers bound as methods (`x.sum()`, `x.cumsum(0)`: tl.tensor's
                # @_tensor_member_fn @jit functions) live in the class, not the module
                for m, v in list(vars(value).items()):
                    if isinstance(v, JITFunction):
                        setattr(value, m, _as_method(interpreted(v)))


def _as_method(f):
    # an InterpretedFunction is no descriptor: as a class attribute it would not bind `self`
    # (triton's own _tensor_member_fn wraps it in a plain function under TRITON_INTERPRET=1)
    def method(*args, **kwargs):
        return f(*args, **kwargs)
    return functools.update_wrapper(method, f.fn)   # __wrapped__: the helper's Python function


def _jit_kwargs(f):
    return {k: getattr(f, k) for k in ("noinline",) if getattr(f, k, None) is not None}


def install() -> None:
    """Make @triton.jit kernels defined from now on run on the simulator."""
    global _installed
    if _installed:
        return
    triton.knobs.runtime.interpret = True
    _interpret_triton_stdlib()
    B = API.builder_class()
    B.create_get_program_id = _program_id
    B.grid_idx = _grid_idx_of_caller()
    B.create_barrier = _debug_barrier
    B.create_get_num_programs = _num_programs
    B.create_masked_load = _masked_load
    B.create_masked_store = _masked_store
    B.create_atomic_rmw = _atomic_rmw
    B.create_atomic_cas = _atomic_cas
    S = _semantic_mod.TritonSemantic
    for name in API.scalar_access_methods:
        setattr(S, name, _flag_scalar(getattr(S, name)))
    _interp.InterpretedFunction.rewrite = _recording_rewrite(_interp.InterpretedFunction.rewrite)
    _interp.GridExecutor.__call__ = _grid_call
    _interp._patch_lang_tensor = API.lang_tensor_patch(_interp._patch_lang_tensor, _index)
    global _patch_lang
    _patch_lang = _interp._patch_lang
    _interp._patch_lang = _patch_lang_outside_launches(_patch_lang)
    B.create_dot = _dot(B.create_dot)
    B.create_addptr = _addptr(B.create_addptr)
    for name, pos in API.pointer_ops():
        setattr(B, name, _keeps_base(getattr(B, name), *pos))
    API.install_device_ops(B)
    _installed = True
