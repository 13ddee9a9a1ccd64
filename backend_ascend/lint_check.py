"""The performance-cliff report of every kernel launch: `pytest --npu-lint`.

Registered as the launch check "npu-lint" (entry-point group triton_dist.launch_checks), so the
pytest plugin and the simulator that publishes launches never import this package.  At each
launch it judges the grid against the target's cores and reads what the compilers made of the
kernel (backend_ascend/lint.py: scalar loops and padded buffers in the compiled module, int64
tile arithmetic and unaligned tail axes in the TTIR) and appends one JSON line per distinct
(kernel, signature, constexprs, grid, target) to TRITON_DIST_NPU_LINT_LOG (the targets: the chips
the kernel is meant for, as the dtype/op rules take them); the plugin prints
them in the session's summary.  A report, never an error: nothing here fails a launch.

Each kernel is compiled once: its stage findings are kept in npu-compile's cache directory next
to the verdicts (keyed by the verdict's own key and this check's code), under that key's lock, so
the ranks and pytest-xdist workers launching the same kernel compile it once between them.
"""
from __future__ import annotations

import hashlib
import json
import os

LOG_ENV = "TRITON_DIST_NPU_LINT_LOG"

_seen: set = set()          # (kernel key, grid, target) this process has logged
_stages: dict = {}          # (kernel key, target) -> (findings as dicts, note)


def _code_digest() -> str:
    h = hashlib.sha256()
    for name in ("lint.py", "lint_check.py"):
        with open(os.path.join(os.path.dirname(__file__), name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def _as_dicts(findings) -> list:
    return [{"kind": f.kind, "text": f.text, "fix": f.fix, "source": f.source} for f in findings]


def _compiled(fn, sig, consts, tgt):
    """(findings of the kernel's stages as dicts, note or "", whether it uses tl.dot), the grid left out:
    from the cache, or compiled now with its stages kept."""
    from . import cache, pipeline, toolchain
    from .frontend import as_jit_function
    from .source_key import source_key
    tools = toolchain.find()
    if tools.missing:          # the TTIR alone (the frontend is stock Triton's)
        return _lint_ttir(fn, sig, consts, "the compiled module not examined: " + "; ".join(tools.missing))
    jit = as_jit_function(fn)
    key = pipeline.cache_key(pipeline._jit_key(fn, jit), jit.__name__, sig, consts, tgt, None, tools,
                             source_key(fn, consts))
    key = hashlib.sha256(f"{key}:lint:{_code_digest()}".encode()).hexdigest()
    store = cache.Cache()
    if store.problem():
        return _lint_now(fn, sig, consts, tgt)
    path = store._path(key, "lint.json")
    with store.lock(key):       # ranks and workers linting the same kernel: one compiles, the others read
        try:
            with open(path) as f:
                saved = json.load(f)
            return saved["findings"], saved["note"], saved["mix"]
        except (OSError, ValueError, KeyError):
            pass
        found = _lint_now(fn, sig, consts, tgt)
        part = f"{path}.{os.getpid()}.part"
        with open(part, "w") as f:
            json.dump({"findings": found[0], "note": found[1], "mix": found[2]}, f)
        os.replace(part, path)
    return found


def _lint_ttir(fn, sig, consts, note):
    from . import lint
    from .frontend import build_ttir
    try:
        module, _ = build_ttir(fn, sig, consts)
    except Exception as e:  # noqa: BLE001 - a report: say what could not be read
        return [], f"not linted: the frontend could not trace it ({type(e).__name__}: {e})", False
    ttir = module.str_nodebug()
    return _as_dicts(lint.source_findings(ttir)), note, "tt.dot" in ttir


def _lint_now(fn, sig, consts, tgt):
    import tempfile
    from . import lint, pipeline
    with tempfile.TemporaryDirectory() as keep:
        try:
            out = pipeline.compile_kernel(fn, sig, consts, target=tgt, keep=keep)
        except Exception as e:  # noqa: BLE001 - a report: the TTIR alone, saying why
            return _lint_ttir(fn, sig, consts, f"the compiled module not examined: it could not be compiled "
                                               f"({type(e).__name__}: {e})")
        ttir, final = lint.read_stages(keep)
    note = "" if out.accepted else f"refused by the compilers at {out.failed_at or out.stage}: only the TTIR is read"
    return _as_dicts(lint.from_stages(ttir, final if out.accepted else None, None, tgt)), note, "tt.dot" in ttir


def _log(record) -> None:
    path = os.environ.get(LOG_ENV, "").strip()
    if not path:
        return
    with open(path, "a") as f:       # one short write: appends of concurrent processes do not interleave
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")


def lint_launch(launch, tgt: str):
    """(every finding of this launch as dicts, note, signature, constexprs, kernel key): the kernel's
    stages (once per kernel) and the launch's grid."""
    from . import compile_check, lint
    sig, consts = compile_check.signature_of(launch)
    memo = compile_check._memo_key(launch, sig, consts)
    if (memo, tgt) not in _stages:
        _stages[(memo, tgt)] = _compiled(launch.fn, sig, consts, tgt)
    found, note, mix = _stages[(memo, tgt)]
    if launch.grid and lint.cores_of(tgt, mix) is None:      # say so rather than pass the grid in silence
        note = "; ".join(filter(None, [note, f"the grid not judged: {tgt}'s core count is not in "
                                             f"triton_dist/ascend_parts.py"]))
    return _as_dicts(lint.grid_findings(launch.grid, tgt, mix)) + list(found), note, sig, consts, memo


def check_launch(launch) -> None:
    """The launch check: log this launch's findings once per kernel, signature, grid and target, for
    each chip the kernel is meant for (ascend_rules.targets(): TRITON_DIST_NPU_TARGET, else
    TRITON_DIST_NPU_COMPILE_TARGET, else Ascend910B4)."""
    from triton_dist.language.ascend_rules import targets
    for tgt in targets():
        _check_for(launch, tgt)


def _check_for(launch, tgt) -> None:
    try:
        findings, note, sig, consts, memo = lint_launch(launch, tgt)
    except Exception as e:  # noqa: BLE001 - a report never fails a launch
        fn = getattr(launch.fn, "__qualname__", str(launch.fn))
        _log({"kernel": fn, "grid": launch.grid, "target": tgt, "findings": [],
              "note": f"not linted: internal error ({type(e).__name__}: {e}); please report it"})
        return
    key = (memo, launch.grid, tgt)
    if key in _seen:
        return
    _seen.add(key)
    _log({"kernel": getattr(launch.fn, "__qualname__", str(launch.fn)),
          "file": getattr(getattr(launch.fn, "__code__", None), "co_filename", ""),
          "signature": sig, "constexprs": {k: repr(v) for k, v in consts.items()}, "grid": launch.grid,
          "target": tgt, "findings": findings, "note": note})
