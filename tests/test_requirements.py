"""Installing beside triton-ascend: torch and triton come from the machine's extra, and
`import triton_dist` says which one is missing (issue 16 item 6).

Oracles: pyproject.toml's extras as the issue asks for them (the simulator's pins in an
extra the README's setup installs, an `npu` extra without stock triton), and the fact that
stock triton and triton-ascend install the same `triton/` directory.
"""
import importlib.metadata
import os
import subprocess
import sys

import pytest

from triton_dist import requirements as R

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _requires():
    return importlib.metadata.requires("triton_dist")


def test_no_hard_dependency_on_torch_or_triton():
    hard = [r for r in _requires() if "extra ==" not in r]
    assert not any(r.startswith(("torch", "triton")) for r in hard), hard


def test_the_extras():
    req = _requires()

    def extra(name):
        return sorted(r.split(";")[0].strip() for r in req if f'extra == "{name}"' in r)
    sim = extra("sim")
    # torch exact (pip takes the CPU wheel on disk); triton: the stock lines with an adapter whose
    # frontend gives block pointers as tt.make_tensor_ptr (3.8 emulates them, 3.9 removed them:
    # tests/test_block_ptr.py), so that pip's pick runs triton-ascend's block-pointer kernels
    assert "torch==2.13.0" in sim
    (triton,) = [r for r in sim if r.startswith("triton")]
    from packaging.requirements import Requirement
    spec = Requirement(triton).specifier
    assert all(v in spec for v in ("3.5.1", "3.6.0", "3.7.1")), triton
    assert not any(v in spec for v in ("3.4.0", "3.2.0", "3.8.0", "3.9.0", "3.10.0")), triton
    npu = extra("npu")
    assert "torch-npu" in npu and not any(r.startswith("triton") for r in npu)
    assert any(r.startswith("ascendnpu-ir==1.2.0") for r in extra("test"))


def test_setup_installs_the_simulator_and_test_extras():
    setup = open(os.path.join(ROOT, "scripts", "setup.sh")).read()
    assert '-e ".[sim,test]"' in setup


def test_missing_torch_or_triton_is_named_with_the_extra(monkeypatch):
    monkeypatch.setattr(R, "_dir_of", lambda name: None if name in ("torch", "triton") else "/somewhere")
    with pytest.raises(ImportError) as e:
        R.check("sim")
    msg = str(e.value)
    assert "torch" in msg and "triton (stock triton for the simulator" in msg
    assert ".[sim]" in msg and ".[npu]" in msg and ".[cuda]" in msg


def _fake_triton(tmp_path, version, keyword, ascend):
    """A `triton` package laid out as that release is (only its files are read: importing it exits)."""
    fake = tmp_path / "triton"
    (fake / "language").mkdir(parents=True)
    if ascend:
        (fake / "backends" / "ascend").mkdir(parents=True)
    (fake / "__init__.py").write_text(f"__version__ = '{version}'\nraise SystemExit('the check must not import triton')\n")
    (fake / "language" / "core.py").write_text(f"def program_id(axis, {keyword}=None):\n    pass\n")
    return dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", TRITON_DIST_BACKEND="sim")


@pytest.mark.parametrize("version,keyword,ascend,says", [
    ("3.2.0", "_builder", True, "this environment's triton-ascend 3.2.0 is of the `_builder` generation"),
    ("3.4.0", "_semantic", False, "this environment has triton 3.4.0, which triton_dist does not support"),
])
def test_unsupported_lines_are_refused_at_import_naming_the_supported_ones(tmp_path, version, keyword, ascend, says):
    env = _fake_triton(tmp_path, version, keyword, ascend)
    out = subprocess.run([sys.executable, "-c", "import triton_dist"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode != 0
    assert "ImportError: triton_dist needs" in out.stderr and says in out.stderr, out.stderr
    assert ("Supported: stock triton 3.5, 3.6, 3.7, 3.8 and 3.9; triton-ascend's main line (Triton 3.5 with the "
            "`_semantic` frontend)") in out.stderr, out.stderr


def test_triton_ascend_main_line_is_not_refused(tmp_path):
    """triton-ascend's main line (3.5.0, `_semantic` builtins): both the simulator and the NPU
    backend run on it, so the file check lets it through (the import then reaches triton)."""
    env = _fake_triton(tmp_path, "3.5.0", "_semantic", True)
    code = ("import importlib.util as u; s = u.spec_from_file_location('R', 'triton_dist/requirements.py'); "
            "R = u.module_from_spec(s); s.loader.exec_module(R); "
            "print(R.triton_is_ascend(), R.problems('sim'), R.problems('npu'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "True [] []", out.stdout + out.stderr


def test_stock_triton_here_is_not_triton_ascend():
    assert not R.triton_is_ascend()
    assert R.problems("sim") == []
