"""How an exception raised inside a kernel reaches the code that launched it.

As under Triton's own interpreter: whatever a kernel raises comes out of the launch as
`triton.runtime.errors.InterpreterError(repr(e))` (a `triton.TritonError`) chained `from e`,
so a user's `pytest.raises(triton.TritonError)` or `except InterpreterError` matches the
same programs on the simulator as without it (triton 3.6 runtime/interpreter.py,
GridExecutor.__call__ and InterpretedFunction.__call__: `raise InterpreterError(repr(e)) from
e`; with `knobs.compilation.front_end_debugging` the original is raised instead).  The
simulator adds where it happened: the kernel line, the program and the rank.

The simulator's own diagnostics (TritonDistError: a misuse it caught, DeadlockError,
LaunchTimeoutError) are raised as themselves, even from a @jit helper that Triton wrapped.
"""
from __future__ import annotations

import os

import triton
from triton.runtime.errors import InterpreterError

from triton_dist.errors import DeadlockError, LaunchTimeoutError, TritonDistError

from . import context

OWN = (TritonDistError, DeadlockError, LaunchTimeoutError)


def _chain(e):
    """e, then the exceptions Triton's interpreter wrapped it around (helper calls), inner last."""
    out = [e]
    while isinstance(out[-1], InterpreterError) and isinstance(out[-1].__cause__, BaseException) \
            and len(out) < 64:
        out.append(out[-1].__cause__)
    return out


def _kernel_line(e) -> str | None:
    """'file.py:LINE (fn)' of the innermost @triton.jit frame e passed through, if any."""
    tb, where = e.__traceback__, None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in context.KERNEL_CODES:
            where = f"{os.path.basename(code.co_filename)}:{tb.tb_lineno} ({code.co_name})"
        tb = tb.tb_next
    return where


def _front_end_debugging() -> bool:
    knobs = getattr(triton, "knobs", None)
    return bool(getattr(getattr(knobs, "compilation", None), "front_end_debugging", False))


def host_error(e: BaseException, kernel: str, program, rank: int) -> BaseException:
    """The exception the launch raises for `e`, raised by `program` of `kernel` on `rank`."""
    chain = _chain(e)
    for x in chain:
        if isinstance(x, OWN):
            return x
    if not isinstance(e, Exception) or _front_end_debugging():
        return e                  # Triton lets these through unwrapped too
    where = _kernel_line(chain[-1])
    at = f"at {where}, " if where else ""
    wrapped = InterpreterError(f"{e!r} [raised {at}in program {tuple(program)} of kernel {kernel} on rank {rank}]")
    wrapped.__cause__ = e
    return wrapped
