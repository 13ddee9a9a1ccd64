"""One kernel launch as native code: the JIT module, its bindings, the arguments, one block per call.

`Native(built)` JITs a Built module once per process and binds every function it declares:
the on-chip space bases and block indices (this module), the template library
(templates.py), the aclshmem wrappers (shmem.py).  `Native.launch(args, signature, grid)`
makes the argument list the lowered entry takes, `LaunchArgs.run_block(block, ...)` runs one
program.  Which core runs which block, and when, is the caller's (backend.py hands each
program to the simulator's dispatch onto the device's physical cores).

A callback that raises (a fault, a primitive's deadlock report) cannot unwind through native
code: the error is kept in the block's state, every later callback of the block returns at
once, and the block raises it when the native call returns.
"""
from __future__ import annotations

import ast
import ctypes
import inspect
import os
import textwrap

import numpy as np

from triton_dist.errors import TritonDistError

from . import jit, memory as M, shmem, templates

PREFIX = "_mlir_ciface_"
LOCK_BYTES = 64
WORKSPACE_BYTES = 1 << 20


class Unsupported(TritonDistError):
    """The compiled module calls something the CPU run does not implement (named)."""


def _guard(fn, restype, params):
    halves = [i for i, t in enumerate(params) if t in jit.HALF_TYPES]

    def cb(*args):
        s = M.state()
        if s.fault is not None:
            return None if restype is None else 0
        s.calls += 1
        if halves:
            args = list(args)
            for i in halves:
                args[i] = jit.half_bits(args[i])
        try:
            out = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised by the block once native code returns
            s.fail(e)
            return None if restype is None else 0
        if restype is None:
            return None
        return 0 if out is None else out
    return cb


def _missing(name):
    def fail(*_):
        raise Unsupported(f"the compiled kernel calls {name}, which the hivm backend does not implement yet "
                          f"(backend_ascend/cpu_run/templates.py lists what it does)")
    return fail


def _space_base(space):
    return lambda: M.space_base(space)


_BLOCK_FNS = {"__hivm_block_idx": lambda s: s.block, "__hivm_block_num": lambda s: s.blocks,
              "__hivm_sub_block_idx": lambda s: s.sub_block, "__hivm_sub_block_num": lambda s: s.sub_blocks}


class Native:
    def __init__(self, built):
        self.built = built
        self._callbacks = []
        symbols = {}
        self.unknown = []
        for name, (ret, params) in jit.declarations(built.ll).items():
            fn = None
            if name.startswith("__hivm_space_base_"):
                fn = _space_base(name[len("__hivm_space_base_"):])
            elif name.rsplit("_", 1)[0] in _BLOCK_FNS:
                get = _BLOCK_FNS[name.rsplit("_", 1)[0]]
                fn = (lambda g: lambda: g(M.state()))(get)
            elif name.startswith(PREFIX):
                bare = name[len(PREFIX):]
                fn = (shmem.handler(bare, params, (built.externs or {}).get(bare))
                      or templates.handler(bare, params))
                if fn is None:
                    self.unknown.append(bare)
                    fn = _missing(bare)
            else:
                continue            # libc / libgcc (jit.py binds them)
            restype = jit.ctype(ret)
            proto = ctypes.CFUNCTYPE(restype, *[jit.ctype(t) for t in params])
            cb = proto(_guard(fn, restype, params))
            self._callbacks.append(cb)
            symbols[name] = ctypes.cast(cb, ctypes.c_void_p).value
        self.compiled = jit.compile_ir(built.ll, symbols, [built.kernel])
        ret, params = jit.definition(built.ll, built.kernel)
        self.entry = ctypes.CFUNCTYPE(None, *[jit.ctype(t) for t in params])(self.compiled.address(built.kernel))
        self.entry_types = params


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
                n = LOCK_BYTES if "sync_block_lock" in ty else WORKSPACE_BYTES
                buf = np.zeros(n, dtype=np.uint8)
                self._keep.append(buf)
                self.buffers.append(M.Buffer(buf.ctypes.data, buf.ctypes.data + n, "the launch's " +
                                             ("sync-block lock" if n == LOCK_BYTES else "workspace")))
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

    def source_lines(self, arg: str) -> str:
        """' The source reads/writes ARG at file:line (masked: ...)' for fault messages."""
        if self._sources is None:
            self._sources = _accesses(self.fn)
        found = [s for s in self._sources if not arg or arg in s[2]]
        if not found:
            return ""
        parts = []
        for line, kind, _names, mask in found:
            parts.append(f"{line} ({kind}" + (f", masked by `{mask}`: the source keeps this lane off, the "
                                               f"compiled code still accesses it" if mask else "") + ")")
        return " Source: " + "; ".join(parts) + "."

    def run_block(self, block: int, blocks: int, sub_block: int = 0, sub_blocks: int = 1) -> dict:
        s = M.BlockState(block=block, sub_block=sub_block, blocks=blocks, sub_blocks=sub_blocks,
                         buffers=self.buffers, sizes=self.native.built.sizes, kernel=self.kernel,
                         source_access=self.source_lines)
        M.set_state(s)
        try:
            self.native.entry(*self.values)
        finally:
            M.set_state(None)
        if s.fault is not None:
            raise s.fault
        return {"calls": s.calls}


def _accesses(fn):
    """(file:line, 'tl.load'|'tl.store', names in the pointer expression, mask text) of the kernel's accesses."""
    fn = getattr(fn, "fn", fn)
    try:
        src, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(src)))
    except (OSError, TypeError, SyntaxError):
        return []
    where = os.path.basename(inspect.getsourcefile(fn) or "?")
    out = []
    for node in ast.walk(tree):
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
