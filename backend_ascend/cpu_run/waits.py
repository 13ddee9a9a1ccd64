"""Whether a compiled kernel's programs can wait for one another.

A program waits for another only through the device library (an aclshmem wait, barrier or
signal: the module calls a `_mlir_ciface_aclshmem*` wrapper), in extension.sync_block_all
(`__hivm_sync_block_all`, rewrite.blocks_sync) or by polling memory in a loop
that ends when another program writes it, which in Triton source is a `while` loop (a `for`
loop runs its iterations whatever it reads, and Triton has no `break`).  A kernel with neither,
and no cross-core flags (a mix kernel's halves wait for each other: runner.BlockFlags), has
programs that each run to their end alone: running them one after another on one core is an
order the NPU may run them in, and needs no thread per core (sim/runtime.py run_grid,
`programs_never_wait`).  Everything else is dispatched onto the device model's cores as on the
NPU, so blocks that wait for each other still run as they would there.

The one wait the compiler adds itself, the block-ordered ticket lock around atomics
(`sync_block_lock`: block k waits until blocks 0..k-1 have unlocked; templates_extra.py,
SyncBlockLock.cpp), is satisfied by one core running the programs in index order, which is
how the simulator's dispatch hands them to a single core (sim/runtime.py Dispatch.next).

Conservative: a kernel whose source cannot be read, or that names a @jit helper with a `while`
loop, counts as one that may wait.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types

from . import jit, rewrite

LIBRARY_PREFIX = "_mlir_ciface_aclshmem"


def calls_library(ll: str) -> bool:
    """Whether the module declares any aclshmem wrapper (dl ops, libshmem_device calls) or meets the other
    blocks in extension.sync_block_all (rewrite.blocks_sync: a barrier that needs every block resident)."""
    return any(name.startswith(LIBRARY_PREFIX) or name == rewrite.SYNC_ALL_FN for name in jit.declarations(ll))


def _function(obj):
    """The Python function of a @triton.jit object (JITFunction, the simulator's wrapper), else None.
    A @constexpr_function (Triton's ConstexprFunction, e.g. triton.language.standard._log2) runs
    while the kernel is compiled: its loops are not in the kernel."""
    if type(obj).__name__ == "ConstexprFunction":
        return None
    inner = getattr(obj, "fn", None)
    return inner if inspect.isfunction(inner) else None


def may_spin(fn, extra=(), _seen=None) -> bool:
    """Whether the kernel `fn`, a @jit helper it names, or a @jit function passed in `extra`
    (constexpr arguments) has a while loop."""
    fn = _function(fn) or fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return True
    seen = set() if _seen is None else _seen
    if code in seen:
        return False
    seen.add(code)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    if any(isinstance(n, ast.While) for n in ast.walk(tree)):
        return True
    g = getattr(fn, "__globals__", {})
    helpers = [x for x in extra if _function(x) is not None]
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            helpers.append(g.get(n.id))
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            mod = g.get(n.value.id)
            if isinstance(mod, types.ModuleType):
                helpers.append(getattr(mod, n.attr, None))
    return any(may_spin(h, (), seen) for h in helpers if _function(h) is not None)
