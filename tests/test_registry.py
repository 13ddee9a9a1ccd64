"""Backends are found by name through entry points; the core imports none of them.

A toy backend is installed into a temporary directory as a real distribution (a
.dist-info with entry_points.txt, which importlib.metadata reads exactly as it reads an
installed wheel's), then launched through triton_dist.launch and given a subcommand.
"""
import ast
import os
import pathlib
import sys
import textwrap

import pytest

import triton_dist
from triton_dist import launcher, registry
from triton_dist.errors import TritonDistError

ROOT = pathlib.Path(__file__).resolve().parent.parent
# folder -> the import name it installs under (pyproject.toml, [tool.setuptools] package-dir)
BACKEND_PACKAGES = {"sim": "triton_dist.sim", "backend_cuda": "triton_dist.backend_cuda",
                    "backend_ascend": "triton_dist.backend_ascend"}

TOY = textwrap.dedent('''
    import os
    from triton_dist import launcher as L
    from triton_dist.backend import Backend
    from triton_dist.cli import Subcommand

    def _rank_main(rank, world_size, fn, args, kwargs, conn):
        try:
            L.set_rank_environment(rank, world_size, "toy")
            L.report(conn, L.pack_value(rank, fn(*args, **kwargs)))
        except BaseException as e:
            L.report(conn, L.pack_error(e))

    class ToyBackend(Backend):
        """Ranks are plain forked processes; no device, no heap."""
        name = "toy"
        launch_options = frozenset({"seed"})

        @classmethod
        def launch(cls, fn, args, kwargs, *, world_size, timeout, **options):
            procs, pipes = L.fork_ranks(world_size, _rank_main, (world_size, fn, args, kwargs), name="toy-rank")
            try:
                outcomes = L.collect(procs, pipes, timeout, __import__("time").monotonic())
            finally:
                L.teardown(procs, pipes, None)
            return L.LaunchResult(values=L.values_of(outcomes), seed=options.get("seed"))

        def device_call(self, family, *args): raise NotImplementedError
        def init(self, rank=None, world_size=None, **options): pass
        def finalize(self): pass
        def rank(self): return int(os.environ["RANK"])
        def world_size(self): return int(os.environ["WORLD_SIZE"])
        def device(self): return "cpu"
        def symm_tensor(self, shape, dtype): raise NotImplementedError
        def free(self, t): raise NotImplementedError
        def barrier(self): pass

    def _configure(p):
        p.add_argument("--who", default="world")

    def _hello(args):
        print(f"hello {args.who} from the toy backend")
        return 0

    HELLO = Subcommand("hello", "say hello (toy backend)", _configure, _hello)
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_backend.py").write_text(TOY)
    info = tmp_path / "toy_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[triton_dist.backends]\ntoy = toy_backend:ToyBackend\n\n"
                                           "[triton_dist.subcommands]\nhello = toy_backend:HELLO\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.refresh()
    yield
    registry.refresh()
    sys.modules.pop("toy_backend", None)


def _times_ten():
    return int(os.environ["RANK"]) * 10


def test_a_third_party_backend_is_found_and_launched(toy):
    assert "toy" in registry.backend_names()
    res = triton_dist.launch(_times_ten, world_size=3, backend="toy", seed=5)
    assert res.values == [0, 10, 20] and res.seed == 5


def test_options_a_backend_does_not_take_are_refused_naming_it(toy):
    with pytest.raises(TritonDistError, match=r"backend 'toy' does not take schedule='pct'.*seed"):
        triton_dist.launch(_times_ten, world_size=2, backend="toy", schedule="pct")


def test_session_defaults_for_another_backend_are_not_forced_on_it(toy, monkeypatch):
    monkeypatch.setitem(launcher.DEFAULTS, "schedule", "pct")      # what --sim-schedule pct sets
    assert triton_dist.launch(_times_ten, world_size=2, backend="toy").values == [0, 10]


def test_a_backend_adds_its_own_subcommand(toy, capsys):
    from triton_dist.cli import main
    assert main(["hello", "--who", "tests"]) == 0
    assert "hello tests from the toy backend" in capsys.readouterr().out


def test_unknown_backend_names_the_registered_ones():
    with pytest.raises(TritonDistError, match="backend must be one of 'sim', 'npu', 'cuda'"):
        triton_dist.launch(_times_ten, world_size=2, backend="tpu")


def _imported_modules(path: pathlib.Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


# Which package may import which (the core no backend, the backends not each other) is an
# import-linter contract now (pyproject.toml [tool.importlinter], tests/test_layers.py): it sees
# relative and function-level imports too, which the AST walk here did not resolve.


def test_no_module_imports_a_backend_by_its_bare_folder_name():
    """`sim`, `backend_ascend` and `backend_cuda` install as triton_dist.sim, ... (issue 22): a
    bare `import sim` would pick up a user's own sim.py instead."""
    offenders = []
    for folder in ("triton_dist", "tests", "benchmarks", "examples", "scripts") + tuple(BACKEND_PACKAGES):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for mod in _imported_modules(path):
                if mod.split(".")[0] in BACKEND_PACKAGES:
                    offenders.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not offenders, "\n".join(offenders)
