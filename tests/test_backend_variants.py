"""The kernel mode per launch, and differential testing across backends (issue 23).

One @triton.jit object runs interpreted on the simulator and compiled for a GPU in one
process and one pytest session.  Without a GPU, the compiled side is "sm90"
(tests/twin_backends.py), a backend registered as a real distribution whose ranks compile
every kernel they launch with stock Triton for sm_90 on the CPU, linking backend cuda's
device library, as tests/test_cuda_lowering.py compiles.  Oracles: torch (what the
simulator computed), Triton's own compiler output (TTIR symbols, PTX instructions), pytest's
outcome counts, and for the comparisons differences constructed on purpose.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch
from triton.runtime.jit import JITFunction

import triton_dist
from triton_dist import registry, testing
from triton_dist.testing import BackendsDisagree, compare

pytest.importorskip("llvmlite", reason="backend 'cuda' assembles its device library with llvmlite")

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
ENTRY_POINTS = ("[triton_dist.backends]\nsm90 = twin_backends:Sm90CompileBackend\n"
                "simtwin = twin_backends:SimTwinBackend\n")


def _install(where: pathlib.Path) -> pathlib.Path:
    info = where / "twin_backends-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: twin-backends\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return where


@pytest.fixture
def twins(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.syspath_prepend(str(_install(tmp_path)))
    registry.refresh()
    import twin_backends
    yield twin_backends
    registry.refresh()


def _symbols(ttir):
    import re
    return set(re.findall(r'symbol = "([\w.]+)"', ttir))


def check_compiled(result, world_size, symbols):
    """What an sm90 launch compiled: every rank compiled the kernel for sm_90, calling the
    device library's aclshmem symbols, and interpreted nothing."""
    assert len(result.compiled) == world_size
    for rank in result.compiled:
        assert rank["interpreted"] == [], rank["interpreted"]
        assert [k["kernel"] for k in rank["kernels"]] == ["ring_kernel"]
        k = rank["kernels"][0]
        assert (k["backend"], k["arch"]) == ("cuda", 90)
        assert symbols <= _symbols(k["ttir"]), _symbols(k["ttir"])
        assert "triton_dist.dist" not in k["ttir"]                  # no Ascend carriers
        ptx = k["ptx"]
        assert ".target sm_90" in ptx
        assert ".global .align 8 .b8 triton_dist_state[" in ptx    # the device library's state
        assert ".extern .func" not in ptx                           # every call resolved by the library
        assert "st.release.sys.global" in ptx and "ld.acquire.sys.global" in ptx   # notify, wait


def test_one_kernel_object_is_interpreted_on_the_simulator_and_compiled_for_sm90(twins):
    kernel = twins.ring_kernel
    assert type(kernel) is JITFunction                  # what Triton made: no interpreter at definition
    sim = triton_dist.launch(twins.ring_body, world_size=2, backend="sim")
    for got, want in zip(sim.values, twins.ring_expected(2)):
        assert torch.equal(got, want)
    # in this process, outside any rank, a kernel runs as on one rank (issue 26 item 7); the
    # process holds the interpreter's patches and its lone rank from here on
    x, out = torch.arange(twins.N, dtype=torch.float32), torch.zeros(twins.N)
    twins.plain_kernel[(1,)](x, out, N=twins.N)
    assert torch.equal(out, x * 10 + x.sum() + 0 + 1)          # rank 0 of 1
    # ... and the same ring_kernel object still compiles, in ranks forked from this process, as
    # plain Triton compiles it
    compiled = triton_dist.launch(twins.ring_body, world_size=2, backend="sm90")
    check_compiled(compiled, 2, twins.RING_SYMBOLS)


def _library_for_sm90():
    from triton_dist import kernels
    x = torch.ones(64, 32, dtype=torch.bfloat16)
    kernels.all_gather(x)
    kernels.all_reduce(x, method="ring")
    kernels.ag_gemm(x, torch.ones(32, 48, dtype=torch.bfloat16))


def test_the_kernel_library_compiles_for_sm90_in_a_process_that_ran_it_on_the_simulator(twins):
    from triton_dist import kernels
    sim = triton_dist.launch(lambda: kernels.all_gather(torch.ones(4) * triton_dist.rank()).tolist(), world_size=2)
    assert sim.values == [[0.0] * 4 + [1.0] * 4] * 2
    res = triton_dist.launch(_library_for_sm90, world_size=1, backend="sm90")
    [rank] = res.compiled
    assert rank["interpreted"] == []
    got = {k["kernel"]: (k["arch"], _symbols(k["ttir"]), k["ptx"]) for k in rank["kernels"]}
    assert set(got) == {"_gather_kernel", "_ring_kernel", "_ag_gemm_kernel"}
    assert all(arch == 90 and ".extern .func" not in ptx for arch, _, ptx in got.values())
    assert {"aclshmem_bfloat16_putmem_signal", "aclshmem_wait_int32"} <= got["_gather_kernel"][1]
    assert {"aclshmem_ptr_bfloat16", "aclshmem_fence", "aclshmemx_signal_op"} <= got["_ring_kernel"][1]


VARIANTS = '''
import torch
import twin_backends as T

def test_ring(backend):
    import triton_dist
    res = triton_dist.launch(T.ring_body, world_size=2, backend=backend)
    if backend == "sim":
        assert all(torch.equal(g, w) for g, w in zip(res.values, T.ring_expected(2)))
    else:
        import test_backend_variants as V
        V.check_compiled(res, 2, T.RING_SYMBOLS)
'''


def _pytester_env(pytester, monkeypatch):
    where = _install(pytester.path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(where), str(TESTS), str(ROOT),
                                                                   os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize("default", ["sim", "sm90"])
def test_one_session_runs_the_simulator_and_the_compiled_variant(pytester, monkeypatch, default):
    # TRITON_DIST_BACKEND names the default of launch() only: a session started for the compiled
    # backend runs the simulator's variants too (before, they were skipped: "this session compiles
    # kernels for 'cuda'; run the simulator tests in another session")
    _pytester_env(pytester, monkeypatch)
    monkeypatch.setenv("TRITON_DIST_BACKEND", default)
    pytester.makepyfile(test_variants=VARIANTS)
    r = pytester.runpytest_subprocess("--backend", "sim,sm90", "-v", "-rs", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=2)                  # neither variant skipped
    r.stdout.fnmatch_lines_random(["*test_ring?sim? PASSED*", "*test_ring?sm90? PASSED*"])


# ---- differential testing ------------------------------------------------------------------

def _library_ops():
    from triton_dist import kernels
    r = triton_dist.rank()
    g = torch.Generator().manual_seed(r)
    x = torch.randn(37, 5, generator=g).to(torch.bfloat16)
    return {"gather": kernels.all_gather(x), "sum": kernels.all_reduce(x.float()),
            "ring": kernels.all_reduce(x, method="ring"), "ints": torch.arange(4) * r}


def test_compare_agrees_where_two_backends_compute_the_same(twins):
    res = compare(_library_ops, world_size=2, backends=("sim", "simtwin"))
    sim = res.results["sim"].values
    # the library's collectives come back marked, so they were compared bit for bit
    assert all(getattr(v["gather"], testing.BIT_IDENTICAL, False) for v in sim)
    assert all(getattr(v["ring"], testing.BIT_IDENTICAL, False) for v in sim)
    want = torch.cat([torch.randn(37, 5, generator=torch.Generator().manual_seed(r)).to(torch.bfloat16)
                      for r in range(2)])
    assert torch.equal(sim[0]["gather"], want)


def _off_by_half_on_the_twin():
    out = torch.arange(10, dtype=torch.float32)
    if triton_dist.rank() == 1 and os.environ["TRITON_DIST_BACKEND"] == "simtwin":
        out[7] += 0.5
    return [torch.zeros(2), out]


def test_compare_reports_the_first_difference_with_rank_index_and_values(twins):
    with pytest.raises(BackendsDisagree) as ei:
        compare(_off_by_half_on_the_twin, world_size=2, backends=("sim", "simtwin"))
    e = ei.value
    assert (e.rank, e.path, e.index, e.values) == (1, "[1]", (7,), (7.0, 7.5))
    assert "rank 1, value [1], index (7,): sim 7.0 vs simtwin 7.5" in str(e)
    assert "rtol 1.3e-06, atol 1e-05 for float32; 1 of 10 elements differ" in str(e)


@pytest.mark.parametrize("dtype,within,beyond", [
    # torch.testing.assert_close's default tolerances (rtol, atol): bf16 1.6e-2/1e-5, fp16 1e-3/1e-5
    (torch.bfloat16, 1.0078125, 1.03125), (torch.float16, 1.0009765625, 1.0029296875)])
def test_default_tolerances_per_dtype_and_exact_marked_results(dtype, within, beyond):
    a = torch.ones(3, dtype=dtype)
    near, far = a.clone(), a.clone()
    near[1], far[2] = within, beyond
    assert testing.first_difference(a, near) is None
    assert testing.first_difference(a, far)[1] == (2,)
    # the same one-ulp difference in a result marked bit_identical is a difference
    diff = testing.first_difference(testing.bit_identical(a.clone()), near)
    assert diff[1] == (1,) and "bit for bit" in diff[4]
    # integers: exact
    assert testing.first_difference(torch.tensor([1, 2]), torch.tensor([1, 3]))[1:4] == ((1,), 2, 3)
    # explicit tolerances apply; keyed by dtype, only to that dtype
    assert testing.first_difference(a, far, rtol=0.1, atol=0.0) is None
    name = str(dtype).replace("torch.", "")
    assert testing.first_difference(a, far, rtol={name: 0.1}) is None
    assert testing.first_difference(a, far, rtol={dtype: 0.1}) is None
    assert testing.first_difference(a, far, rtol={"float64": 0.1})[1] == (2,)


COMPARED = '''
import os, torch, triton_dist
from triton_dist import kernels

def _gather():
    return kernels.all_gather(torch.arange(6, dtype=torch.float32).reshape(2, 3) + triton_dist.rank())

def _skewed():
    out = torch.arange(4, dtype=torch.float32)
    if os.environ["TRITON_DIST_BACKEND"] == "simtwin":
        out[3] = 3.25
    return out

def test_agrees(backend):
    res = triton_dist.launch(_gather, world_size=2, backend=backend)
    assert res.values[0].shape == (4, 3)

def test_disagrees(backend):
    triton_dist.launch(_skewed, world_size=2, backend=backend)

@__import__("pytest").mark.compare_tolerance(rtol={"float32": 0.1})
def test_agrees_within_its_tolerance(backend):
    triton_dist.launch(_skewed, world_size=2, backend=backend)

def test_launches_nothing(backend):
    pass

@__import__("pytest").mark.backend_specific("returns the name of its backend")
def test_names_its_backend(backend):
    assert triton_dist.launch(_name, world_size=1, backend=backend).values == [backend]

def _name():
    return os.environ["TRITON_DIST_BACKEND"]
'''


def test_pytest_compare_backends_compares_every_backend_test(pytester, monkeypatch):
    _pytester_env(pytester, monkeypatch)
    pytester.makepyfile(test_compared=COMPARED)
    r = pytester.runpytest_subprocess("--compare-backends", "sim,simtwin", "-v", "-rs", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=3, failed=1, skipped=1)
    r.stdout.fnmatch_lines_random([
        "*test_agrees?sim-vs-simtwin? PASSED*", "*test_names_its_backend?sim-vs-simtwin? PASSED*",
        "*test_agrees_within_its_tolerance?sim-vs-simtwin? PASSED*",
        "*BackendsDisagree: backends 'sim' and 'simtwin' disagree: rank 0, value (the whole value), index (3,): "
        "sim 3.0 vs simtwin 3.25*",
        "*nothing to compare: the test launched nothing on 'sim' that returned*"])


def test_compare_backends_is_refused_with_backend(pytester, monkeypatch):
    _pytester_env(pytester, monkeypatch)
    pytester.makepyfile(test_compared=COMPARED)
    r = pytester.runpytest_subprocess("--compare-backends", "sim,simtwin", "--backend", "sim")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--compare-backends runs each test on both of its backends; leave --backend out*"])


SCRIPT = '''
import os, sys, torch, triton_dist
from triton_dist import kernels

def main():
    out = kernels.all_gather(torch.full((2,), float(triton_dist.rank())))
    if SKEW and os.environ["TRITON_DIST_BACKEND"] == "simtwin" and triton_dist.rank() == 1:
        out[3] += 1
    return out

SKEW = len(sys.argv) > 1
sys.exit(triton_dist.main_or_launch(main, world_size=2))
'''


@pytest.mark.parametrize("skew,status,says", [
    ([], 0, "sim, simtwin agree on what the 2 ranks of compared.py returned"),
    (["skew"], 1, "backends 'sim' and 'simtwin' disagree: rank 1, value [0], index (3,): sim 1.0 vs simtwin 2.0 "
                  "(bit for bit: a result marked bit_identical; 1 of 4 elements differ)")])
def test_triton_dist_compare_runs_a_script_on_both(tmp_path, skew, status, says):
    script = tmp_path / "compared.py"
    script.write_text(SCRIPT)
    where = _install(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(where), str(TESTS), str(ROOT),
                                                                    os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "triton_dist.cli", "compare", "-n", "2", "--backends", "sim,simtwin",
                           str(script), *skew], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == status, proc.stderr[-3000:]
    assert says in proc.stderr, proc.stderr[-3000:]


def test_triton_dist_compare_refuses_a_script_that_returns_nothing(tmp_path, twins, capsys):
    from triton_dist.cli import main
    script = tmp_path / "silent.py"
    script.write_text("print('hello')\n")
    with pytest.raises(SystemExit) as ei:
        main(["compare", "-n", "2", "--backends", "sim,simtwin", str(script)])
    assert ei.value.code == 2
    assert "returned nothing to compare: end it with `sys.exit(triton_dist.main_or_launch(main))`" in \
        capsys.readouterr().err
