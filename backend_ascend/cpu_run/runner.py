"""One kernel launch as native code: the JIT module, its bindings, the arguments, one block per call.

`Native(built)` JITs a Built module once per process and binds every function it declares:
the on-chip space bases and block indices (this module), the template library
(templates.py), the aclshmem wrappers (shmem.py).  `Native.launch(args, signature, grid)`
makes the argument list the lowered entry takes, `LaunchArgs.run_block(block, ...)` runs one
program.  Which core runs which block, and when, is the caller's (backend.py hands each
program to the simulator's dispatch onto the device's physical cores).

A callback that raises (a fault, a primitive's deadlock report) cannot unwind through native
code: the error is kept in the block's state, every later callback of the block returns at
once, and the block raises it when the native call returns.  So that a `while` loop whose
condition depends on the failed call's results does not spin for ever, the first failure also
sets the launch's abort word, which every loop condition reads (rewrite.loop_aborts): the loops
end, the other blocks' calls return at once too, and the launch reports the failure, with the
core, block and call it happened in, instead of timing out.
"""
from __future__ import annotations

import ast
import ctypes
import inspect
import os
import re
import textwrap
import threading

import numpy as np

from triton_dist.errors import TritonDistError

from . import device_print, jit, memory as M, mix_order, rewrite, shmem, templates, templates_extra, views

PREFIX = "_mlir_ciface_"
LOCK_BYTES = 64
WORKSPACE_BYTES = 1 << 20


class Unsupported(TritonDistError):
    """The compiled module calls something the CPU run does not implement (named)."""


def _guard(fn, restype, params, name=""):
    halves = [i for i, t in enumerate(params) if t in jit.HALF_TYPES]

    def cb(*args):
        s = M.state()
        if s.fault is not None or (s.launch is not None and s.launch.failed):
            return None if restype is None else 0
        s.calls += 1
        if halves:
            args = list(args)
            for i in halves:
                args[i] = jit.half_bits(args[i])
        try:
            out = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised by the block once native code returns
            if s.fault is None:
                s.failed_call = name
                s.failed_source = _call_source(s, name, args)
            s.fail(e)
            return None if restype is None else 0
        if restype is None:
            return None
        return 0 if out is None else out
    return cb


_GM_OPERAND = {"load_gm_to_ubuf": 0, "store_ubuf_to_gm": 1}     # which descriptor is the global one


def _call_source(s, name, args) -> str:
    """' Source: file:line (...)' of the kernel's accesses of the argument a failing copy between
    global memory and UB reads or writes (found while its descriptor is alive: in the call), else ''."""
    m = re.match(r"(?:" + PREFIX + r")?(load_gm_to_ubuf|store_ubuf_to_gm)_(\d)d_", name)
    if m is None or s.source_access is None:
        return ""
    try:
        addr = M.view(args[_GM_OPERAND[m.group(1)]], int(m.group(2)), 1).aligned
    except Exception:  # noqa: BLE001 - only a hint for the message
        return ""
    b = next((b for b in s.buffers if b.start <= addr < b.end), None)
    return s.source_access(b.arg) if b is not None and b.arg else ""


def _missing(name):
    def fail(*_):
        raise Unsupported(f"the compiled kernel calls {name}, which the hivm backend does not implement yet "
                          f"(backend_ascend/cpu_run/templates.py lists what it does)")
    return fail


def _space_base(space):
    return lambda: views.space_base(space)


def _sync_set(core, flag):
    s = M.state()
    if s.flags is None:
        raise Unsupported("sync_block_set in a kernel that is no mix pair: the hivm backend cannot run it yet")
    s.flags.set("vector" if core else "cube", int(flag), s.sub_block)


def _sync_wait(core, flag):
    s = M.state()
    if s.flags is None:
        raise Unsupported("sync_block_wait in a kernel that is no mix pair: the hivm backend cannot run it yet")
    s.flags.wait("vector" if core else "cube", int(flag), s.sub_block, s)


def _sync_all(core, flag):
    """extension.sync_block_all across the launch's blocks (rewrite.blocks_sync): the simulator's barrier of
    the launch's cores, through the backend interface (sim/cann_device.py sync_block_all, which reports a
    launch of more blocks than cores as the NPU's deadlock, triton-ascend #1738)."""
    s = M.state()
    if s.flags is not None:
        raise Unsupported(f"kernel {s.kernel}: sync_block_all in a mix kernel (cube and vector halves): the hivm "
                          f"backend runs it across blocks only in a kernel of one core type; run it on the simulator")
    from triton_dist import backend
    backend.active().device_call("sync_block_all", "all_vector" if core else "all_cube", int(flag))


_BLOCK_FNS = {"__hivm_block_idx": lambda s: s.block, "__hivm_block_num": lambda s: s.blocks,
              "__hivm_sub_block_idx": lambda s: s.sub_block, "__hivm_sub_block_num": lambda s: s.sub_blocks}


ABORT_WORD = "__hivm_abort_word"


def _with_abort_word(ll: str) -> str:
    """The module with `__hivm_running` (rewrite.loop_aborts) defined natively: 1 until the word
    ABORT_WORD, which the runner sets at a launch's first failure, is non-zero.  The load is volatile
    so that no optimisation keeps it out of the loop that asks."""
    decl = re.compile(r"^declare\b[^\n]*@" + rewrite.RUNNING_FN + r"\(\)[^\n]*$", re.M)
    if not decl.search(ll):
        return ll
    return decl.sub(f"@{ABORT_WORD} = global i32 0\n"
                    f"define i1 @{rewrite.RUNNING_FN}() {{\n"
                    f"  %w = load volatile i32, ptr @{ABORT_WORD}, align 4\n"
                    f"  %r = icmp eq i32 %w, 0\n"
                    f"  ret i1 %r\n}}", ll, count=1)


class Native:
    def __init__(self, built):
        self.built = built
        self._callbacks = []
        symbols = {}
        self.unknown = []
        ll = _with_abort_word(built.ll)
        for name, (ret, params) in jit.declarations(ll).items():
            fn = None
            if name.startswith("__hivm_space_base_"):
                fn = _space_base(name[len("__hivm_space_base_"):])
            elif name in ("__hivm_sync_block_set", "__hivm_sync_block_wait"):
                fn = _sync_set if name.endswith("set") else _sync_wait
            elif name == rewrite.SYNC_ALL_FN:
                fn = _sync_all
            elif name == "__hivm_gm_fault":       # a scalar gm access the native table did not place
                fn = M.gm_scalar_fault
            elif name.rsplit("_", 1)[0] in _BLOCK_FNS:
                get = _BLOCK_FNS[name.rsplit("_", 1)[0]]
                fn = (lambda g: lambda: g(M.state()))(get)
            elif name.startswith(PREFIX):
                # hivm-split-mix-kernel names each half's copy of a wrapper <name>.cube / <name>.vector
                # (linked to that core's wrapper variant on an NPU): one host implementation serves both
                bare = re.sub(r"\.(cube|vector)$", "", name[len(PREFIX):])
                fn = (shmem.handler(bare, params, (built.externs or {}).get(name[len(PREFIX):])
                                         or (built.externs or {}).get(bare))
                      or templates.handler(bare, params)
                      or templates_extra.handler(bare, params) or device_print.handler(bare, params))
                if fn is None:
                    self.unknown.append(bare)
                    fn = _missing(bare)
                fn = mix_order.observed(bare, fn)      # a mix block's cube stores and vector publishes
            else:
                continue            # libc / libgcc (jit.py binds them)
            restype = jit.ctype(ret)
            proto = ctypes.CFUNCTYPE(restype, *[jit.ctype(t) for t in params])
            # an on-chip base stays valid after a fault: the block's native code goes on to its return
            # (a scalar UB access included) and must not dereference a null base
            cb = proto(fn if name.startswith("__hivm_space_base_") else _guard(fn, restype, params, name))
            self._callbacks.append(cb)
            symbols[name] = ctypes.cast(cb, ctypes.c_void_p).value
        parts = built.parts or {"": built.kernel}
        exports = list(parts.values()) + ([built.workspace_fn] if built.workspace_fn else [])
        # InsertInferSyncBlockLockNumAndInitFunc (AscendNPU-IR v1.2.0): how many int64 lock words the
        # block-ordered lock around atomics uses, and their first value (templates_extra: sync_block_lock)
        locks = {k: m.group(1) for k in ("num", "init")
                 for m in [re.search(rf"define i64 @(\w+_infer_sync_block_lock_{k}_function)\(\)", built.ll)] if m}
        exports += list(locks.values())
        table = "@__hivm_gm_table = " in built.ll      # the live-buffer table of the scalar gm checks
        word = f"@{ABORT_WORD} = " in ll
        self.compiled = jit.compile_ir(ll, symbols, exports + (["__hivm_gm_table"] if table else [])
                                       + ([ABORT_WORD] if word else []))
        self.gm_table = self.compiled.address("__hivm_gm_table") if table else 0
        self._abort = ctypes.c_int32.from_address(self.compiled.address(ABORT_WORD)) if word else None
        self.failed = False         # a block of the running launch failed (its while loops end: rewrite.loop_aborts)
        self.entries = {}
        for core, fname in parts.items():
            ret, params = jit.definition(built.ll, fname)
            self.entries[core] = ctypes.CFUNCTYPE(None, *[jit.ctype(t) for t in params])(self.compiled.address(fname))
        self.mix = set(parts) == {"aic", "aiv"}
        self.lock_words, self.lock_init = (
            int(ctypes.CFUNCTYPE(ctypes.c_int64)(self.compiled.address(locks[k]))()) if k in locks else 0
            for k in ("num", "init"))
        self.workspace_per_block = 0
        if built.workspace_fn:     # the module's infer_workspace_shape_function: bytes each block uses
            self.workspace_per_block = int(ctypes.CFUNCTYPE(ctypes.c_int64)(
                self.compiled.address(built.workspace_fn))())


    def abort(self) -> None:
        """A block of the running launch failed: every block's while loops end at their next test and
        their later calls return at once, so the failure surfaces instead of a spin (rewrite.loop_aborts)."""
        self.failed = True
        if self._abort is not None:
            self._abort.value = 1

    def reset(self) -> None:
        """A new launch: nothing has failed."""
        self.failed = False
        if self._abort is not None:
            self._abort.value = 0


def _memref_words(ptr, numel):
    return [ptr, ptr, 0, numel, 1]


class LaunchArgs:
    """The native argument list of one launch, and the live buffers its blocks may touch."""

    def __init__(self, native: Native, fn, args: dict, signature: dict, grid):
        self.native, self.fn, self.grid = native, fn, grid
        self.kernel = native.built.kernel
        self.buffers = []
        self._keep = []
        params = native.built.entry
        values = []
        user = list(signature.items())
        special = [p for p in params if "sync_block_lock" in p[1] or "workspace" in p[1] or "ffts" in p[1]]
        if len(params) != len(special) + len(user) + 3:
            raise Unsupported(f"kernel {self.kernel}: the compiled entry has {len(params)} parameters, expected "
                              f"{len(special)} runtime ones, {len(user)} arguments and 3 grid sizes")
        it = iter(user)
        for i, (kind, ty) in enumerate(params):
            if "ffts_base_address" in ty:
                values.append(0)
            elif "sync_block_lock" in ty or "workspace" in ty:
                blocks = int(np.prod(grid))
                n = (max(LOCK_BYTES, 8 * native.lock_words) if "sync_block_lock" in ty
                     else max(WORKSPACE_BYTES, native.workspace_per_block * blocks))
                buf = np.zeros(n, dtype=np.uint8)
                if "sync_block_lock" in ty and native.lock_init:
                    buf.view(np.int64)[:] = native.lock_init
                self._keep.append(buf)
                self.buffers.append(M.Buffer(buf.ctypes.data, buf.ctypes.data + n, "the launch's " +
                                             ("sync-block lock" if "sync_block_lock" in ty else "workspace")))
                values += _memref_words(buf.ctypes.data, n)
            elif i >= len(params) - 3:
                values.append(int(grid[i - (len(params) - 3)]))
            else:
                name, ty_s = next(it)
                a = args[name]
                if kind == "memref":
                    if not hasattr(a, "data_ptr"):
                        raise Unsupported(f"kernel {self.kernel}: argument {name!r} ({ty_s}) is no tensor")
                    st = a.untyped_storage()
                    start = st.data_ptr()
                    self.buffers.append(M.Buffer(start, start + st.nbytes(),
                                                 f"argument {name!r} ({str(a.dtype)[6:]}{list(a.shape)})", name))
                    values += _memref_words(a.data_ptr(), a.numel())
                else:
                    v = a.item() if hasattr(a, "item") else a
                    values.append(int(v) if kind.startswith("i") else float(v))
        self.values = values
        self._sources = None
        self._args, self._signature = args, signature
        native.reset()
        if native.gm_table:
            M.fill_gm_table(native.gm_table, rewrite.GM_TABLE_SLOTS, self.buffers)

    def source_lines(self, arg: str) -> str:
        """' The source reads/writes ARG at file:line (masked: ...)' for fault messages."""
        if self._sources is None:
            consts = {k: getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
                      for k, v in self._args.items() if k not in self._signature}
            self._sources = _accesses(self.fn, consts)
        found = [s for s in self._sources if not arg or arg in s[2]]
        if not found:
            return ""
        parts = []
        for line, kind, _names, mask in found:
            parts.append(f"{line} ({kind}" + (f", masked by `{mask}`: the source keeps this lane off, the "
                                               f"compiled code still accesses it" if mask else "") + ")")
        return " Source: " + "; ".join(parts) + "."

    def _state(self, block, blocks, sub_block, sub_blocks, flags=None):
        return M.BlockState(block=block, sub_block=sub_block, blocks=blocks, sub_blocks=sub_blocks,
                            buffers=self.buffers, sizes=self.native.built.sizes, kernel=self.kernel,
                            source_access=self.source_lines, flags=flags, launch=self.native)

    def _run(self, core, s):
        M.set_state(s)
        s.pool = views.acquire()        # the core's on-chip spaces and their checked views (views.py)
        try:
            with np.errstate(all="ignore"):     # inf/nan as the vector unit gives them, no warnings
                self.native.entries[core](*self.values)
        finally:
            views.release(s.pool)
            s.pool = None
            M.set_state(None)

    def run_block(self, block: int, blocks: int, sub_block: int = 0, sub_blocks: int = 1, thread_init=None,
                  where: str = "") -> dict:
        """Run program `block` (`where`: the core that runs it, for the fault message).  A mix kernel's block runs as its AI core does: the cube part and
        VECTOR_PER_CUBE vector parts (sub-blocks) at once, handing sync_block flags (BlockFlags);
        thread_init() is called first in each thread this starts (the caller's per-thread context)."""
        if not self.native.mix:
            s = self._state(block, blocks, sub_block, sub_blocks)
            self._run("", s)
            if s.fault is not None:
                raise _placed(s.fault, s, where)
            return {"calls": s.calls}
        how = mix_order.order()
        flags = BlockFlags(VECTOR_PER_CUBE, self.kernel, block, how)
        states = [self._state(block, blocks, 0, 1, flags)] + [
            self._state(block, blocks, v, VECTOR_PER_CUBE, flags) for v in range(VECTOR_PER_CUBE)]
        cores = ["aic"] + ["aiv"] * VECTOR_PER_CUBE
        for c, st in zip(cores, states):
            st.core = c

        def part(core, s):
            if thread_init is not None:
                thread_init()
            try:
                flags.start(core, s.sub_block)     # a deterministic order: this half's turn (mix_order.py)
                self._run(core, s)
            except FlagAborted as e:
                s.fail(e)
            finally:
                if s.fault is not None:
                    flags.abort()
                flags.ended(core, s.sub_block)

        threads = [threading.Thread(target=part, args=(c, s), name=f"hivm-{self.kernel}-b{block}-{c}{s.sub_block}",
                                    daemon=True) for c, s in zip(cores[1:], states[1:])]
        for t in threads:
            t.start()
        part(cores[0], states[0])          # the cube part in the caller's thread
        for t in threads:
            t.join()
        faults = [s.fault for s in states if s.fault is not None]
        real = [f for f in faults if not isinstance(f, FlagAborted)]
        if faults:
            first = next((s for s in states if s.fault is (real or faults)[0]))
            half = "the cube core" if first.core == "aic" else f"vector core {first.sub_block}"
            raise _placed(first.fault, first, f"{half} of {where}" if where else half)
        if how == "check":
            hazards, read = flags.clocks.hazards(), flags.clocks.read
            if hazards or read:
                arg = flags.store_args.get(hazards[0][2] if hazards else read[1], "")
                raise mix_order.report(self.kernel, block, self.fn, hazards, read,
                                       self.source_lines(arg) if arg else "")
        return {"calls": sum(s.calls for s in states)}


def _placed(fault, s, where):
    """The block's fault, its message ending with where it happened: the core, and the kernel, block and
    failing call where the message does not name them (memory.py's DeviceFaults name kernel and block)."""
    if (not isinstance(fault, TritonDistError) or isinstance(fault, FlagAborted) or len(fault.args) != 1
            or not isinstance(fault.args[0], str)):
        return fault
    text, call = fault.args[0], s.failed_call
    call = call[len(PREFIX):] if call.startswith(PREFIX) else call
    if f"block {s.block}" in text:
        if where and where not in text:
            fault.args = (f"{text} [on {where}]",)
        return fault
    place = f"kernel {s.kernel}, block {s.block}" + (f" on {where}" if where else "")
    if call and not call.startswith("__hivm_"):
        place += f"; the failing call: {call}"
    source = getattr(s, "failed_source", "")
    fault.args = (f"{text} [{place}]" + (source if source and "Source:" not in text else ""),)
    return fault


VECTOR_PER_CUBE = 2       # an Atlas A2 AI core: 1 cube + 2 vector cores (sim/device.py, NPUTargetSpec.td)
FLAG_WAIT_S = float(__import__("os").environ.get("TRITON_DIST_HIVM_FLAG_TIMEOUT", "60"))


class FlagAborted(TritonDistError):
    """Another part of the block failed: this wait gives up (the block reports that part's fault)."""


class BlockFlags:
    """The cross-core flags of one block of a mix kernel, as the simulator models them
    (sim/core_split.py: counters per receiving core; a cube->vector set adds one to every vector
    core's flag, a vector->cube set to the cube's flag of that vector core; a wait takes one, the
    cube's one of each vector core).  Unless `how` is 'concurrent', one half runs at a time in
    the order's priority (mix_order.Turns); the flags carry happens-before (mix_order.Clocks)."""

    def __init__(self, nvec, kernel, block, how="concurrent"):
        self.nvec, self.kernel, self.block = nvec, kernel, block
        self.counts = {}
        self.done = set()
        self.aborted = False
        self.cv = threading.Condition()
        self.turns = None if how == "concurrent" else mix_order.Turns(mix_order.cores(nvec, how))
        self.clocks = mix_order.Clocks(nvec)
        self.store_args = {}            # a cube store's description -> the kernel argument it wrote
        self.shared = {}                # buffer start -> whether peers can read it (_shared)

    @staticmethod
    def _kind(core):
        return "cube" if core in ("aic", "cube") else "vector"

    def start(self, core, sub):
        if self.turns is None:
            return
        me = (self._kind(core), sub)
        with self.cv:
            self.cv.wait_for(lambda: self.aborted or self.turns.turn == me)
            if self.aborted:
                raise FlagAborted("another core of the block failed")

    def set(self, setter, flag, sub):
        with self.cv:
            if setter == "cube":
                keys = [("vector", v, flag) for v in range(self.nvec)]
            else:
                keys = [("cube", sub, flag)]
            for k in keys:
                self.counts[k] = self.counts.get(k, 0) + 1
            self.clocks.on_set(setter, sub, keys)
            self.cv.notify_all()

    def _deadlock(self, waiter, flag, sub, why):
        other = "cube" if waiter == "vector" else "vector"
        gone = [c for c in self.done if c[0] == other]
        return M.DeviceFault(
            f"kernel {self.kernel}, block {self.block}: the {waiter} core{'' if waiter == 'cube' else f' {sub}'} "
            f"waits for cross-core flag {flag} (sync_block_wait), which the {other} core "
            f"{'ended without setting' if gone else 'has not set'}{why}: the compiled mix "
            f"kernel's halves deadlock")

    def wait(self, waiter, flag, sub, state):
        keys = [("vector", sub, flag)] if waiter == "vector" else [("cube", v, flag) for v in range(self.nvec)]

        def ready():
            return all(self.counts.get(k, 0) > 0 for k in keys)
        with self.cv:
            if self.turns is not None and not ready():
                me = (waiter, sub)
                self.turns.blocked[me] = ready
                self.turns.pass_on()            # the next half in the order runs until it sets the flag
                self.cv.notify_all()
                self.cv.wait_for(lambda: self.aborted or self.turns.turn in (me, None))
                del self.turns.blocked[me]
                if self.turns.turn is None and not self.aborted:
                    raise self._deadlock(waiter, flag, sub, " and no other half of the block can run any more")
                ok = True
            else:
                ok = self.cv.wait_for(lambda: self.aborted or ready(), FLAG_WAIT_S)
            if self.aborted:
                raise FlagAborted("another core of the block failed")
            if not ok:
                raise self._deadlock(waiter, flag, sub, f" in {FLAG_WAIT_S:g} s (TRITON_DIST_HIVM_FLAG_TIMEOUT "
                                                        f"sets the wait)")
            for k in keys:
                self.counts[k] -= 1
            self.clocks.on_wait(waiter, sub, keys)

    def gm_store(self, core, sub, call, addr):
        """A half's template `call` stored to global memory at `addr` (counted: what peers can read; not
        the launch's workspace, the halves' own channel, which the compiler orders with its flags)."""
        s = M.state()
        b = next((b for b in s.buffers if b.start <= addr < b.end), None)
        if b is None or not self._shared(b):
            return
        what = f"{call} into {b.label}"
        with self.cv:
            if core == "aic":
                self.clocks.cube_store(what)
            else:
                self.clocks.vector_store(sub, f"vector core {sub}'s {what}")
            if b is not None:
                self.store_args[what] = b.arg

    def _shared(self, b):
        """Whether peers can read buffer `b`: a peer's copy (aclshmem_ptr gave it) or a symmetric
        buffer (the backend's aclshmem_ptr takes it); a plain tensor or the launch's workspace is not."""
        if b.start not in self.shared:
            ok = " on rank " in b.label
            if not ok and not b.label.startswith("the launch's"):
                from triton_dist import backend
                try:
                    me = backend.active().device_call("aclshmem_my_pe")
                    backend.active().device_call("aclshmem_ptr", backend.Ptr(b.start, "int8"), me)
                    ok = True
                except TritonDistError:
                    ok = False
            self.shared[b.start] = ok
        return self.shared[b.start]

    def cube_load(self, call, addr):
        """The cube's template `call` read global memory at `addr` (counted: what peers can write)."""
        s = M.state()
        b = next((b for b in s.buffers if b.start <= addr < b.end), None)
        if b is not None and self._shared(b):
            with self.cv:
                what = f"{call} from {b.label}"
                self.clocks.cube_load(what)
                self.store_args[what] = b.arg

    def acquire(self, core, sub, family):
        with self.cv:
            self.clocks.acquire(core, sub, family)

    def publish(self, core, sub, family):
        """A publishing library call reached by a half: the vector's may act, the cube's marks the place."""
        with self.cv:
            if core == "aic":
                self.clocks.cube_copy()
            else:
                self.clocks.publish(sub, family)

    def ended(self, core, sub):
        with self.cv:
            self.done.add((self._kind(core), sub))
            if self.turns is not None:
                self.turns.ended.add((self._kind(core), sub))
                if self.turns.turn == (self._kind(core), sub):
                    self.turns.pass_on()
            self.cv.notify_all()

    def abort(self):
        with self.cv:
            self.aborted = True
            self.cv.notify_all()


def _taken(test, consts):
    """The value of an `if` test that only names constexpr arguments (the branch the specialised
    kernel keeps: Triton folds such an `if` while compiling), else None (both branches may run)."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names or not names <= set(consts) or any(isinstance(n, ast.Call) for n in ast.walk(test)):
        return None
    try:
        return bool(eval(compile(ast.Expression(test), "<test>", "eval"), {"__builtins__": {}}, dict(consts)))
    except Exception:  # noqa: BLE001 - a test it cannot evaluate keeps both branches
        return None


def _nodes(node, consts):
    """The AST nodes under `node`, leaving out the branch of an `if` on constexprs that is not taken."""
    yield node
    if isinstance(node, ast.If):
        taken = _taken(node.test, consts)
        if taken is not None:
            for child in (node.body if taken else node.orelse):
                yield from _nodes(child, consts)
            return
    for child in ast.iter_child_nodes(node):
        yield from _nodes(child, consts)


def _accesses(fn, consts=None):
    """(file:line, 'tl.load'|'tl.store', names in the pointer expression, mask text) of the kernel's
    accesses in the branches its constexpr arguments `consts` select."""
    fn = getattr(fn, "fn", fn)
    try:
        src, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(src)))
    except (OSError, TypeError, SyntaxError):
        return []
    where = os.path.basename(inspect.getsourcefile(fn) or "?")
    out = []
    for node in _nodes(tree, consts or {}):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("load", "store"):
            if not node.args:
                continue
            names = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            mask = next((k.value for k in node.keywords if k.arg == "mask"), None)
            if mask is None and len(node.args) > (2 if node.func.attr == "store" else 1):
                mask = node.args[2 if node.func.attr == "store" else 1]
            out.append((f"{where}:{first + node.lineno - 1}", f"tl.{node.func.attr}", names,
                        ast.unparse(mask) if mask is not None else ""))
    return out
