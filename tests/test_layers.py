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
    # the upward imports that held sim's old cycle (docs/index.md "Layers"): each, planted back
    ("sim/interp.py", "def _planted():\n    from .backend import lone_rank\n", "triton_dist.sim.interp -> triton_dist.sim.backend"),
    ("sim/predict/cli.py", "def _planted():\n    from ..cli import warm\n", "triton_dist.sim.predict.cli -> triton_dist.sim.cli"),
    ("sim/compat/cann.py", "def _planted():\n    from ..interp import TensorHandle\n", "triton_dist.sim.compat.cann -> triton_dist.sim.interp"),
    ("sim/autotune.py", "def _planted():\n    from .interp import API\n", "triton_dist.sim.autotune -> triton_dist.sim.interp"),
    ("sim/runtime.py", "def _planted():\n    from . import schedulers\n", "triton_dist.sim.runtime -> triton_dist.sim.schedulers"),
    # rooms of one layer are independent (`|`): beside is as refused as above
    ("sim/launch.py", "def _planted():\n    from . import interp\n", "triton_dist.sim.launch -> triton_dist.sim.interp"),
])
def test_an_upward_import_breaks_the_contract(tmp_path, path, line, edge):
    tree = _tree(tmp_path)
    with open(tree / path, "a") as f:
        f.write("\n\n" + line)
    rc, out = _lint(tree)
    assert rc == 1 and "BROKEN" in out, out
    assert edge in out, out


# grimp (the graph import-linter checks) on the installed layout, as scripts/lint_imports.sh
# lays it out: every import of sim/ whose target imports its importer back, directly or not
# (chain_exists: modules, a package's __init__ included), and the imports that, removed,
# would leave each package of sim/ without a cycle between its children
# (nominate_cycle_breakers, grimp >= 3.6); nothing printed when there is no cycle
_CYCLES = """
import sys, grimp
g = grimp.build_graph("triton_dist", cache_dir=None)
sim = sorted(g.find_descendants("triton_dist.sim") | {"triton_dist.sim"})
for a in sim:
    for b in sorted(g.find_modules_directly_imported_by(a)):
        if b in sim and g.chain_exists(importer=b, imported=a):
            print("module cycle :", a, "->", b)
if hasattr(grimp.ImportGraph, "nominate_cycle_breakers"):
    for pkg in [m for m in sim if g.find_children(m)]:
        for a, b in sorted(g.nominate_cycle_breakers(pkg)):
            print(pkg, ":", a, "->", b)
"""


def _cycles(root):
    stage = root.parent / "stage"
    (stage / "triton_dist").mkdir(parents=True)
    for entry in (root / "triton_dist").iterdir():
        if entry.name != "__pycache__":
            (stage / "triton_dist" / entry.name).symlink_to(entry)
    for folder in ("sim", "backend_ascend", "backend_cuda"):
        (stage / "triton_dist" / folder).symlink_to(root / folder)
    r = subprocess.run([sys.executable, "-c", _CYCLES], capture_output=True, text=True, timeout=300, cwd=stage,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(stage)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_sim_has_no_import_cycle(tmp_path):
    """Whatever the contract's layers say: no module of sim/ is in an import cycle, and no
    package of sim/ has one between its children, function-level imports included."""
    tree = _tree(tmp_path)
    out = _cycles(tree)
    assert out == "", ("sim/ has an import cycle again; break one of these imports (move the shared code down, "
                       "or hand it in from the upper room):\n" + out)


@pytest.mark.parametrize("plants,cycle", [
    # two rooms that import each other inside functions
    ({"sim/context.py": "from . import naming", "sim/naming.py": "from . import context"},
     ("triton_dist.sim.context -> triton_dist.sim.naming", "triton_dist.sim.naming -> triton_dist.sim.context")),
    # a module and its own package's __init__ (as schedulers/explore.py once did)
    ({"sim/schedulers/explore.py": "from . import seed_problem"},
     ("triton_dist.sim.schedulers.explore -> triton_dist.sim.schedulers",)),
])
def test_the_cycle_check_sees_a_function_level_cycle(tmp_path, plants, cycle):
    tree = _tree(tmp_path)
    for path, line in plants.items():
        with open(tree / path, "a") as f:
            f.write(f"\n\ndef _planted():\n    {line}\n")
    out = _cycles(tree)
    assert any(f"module cycle : {c}" in out for c in cycle), out
