"""The NPU compile check of every kernel launch: `pytest --npu-compile`, `launch(..., npu_compile=True)`.

Registered as the launch check "npu-compile" (entry-point group triton_dist.launch_checks);
triton_dist/kernel_launches.py calls `check_launch` at each kernel launch of the simulator.
The launch's own arguments give the signature, as Triton specializes them
(triton.runtime.jit.mangle_type: a float32 tensor is *fp32, an int i32 or i64 by its value, a
bool u1), and its tl.constexpr values the constexprs.  The kernel then goes through the real
pipeline (pipeline.compile_kernel) once per (source, signature, constexprs, target): verdicts
are kept in memory per process and on disk (cache.py) between processes and sessions.

A refusal raises NpuCompileError with the compiler's own lines: the launch, and the test that
made it, fail with them; unless it is a recorded limit of the 3.2.0 tools (known_limits.py:
that kernel, that error line), reported by name as a known limit.  What cannot be checked is
skipped, never failed: the tools missing
on this machine, a kernel the frontend refuses (the simulator reports that itself, with its
own message), or a form the 3.2.0 adapter cannot be given (carry.CarryError, named in
docs/ascend.md).

With TRITON_DIST_NPU_COMPILE_LOG=path every process appends one JSON line per distinct
kernel it checked; the pytest plugin sums them up at the end of the session.
"""
from __future__ import annotations

import json
import os
import time

from triton_dist.errors import TritonDistError

TARGET_ENV = "TRITON_DIST_NPU_COMPILE_TARGET"
LOG_ENV = "TRITON_DIST_NPU_COMPILE_LOG"
# comma list of source paths (files or directories, relative to the working directory): only kernels
# defined under them are compiled (pytest --npu-compile-sources; CI: the kernel library, the
# examples and the upstream scenarios, wherever the suite launches them)
SOURCES_ENV = "TRITON_DIST_NPU_COMPILE_SOURCES"


class NpuCompileError(TritonDistError):
    """The real NPU compiler refuses a kernel as it was launched (the message is its report)."""


class NpuCompileCheckError(TritonDistError):
    """The check could not run (a wrong TRITON_DIST_NPU_COMPILE_TARGET, a fault of the checker): the
    launch fails saying so, since a check that did not run must not pass."""
    refusal = False     # not a config the compilers refuse: the simulator's autotuner stops at it (sim/autotune.py)


_cache_warned: set = set()     # cache roots this process said it compiles without


_wanted_memo: dict = {}    # (function, TRITON_DIST_NPU_COMPILE_SOURCES) -> is the function under them
_verdicts: dict = {}       # in-process memo: (function, signature, constexprs) -> (status, outcome or reason)


def target() -> str:
    return targets()[0]


def targets() -> list:
    """The chips each launch is compiled for: TRITON_DIST_NPU_COMPILE_TARGET, one target or a comma list
    (pytest --npu-compile-targets A,B sets it); default Ascend910B4."""
    from .pipeline import targets_of
    return targets_of(os.environ.get(TARGET_ENV, ""))


def signature_of(launch):
    """(signature, constexprs) of a launch, as Triton would specialize its arguments."""
    from triton.runtime.jit import mangle_type
    sig, consts = {}, {}
    for name, value in launch.args.items():
        if name in launch.constexprs:
            consts[name] = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
            continue
        ty = mangle_type(value)
        if ty == "constexpr":        # None: Triton makes it a constant
            consts[name] = value
        else:
            sig[name] = ty
    return sig, consts


def _memo_key(launch, sig, consts):
    # the code of the kernel and of every @jit function it reaches as it is now (a constexpr ACT=act
    # edited into a new function of the same name has the same repr; a rebound helper changes nothing
    # of launch.fn): source_key, a walk of code objects and names (10-60 us for the library's kernels)
    from .source_key import source_key
    return (launch.fn, tuple(sorted(sig.items())), tuple(sorted((k, repr(v)) for k, v in consts.items())),
            source_key(launch.fn, consts))


def _log(record):
    path = os.environ.get(LOG_ENV, "").strip()
    if not path:
        return
    line = json.dumps(record, sort_keys=True, default=str) + "\n"
    with open(path, "a") as f:           # one short write: appends of concurrent processes do not interleave
        f.write(line)


def check(fn, sig, consts, *, tgt=None):
    """(status, outcome or reason): status "accepted", "refused", "known-limit", "skipped" (the tools
    missing, a form the 3.2.0 adapter cannot be given, a kernel the frontend refuses) or "error"
    (the check could not run: check_launch fails the launch)."""
    from . import cache, pipeline
    from .carry import CarryError
    from .ascend_ttir import Unavailable
    from .extension_ops import CannotLower
    tgt = tgt or target()
    t0 = time.monotonic()
    record = {"kernel": getattr(fn, "__qualname__", str(fn)), "file": getattr(getattr(fn, "__code__", None),
                                                                              "co_filename", ""),
              "signature": sig, "constexprs": {k: repr(v) for k, v in consts.items()}, "target": tgt,
              "pid": os.getpid()}
    logged = []

    def log_fresh(outcome):          # inside the cache lock: before any other rank can read the verdict
        logged.append(outcome)
        _log(_record(record, _status(record, outcome), outcome, t0))

    verdicts = cache.Cache()
    if verdicts.problem():          # compile without it, saying so once: the check itself still runs
        if verdicts.root not in _cache_warned:
            _cache_warned.add(verdicts.root)
            import sys
            sys.stderr.write(f"triton_dist npu-compile: {verdicts.problem()}; compiling without the cache\n")
        verdicts = None
    try:
        out = pipeline.compile_kernel(fn, sig, consts, target=tgt, cache=verdicts, on_compiled=log_fresh)
    except (pipeline.ToolsMissing, Unavailable) as e:
        result = ("skipped", f"tools missing: {e}")
    except CarryError as e:
        result = ("skipped", f"not carried through triton-ascend 3.2.0's ttadapter: {e}")
    except CannotLower as e:        # an extension op the 3.2.0 adapter does not take: no verdict
        result = ("skipped", str(e))
    except (pipeline.UsageError, cache.CacheUnavailable) as e:     # the check could not run: never a pass
        result = ("error", f"the NPU compile check could not run: {e}")
    except TritonDistError as e:
        result = ("skipped", f"the frontend refuses it (the simulator reports this itself): {e}")
    except Exception as e:  # noqa: BLE001 - a fault of this checker must not pass, nor pass as a verdict
        result = ("error", f"the NPU compile check could not run: internal error ({type(e).__name__}: {e}); "
                           f"please report it")
    else:
        result = (out.status, out)
        if out.status == "refused":
            from .known_limits import match
            where = f"{record['file']}::{record['kernel']}"
            limit = match(where, out.errors)
            if limit is not None:
                result = ("known-limit", out)
                record["limit"] = f"{limit.what} ({limit.doc})"
    if not logged:
        _log(_record(record, result[0], result[1], t0))
    return result


def _status(record, outcome):
    from .known_limits import match
    if outcome.status == "refused" and match(f"{record['file']}::{record['kernel']}", outcome.errors):
        return "known-limit"
    return outcome.status


def _record(base, status, what, t0):
    from .pipeline import Outcome
    record = dict(base, status=status, seconds=round(time.monotonic() - t0, 3))
    if isinstance(what, Outcome):
        record.update(key=what.key, cached=what.cached, compile_seconds=what.seconds, symbols=what.symbols)
        if status in ("refused", "known-limit"):
            record["report"] = what.report()
    else:
        record.update(key=f"skip:{record['kernel']}:{json.dumps(base['signature'], sort_keys=True)}:"
                          f"{record['constexprs']}", reason=what)
    return record


def _wanted(fn) -> bool:
    raw = os.environ.get(SOURCES_ENV, "").strip()
    if not raw:
        return True
    file = os.path.abspath(getattr(getattr(fn, "__code__", None), "co_filename", "") or "")
    for prefix in (p.strip() for p in raw.split(",") if p.strip()):
        root = os.path.abspath(prefix)
        if file == root or file.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def check_launch(launch) -> None:
    """The launch check: compile the launched kernel (once), raise NpuCompileError if refused."""
    # keyed by the sources too: a process (an xdist worker) may run launches under several settings
    wanted = (launch.fn, os.environ.get(SOURCES_ENV, ""))
    if wanted not in _wanted_memo:
        _wanted_memo[wanted] = _wanted(launch.fn)
    if not _wanted_memo[wanted]:
        return
    sig, consts = signature_of(launch)
    for tgt in targets():           # each chip in turn: the report names the chip (--target in its line)
        key = _memo_key(launch, sig, consts) + (tgt,)
        verdict = _verdicts.get(key)
        if verdict is None:
            verdict = _verdicts[key] = check(launch.fn, sig, consts, tgt=tgt)
        status, what = verdict
        if status == "refused":
            raise NpuCompileError(what.report())
        if status == "error":
            _verdicts.pop(key, None)      # not a verdict: the next launch tries again
            raise NpuCompileCheckError(what)


def target_problem(chips: str) -> str | None:
    """Why the comma list `chips` cannot be compiled for (an unknown chip, in bishengir-compile's words
    with its list), or None; None too where the tools are missing (each launch check then says so).
    The pytest plugin asks this through the registered check (check_launch.target_problem) before any
    test runs: the core finds it by entry point and never imports this package."""
    from . import pipeline, toolchain
    tools = toolchain.find()
    if tools.missing:
        return None
    for chip in pipeline.targets_of(chips):
        try:
            pipeline.check_target(chip, tools)
        except pipeline.UsageError as e:
            return str(e)
    return None


check_launch.target_problem = target_problem
