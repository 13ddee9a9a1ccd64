"""Triton programs run on the simulator as under Triton's interpreter (issue 26 item 1).

Oracle: Triton's plain interpreter, run in a subprocess without triton_dist
(TRITON_INTERPRET=1, every TRITON_DIST* variable removed) on the same programs
(tests/conformance_cases.py: one or more per feature family of Triton's test_core.py).
Inside a simulated rank every case must give exactly what the plain run gave: the same
numbers, the same printed lines (as a set: the programs of a launch run concurrently here),
the same error type, cause and text (the simulator adds where it happened after the text).
Each case is one launch on each backend of the `backend` fixture (the simulator by default;
`--backend sim,hivm` adds the kernels as the NPU compilers made them, run on this CPU;
`--compare-backends sim,hivm` also compares what the two launches returned).  Where a backend
is known to give something else, DIFFERS says so, in one place, with the class docs/ascend.md
gives it ("The conformance suite"): the test checks that the backend still shows that
difference and is an xfail with the reason; when the difference is gone it fails, saying to
remove the line (a strict xfail).

Model differences (none of these cases hits one; each is documented where it lives):
- an access outside every buffer the kernel may touch is a TritonDistError here, where the
  plain interpreter reads or writes whatever lies there (docs/device_model.md);
- the programs of a launch run concurrently, so output interleaves in schedule order;
- a float32 -> bfloat16 cast rounds to nearest even, as Triton's semantics and the compiled
  kernel do, where Triton's interpreter rounds toward zero (sim/float_casts.py): the `casts`
  case's bfloat16 column is checked against torch's conversion instead;
- a non-power-of-two tl.arange is taken, as triton-ascend's language takes it
  (triton_dist/language/ascend_shapes.py), where stock Triton's interpreter refuses it: the
  `error_arange_not_power_of_two` case checks that the plain run refuses and the simulator runs it.
"""
import json
import re
from typing import NamedTuple, Optional

import pytest

import triton_dist

import plain_interpreter
import conformance_cases as C


@pytest.fixture(scope="module")
def plain():
    return plain_interpreter.outcomes("conformance_cases.py", timeout=600)


def _same(name, got, want):
    if isinstance(want, list) and want[:1] == ["raised"]:
        assert isinstance(got, list) and got[:4] == want[:4], (name, got, want)
        assert got[4].startswith(want[4]), (name, got, want)        # Triton's text, then the location
        return
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True), (name, got, want)


class Differs(NamedTuple):
    kind: str                  # docs/ascend.md's class: compiler finding/refusal, model difference, backend gap
    shows: Optional[str]       # a regex the backend's outcome (as JSON) matches; None: not run, it would hang
    why: str


# What a backend other than the simulator gives where it is not what the plain interpreter gives.
DIFFERS = {
    "hivm": {
        "float_unary_ops": Differs(
            "model difference", r"0\.14112001657485962.*0\.0009999998146668077",
            "tl.sin(3.0) and tl.sin(1e-3) are one unit in the last place off libm's: the compiled sin is "
            "bishengir-compile's range reduction and polynomial, the interpreter's is numpy's"),
        "spin_lock": Differs(
            "compiler finding", None,
            "not run: triton-adapter-opt 3.2.0 makes tl.atomic_cas return the value it stored, so the spin lock never "
            "leaves its loop and the launch hangs until its timeout "
            "(tests/test_hivm_findings.py::test_atomic_cas_returns_the_swapped_in_value_not_the_old_one)"),
        "printing": Differs(
            "model difference", r'" v=: ".*"\[0\.000000,1\.000000,2\.000000,3\.000000\]"',
            "the compiled kernel prints through the template library's print functions (the prefix on its own "
            "line, then the values in printf's %f / %X form: backend_ascend/cpu_run/device_print.py), the "
            "interpreter in numpy's form after the program id; tl.static_print runs once, when the kernel compiles"),
        "tuples": Differs(
            "backend gap", r"the type of 'ptrs' must be a Triton type string",
            "npu-compile's signature takes no tuple arguments"),
        "tensor_descriptors": Differs(
            "compiler refusal", r"CompileRefused.*the NPU compiler refuses kernel _desc_kernel",
            "triton-adapter-opt 3.2.0 refuses the host TensorDescriptor kernel; the simulator runs the source"),
        "error_scalar_overflow": Differs(
            "model difference", r'"TritonDistError", false, "CompilationError", "cannot lower kernel _overflow_kernel',
            "the compile path refuses the kernel (Triton's CompilationError) where the interpreter raises the "
            "ValueError when the program runs: the same cause, at compile time"),
        "error_static_assert": Differs(
            "model difference", r'"CompileTimeAssertionFailure", "cannot lower kernel _static_assert_kernel',
            "the compile path refuses the kernel (CompileTimeAssertionFailure) where the interpreter raises the "
            "AssertionError when the program runs: the same cause, at compile time"),
    },
}


def _outcome(name):
    import numpy as np
    np.seterr(all="ignore")
    return C.outcome(name)


@pytest.mark.parametrize("name", sorted(C.CASES))
def test_case_matches_the_plain_interpreter(plain, backend, name):
    assert plain[name] is not None
    differs = DIFFERS.get(backend, {}).get(name)
    if differs is not None and differs.shows is None:
        pytest.xfail(f"{differs.kind}: {differs.why}")
    got = triton_dist.launch(_outcome, name, world_size=1, backend=backend, timeout=300).values[0]
    if differs is None:
        _check(name, got, plain[name])
        return
    try:
        _check(name, got, plain[name])
    except AssertionError:
        text = json.dumps(got, sort_keys=True)
        assert re.search(differs.shows, text, re.S), (
            f"{name} on {backend}: expected its declared {differs.kind} (an outcome matching /{differs.shows}/), "
            f"got {text[:2000]}")
        pytest.xfail(f"{differs.kind}: {differs.why}")
    pytest.fail(f"{name} now gives on {backend!r} what the plain interpreter gives: its declared {differs.kind} "
                f"({differs.why}) is gone; remove DIFFERS[{backend!r}][{name!r}] in tests/test_conformance.py")


def _check(name, got, want):
    if name == "error_arange_not_power_of_two":       # triton-ascend's rule (see above)
        assert want[:1] == ["raised"] and "arange's range must be a power of 2" in want[4], want
        assert got == "no error", got
        return
    if name == "casts":           # the bfloat16 column: torch's round-to-nearest-even (see above)
        import torch
        x = torch.tensor(C.CAST_INPUTS, dtype=torch.float32)
        assert got[-1] == x.to(torch.bfloat16).to(torch.float32).tolist(), (got[-1], want[-1])
        got, want = got[:-1], want[:-1]
    _same(name, got, want)


def test_every_family_is_covered():
    """The families of test_core.py the issue lists, each with at least one case."""
    families = {"casts", "bitcast", "int_binary_ops", "float_unary_ops", "reductions_and_scans", "histogram",
                "atomics", "spin_lock", "dots", "block_pointers", "tensor_descriptors", "tuples",
                "constexpr_static_range", "program_ids", "printing", "device_assert_passes",
                "error_arange_not_power_of_two", "error_scalar_overflow", "error_static_assert"}
    assert families <= set(C.CASES)


@pytest.mark.parametrize("schedule,seed", [("pct", 0), ("random", 1)])
def test_cases_match_under_deterministic_schedules(plain, schedule, seed):
    names = ["atomics", "spin_lock", "printing", "tuples", "tensor_descriptors"]

    def body():
        return C.all_outcomes(names)
    got = triton_dist.launch(body, world_size=1, schedule=schedule, seed=seed, timeout=600).values[0]
    assert sorted(got) == sorted(names)
    for n in names:
        _same(n, got[n], plain[n])      # asserts the outcome equals the plain interpreter's


def test_a_declared_difference_is_checked_both_ways(plain, monkeypatch):
    """DIFFERS on both sides, on the simulator: a declared difference that shows is an xfail with its
    reason; one whose outcome is another is a failure naming both; one that is gone is a failure naming
    the line to remove (the strict xfail)."""
    monkeypatch.setitem(DIFFERS, "sim", {"bitcast": Differs("backend gap", r"1065353216", "planted")})
    wrong = dict(plain, bitcast=[0, 0, 0, 0])          # the case now differs from its oracle
    with pytest.raises(pytest.xfail.Exception, match="backend gap: planted"):
        test_case_matches_the_plain_interpreter(wrong, "sim", "bitcast")
    monkeypatch.setitem(DIFFERS, "sim", {"bitcast": Differs("backend gap", r"LoweringFailed", "planted")})
    with pytest.raises(AssertionError, match=r"bitcast on sim: expected its declared backend gap .*got \[1065353216"):
        test_case_matches_the_plain_interpreter(wrong, "sim", "bitcast")
    with pytest.raises(pytest.fail.Exception, match=r"remove DIFFERS\['sim'\]\['bitcast'\] in tests/test_conformance"):
        test_case_matches_the_plain_interpreter(plain, "sim", "bitcast")
