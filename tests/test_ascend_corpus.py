"""The Ascend corpus (tests/ascend_corpus, issue 31 item 4): kernels written in the styles of real
Ascend users' kernels, each run at world size 1 against torch on each backend of the `backend`
fixture (the simulator by default; `--backend sim,hivm` adds the kernel as the NPU compilers made
it, run on this CPU; `--compare-backends sim,hivm` also compares what the two launches returned,
at the case's tolerance), and compiled by the real NPU compilers (triton-ascend 3.2.0's
triton-adapter-opt, AscendNPU-IR's bishengir-compile) with the signatures of its launches.

Oracles: torch for what the kernels compute (at a tolerance fitting the dtype); the real compilers'
verdicts (accepted, or the compiler's own `ub overflow` line) for the compile.  The simulator run
also checks that each launch it saw is one of the case's declared compiles, so the compile step
compiles what really ran.  scripts/corpus_table.py measures docs/corpus.md's table with these same cases.

Where a backend other than the simulator is known not to do what the simulator does, the case says
so, in one place: its `on_backend` (a Differs: kind, the text the backend's report shows, why), or,
for a backend that runs compiled kernels, a compile declared refused (`Compile.expect`).  There the
test checks that the backend's report is the declared one and is an xfail with the reason; when the
difference is gone it fails, saying which declaration to remove (a strict xfail).  docs/ascend.md
("Issue 31's corpus") classifies each.
"""
import dataclasses
import inspect
import re

import pytest
import torch

import triton_dist
from ascend_corpus import Differs, all_cases

CASES = all_cases()
BY_NAME = {c.name: c for c in CASES}

# Test ids that fail today because a feature the kernel uses is not there yet (issue 31 items
# 1-3, built by others now).  strict: when the feature lands, the XPASS fails here; remove the line.
XFAIL = {
}

# The backends that run the kernel as the NPU compilers made it: a config declared refused
# (Compile.expect) leaves them nothing to run.
COMPILED_BACKENDS = ("hivm",)


def _params(test):
    out = []
    for c in CASES:
        reason = XFAIL.get(f"{test}[{c.name}]")
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        if test == "test_matches_torch":
            # --compare-backends: the two runs agree as each agrees with torch, at the case's tolerance
            marks.append(pytest.mark.compare_tolerance(atol=c.atol, rtol=c.rtol))
            if c.sim_error:
                marks.append(pytest.mark.backend_specific("the run is refused on every backend, each reporting the "
                                                          "kernel's bug in its own words: nothing returns to compare"))
        out.append(pytest.param(c, id=c.name, marks=marks))
    return out


def expected_difference(case, backend):
    """How the case on `backend` is known to differ from the simulator's run (a Differs), or None."""
    declared = case.on_backend.get(backend)
    if declared is not None or backend not in COMPILED_BACKENDS:
        return declared
    refused = next((c for c in case.compiles if c.expect != "accepted"), None)
    if refused is None:
        return None
    kernel = f"{case.jit.__name__} (" + ", ".join(f"{k}={v}" for k, v in refused.constexprs.items()) + ")"
    if refused.expect == "ub overflow":     # the NPU's 192 KiB of UB; the simulator runs a tile of any size
        kind, what = "model difference", f"bishengir-compile refuses {kernel}: 'ub overflow'"
    elif refused.expect == "cannot lower":
        kind, what = "compiler refusal", f"{kernel} uses a form triton-ascend 3.2.0's adapter has no counterpart for"
    else:
        kind, what = "compiler refusal", f"the NPU compilers refuse {kernel}: '{refused.expect}'"
    return Differs(kind, re.escape(refused.expect),
                   f"{what}, the case's declared npu-compile verdict (docs/ascend.md): {backend} has nothing to run")


def _in_rank(name, inputs):
    """Runs inside the simulated rank: the case's launches, and the signatures Triton specialized."""
    from triton_dist import kernel_launches
    from triton_dist.backend_ascend.compile_check import signature_of
    seen = []

    def record(launch):
        sig, consts = signature_of(launch)
        seen.append((launch.fn.__name__, sig, {k: repr(v) for k, v in consts.items()}))
    kernel_launches.subscribe(record)
    try:
        out = BY_NAME[name].run(**inputs)
    finally:
        kernel_launches.unsubscribe(record)
    return out, seen


def _compare(got, want, case, where="output"):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (type(got), len(got))
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, case, f"{where}[{i}]")
        return
    assert got.shape == want.shape, f"{case.name} {where}: shape {tuple(got.shape)}, torch {tuple(want.shape)}"
    if got.dtype.is_floating_point or want.dtype.is_floating_point:
        torch.testing.assert_close(got.double(), want.double(), atol=case.atol, rtol=case.rtol, equal_nan=True,
                                   msg=lambda m: f"{case.name} {where} differs from torch:\n{m}")
    else:
        assert torch.equal(got.to(want.dtype), want), f"{case.name} {where}: {got} != torch {want}"


def run_on_simulator(case, seed=None, backend="sim"):
    """(inputs, (outputs, launches)) of the case on one rank of `backend` (the free schedule, or the
    random one under `seed`); raises what the backend reported."""
    inputs = case.inputs()
    sched = {} if seed is None else dict(schedule="random", seed=seed)
    res = triton_dist.launch(_in_rank, case.name, inputs, world_size=1, timeout=300, backend=backend, **sched)
    return inputs, res.values[0]


def check_on_simulator(case, backend="sim"):
    """Runs the case as test_matches_torch does on `backend`; raises AssertionError (or the backend's
    error) on a difference from torch or from the declared launches."""
    differs = case.on_backend.get(backend)
    error = differs.shows if differs is not None and differs.kind == "reports the fault" else case.sim_error
    if error:
        try:
            run_on_simulator(case, backend=backend)
        except triton_dist.RankError as e:
            found = re.search(error, str(e), re.S)
            assert found, str(e)
            return found.group(0)
        raise AssertionError(f"{case.name}: {backend} reported nothing; expected /{error}/")
    for seed in case.seeds or (None,):
        inputs, (got, seen) = run_on_simulator(case, seed, backend)
        where = "" if seed is None else f" (random schedule, seed {seed})"
        want = case.ref(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
        _compare(got, want, case, "output" + where)
        declared = [(case.jit.__name__, c.signature, {k: repr(v) for k, v in c.constexprs.items()})
                    for c in case.compiles]
        assert seen, f"{case.name}: the simulator saw no launch"
        for launch in seen:
            assert launch in declared, (f"{case.name}: launched as {launch}, which is none of its declared "
                                        f"compiles {declared}: fix the case's `compiles`")


def check_npu_compile(case, tools=None):
    """Compiles every declared launch of the case; returns the outcomes (verdicts), asserting each is
    the expected one.  Raises ToolsMissing where the compilers are not here."""
    from triton_dist.backend_ascend import cache, pipeline
    from triton_dist.backend_ascend.extension_ops import CannotLower
    tools = tools or _tools()
    if tools.missing:
        raise pipeline.ToolsMissing("the NPU compilers are not here: " + "; ".join(tools.missing))
    outcomes = []
    for c in case.compiles:
        if c.expect == "cannot lower":
            with pytest.raises(CannotLower) as e:
                pipeline.compile_kernel(case.jit, c.signature, c.constexprs, cache=cache.Cache(), tools=tools)
            outcomes.append(("cannot lower", str(e.value).splitlines()[0]))
            continue
        out = pipeline.compile_kernel(case.jit, c.signature, c.constexprs, cache=cache.Cache(), tools=tools)
        if c.expect == "accepted":
            assert out.accepted, out.report()
        else:
            assert not out.accepted, f"{case.name} {c.constexprs}: accepted, expected the compiler's '{c.expect}'"
            assert any(c.expect in e for e in out.errors), out.report()
        outcomes.append((out.status, (out.errors or [""])[0]))
    return outcomes


BLOCK_POINTERS_GONE = r"block pointers \(tl.make_block_ptr, tl.advance\) were removed from stock triton in 3.9"


def _without_block_pointers(case) -> bool:
    """A block-pointer kernel on a triton line that removed them: there the refusal naming the lines
    that have them is the outcome (triton_dist/language/block_pointers.py)."""
    from triton_dist.language import block_pointers
    return case.block_pointers and block_pointers.removed()


@pytest.mark.parametrize("case", _params("test_matches_torch"))
def test_matches_torch(case, backend):
    if _without_block_pointers(case):
        with pytest.raises(triton_dist.RankError, match=BLOCK_POINTERS_GONE):
            run_on_simulator(case, backend=backend)
        return
    differs = expected_difference(case, backend)
    if differs is None or differs.kind == "reports the fault":
        check_on_simulator(case, backend)
        return
    try:
        check_on_simulator(case, backend)
    except (triton_dist.RankError, AssertionError) as e:
        assert re.search(differs.shows, str(e), re.S), (
            f"{case.name} on {backend}: expected its declared {differs.kind} (a report matching /{differs.shows}/), "
            f"got another outcome:\n{e}")
        pytest.xfail(f"{differs.kind}: {differs.why}")
    declared = case.on_backend.get(backend)
    where = (f"on_backend[{backend!r}] of the case in tests/ascend_corpus/{case.family}.py" if declared else
             f"the refused Compile.expect of the case in tests/ascend_corpus/{case.family}.py (test_npu_compile "
             f"says whether the compilers still refuse it)")
    pytest.fail(f"{case.name} now matches torch on {backend!r}: its declared {differs.kind} ({differs.why}) is gone; "
                f"remove {where}")


def test_a_declared_difference_is_checked_both_ways(monkeypatch):
    """on_backend on both sides, on the simulator: a declared difference that shows is an xfail with its
    reason; another outcome is a failure naming both; a difference that is gone is a failure naming
    the declaration to remove (the strict xfail)."""
    case = BY_NAME["axpy_masked_tail"]
    monkeypatch.setattr(case, "on_backend", {"sim": Differs("model difference", "differs from torch", "planted")})
    monkeypatch.setattr(case, "ref", lambda x, y: x + y)          # not what the kernel computes (0.5 x + y)
    with pytest.raises(pytest.xfail.Exception, match="model difference: planted"):
        test_matches_torch(case, "sim")
    monkeypatch.setattr(case, "on_backend", {"sim": Differs("backend gap", "a sync_block form", "planted")})
    with pytest.raises(AssertionError, match=r"axpy_masked_tail on sim: expected its declared backend gap .* got "
                                             r"another outcome:\s+axpy_masked_tail output differs from torch"):
        test_matches_torch(case, "sim")
    monkeypatch.undo()
    monkeypatch.setattr(case, "on_backend", {"sim": Differs("backend gap", "a sync_block form", "planted")})
    with pytest.raises(pytest.fail.Exception, match=r"now matches torch on 'sim'.* remove on_backend\['sim'\] of the "
                                                    r"case in tests/ascend_corpus/elementwise.py"):
        test_matches_torch(case, "sim")


def test_the_backend_declarations_fit_their_cases():
    """Each on_backend names a registered backend; 'reports the fault' only where the simulator reports one
    (sim_error): elsewhere the case must match torch; a compile declared refused is not declared twice."""
    from triton_dist import registry
    names = registry.backend_names()
    for c in CASES:
        for backend, d in c.on_backend.items():
            assert backend in names, f"{c.name}: on_backend names {backend!r}, not a backend ({names})"
            assert d.kind != "reports the fault" or c.sim_error, f"{c.name}: 'reports the fault' without sim_error"
            refused = [k.expect for k in c.compiles if k.expect != "accepted"]
            assert not (refused and backend in COMPILED_BACKENDS), (
                f"{c.name}: its compile is declared refused ({refused}), which already says what {backend} does")


def _tools():
    from triton_dist.backend_ascend import toolchain
    return toolchain.find()


def _triton_ascend_doubles() -> bool:
    """triton-ascend's main line as the test doubles of tests/doubles/triton_ascend_main (Python modules
    over stock 3.5.1): its extension ops, cast(overflow_mode=) and extension.parallel are traced there by
    triton-ascend's own builder and code generator, whose C++ parts the doubles do not have."""
    import triton
    from triton_dist.sim import interp
    return "triton-ascend" in interp.API.line and not hasattr(triton._C.libtriton, "ascend")


@pytest.mark.parametrize("case", _params("test_npu_compile"))
def test_npu_compile(case):
    tools = _tools()
    if tools.missing:
        pytest.skip("the NPU compilers are not here: " + "; ".join(tools.missing))
    if _triton_ascend_doubles():
        pytest.skip("triton-ascend's main line as test doubles: its compile path (C++ builder methods such as "
                    "create_sort, its code generator) is not there (tests/doubles/triton_ascend_main/README.md); "
                    "the corpus's verdicts are measured on stock triton")
    if _without_block_pointers(case):
        from triton_dist.backend_ascend import pipeline
        with pytest.raises(triton_dist.TritonDistError, match=BLOCK_POINTERS_GONE):
            pipeline.compile_kernel(case.jit, case.compiles[0].signature, case.compiles[0].constexprs)
        return
    check_npu_compile(case, tools)


def test_the_corpus_is_big_enough_and_names_its_styles():
    """At least 30 kernels; every kernel has, right above its decorators, the comment naming the public
    kernel whose style it follows (the case's `style`)."""
    kernels = {id(c.jit) for c in CASES}
    assert len(kernels) >= 30, f"{len(kernels)} distinct kernels"
    for c in CASES:
        fn = c.jit.fn
        lines, first = inspect.getsourcelines(fn)
        module_lines = inspect.getsource(inspect.getmodule(fn)).splitlines()
        k = first - 1                       # 0-based index of the first decorator
        while k > 0 and not module_lines[k].startswith("@triton.autotune") and module_lines[k - 1].startswith("@"):
            k -= 1
        above = []
        while k > 0 and module_lines[k - 1].startswith("#"):
            above.insert(0, module_lines[k - 1])
            k -= 1
        repo, path = c.style.split(": ")
        assert above and above[0].startswith(f"# style: {repo} {path}"), \
            f"{c.name}: the comment above {fn.__name__} should begin '# style: {repo} {path}', found {above}"


def test_the_readme_table_lists_every_case():
    """docs/corpus.md's table is scripts/corpus_table.py's output: a case added or renamed since it was
    measured makes this fail until the script is run again."""
    import os
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "corpus.md")).read()
    table = readme.split("<!-- corpus:begin -->", 1)[1].split("<!-- corpus:end -->", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", table, re.M)
    assert listed == [c.name for c in CASES], ("docs/corpus.md's table is not the corpus's: run "
                                               ".venv/bin/python scripts/corpus_table.py --docs")


def test_the_table_script_reports_what_it_measures(monkeypatch):
    """scripts/corpus_table.py: a case as expected reads 'matches torch' / 'accepted' (and 'matches torch' on
    hivm where it runs); the same case with a wrong oracle, or declared to be refused, is marked unexpected,
    and a wrong result declared as a hivm difference reads as declared (both sides of each check)."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    import corpus_table
    from triton_dist.backend_ascend import toolchain
    case = BY_NAME["axpy_masked_tail"]
    assert corpus_table.simulator_cell(case) == "matches torch"
    from triton_dist import registry
    hivm = not registry.backend_class("hivm").missing()
    if hivm:
        assert corpus_table.hivm_cell(case) == "matches torch"
    tools = toolchain.find()
    if not tools.missing:
        assert corpus_table.compile_cell(case, tools) == "accepted"
        declared_refused = [dataclasses.replace(c, expect="ub overflow") for c in case.compiles]
        monkeypatch.setattr(case, "compiles", declared_refused)
        assert corpus_table.compile_cell(case, tools) == "**unexpected**: accepted"
        if hivm:        # a refused compile leaves hivm nothing to run: the case ran, unexpectedly
            assert corpus_table.hivm_cell(case) == "**unexpected**: matches torch (declared: model difference)"
    monkeypatch.setattr(case, "ref", lambda x, y: x + y)          # not what the kernel computes (0.5 x + y)
    assert corpus_table.simulator_cell(case) == "**unexpected**: differs from torch"
    if hivm:
        assert corpus_table.hivm_cell(case) == "**unexpected**: differs from torch"
        monkeypatch.setattr(case, "on_backend", {"hivm": Differs("model difference", "differs from torch", "planted")})
        assert corpus_table.hivm_cell(case) == "model difference, as declared: differs from torch"
