"""Issue 32, "Silent or crashing": no silent slice, comparisons that cannot crash, seeds
normalised once.  Each case is checked on both sides (refused / accepted) against an outside
oracle: numpy or torch for values, the range a schedule's seed has (an unsigned 64-bit word of
the shared schedule state) for seeds."""
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist  # noqa: F401  (the simulator's backend installs the extension module where none is)
from triton.language.extra.cann import extension as al  # noqa: E402
from triton_dist import registry, testing
from triton_dist.errors import TritonDistError
from triton_dist.sim.schedulers import explore
from triton_dist.testing import BackendsDisagree, compare


# --- seeds: one range, checked once, the member named is the member that ran ---------------------

def _member_that_ran():
    from triton_dist.sim import context
    return context.runtime().sched.member


@pytest.mark.parametrize("seed", [-1, -5, 1 << 64])
def test_a_seed_outside_64_bits_is_refused_by_launch(seed):
    with pytest.raises(TritonDistError, match=r"seed must be in 0\.\.2\*\*64-1"):
        triton_dist.launch(_member_that_ran, world_size=1, schedule="explore", seed=seed)


@pytest.mark.parametrize("seed", [0, 4, (1 << 64) - 1])
def test_a_seed_in_range_runs_the_member_it_names(seed):
    res = triton_dist.launch(_member_that_ran, world_size=1, schedule="explore", seed=seed)
    # the member explore names for the seed, by its rule: MEMBERS[seed % len(MEMBERS)]
    cls, _ = explore.MEMBERS[seed % len(explore.MEMBERS)]
    assert res.values[0].split("(")[0] == cls.name == explore.describe(seed).split("(")[0]


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "triton_dist.cli", *argv], capture_output=True, text=True,
                          timeout=300)


def test_cli_refuses_out_of_range_seeds_before_running(tmp_path, capsys):
    from triton_dist.cli import main
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    for argv, option in ((["replay", "-n", "1", str(script), "--seed", "-1"], "--seed"),
                         (["run", "-n", "1", "--schedule", "pct", "--seed", str(1 << 64), str(script)], "--seed"),
                         (["explore", "-n", "1", str(script), "--first-seed", str((1 << 64) - 2), "--seeds", "5"],
                          "--first-seed")):
        with pytest.raises(SystemExit) as ei:
            main(argv)
        err = capsys.readouterr().err
        assert ei.value.code == 2, (argv, err)
        assert option in err and "2**64-1" in err and "must not run" not in err, err
    # `python -m triton_dist.cli` too: one line and exit 2 (its __main__ copy had its own CliError)
    p = _cli("explore", "-n", "1", str(script), "--first-seed", "-5", "--seeds", "3")
    assert p.returncode == 2 and "--first-seed must be in 0..2**64-1" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr, p.stderr


# --- compare: every value type a launch returns; unknown tolerance keys refused --------------------


TESTS = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def simtwin(tmp_path, monkeypatch):
    """The simulator registered a second time as backend "simtwin" (tests/twin_backends.py), so
    compare has two backends that run on a machine without a GPU."""
    info = tmp_path / "twin_backends-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: twin-backends\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[triton_dist.backends]\nsimtwin = twin_backends:SimTwinBackend\n")
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.refresh()
    yield
    registry.refresh()


def _every_kind(skew=False):
    """What a launch may return: numpy arrays and scalars, Python floats with infinities and NaN,
    bools, None, strings, nested tuples/lists/dicts, torch tensors."""
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    if skew and os.environ["TRITON_DIST_BACKEND"] == "simtwin":
        arr[1, 2] = 7.5
    return {"arr": arr, "ints": np.arange(3, dtype=np.int64), "np_scalar": np.float32(0.25), "flag": np.bool_(True),
            "inf": math.inf, "ninf": -math.inf, "nan": math.nan, "t": torch.tensor([1.0, math.inf]),
            "nested": ([None, True, "s", 3], {"x": [np.ones(2)]})}


def test_compare_takes_every_value_type_a_launch_returns(simtwin):
    res = compare(_every_kind, world_size=1, backends=("sim", "simtwin"))
    assert res.results["sim"].values[0]["inf"] == math.inf
    # a difference inside a numpy array is found where numpy says the arrays differ
    with pytest.raises(BackendsDisagree) as ei:
        compare(_every_kind, True, world_size=1, backends=("sim", "simtwin"))
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(6, dtype=np.float32).reshape(2, 3)
    b[1, 2] = 7.5
    want = tuple(int(i) for i in np.argwhere(~np.isclose(a, b))[0])
    assert (ei.value.path, ei.value.index, ei.value.values) == ("['arr']", want, (a[want].item(), b[want].item()))


@pytest.mark.parametrize("a,b,same", [
    (math.inf, math.inf, True), (-math.inf, -math.inf, True), (math.nan, math.nan, True),
    (math.inf, -math.inf, False), (1.0, math.inf, False), (math.inf, 1e308, False),
    (np.array([math.inf, 1.0]), np.array([math.inf, 1.0]), True), (np.array([math.inf]), np.array([-math.inf]), False),
    (np.float16(1.0), np.float16(1.0), True), (np.array([1, 2]), np.array([1, 3]), False),
    ([np.zeros(2), None, False], [np.zeros(2), None, False], True), ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
    (True, 1, False), (np.array([1.0]), torch.tensor([1.0]), False)])
def test_first_difference_agrees_with_python_and_numpy(a, b, same):
    # the oracle: Python's == for scalars and containers (NaN counted equal), numpy's array_equal
    assert (testing.first_difference(a, b) is None) == same


def test_unknown_tolerance_keys_are_refused_before_launching(simtwin):
    for bad in ({"fp16": 1e-3}, {"float61": 1e-3}, {torch.int32: 1}, {"float32": -1.0}):
        with pytest.raises(TritonDistError) as ei:
            compare(_every_kind, world_size=1, backends=("sim", "simtwin"), rtol=bad)
        assert "float16" in str(ei.value) or "must be a number >= 0" in str(ei.value), str(ei.value)
        with pytest.raises(TritonDistError):       # the pytest plugin's and the CLI's path
            testing.check_values([1.0], [1.0], ("a", "b"), atol=bad)
    # the valid forms: a torch dtype, a numpy dtype, a name
    testing.check_values([np.float16(1.0)], [np.float16(1.0009765625)], ("a", "b"),
                         rtol={torch.float16: 1e-3, np.float32: 1e-6, "bfloat16": 1e-2})
    with pytest.raises(BackendsDisagree):
        testing.check_values([np.float16(1.0)], [np.float16(1.0029296875)], ("a", "b"), rtol={"float16": 1e-3})


# --- slices and element reads: in bounds as numpy says, out of bounds refused with the line -------


@triton.jit
def slice_1d(x, out, OFF: tl.constexpr, SIZE: tl.constexpr, STRIDE: tl.constexpr):
    v = tl.load(x + tl.arange(0, 8))
    tl.store(out + tl.arange(0, SIZE), al.extract_slice(v, (OFF,), (SIZE,), (STRIDE,)))


@triton.jit
def element_1d(x, out, I: tl.constexpr):
    v = tl.load(x + tl.arange(0, 8))
    tl.store(out, al.get_element(v, (I,)))


@triton.jit
def insert_2d(x, out, R: tl.constexpr, C: tl.constexpr, SR: tl.constexpr, SC: tl.constexpr):
    full = tl.zeros((4, 4), tl.float32)
    sub = tl.load(x + tl.arange(0, SR)[:, None] * SC + tl.arange(0, SC)[None, :]) + 1
    res = al.insert_slice(full, sub, (R, C), (SR, SC), (1, 1))
    tl.store(out + tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :], res)


def _launch_slice(kernel, n_out, **meta):
    def body():
        x, out = torch.arange(16, dtype=torch.float32), torch.full((n_out,), -1.0)
        kernel[(1,)](x, out, **meta)
        return out.numpy()
    return triton_dist.launch(body, world_size=1, backend="sim").values[0]


X = np.arange(16, dtype=np.float32)
# the simulator's extension (stock triton), or triton-ascend's own (its main line: the test double
# of scripts/triton_ascend_double.sh, whose interpreter and frontend serve the value ops)
OURS = getattr(sys.modules["triton.language.extra.cann"], "__triton_dist_sim__", False)


@pytest.mark.parametrize("off,size,stride", [(4, 4, 1), (0, 8, 1), (1, 4, 2), (3, 4, 0), (7, 1, 1)])
def test_an_in_bounds_slice_is_numpy_s(off, size, stride):
    if stride == 0 and not OURS:
        pytest.skip("triton-ascend's own interpreter slices with a numpy slice, which cannot take a step of 0")
    got = _launch_slice(slice_1d, size, OFF=off, SIZE=size, STRIDE=stride)
    np.testing.assert_array_equal(got, X[:8][off + np.arange(size) * stride])


@pytest.mark.parametrize("off,size,stride,taken", [(6, 4, 1, "6..9"), (0, 4, 3, "0..9"), (8, 1, 1, "8..8")])
def test_an_out_of_bounds_slice_is_refused_with_the_kernel_line(off, size, stride, taken):
    with pytest.raises(triton_dist.RankError) as ei:
        _launch_slice(slice_1d, size, OFF=off, SIZE=size, STRIDE=stride)
    msg = str(ei.value)
    line = slice_1d.fn.__code__.co_firstlineno + 3
    assert f"test_trust_round4_silent.py:{line} (slice_1d): extract_slice" in msg, msg
    assert f"take elements {taken}" in msg and "0..7" in msg and "undefined" in msg, msg


@pytest.mark.parametrize("i,ok", [(0, True), (7, True), (-1, False), (8, False)])
def test_get_element_reads_inside_the_tile_only(i, ok):
    if ok:
        assert _launch_slice(element_1d, 1, I=i)[0] == X[i]
        return
    with pytest.raises(triton_dist.RankError) as ei:
        _launch_slice(element_1d, 1, I=i)
    line = element_1d.fn.__code__.co_firstlineno + 3
    assert f"test_trust_round4_silent.py:{line} (element_1d): get_element: index {i}" in str(ei.value), str(ei.value)


@pytest.mark.parametrize("r,c,sr,sc,ok", [(2, 1, 2, 3, True), (0, 0, 4, 4, True), (3, 2, 2, 2, False),
                                          (0, 3, 1, 2, False)])
def test_insert_slice_writes_inside_the_tile_only(r, c, sr, sc, ok):
    if not ok:
        with pytest.raises(triton_dist.RankError, match=r"insert_slice: dimension \d of the \[4, 4\] tile"):
            _launch_slice(insert_2d, 16, R=r, C=c, SR=sr, SC=sc)
        return
    want = np.zeros((4, 4), np.float32)
    want[r:r + sr, c:c + sc] = X[:sr * sc].reshape(sr, sc) + 1
    np.testing.assert_array_equal(_launch_slice(insert_2d, 16, R=r, C=c, SR=sr, SC=sc).reshape(4, 4), want)


# --- triton-ascend's tensor-method forms of the extension ops ---------------------------------------

@triton.jit
def methods(x, y, out):
    v = tl.load(x + tl.arange(0, 8))
    w = tl.load(y + tl.arange(0, 8))
    tl.store(out + tl.arange(0, 4), v.extract_slice((2,), (4,), (1,)))
    tl.store(out + 4, v.get_element((5,)))
    tl.store(out + 8 + tl.arange(0, 8), v.insert_slice(w.extract_slice((0,), (2,), (1,)), (6,), (2,), (1,)))
    tl.store(out + 16 + tl.arange(0, 8), v.atan2(w))
    tl.store(out + 24 + tl.arange(0, 8), (v / w).isfinited().to(tl.float32))


@triton.jit
def method_out_of_bounds(x, out):
    v = tl.load(x + tl.arange(0, 8))
    tl.store(out, v.get_element((-1,)))


MEMBERS_ATTACHED = pytest.mark.skipif(not OURS and not hasattr(tl.tensor, "get_element"), reason=(
    "triton-ascend's own extension serves here and does not attach the methods (the test double "
    "leaves _tensor_member_fn out; triton-ascend itself attaches them)"))


@MEMBERS_ATTACHED
def test_extension_ops_as_tensor_methods_on_the_simulator():
    x = np.arange(8, dtype=np.float32) - 3
    y = np.array([1, 2, 0, -1, 0.5, 0, 3, 4], np.float32)

    def body():
        out = torch.zeros(32)
        methods[(1,)](torch.from_numpy(x), torch.from_numpy(y), out)
        return out.numpy()
    got = triton_dist.launch(body, world_size=1, backend="sim").values[0]
    ins = x.copy()
    ins[6:8] = y[0:2]
    with np.errstate(divide="ignore", invalid="ignore"):
        finite = np.isfinite(x / y).astype(np.float32)
    np.testing.assert_array_equal(got[:4], x[2:6])
    assert got[4] == x[5]
    np.testing.assert_array_equal(got[8:16], ins)
    np.testing.assert_allclose(got[16:24], np.arctan2(x, y), rtol=1e-6)
    np.testing.assert_array_equal(got[24:32], finite)
    # the method form is bounds-checked as the function is
    with pytest.raises(triton_dist.RankError, match=r"\(method_out_of_bounds\): get_element: index -1"):
        triton_dist.launch(lambda: method_out_of_bounds[(1,)](torch.zeros(8), torch.zeros(1)), world_size=1,
                           backend="sim")


@MEMBERS_ATTACHED
def test_every_member_triton_ascend_attaches_is_a_tensor_method():
    from triton_dist.sim.compat import cann
    # triton-ascend a84b1eb5's @_tensor_member_fn functions of the extension (vec_ops, mem_ops,
    # math_ops, aux_ops), read from its source; cast comes from sim/compat/ascend_cast.py
    ascend = {"insert_slice", "extract_slice", "get_element", "cast", "index_put", "gather_out_to_ub",
              "scatter_ub_to_out", "index_select_simd", "atan2", "isfinited", "finitef", "sync_block_all",
              "sync_block_set", "sync_block_wait"}
    assert set(cann.TENSOR_MEMBERS) | {"cast"} == ascend
    assert all(callable(getattr(tl.tensor, n, None)) for n in ascend)


@triton.jit
def slice_methods(x, y, out):
    v = tl.load(x + tl.arange(0, 8))
    w = tl.load(y + tl.arange(0, 8))
    tl.store(out + tl.arange(0, 4), v.extract_slice((2,), (4,), (1,)))
    tl.store(out + 4, v.get_element((5,)))
    tl.store(out + 8 + tl.arange(0, 8), v.insert_slice(w.extract_slice((0,), (2,), (1,)), (6,), (2,), (1,)))


@MEMBERS_ATTACHED
def test_tensor_methods_trace_for_the_npu(tmp_path):
    from triton_dist.backend_ascend import cache, pipeline, toolchain
    tools = toolchain.find()
    if tools.missing:
        pytest.skip("; ".join(tools.missing))
    out = pipeline.compile_kernel(slice_methods, {"x": "*fp32", "y": "*fp32", "out": "*fp32"}, {},
                                  cache=cache.Cache(str(tmp_path)), tools=tools)
    assert out.accepted, out.report()


@triton.jit
def atan2_kernel(x, out):
    v = tl.load(x + tl.arange(0, 8))
    tl.store(out + tl.arange(0, 8), al.atan2(v, v + 1))


@pytest.mark.skipif(not OURS, reason="triton-ascend's own extension traces here")
def test_a_values_only_op_traced_for_the_npu_says_so():
    from triton_dist.backend_ascend import frontend
    with pytest.raises(TritonDistError, match=r"extension\.atan2 has no device lowering in triton_dist"):
        frontend.build_ttir(atan2_kernel, {"x": "*fp32", "out": "*fp32"}, {})


# --- the same class elsewhere: tl.gather (stock Triton's interpreter wraps -1 to the last element) --

@triton.jit
def gather_1d(x, idx, out):
    v = tl.load(x + tl.arange(0, 8))
    i = tl.load(idx + tl.arange(0, 4))
    tl.store(out + tl.arange(0, 4), tl.gather(v, i, 0))


@pytest.mark.parametrize("index,ok", [([0, 7, 2, 3], True), ([0, -1, 2, 3], False), ([0, 1, 8, 3], False)])
def test_tl_gather_reads_inside_the_axis_only(index, ok):
    def body():
        out = torch.zeros(4)
        gather_1d[(1,)](torch.from_numpy(X[:8].copy()), torch.tensor(index, dtype=torch.int32), out)
        return out.numpy()
    if ok:
        np.testing.assert_array_equal(triton_dist.launch(body, world_size=1).values[0], X[:8][index])
        return
    with pytest.raises(triton_dist.RankError) as ei:
        triton_dist.launch(body, world_size=1)
    bad = [i for i in index if not 0 <= i < 8][0]
    line = gather_1d.fn.__code__.co_firstlineno + 4
    assert f"test_trust_round4_silent.py:{line} (gather_1d): tl.gather: index {bad} " in str(ei.value), str(ei.value)


@triton.jit
def insert_mismatched(x, out):
    full = tl.zeros((4, 4), tl.float32)
    sub = tl.load(x + tl.arange(0, 2)[None, :])             # a [1, 2] tile
    res = al.insert_slice(full, sub, (0, 0), (2, 2), (1, 1))  # sizes say [2, 2]
    tl.store(out + tl.arange(0, 4)[:, None] * 4 + tl.arange(0, 4)[None, :], res)


def test_insert_slice_of_a_tile_other_than_its_sizes_is_refused():
    # numpy would broadcast the [1, 2] tile into both rows of the [2, 2] slice
    with pytest.raises(triton_dist.RankError, match=r"insert_slice: the inserted tile is \[1, 2\], the sizes say "
                                                    r"\[2, 2\]"):
        _launch_slice(insert_mismatched, 16)


@pytest.mark.skipif(not OURS, reason="triton-ascend's own extension traces here")
def test_insert_slice_of_a_tile_other_than_its_sizes_is_refused_in_the_npu_trace():
    # the adapter's verifier would refuse it ("expected type to be 'tensor<2x2xf32>' or a rank-reduced
    # version. (size mismatch)"), which npu-compile reported as a gap between Triton releases
    from triton.compiler.errors import CompilationError
    from triton_dist.backend_ascend import frontend
    with pytest.raises((TritonDistError, CompilationError), match=r"insert_slice: the inserted tile is \[1, 2\]"):
        frontend.build_ttir(insert_mismatched, {"x": "*fp32", "out": "*fp32"}, {})


TOLERANCES = '''
import os, pytest, torch, triton_dist

def _skewed():
    out = torch.arange(4, dtype=torch.float32)
    if os.environ["TRITON_DIST_BACKEND"] == "simtwin":
        out[3] = 3.25
    return out

@pytest.mark.compare_tolerance(rtol={"fp32": 0.1})
def test_misspelt_dtype(backend):
    triton_dist.launch(_skewed, world_size=1, backend=backend)

@pytest.mark.compare_tolerance(rtl=0.1)
def test_misspelt_argument(backend):
    triton_dist.launch(_skewed, world_size=1, backend=backend)
'''


def test_compare_backends_refuses_a_tolerance_marker_it_would_ignore(pytester, simtwin):
    pytester.makepyfile(test_tolerances=TOLERANCES)
    r = pytester.runpytest_inprocess("--compare-backends", "sim,simtwin", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=2)      # (a valid marker: tests/test_backend_variants.py's COMPARED)
    r.stdout.fnmatch_lines_random([
        "*compare_tolerance: rtol has the key 'fp32', which names no floating dtype*float32*",
        "*compare_tolerance takes rtol= and atol= only*got rtl*"])


def test_triton_dist_compare_refuses_a_negative_tolerance_before_running(simtwin, tmp_path, capsys):
    from triton_dist.cli import main
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    with pytest.raises(SystemExit) as ei:
        main(["compare", "-n", "1", "--backends", "sim,simtwin", "--rtol", "-0.1", str(script)])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and "rtol must be a number >= 0, got -0.1" in err and "must not run" not in err, err


def test_pytest_refuses_an_out_of_range_sim_seed_at_the_start(pytester):
    pytester.makepyfile(test_nothing="def test_x():\n    pass\n")
    for argv in (["--sim-seed", "-1"], ["--sim-schedule", "pct", "--sim-seed", str((1 << 64) - 2), "--sim-seeds", "4"]):
        r = pytester.runpytest_inprocess(*argv, "-p", "no:cacheprovider")
        assert r.ret == pytest.ExitCode.USAGE_ERROR, (argv, r.stdout.str())
        assert "2**64-1" in r.stderr.str() + r.stdout.str()
    assert pytester.runpytest_inprocess("--sim-seed", "5", "-p", "no:cacheprovider").ret == pytest.ExitCode.OK
