"""Performance cliffs as a report (issue 34 item 6; backend_ascend/lint.py, `npu-compile --lint`).

Oracle: what the real compilers (triton-adapter-opt 3.2.0, bishengir-compile 1.2.0, Ascend910B4)
made of each kernel: a scalar scf.for in the module after convert-hivm-to-std, a UB buffer with
its tail axis rounded up to 32 bytes; and the launcher's own grid warning against the chip's
vector cores (AscendNPU-IR's NPUTargetSpec.td: 40 on a 910B4).  Both sides: a clean kernel has
no lint line; each cliff's twin has its line with the fix.  Skipped where the tools are missing.
"""
import os
import tempfile

import pytest
import triton
import triton.language as tl

from triton_dist.backend_ascend import lint, toolchain
from triton_dist.cli import main

TOOLS = toolchain.find()
pytestmark = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
HERE = os.path.abspath(__file__)


@triton.jit
def add(x, y, out, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o) + tl.load(y + o))


@triton.jit
def smaller(x, y, out, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    a = tl.load(x + o)
    b = tl.load(y + o)
    tl.store(out + o, tl.where(a < b, a, b))


@triton.jit
def scan(x, out, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.cumsum(tl.load(x + o), 0))


@triton.jit
def rows(x, out, stride, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    tl.store(out + r * C + c, tl.load(x + r * stride + c) * 2)


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def tuned_add(x, y, out, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o) + tl.load(y + o))


def _sig(t, *names):
    return {n: f"*{t}" for n in names}


_STAGES = {}


def _lint(kernel, sig, consts, grid=None):
    """The findings for one compile (each compiled once per session: the grid is judged apart)."""
    key = (kernel.fn.__name__, tuple(sig.items()), tuple(consts.items()))
    if key not in _STAGES:
        with tempfile.TemporaryDirectory() as keep:
            out, _ = lint.lint_kernel(kernel, sig, consts, keep=keep)
            assert out.accepted, out.report()
            _STAGES[key] = lint.read_stages(keep)
    ttir, final = _STAGES[key]
    return {f.kind: f for f in lint.from_stages(ttir, final, grid, "Ascend910B4")}


def test_grid_over_the_cores_is_reported_a_grid_within_them_is_not():
    sig = _sig("fp32", "x", "y", "out")
    assert _lint(add, sig, {"BLOCK": 1024}, grid=(40,)) == {}
    f = _lint(add, sig, {"BLOCK": 1024}, grid=(64, 64))["grid"]
    assert "'WARNING: Grid 4096 > physical limit 40, performance maybe reduced.'" in f.text, f.line()
    assert "103 rounds" in f.text and "launch 40 blocks" in f.fix and "driver.py" in f.source


def test_int64_add_is_a_scalar_loop_fp32_and_int32_are_vector():
    assert _lint(add, _sig("fp32", "x", "y", "out"), {"BLOCK": 1024}) == {}
    assert _lint(add, _sig("i32", "x", "y", "out"), {"BLOCK": 1024}) == {}
    f = _lint(add, _sig("i64", "x", "y", "out"), {"BLOCK": 1024})["scalar"]
    assert "arith.addi on i64 in a scalar loop (1024 iterations" in f.text, f.line()
    assert "int32" in f.fix and "performance_guidelines.md" in f.source


def test_int64_compare_is_a_scalar_loop_int32_is_vector():
    # measured: bishengir-compile 1.2.0 vectorises the int32 compare (vcmp) the docs list as scalar
    assert _lint(smaller, _sig("i32", "x", "y", "out"), {"BLOCK": 1024}) == {}
    f = _lint(smaller, _sig("i64", "x", "y", "out"), {"BLOCK": 1024})["scalar"]
    assert "arith.cmpi on i64 in a scalar loop" in f.text and "float32" in f.fix, f.line()


def test_a_scan_is_a_scalar_loop_of_a_vector_dtype_with_its_own_words():
    f = _lint(scan, _sig("fp32", "x", "out"), {"BLOCK": 256})["scalar"]
    assert "arith.addf on f32 in a scalar loop (255 iterations" in f.text, f.line()
    assert "no vector form for this op" in f.text and "int32" not in f.fix and "inferred" in f.source, f.line()


def test_a_narrow_tail_axis_padded_in_ub_is_reported_a_32_byte_one_is_not():
    sig = {"x": "*fp32", "out": "*fp32", "stride": "i32"}
    assert _lint(rows, sig, {"R": 256, "C": 8}) == {}
    f = _lint(rows, sig, {"R": 256, "C": 2})["padding"]
    assert "tensor<256x2xf32>'s tail axis is 8 bytes" in f.text and "as 256x8 (4x its bytes" in f.text, f.line()
    assert "programming_guide.md" in f.source


def _cli(capsys, *args, kernel="add", sig="x=*i64,y=*i64,out=*i64", consts=("-c", "BLOCK=1024")):
    rc = main(["npu-compile", f"{HERE}::{kernel}", "-s", sig, *consts, *args])
    return rc, capsys.readouterr().out


def test_cli_lint_is_silent_unless_asked(capsys):
    rc, out = _cli(capsys)
    assert rc == 0 and "lint" not in out, out
    rc, out = _cli(capsys, "--lint", "--grid", "4096")
    assert rc == 0, out         # a report, not an error: the verdict is the compilers'
    assert "lint: kernel add: 2 performance finding(s)" in out, out
    assert "  grid: grid (4096,)" in out and "  scalar: the compiled module computes arith.addi on i64" in out, out


def test_cli_lints_each_config_of_an_autotuned_kernel(capsys):
    rc, out = _cli(capsys, "--lint", kernel="tuned_add", sig="x=*i64,y=*i64,out=*i64,n=i32", consts=())
    assert rc == 0, out
    assert "computes arith.addi on i64 in a scalar loop (256 iterations" in out, out
    assert "computes arith.addi on i64 in a scalar loop (1024 iterations" in out, out


def test_cli_grid_without_lint_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["npu-compile", f"{HERE}::add", "-s", "x=*fp32,y=*fp32,out=*fp32", "-c", "BLOCK=16", "--grid", "8"])
    assert e.value.code == 2 and "--grid is judged by --lint only" in capsys.readouterr().err


# ---- pytest --npu-lint: the report in the session summary ------------------------------------------

LINTED_TESTS = '''
import torch
import triton
import triton.language as tl
import triton_dist


@triton.jit
def scale_rows(x, out, n, R: tl.constexpr):
    # each row of a (2048, 3) float32 tensor over its sum, R rows a program: the tile's tail axis is
    # 12 bytes, and the row sum keeps the tile 2-D (a plain copy would be collapsed to 1-D, not padded)
    r = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    c = tl.arange(0, 3)[None, :]
    m = r < n
    t = tl.load(x + r * 3 + c, mask=m, other=1.0)
    tl.store(out + r * 3 + c, t / tl.sum(t, 1)[:, None], mask=m)


@triton.jit
def add_flat(x, y, out, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o) + tl.load(y + o))


def test_rows():
    def body():
        x = torch.arange(1, 2048 * 3 + 1, dtype=torch.float32).reshape(2048, 3)
        out = torch.empty_like(x)
        scale_rows[(2048 // 8,)](x, out, 2048, R=8)
        torch.testing.assert_close(out, x / x.sum(1, keepdim=True))
    triton_dist.launch(body, world_size=1)


def test_flat():
    def body():
        x, y = torch.rand(1024), torch.rand(1024)
        out = torch.empty(1024)
        add_flat[(4,)](x, y, out, BLOCK=256)
        add_flat[(4,)](x, y, out, BLOCK=256)     # the same launch again: one line
        assert torch.equal(out, x + y)
    triton_dist.launch(body, world_size=1)
'''


@pytest.fixture
def _inner_session(pytester, monkeypatch):
    """A pytest session of its own (its own launch checks and logs, not this session's)."""
    root = os.path.dirname(os.path.dirname(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    for var in ("TRITON_DIST_LAUNCH_CHECKS", "TRITON_DIST_NPU_COMPILE_SOURCES", "TRITON_DIST_NPU_COMPILE_LOG",
                "TRITON_DIST_NPU_LINT_LOG", "TRITON_DIST_NPU_COMPILE_TARGET"):
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(test_linted=LINTED_TESTS)
    return pytester


def test_pytest_npu_lint_lists_each_kernels_cliffs_with_fixes_a_clean_kernel_has_none(_inner_session):
    r = _inner_session.runpytest_subprocess("--npu-lint", "-p", "no:cacheprovider")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.OK, out + r.stderr.str()        # a report, never a failure
    section = out.split("npu-lint: performance cliffs on the NPU", 1)[1]
    rows = [ln for ln in section.splitlines() if ln.startswith("kernel scale_rows")]
    assert len(rows) == 1 and "grid (256,) on Ascend910B4" in rows[0] and "R=8" in rows[0], section
    # the grid against the 40 vector cores of a 910B4 (the launcher's own warning), with its fix
    assert ("grid: grid (256,) is 256 blocks on 40 vector cores of Ascend910B4: the launcher prints "
            "'WARNING: Grid 256 > physical limit 40, performance maybe reduced.'") in section, section
    assert "Fix: launch 40 blocks and loop over the work inside the kernel" in section, section
    # the (2048, 3) tail: 12 bytes, padded to 32 in the compiled module's UB buffer
    tail = [ln for ln in section.splitlines() if "tensor<8x3xf32>" in ln]
    assert tail and "12 bytes, not a multiple of 32: the module keeps it in UB as 8x8" in tail[0], section
    assert "Fix: make the tail axis a multiple of 32 bytes" in tail[0] and "programming_guide.md" in tail[0], tail
    flat = [ln for ln in section.splitlines() if ln.startswith("kernel add_flat")]
    assert len(flat) == 1 and flat[0].endswith("grid (4,) on Ascend910B4: no findings"), section


def test_without_the_compilers_npu_lint_reports_what_the_ttir_shows_and_says_so(_inner_session, monkeypatch):
    monkeypatch.setenv("TRITON_DIST_BISHENGIR_COMPILE", "/nonexistent/bishengir-compile")
    r = _inner_session.runpytest_subprocess("--npu-lint", "-p", "no:cacheprovider")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.OK, out + r.stderr.str()
    section = out.split("npu-lint: performance cliffs on the NPU", 1)[1]
    assert "grid: grid (256,) is 256 blocks on 40 vector cores" in section, section
    assert ("align: tile tensor<8x3xf32> is loaded or stored with a tail axis of 12 bytes, not a multiple of 32 "
            "(vector operators)") in section, section
    assert "(the compiled module not examined: " in section and "/nonexistent/bishengir-compile" in section, section


def test_without_npu_lint_nothing_is_linted_or_printed(_inner_session):
    r = _inner_session.runpytest_subprocess("-p", "no:cacheprovider")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.OK, out + r.stderr.str()
    assert "npu-lint" not in out and "Fix:" not in out, out


# ---- the TTIR-level kinds (what the source asks for, read without the NPU compilers) -----------------

@triton.jit
def tile_mm(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)[:, None]
    n = tl.arange(0, N)[None, :]
    k = tl.arange(0, K)
    x = tl.load(a + m * K + k[None, :])
    y = tl.load(b + k[:, None] * N + n)
    tl.store(c + m * N + n, tl.dot(x, y))


def _ttir(kernel, sig, consts):
    from triton_dist.backend_ascend.frontend import build_ttir
    module, _ = build_ttir(kernel, sig, consts)
    return module.str_nodebug()


def test_int64_tile_add_and_compare_are_reported_from_the_ttir_int32_and_fp32_are_not():
    for t in ("fp32", "i32"):
        assert lint.int64_findings(_ttir(add, _sig(t, "x", "y", "out"), {"BLOCK": 64})) == []
        assert lint.int64_findings(_ttir(smaller, _sig(t, "x", "y", "out"), {"BLOCK": 64})) == []
    (f,) = lint.int64_findings(_ttir(add, _sig("i64", "x", "y", "out"), {"BLOCK": 64}))
    assert "arith.addi on tensor<64xi64>" in f.text and "scalar code" in f.text and "int32" in f.fix, f.line()
    (f,) = lint.int64_findings(_ttir(smaller, _sig("i64", "x", "y", "out"), {"BLOCK": 64}))
    assert "int64 compare" in f.text and "float32" in f.fix and "performance_guidelines.md" in f.source, f.line()


def test_a_cube_vector_kernel_needs_512_byte_tail_axes_a_vector_kernel_32():
    sig = {"x": "*fp32", "out": "*fp32", "stride": "i32"}
    assert lint.align_findings(_ttir(rows, sig, {"R": 16, "C": 16})) == []      # 64 bytes: a vector kernel's 32
    mm = {"a": "*fp32", "b": "*fp32", "c": "*fp32"}
    assert lint.align_findings(_ttir(tile_mm, mm, {"M": 16, "N": 128, "K": 128})) == []     # 512 bytes
    found = lint.align_findings(_ttir(tile_mm, mm, {"M": 16, "N": 16, "K": 16}))
    assert found and all("not a multiple of 512 (cube+vector" in f.text for f in found), [f.line() for f in found]
    assert "tensor<16x16xf32>" in found[0].text and "64 bytes" in found[0].text, found[0].line()


@triton.jit
def int64_offsets(x, out, n, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(x + o, mask=o < n), mask=o < n)


def test_the_compiled_module_decides_over_the_ttir_an_int64_offset_and_mask_is_no_finding():
    # the TTIR has an int64 add and compare of tiles; measured: the module has no scalar loop for them
    # (the compiler folds offsets and masks into the copies), so only what it shows is reported
    sig = {"x": "*fp32", "out": "*fp32", "n": "i64"}
    assert [f.kind for f in lint.int64_findings(_ttir(int64_offsets, sig, {"BLOCK": 1024}))] == ["int64", "int64"]
    assert _lint(int64_offsets, sig, {"BLOCK": 1024}) == {}
    # without a module (the compilers missing, or refusing) the TTIR's findings are the report
    ttir = _ttir(int64_offsets, sig, {"BLOCK": 1024})
    assert [f.kind for f in lint.from_stages(ttir, None)] == ["int64", "int64"]


@triton.jit
def row_norm(x, out, n, R: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    c = tl.arange(0, 3)[None, :]
    m = r < n
    t = tl.load(x + r * 3 + c, mask=m, other=1.0)
    tl.store(out + r * 3 + c, t / tl.sum(t, 1)[:, None], mask=m)


def test_npu_lint_judges_each_target_the_kernel_is_meant_for(monkeypatch):
    # measured: bishengir-compile 1.2.0 pads the (8, 3) fp32 tile to 8x8 in UB for Ascend910B4 and keeps it
    # 8x3 for Ascend950PR_9599 (bishengir-compile-a5); the A5 parts' core counts are not in the table
    import torch
    from triton_dist import kernel_launches
    from triton_dist.backend_ascend import lint_check
    x = torch.ones(2048, 3)
    launch = kernel_launches.Launch(row_norm.fn, {"x": x, "out": x, "n": 2048, "R": 8}, ("R",), (256,))
    found, note, *_ = lint_check.lint_launch(launch, "Ascend910B4")
    assert [f["kind"] for f in found] == ["grid", "padding", "padding"] and not note, (found, note)
    found, note, *_ = lint_check.lint_launch(launch, "Ascend950PR_9599")
    assert found == [] and "the grid not judged: Ascend950PR_9599's core count" in note, (found, note)
