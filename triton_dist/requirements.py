"""What `import triton_dist` needs installed, said in words before anything fails obscurely.

torch and triton are not hard dependencies of the package (pyproject.toml): on an Ascend
NPU host triton is triton-ascend, which installs into the same `triton/` directory as
stock triton, so each kind of machine installs its own extra:

    pip install -e ".[sim]"     the simulator, any CPU machine (torch==2.13.0, triton==3.6.0)
    pip install -e ".[npu]"     Ascend NPU hosts (torch_npu; plus triton-ascend and shmem, docs/ascend.md)
    pip install -e ".[cuda]"    NVIDIA GPUs (llvmlite, triton==3.6.0; torch from its CUDA build)

check() runs first thing in triton_dist/__init__.py.  It imports nothing: it only looks for
the packages (importlib.util.find_spec of top-level names) and at the files of the
installed triton.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

SIM_TRITON = "3.6.0"
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


def triton_is_ascend() -> bool:
    """Is the installed `triton` package triton-ascend (it has backends/ascend)?"""
    root = _dir_of("triton")
    return bool(root) and os.path.isdir(os.path.join(root, "backends", "ascend"))


def problems(backend: str | None = None) -> list:
    """What is missing for importing triton_dist with `backend` (TRITON_DIST_BACKEND; auto picks
    the simulator where npu-smi is not on PATH)."""
    backend = (backend if backend is not None else os.environ.get("TRITON_DIST_BACKEND", "auto")).strip() or "auto"
    out = []
    for name, what in (("torch", "torch"), ("triton", "triton (stock triton for the simulator and GPUs, "
                                                       "triton-ascend on NPU hosts)")):
        if _dir_of(name) is None:
            out.append(what)
    sim = backend == "sim" or (backend == "auto" and shutil.which("npu-smi") is None)
    if not out and sim and triton_is_ascend():
        out.append(f"stock triton=={SIM_TRITON} for the simulator: this environment's triton is triton-ascend, "
                   f"which the simulator cannot run on (it patches stock triton's interpreter); use a separate "
                   f"environment with '.[sim]', or TRITON_DIST_BACKEND=npu on the NPU host")
    return out


def check(backend: str | None = None) -> None:
    missing = problems(backend)
    if missing:
        raise ImportError(f"triton_dist needs {'; '.join(missing)}: {EXTRAS}")
