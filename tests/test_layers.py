"""The layers of the tree as import-linter contracts (pyproject.toml [tool.importlinter],
scripts/lint_imports.sh): they hold on this tree, and a planted upward import, at module
level or inside a function, breaks them (the oracle is import-linter's verdict)."""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "lint_imports.sh"

pytest.importorskip("importlinter", reason="import-linter is in the test extra (pip install -e .[test])")


def _lint(root=ROOT):
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "TRITON_DIST_LINT_ROOT": str(root)}
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_the_tree_keeps_its_layers():
    rc, out = _lint()
    assert rc == 0 and "0 broken" in out, out


def test_the_core_layer_names_every_module_of_triton_dist():
    """A core module the contract does not list would be checked by nothing."""
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r"triton_dist\.(\w+)", text.split("[tool.importlinter]", 1)[1]))
    here = {p.stem for p in (ROOT / "triton_dist").iterdir()
            if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert here - listed == set(), f"add these to the core layer in pyproject.toml: {sorted(here - listed)}"


def test_the_sim_layers_name_every_module_of_sim():
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r"triton_dist\.sim\.(\w+)", text.split("[tool.importlinter]", 1)[1]))
    here = {p.stem for p in (ROOT / "sim").iterdir()
            if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert here - listed == set(), f"add these to a layer of sim/ in pyproject.toml: {sorted(here - listed)}"


def _tree(tmp_path):
    dst = tmp_path / "tree"
    for folder in ("triton_dist", "sim", "backend_ascend", "backend_cuda"):
        shutil.copytree(ROOT / folder, dst / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


@pytest.mark.parametrize("path,line,edge", [
    ("triton_dist/launcher.py", "from triton_dist.sim import device\n", "triton_dist.launcher -> triton_dist.sim.device"),
    ("sim/interp.py", "def _planted():\n    from ..backend_cuda import emit\n", "triton_dist.sim.interp -> triton_dist.backend_cuda.emit"),
    ("triton_dist/__init__.py", "def _planted():\n    import triton_dist.backend_ascend.lint\n", "triton_dist -> triton_dist.backend_ascend.lint"),
    ("sim/heap.py", "def _planted():\n    from . import runtime\n", "triton_dist.sim.heap -> triton_dist.sim.runtime"),
    ("sim/grid_limits.py", "def _planted():\n    from .board import Board\n", "triton_dist.sim.grid_limits -> triton_dist.sim.board"),
])
def test_an_upward_import_breaks_the_contract(tmp_path, path, line, edge):
    tree = _tree(tmp_path)
    with open(tree / path, "a") as f:
        f.write("\n\n" + line)
    rc, out = _lint(tree)
    assert rc == 1 and "BROKEN" in out, out
    assert edge in out, out
