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
tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads the contracts")


def _lint(root=ROOT):
    env = {"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "TRITON_DIST_LINT_ROOT": str(root),
           "COLUMNS": "300"}       # one import a line: its two modules unwrapped
    r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_the_tree_keeps_its_layers():
    rc, out = _lint()
    assert rc == 0 and "0 broken" in out, out


# each package (as installed) -> its folder in the source tree
PACKAGES = {"triton_dist": "triton_dist", "triton_dist.sim": "sim",
            "triton_dist.backend_ascend": "backend_ascend", "triton_dist.backend_cuda": "backend_cuda"}


def _unlayered(tree):
    """Every module or subpackage (room) of the four packages that no layers contract names: an
    import of or from it would be checked by nothing."""
    contracts = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named = {room.strip() for c in contracts if c["type"] == "layers"
             for layer in c["layers"] for room in re.split(r"[|:]", layer)}
    return [f"{pkg}.{p.stem}" for pkg, folder in PACKAGES.items() for p in sorted((tree / folder).iterdir())
            if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
            and f"{pkg}.{p.stem}" not in named]


def test_every_module_is_in_a_layer():
    assert _unlayered(ROOT) == [], ("put these in a layer of their package's contract in pyproject.toml "
                                    "[tool.importlinter] (docs/index.md \"Layers\"): " + ", ".join(_unlayered(ROOT)))


def _tree(tmp_path):
    dst = tmp_path / "tree"
    for folder in ("triton_dist", "sim", "backend_ascend", "backend_cuda"):
        shutil.copytree(ROOT / folder, dst / folder, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


@pytest.mark.parametrize("folder,room", [(f, f"{p}.planted_room") for p, f in PACKAGES.items()])
def test_a_module_in_no_layer_is_named(tmp_path, folder, room):
    tree = _tree(tmp_path)
    (tree / folder / "planted_room.py").write_text("")
    assert _unlayered(tree) == [room]


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


# The backends' and the core's contracts, in one lint run (import-linter names every illegal
# import, each pair of rooms apart): the imports that held their old cycles planted back (each
# now points up its package's layers), a room importing one beside it, and an upward import into
# backend_ascend's cpu_run room.
_PLANTED = {
    "backend_ascend/cache.py": ("from .pipeline import Outcome",
                                "triton_dist.backend_ascend.cache -> triton_dist.backend_ascend.pipeline"),
    "backend_ascend/ascend_ttir.py": ("from .frontend import build_ttir",
                                      "triton_dist.backend_ascend.ascend_ttir -> triton_dist.backend_ascend.frontend"),
    "backend_ascend/toolchain.py": ("from .ascend_ttir import run_passes",
                                    "triton_dist.backend_ascend.toolchain -> triton_dist.backend_ascend.ascend_ttir"),
    "backend_ascend/extension_ops.py": ("from . import hivm",
                                        "triton_dist.backend_ascend.extension_ops -> triton_dist.backend_ascend.hivm"),
    "backend_ascend/compile_check.py": ("from . import variants",
                                        "triton_dist.backend_ascend.compile_check -> triton_dist.backend_ascend.variants"),
    "backend_ascend/pipeline.py": ("from .cpu_run import backend",
                                   "triton_dist.backend_ascend.pipeline -> triton_dist.backend_ascend.cpu_run.backend"),
    "backend_cuda/devlib.py": ("from . import emit", "triton_dist.backend_cuda.devlib -> triton_dist.backend_cuda.emit"),
    "backend_cuda/launch.py": ("from .runtime import missing",
                               "triton_dist.backend_cuda.launch -> triton_dist.backend_cuda.runtime"),
    "triton_dist/registry.py": ("from . import launcher", "triton_dist.registry -> triton_dist.launcher"),
    "triton_dist/cli.py": ("from . import kernel_launches", "triton_dist.cli -> triton_dist.kernel_launches"),
}


def test_the_backends_and_the_core_keep_their_layers(tmp_path):
    tree = _tree(tmp_path)
    for path, (line, _) in _PLANTED.items():
        with open(tree / path, "a") as f:
            f.write(f"\n\ndef _planted():\n    {line}\n")
    rc, out = _lint(tree)
    assert rc == 1, out
    missed = [edge for _, edge in _PLANTED.values() if edge not in out]
    assert missed == [], f"not reported: {missed}\n{out}"


# grimp (the graph import-linter checks) on the installed layout, as scripts/lint_imports.sh
# lays it out: every import in the tree whose target imports its importer back, directly or not
# (chain_exists: modules, a package's __init__ included; a module's import of itself, as
# `python -m triton_dist.cli` does, is none), and the imports that, removed, would leave each
# package without a cycle between its children (nominate_cycle_breakers, grimp >= 3.6); nothing
# printed when there is no cycle
_CYCLES = """
import sys, grimp
g = grimp.build_graph("triton_dist", cache_dir=None)
mods = sorted(g.modules)
for a in mods:
    for b in sorted(g.find_modules_directly_imported_by(a)):
        if b != a and b in g.modules and g.chain_exists(importer=b, imported=a):
            print("module cycle :", a, "->", b)
if hasattr(grimp.ImportGraph, "nominate_cycle_breakers"):
    for pkg in [m for m in mods if g.find_children(m)]:
        for a, b in sorted(g.nominate_cycle_breakers(pkg)):
            print(pkg, ":", a, "->", b)
"""


def _cycles(root, tmp_path):
    stage = tmp_path / "stage"
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


def test_the_tree_has_no_import_cycle(tmp_path):
    """Whatever the contracts' layers say: no module of the tree (the core, sim/, the backends)
    is in an import cycle, and no package has one between its children, function-level imports
    included."""
    out = _cycles(ROOT, tmp_path)
    assert out == "", ("the tree has an import cycle again; break one of these imports (move the shared code "
                       "down, or hand it in from the upper room; docs/index.md \"Layers\"):\n" + out)


@pytest.mark.parametrize("plants,cycle", [
    # two rooms that import each other inside functions
    ({"sim/context.py": "from . import naming", "sim/naming.py": "from . import context"},
     ("triton_dist.sim.context -> triton_dist.sim.naming", "triton_dist.sim.naming -> triton_dist.sim.context")),
    # a module and its own package's __init__ (as schedulers/explore.py once did)
    ({"sim/schedulers/explore.py": "from . import seed_problem"},
     ("triton_dist.sim.schedulers.explore -> triton_dist.sim.schedulers",)),
    # the imports that held the backends' and the core's cycles, planted back
    ({"backend_ascend/cache.py": "from .pipeline import Outcome"},
     ("triton_dist.backend_ascend.cache -> triton_dist.backend_ascend.pipeline",)),
    ({"backend_ascend/extension_ops.py": "from . import hivm"},
     ("triton_dist.backend_ascend.extension_ops -> triton_dist.backend_ascend.hivm",)),
    ({"backend_cuda/launch.py": "from .runtime import missing"},
     ("triton_dist.backend_cuda.launch -> triton_dist.backend_cuda.runtime",)),
    ({"triton_dist/launcher.py": "from . import finalize, init"},
     ("triton_dist.launcher -> triton_dist",)),
])
def test_the_cycle_check_sees_a_function_level_cycle(tmp_path, plants, cycle):
    tree = _tree(tmp_path)
    for path, line in plants.items():
        with open(tree / path, "a") as f:
            f.write(f"\n\ndef _planted():\n    {line}\n")
    out = _cycles(tree, tmp_path)
    assert any(f"module cycle : {c}" in out for c in cycle), out
