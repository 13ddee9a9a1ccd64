"""An error raised inside a kernel keeps the type Triton's interpreter gives it.

Oracle: Triton's own interpreter, run in a subprocess without triton_dist
(TRITON_INTERPRET=1) on the same kernels (tests/kernel_error_cases.py): it raises
`InterpreterError(repr(e))` from e, a `triton.TritonError`.  The simulator must raise the
same type with the same cause and the same text, and add where it happened.  Before: it
re-raised ValueError/AssertionError/AttributeError, and `pytest.raises(triton.TritonError)`
stopped matching (33 cases of Triton's test_core.py failed only for that, issue 26).
"""

import pytest
import torch
import triton
from triton.runtime.errors import InterpreterError

import triton_dist
import triton_dist.language as dl

import plain_interpreter
import kernel_error_cases as K


@pytest.fixture(scope="module")
def plain():
    return plain_interpreter.outcomes("kernel_error_cases.py", timeout=300)


def _outcomes(grid):
    return {n: K.outcome(n, torch.zeros(8), grid) for n in K.CASES}


@pytest.mark.parametrize("schedule", ["free", "pct"])
def test_kernel_errors_have_the_plain_interpreters_type(plain, schedule):
    sim = triton_dist.launch(_outcomes, (2,), world_size=2, schedule=schedule, seed=3).values
    for rank, got in enumerate(sim):
        for name, want in plain.items():
            assert want is not None and want[0] == "InterpreterError" and want[1], want    # the oracle raised
            g = got[name]
            assert g[:3] == want[:3], (name, g, want)
            assert g[3].startswith(want[3]), (name, g, want)          # Triton's text, then the location
            assert f"of kernel {K.CASES[name][0].__name__} on rank {rank}" in g[3], g
            assert "kernel_error_cases.py:" in g[3], g                # the kernel line


def test_pytest_raises_triton_error_matches_inside_a_rank():
    def body():
        with pytest.raises(triton.TritonError, match="arange's end argument must be greater than the start argument") as ei:
            K.arange_kernel[(1,)](torch.zeros(8))
        assert isinstance(ei.value, InterpreterError) and isinstance(ei.value.__cause__, ValueError)
        return "kernel_error_cases.py:10 (arange_kernel)" in str(ei.value)
    assert triton_dist.launch(body, world_size=1).values == [True]


@triton.jit
def _bad_peer_kernel(sig):
    dl.notify(sig, 7)


def test_the_simulators_own_diagnostics_stay_themselves():
    """A misuse the simulator catches is a TritonDistError, not wrapped (Triton has no such check)."""
    def body():
        sig = triton_dist.symm_tensor((16,), torch.int32)
        with pytest.raises(triton_dist.TritonDistError, match="rank 7"):
            _bad_peer_kernel[(1,)](sig)
        return True
    assert triton_dist.launch(body, world_size=2).values == [True, True]


def test_uncaught_kernel_error_reaches_the_launcher_as_rank_error():
    def body():
        K.static_kernel[(1,)](torch.zeros(8), N=2)
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=1)
    assert ei.value.exc_type == "InterpreterError" and "N must exceed 4" in str(ei.value)
