"""Which compiled module the CPU runs, and its JIT-ready LLVM IR, cached per compile key.

The goal is the module after `convert-hivm-to-std`: the one bishengir-compile hands to hivmc,
where every HIVM op is a template-library call (stages_ir.compiled_ir).  Each built kernel
records the stage it runs (`Built.stage`): the launch result lists them per kernel.

The cache: $TRITON_DIST_HIVM_CACHE, else <npu-compile cache>/../hivm-cpu; one .ll and one .json
per (npu-compile cache key, stage, the code of this package).  Deleting it is always safe.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass

from triton_dist.errors import TritonDistError

from . import lower, rewrite, stages_ir

FINAL = "convert-hivm-to-std"
CACHE_ENV = "TRITON_DIST_HIVM_CACHE"


class CompileRefused(TritonDistError):
    """The NPU compilers refuse the kernel as launched: nothing to run (the message is their report)."""


@dataclass
class Built:
    kernel: str
    stage: str            # the bishengir-compile pass the run module was taken after
    ll: str               # LLVM IR
    entry: list           # the entry's MLIR parameters, in order: ("memref"|"i64"|"i32"|..., attribute text)
    # the device functions to run per block: {"": name} for a vector- or cube-only kernel, {"aic": name,
    # "aiv": name} for a mix kernel (hivm-split-mix-kernel), and its workspace function, if any
    sizes: dict           # on-chip space sizes (rewrite.target_sizes)
    externs: dict = None  # declared function (bare name) -> per parameter: memref element type or None
    parts: dict = None
    workspace_fn: str = ""
    cached: bool = False


def cache_dir() -> str:
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return env
    from ..cache import default_dir
    return os.path.join(os.path.dirname(default_dir().rstrip(os.sep)), "hivm-cpu")


@functools.lru_cache(maxsize=None)
def _code_digest() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


_ENTRY = re.compile(r"func\.func @(\w+)\((.*)\) attributes \{([^\n]*hacc\.entry[^\n]*)", re.M)


def entry_params(text: str):
    """(kernel name, parameters, parts, workspace function) of the compiled module's device entries."""
    found = list(_ENTRY.finditer(text))
    if not found:
        raise rewrite.RewriteError("the compiled module has no hacc.entry function")
    parts = {}
    for m in found:
        core = re.search(r"hivm\.func_core_type = #hivm\.func_core_type<(\w+)>", m.group(3))
        mix = "hivm.part_of_mix" in m.group(3)
        parts["" if not mix else core.group(1).lower()] = m.group(1)
    if len(found) > 1 and set(parts) != {"aic", "aiv"}:
        raise rewrite.RewriteError(f"the compiled module has device entries {sorted(parts.values())}, not one kernel "
                                   f"or one mix pair")
    name = found[0].group(1)
    base = re.sub(r"_mix_ai[cv]$", "", name)
    ws = re.search(r"func\.func @(\w+_infer_workspace_shape_function)\(\)", text)
    return base, _param_kinds(found[0].group(2)), parts, ws.group(1) if ws else ""


def _param_kinds(text: str) -> list:
    params = []
    for p in lower._split_top(text):
        ty = p.split(":", 1)[1].strip()
        kind = "memref" if ty.startswith("memref<") else ty.split()[0]
        params.append((kind, ty))
    return params


_DECL = re.compile(r"^\s*func\.func private @(?:_mlir_ciface_)?([\w.]+)\((.*?)\)(?: -> ([^{]*))? attributes", re.M)


def extern_types(text: str) -> dict:
    """bare name -> [memref element type ('f32', 'i32', ...) or None for a scalar] of each declaration's
    parameters; a memref result comes first, as "result:<type>" (MLIR's C interface passes it as the
    first pointer)."""
    out = {}
    for m in _DECL.finditer(text):
        types = []
        r = re.match(r"\s*memref<(?:[?\d]+x)*(\w+)", m.group(3) or "")
        if r:
            types.append("result:" + r.group(1))
        for p in lower._split_top(m.group(2)):
            e = re.match(r"\s*memref<(?:[?\d]+x)*(\w+)", p)
            types.append(e.group(1) if e else None)
        out[m.group(1)] = types
    return out


def build(fn, signature, constexprs, *, target=None, options=None) -> Built:
    from .. import pipeline, toolchain
    from ..frontend import as_jit_function
    from ..source_key import source_key
    tools = toolchain.find()
    if tools.missing:
        raise pipeline.ToolsMissing("the hivm backend needs the NPU compile pipeline: " + "; ".join(tools.missing))
    # the variable may name several chips (pytest --npu-compile-targets A,B): a run is built for the first
    target = target or pipeline.targets_of(os.environ.get("TRITON_DIST_NPU_COMPILE_TARGET", ""))[0]
    jit = as_jit_function(fn)
    # the kernel's code as it is now (source_key: every @jit function it reaches, the constants they
    # read), as npu-compile's verdict cache keys it: Triton's cache_key alone is computed once per
    # JITFunction and misses a module constant a @jit helper reads, so a changed kernel ran stale
    key = hashlib.sha256((pipeline.cache_key(pipeline._jit_key(fn, jit), jit.__name__, signature, constexprs,
                                             target, options, tools, source_key(fn, constexprs))
                          + FINAL + _code_digest()).encode()).hexdigest()
    path = os.path.join(cache_dir(), key[:2], key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # the ranks of a launch build a kernel once, the others read it
        try:
            return _cached(path) or _build(fn, signature, constexprs, target, options, tools, path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _cached(path):
    try:
        with open(path + ".json") as f:
            meta = json.load(f)
        with open(path + ".ll") as f:
            return Built(meta["kernel"], meta["stage"], f.read(), [tuple(p) for p in meta["entry"]],
                         meta["sizes"], meta["externs"], meta["parts"], meta["workspace_fn"], cached=True)
    except (OSError, ValueError, KeyError):
        return None


def _build(fn, signature, constexprs, target, options, tools, path):
    outcome, text = stages_ir.compiled_ir(fn, signature, constexprs, after=FINAL, target=target, options=options,
                                          tools=tools)
    if text is None:
        raise CompileRefused(outcome.report())
    try:
        name, params, parts, ws = entry_params(text)
        sizes = rewrite.target_sizes(text)
        llvm_dialect = rewrite.per_core_spaces(lower.to_llvm_dialect(rewrite.rewrite(text), lower.bishengir_opt(
            tools.compiler)))
        built = Built(name, FINAL, lower.to_llvm_ir(llvm_dialect), params, sizes, extern_types(text), parts, ws)
    except (rewrite.RewriteError, lower.LoweringFailed) as e:
        with open(path + ".failed.mlir", "w") as f:      # the module it could not run, for the report
            f.write(text)
        raise type(e)(f"{e}\n(the compiled module, after {FINAL}: {path}.failed.mlir)") from e
    for ext, data in ((".ll", built.ll), (".json", json.dumps({"kernel": name, "stage": FINAL, "entry": params,
                                                                 "sizes": sizes, "externs": built.externs,
                                                                 "parts": parts, "workspace_fn": ws}))):
        part = f"{path}{ext}.{os.getpid()}.part"
        with open(part, "w") as f:
            f.write(data)
        os.replace(part, path + ext)
    return built
