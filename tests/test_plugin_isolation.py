"""The pytest plugin (pytest11, loaded by every pytest session of an environment where
triton_dist is installed) changes nothing for suites that do not use triton_dist (issue 22
item 5).

Oracles: Triton's own interpreter result checked against torch, in a session where the
plugin is loaded but nothing uses triton_dist (before, the plugin installed the simulator's
interpreter at configure time and this failed with "triton_dist is not initialized in this
process"); pytest's own outcome counts; and the refusal names the triton version a fake
`triton` package on PYTHONPATH declares.
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PLAIN_TRITON = '''
import sys
import torch, triton, triton.language as tl

@triton.jit
def add(x, y, out, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(out + o, tl.load(x + o) + tl.load(y + o) * tl.program_id(0))

def test_plain_triton_kernel():
    x, y, out = torch.arange(8.0), torch.full((8,), 2.0), torch.empty(8)
    add[(2,)](x, y, out, N=8)        # the interpreter runs program 0, then 1: out = x + 2 * 1
    assert torch.equal(out, x + 2)
    assert not [m for m in sys.modules if m.split(".")[0] == "triton_dist"], "the plugin imported triton_dist"
'''


def test_plain_triton_test_under_triton_interpret_passes(pytester, monkeypatch):
    pytester.makepyfile(test_plain=PLAIN_TRITON)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    r = pytester.runpytest_subprocess("-v")      # the plugin is loaded through its pytest11 entry point
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["triton_dist: not imported (activated by the first test that uses it)"])


USES_IT = '''
import pytest

def test_plain():
    assert sum(range(5)) == 10

def test_takes_the_backend_fixture(backend):
    raise AssertionError("must not run where triton_dist cannot")

@pytest.mark.backend("sim")
def test_marked():
    raise AssertionError("must not run where triton_dist cannot")
'''


def _fake_triton(tmp_path, version, keyword):
    """A `triton` package as a release of that generation lays it out (read from files only)."""
    pkg = tmp_path / "fake" / "triton"
    (pkg / "language").mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = '{version}'\n")
    (pkg / "language" / "__init__.py").write_text("")
    (pkg / "language" / "core.py").write_text(f"def program_id(axis, {keyword}=None):\n    pass\n")
    return pkg.parent


@pytest.mark.parametrize("version,keyword,says", [
    ("3.4.0", "_semantic", "this environment has triton 3.4.0, which triton_dist does not support"),
    ("3.2.0", "_builder", "this environment's triton 3.2.0 is of the `_builder` generation"),
])
def test_unsupported_triton_skips_only_the_tests_that_use_triton_dist(pytester, monkeypatch, tmp_path, version,
                                                                      keyword, says):
    fake = _fake_triton(tmp_path, version, keyword)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(fake), str(ROOT)]))
    pytester.makepyfile(test_mixed=USES_IT)
    # the plugin's options are still there (--sim-schedule) though nothing of it can run
    r = pytester.runpytest_subprocess("-rs", "--sim-schedule", "pct", "--backend", "sim")
    r.assert_outcomes(passed=1, skipped=2)
    out = r.stdout.str()
    header = [ln for ln in r.outlines if ln.startswith("triton_dist: cannot run here")]
    assert len(header) == 1 and says in header[0] and "Supported: stock triton 3.5" in header[0], out
    skips = [ln for ln in r.outlines if ln.startswith("SKIPPED")]
    assert len(skips) == 2 and all(says in ln for ln in skips), out
