"""What `import triton_dist` needs installed, said in words before anything fails obscurely.

torch and triton are not hard dependencies of the package (pyproject.toml): on an Ascend
NPU host triton is triton-ascend, which installs into the same `triton/` directory as
stock triton, so each kind of machine installs its own extra:

    pip install -e ".[sim]"     the simulator, any CPU machine (torch==2.13.0, stock triton 3.5 to 3.7;
                                runs on 3.8 and 3.9 too, installed by hand: triton_dist/language/block_pointers.py)
    pip install -e ".[npu]"     Ascend NPU hosts (torch_npu; plus triton-ascend and shmem, docs/ascend.md)
    pip install -e ".[cuda]"    NVIDIA GPUs (llvmlite, stock triton; torch from its CUDA build)

check() runs first thing in triton_dist/__init__.py.  It imports nothing: it only looks for
the packages (importlib.util.find_spec of top-level names) and reads files of the installed
triton, so the pytest plugin can ask it too without activating anything.  Which adapter of
the interpreter then serves the triton found is decided by feature detection, in
triton_dist/sim/tritonapi/.
"""
from __future__ import annotations

import importlib.util
import os
import re

# The Triton lines triton_dist runs on (one adapter each in sim/tritonapi/); every refusal
# names them.
SUPPORTED_LINES = ("stock triton 3.5, 3.6, 3.7, 3.8 and 3.9",
                   "triton-ascend's main line (Triton 3.5 with the `_semantic` frontend)")
OLDEST_STOCK = (3, 5)
EXTRAS = ("pip install -e '.[sim]' on a CPU machine (the simulator), '.[npu]' on an Ascend NPU host "
          "(with triton-ascend, docs/ascend.md), '.[cuda]' on an NVIDIA GPU host")


def _dir_of(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else os.path.dirname(spec.origin or "")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def triton_is_ascend() -> bool:
    """Is the installed `triton` package triton-ascend (it has backends/ascend)?"""
    root = _dir_of("triton")
    return bool(root) and os.path.isdir(os.path.join(root, "backends", "ascend"))


def triton_version() -> str | None:
    """`triton.__version__` as its __init__.py spells it (read, not imported)."""
    root = _dir_of("triton")
    m = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", _read(os.path.join(root or "", "__init__.py")), re.M)
    return m.group(1) if m else None


def _release(version: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def triton_problem() -> str | None:
    """Why the installed triton is none of SUPPORTED_LINES (None: it is, as far as its files say).

    The `_builder` generation (triton 3.2; the triton-ascend 3.2.0 wheel and its 3.x branches,
    whose builtins take `_builder=`) and stock triton before 3.5 (3.4 has no
    InterpreterBuilder.create_unsplat) are refused: both the simulator and the dl layer's
    builtins need the `_semantic` frontend of 3.5 on."""
    root = _dir_of("triton")
    version = triton_version() or "(unknown version)"
    supported = "; ".join(SUPPORTED_LINES)
    core = _read(os.path.join(root or "", "language", "core.py"))
    if "_semantic=None" not in core and "_builder=None" in core:
        kind = "triton-ascend" if triton_is_ascend() else "triton"
        return (f"a triton with the `_semantic` frontend: this environment's {kind} {version} is of the `_builder` "
                f"generation (its builtins take _builder=), which triton_dist does not support. Supported: "
                f"{supported}")
    rel = _release(version) if version[0].isdigit() else ()
    if not triton_is_ascend() and rel and rel < OLDEST_STOCK:
        return (f"triton {'.'.join(map(str, OLDEST_STOCK))} or newer: this environment has triton {version}, "
                f"which triton_dist does not support. Supported: {supported}")
    return None


def problems(backend: str | None = None) -> list:
    """What is missing for importing triton_dist (any backend: the simulator and the NPU
    backend both run on triton-ascend's main line)."""
    out = []
    for name, what in (("torch", "torch"), ("triton", "triton (stock triton for the simulator and GPUs, "
                                                       "triton-ascend on NPU hosts)")):
        if _dir_of(name) is None:
            out.append(what)
    if not out:
        why = triton_problem()
        if why:
            out.append(why)
    return out


def check(backend: str | None = None) -> None:
    missing = problems(backend)
    if missing:
        raise ImportError(f"triton_dist needs {'; '.join(missing)}: {EXTRAS}")
