"""Every patch of Triton's interpreter lives here, and nowhere else.

What the simulator needs from the interpreter, and what is changed to get it:
- the kernel mode is chosen per launch (issue 23), never per process: a @triton.jit
  kernel stays the JITFunction Triton made, which cuda/npu ranks compile as plain Triton
  does.  Where the simulator runs kernels (its ranks, and a process whose default backend
  it is), JITFunction.run hands the launch to the kernel's interpreted form (an
  InterpretedFunction of the same Python function, made once per kernel); a @jit helper
  called inside an interpreted kernel runs its interpreted form (JITFunction.__call__);
  triton.language's @jit tensor methods (`x.sum()`) are bound as interpreted methods for
  the duration of a launch only;
- a kernel launched outside any rank runs as on one rank (a lone rank, sim/backend.py),
  as under Triton's own interpreter;
- launches from several host threads of one rank run one at a time (the rank's device runs
  one kernel at a time, as one stream): the language is patched by the one running; under a
  deterministic schedule, which replays one host task per rank, a second concurrent launch
  is refused at once;
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
import sys
import threading
import time
import types

import numpy as np
import triton
from triton.language import semantic as _semantic_mod
from triton.runtime import interpreter as _interp

from triton_dist import kernel_launches
from triton_dist.language import ascend_math, ascend_rules  # ascend_rules: the NPU's dtype/op rules

from . import access, context, memory
from . import low_precision, tile_slices
from .kernel_args import tensors_in
from .tritonapi import detect

# The adapter of the installed triton's interpreter generation (sim/tritonapi/): every
# difference between Triton releases is answered there; this module asks only it.
API = detect()
_installed = False
_lone_rank = None            # set by install(): the backend's maker of a lone rank
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
    return TensorHandle(access.load(ptrs.data, _mask(mask), other.data, dtype_np, scalar, _operand_base(ptrs)),
                        dtype_tt)


def _masked_store(self, ptrs, value, mask, *_policy, **_named_policy):
    return access.store(ptrs.data, value.data, _mask(mask), getattr(_access, "scalar", False), _operand_base(ptrs))


# An unmasked tl.load / tl.store: Triton's builder makes an all-true mask (np.ones_like) and
# hands it to the masked op, which then tests every lane of it; here the mask is None (every
# lane active: sim/access.py never builds or tests one).  Same trailing policy arguments.
def _load(self, ptr, *_policy, **_named_policy):
    dtype_tt = ptr.get_element_ty()
    return TensorHandle(access.load(ptr.data, None, None, np_dtype_of(dtype_tt), getattr(_access, "scalar", False),
                                    _operand_base(ptr)), dtype_tt)


def _store(self, ptr, value, *_policy, **_named_policy):
    return access.store(ptr.data, value.data, None, getattr(_access, "scalar", False), _operand_base(ptr))


def _atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
    op = self.ir_rmw_op_to_interpreter_rmw_op[rmwOp]
    sem = self.ir_sem_to_interpreter_sem[sem]
    return TensorHandle(access.atomic_rmw(op, ptr.data, val.data, mask.data, sem, _operand_base(ptr)),
                        val.dtype.scalar)


def _atomic_cas(self, ptr, cmp, val, sem, scope):
    sem = self.ir_sem_to_interpreter_sem[sem]
    return TensorHandle(access.atomic_cas(ptr.data, cmp.data, val.data, sem, _operand_base(ptr)),
                        cmp.dtype.scalar)


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
    if len(pos) == 1:           # most of them (splat, broadcast, reshape): one operand, no set
        i = pos[0]

        def op1(self, *args):
            out = orig(self, *args)
            base = _operand_base(args[i])
            if base is not None and isinstance(out, TensorHandle):
                out.attr[_BASE] = base
            return out
        return op1

    def op(self, *args):
        out = orig(self, *args)
        bases = {_operand_base(args[i]) for i in pos}
        if len(bases) == 1 and None not in bases and isinstance(out, TensorHandle):
            out.attr[_BASE] = bases.pop()
        return out
    return op


def _operand_base(h):
    """The base of a pointer operand; a scalar pointer (a kernel argument, splat in every
    round of a loop, or loaded and stored through as it is) learns its own once, so no round
    looks it up again."""
    attr = getattr(h, "attr", None)
    if attr is None:
        return None
    base = attr.get(_BASE)
    if base is None and getattr(h.data, "size", 0) == 1 and getattr(h.dtype, "is_ptr", lambda: False)():
        base = memory.base_of(h.data)
        if base is not None:
            attr[_BASE] = base
    return base


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

def _grid_call(self, *args_dev, **kwargs):
    from triton_dist.errors import TritonDistError
    rt = _runtime_for(self.fn.__name__)
    argspec = inspect.getfullargspec(self.fn)
    kwargs = {k: v for k, v in kwargs.items() if k in argspec.args or k in argspec.kwonlyargs}
    tensors = []
    for name, a in list(zip(self.arg_names, args_dev)) + list(kwargs.items()):
        for what, t in tensors_in(name, a):
            if t.device.type != "cpu":
                raise TritonDistError(
                    f"kernel {self.fn.__name__}: argument {what!r} is on {t.device}; the simulator "
                    f"runs on the CPU, so pass tensors from triton_dist.symm_tensor or on 'cpu'")
            tensors.append((what, t))
    with _one_launch_at_a_time(rt, self.fn.__name__):
        for hook in API.pre_run_hooks(self):
            hook(*args_dev, **kwargs)
        # the launch's observers (e.g. the NPU compile check), before the language is patched for the run
        kernel_launches.launched(self.fn, inspect.getcallargs(self.fn, *args_dev, **kwargs), self.constexprs, self.grid)
        # Triton's code generator keys its static builtins (tl.static_assert, tl.static_print) by the
        # functions it finds when first imported, and the launch's first mangle_type imports it (through
        # gluon): imported under the patched language it would keep the interpreter's static_assert,
        # and every later compile of this process (npu-compile, the launch check) would skip them
        import triton.compiler.code_generator  # noqa: F401
        patch_scope = API.patch_lang(_patch_lang, _ALL_LANG)
        methods = _bind_interpreted_methods()
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
            methods.restore()
            patch_scope.restore()


def _runtime_for(kernel: str):
    """The rank this launch runs on: the process's, or, in a process that is no rank, a lone
    rank (world size 1) made on first use, as Triton's interpreter runs a kernel anywhere."""
    from triton_dist import backend
    from triton_dist.errors import TritonDistError
    cls = backend.kernel_backend_class()
    if not cls.interprets_kernels:
        # an InterpretedFunction (a kernel defined under TRITON_INTERPRET=1) in a rank of a
        # compiled backend: its interpreted form cannot run on that device
        raise TritonDistError(
            f"kernel {kernel} was defined while TRITON_INTERPRET=1 (Triton made it an InterpretedFunction), and "
            f"backend {cls.name!r} compiles kernels for its device; unset TRITON_INTERPRET (triton_dist chooses "
            f"per launch: the simulator interprets, {cls.name!r} compiles)")
    rt = context.current()
    if rt is None or rt.lone:
        rt = _lone_rank()
    return rt


# ---- one launch at a time per rank ----------------------------------------------------------
# A rank's launches share its runtime (board, abort flag, core barrier, address space) and
# the patched language; a rank's device runs one kernel at a time, so launches from several
# host threads take turns, first come first served.
_launch_lock = threading.Lock()
_running = {"thread": None, "kernel": None}
_queued = [0]             # launches waiting for their turn (tests/test_host_threads.py watches it)


class _one_launch_at_a_time:
    __slots__ = ("rt", "kernel")

    def __init__(self, rt, kernel):
        self.rt, self.kernel = rt, kernel

    def __enter__(self):
        from triton_dist.errors import LaunchTimeoutError, TritonDistError
        if _launch_lock.acquire(blocking=False):
            self._hold()
            return self
        me, other = threading.current_thread(), dict(_running)
        other["kernel"] = other.get("kernel") or "another kernel"
        name = getattr(self.rt.sched, "name", "free")
        if other["thread"] is me:
            raise TritonDistError(f"kernel {self.kernel} was launched while kernel {other['kernel']} runs in the "
                                  f"same thread (a kernel cannot launch a kernel); launch it after that one returns")
        if name != "free":
            raise TritonDistError(
                f"kernel {self.kernel} was launched from host thread {me.name!r} while kernel {other['kernel']} "
                f"(launched from thread {getattr(other['thread'], 'name', '?')!r}) is running on rank "
                f"{self.rt.rank}: schedule={name!r} replays one host task per rank, so launches from several host "
                f"threads at once cannot be scheduled or replayed. Launch from one thread (join the other first), "
                f"or use schedule='free', where concurrent launches run one after the other")
        _queued[0] += 1
        try:
            got = _launch_lock.acquire(timeout=max(1.0, float(self.rt.timeout)))
        finally:
            _queued[0] -= 1
        if not got:
            raise LaunchTimeoutError(
                f"kernel {self.kernel} (host thread {me.name!r}) waited {self.rt.timeout:g} s for its turn on rank "
                f"{self.rt.rank}: kernel {other['kernel']} launched from thread "
                f"{getattr(other['thread'], 'name', '?')!r} is still running (a rank runs one kernel at a time, "
                f"like one stream); give it more time with launch(..., timeout=SECONDS), or do not make one "
                f"kernel wait for another launched from another thread of the same rank",
                self.rt.board.report([self.rt.rank]) if self.rt.board is not None else "")
        self._hold()
        return self

    def _hold(self):
        _running.update(thread=threading.current_thread(), kernel=self.kernel, since=time.monotonic())

    def __exit__(self, *exc):
        _running.update(thread=None, kernel=None)
        _launch_lock.release()
        return False


def launches_waiting() -> int:
    """How many launches of this process wait for the one running to end."""
    return _queued[0]


# ---- the kernel mode, per launch ---------------------------------------------------------------

def interpreted(jit):
    """The interpreted form of a JITFunction: an InterpretedFunction of the same Python
    function (made once, kept on the kernel), sharing its pre-run hooks."""
    f = vars(jit).get(_INTERPRETED)
    if f is None:
        f = _interp.InterpretedFunction(jit.fn, **_jit_kwargs(jit))
        f.pre_run_hooks = jit.pre_run_hooks
        vars(jit)[_INTERPRETED] = f
    return f


_INTERPRETED = "_triton_dist_interpreted"


def _simulator_runs_kernels() -> bool:
    from triton_dist import backend
    return backend.kernel_backend_class().interprets_kernels


def _dispatching_run(orig):
    # kernel[grid](...) and kernel.warmup(...): interpreted where the simulator runs this
    # process's kernels; Triton's own compile-and-launch everywhere else (untouched)
    def run(self, *args, grid, warmup, **kwargs):
        if not _is_gluon(self) and _simulator_runs_kernels():
            return interpreted(self).run(*args, grid=grid, warmup=warmup, **kwargs)
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
    run.__wrapped__ = orig
    return run


def _dispatching_autotune(orig):
    # kernel[grid](...) of a @triton.autotune kernel: where the simulator runs this process's
    # kernels, every config runs and is checked against one (sim/autotune.py) instead of being
    # timed on a device (Triton's own interpreter fails with "0 active drivers"); untouched elsewhere
    def run(self, *args, **kwargs):
        if _simulator_runs_kernels():
            from . import autotune
            return autotune.run(self, orig, *args, **kwargs)
        return orig(self, *args, **kwargs)
    run.__wrapped__ = orig
    return run


def _is_gluon(jit) -> bool:
    is_gluon = getattr(jit, "is_gluon", None)       # not on every generation's JITFunction
    return bool(is_gluon()) if callable(is_gluon) else False


def _dispatching_call(orig):
    # a @jit helper called by a kernel the simulator interprets (the compiler never calls a
    # JITFunction: it inlines or emits a call; outside a kernel Triton's own error stands)
    def call(self, *args, **kwargs):
        if context.core() is not None:
            return interpreted(self)(*args, **kwargs)
        return orig(self, *args, **kwargs)
    call.__wrapped__ = orig
    return call


class _MethodScope:
    __slots__ = ("saved",)

    def __init__(self, saved):
        self.saved = saved

    def restore(self) -> None:
        for cls, name, value in self.saved:
            setattr(cls, name, value)


_methods_cache = {"modules": -1, "list": []}


def _jit_methods():
    """(class, name, JITFunction) of the @jit helpers triton.language binds as methods
    (`x.sum()`, `x.cumsum(0)`: tl.tensor's @_tensor_member_fn @jit functions)."""
    from triton.runtime.jit import JITFunction
    if _methods_cache["modules"] != len(sys.modules):
        found = []
        for name, module in list(sys.modules.items()):
            if not name.startswith("triton.language") or module is None:
                continue
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__.startswith("triton.language"):
                    found += [(value, m, v) for m, v in list(vars(value).items()) if isinstance(v, JITFunction)]
        _methods_cache.update(modules=len(sys.modules), list=list({(c, m): (c, m, v) for c, m, v in found}.values()))
    return _methods_cache["list"]


def _bind_interpreted_methods() -> _MethodScope:
    """For one launch: the @jit tensor methods as interpreted, bound methods.  A JITFunction
    is no descriptor (the compiler binds it itself), and an InterpretedFunction neither:
    Triton's interpreter puts a plain function there under TRITON_INTERPRET=1; so does this."""
    saved = []
    for cls, name, jit in _jit_methods():
        if vars(cls).get(name) is jit:
            saved.append((cls, name, jit))
            setattr(cls, name, _as_method(interpreted(jit)))
    return _MethodScope(saved)


def _index(self):
    # Triton's own tl.tensor.__index__ is int(array) of a shape-(1,) array up to 3.6, which numpy
    # >= 2.4 refuses for ndim > 0; `range(dl.num_ranks())` in a kernel needs it.
    return int(self.handle.data.ravel()[0])


def _as_method(f):
    def method(*args, **kwargs):
        return f(*args, **kwargs)
    return functools.update_wrapper(method, f.fn)   # __wrapped__: the helper's Python function


def _jit_kwargs(f):
    return {k: getattr(f, k) for k in ("noinline",) if getattr(f, k, None) is not None}


def install(lone_rank) -> None:
    """Let the simulator run @triton.jit kernels in this process (its ranks, and launches
    outside any rank where it is the default backend); compiled launches are untouched.
    lone_rank() gives the runtime of a kernel launched in a process that is no rank: the
    backend makes it (sim/backend.py), a layer above this one, so it is handed in here."""
    global _installed, _lone_rank
    if _installed:
        return
    _lone_rank = lone_rank
    from triton.runtime.jit import JITFunction
    JITFunction.run = _dispatching_run(JITFunction.run)
    JITFunction.__call__ = _dispatching_call(JITFunction.__call__)
    from triton.runtime.autotuner import Autotuner
    Autotuner.run = _dispatching_autotune(Autotuner.run)
    from triton_dist.language import block_pointers
    block_pointers.install()        # on a triton without them: a refusal naming the lines that have them
    B = API.builder_class()
    B.create_get_program_id = _program_id
    B.grid_idx = _grid_idx_of_caller()
    B.create_barrier = _debug_barrier
    B.create_get_num_programs = _num_programs
    B.create_masked_load = _masked_load
    B.create_masked_store = _masked_store
    B.create_load = _load
    B.create_store = _store
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
    tile_slices.install(B)            # tl.gather: an index outside the axis refused (numpy would wrap -1)
    low_precision.install(B)          # bf16/fp8 computed on their values (after the device ops: sort)
    ascend_math.install()             # triton-ascend's dtypes for tl.exp & co. on simulated cores
    ascend_rules.install(S, B, lambda: context.core() is not None, context.kernel_line, context.kernel_frame)
    _installed = True
