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
    assert {"torch==2.13.0", "triton==3.6.0"} <= set(extra("sim"))
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


def test_the_simulator_on_triton_ascend_is_refused_at_import(tmp_path):
    """A `triton` package with backends/ascend (triton-ascend's layout) and the simulator chosen."""
    fake = tmp_path / "triton"
    (fake / "backends" / "ascend").mkdir(parents=True)
    (fake / "__init__.py").write_text("raise SystemExit('the check must not import triton')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", TRITON_DIST_BACKEND="sim")
    out = subprocess.run([sys.executable, "-c", "import triton_dist"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode != 0
    assert "ImportError: triton_dist needs stock triton==3.6.0 for the simulator: this environment's triton is " \
           "triton-ascend" in out.stderr, out.stderr
    # backend 'npu' on the same environment is not refused by this check (it has its own, at init)
    assert R.problems("npu") == [] or not R.triton_is_ascend()


def test_stock_triton_here_is_not_triton_ascend():
    assert not R.triton_is_ascend()
    assert R.problems("sim") == []
