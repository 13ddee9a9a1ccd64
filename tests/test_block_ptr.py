"""Block pointers (tl.make_block_ptr, tl.advance, boundary_check, padding_option) in the style of
triton-ascend's kernels (its fused-attention tutorial), on the simulator and through the real NPU
compilers; and the refusal on a stock triton without them (3.9), which names the lines that have them.

Oracles: torch for what the kernels compute; the real compilers' verdicts (triton-ascend 3.2.0's
triton-adapter-opt, AscendNPU-IR 1.2.0's bishengir-compile); the installed triton's own language
(which lines have tl.advance) for the refusal.
"""
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.backend_ascend import toolchain
from triton_dist.cli import main

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = toolchain.find()
needs_tools = pytest.mark.skipif(bool(TOOLS.missing), reason="; ".join(TOOLS.missing))
LINES = "stock triton 3.5 to 3.8"
# on a line without block pointers (3.9: the last test checks the refusal there) the kernels cannot run
from triton_dist.language import block_pointers  # noqa: E402
has_them = pytest.mark.skipif(block_pointers.removed(), reason=f"triton {triton.__version__} has no block pointers")


@triton.jit
def tiled_copy(x, y, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x, shape=(M, N), strides=(stride_m, 1), offsets=(pm * BM, pn * BN),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(y, shape=(M, N), strides=(stride_m, 1), offsets=(pm * BM, pn * BN),
                            block_shape=(BM, BN), order=(1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero") * 2, boundary_check=(0, 1))


# the padded tile is stored whole into a buffer of whole tiles: what lies past M x N is the padding
@triton.jit
def padded_tiles(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x, shape=(M, N), strides=(N, 1), offsets=(pm * BM, pn * BN), block_shape=(BM, BN),
                            order=(1, 0))
    tile = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    width = tl.num_programs(1) * BN
    rows = pm * BM + tl.arange(0, BM)
    cols = pn * BN + tl.arange(0, BN)
    tl.store(out + rows[:, None] * width + cols[None, :], tile + 1)


# one program per BLOCK_M rows of queries; K and V walked with tl.advance, online softmax
@triton.jit
def attention(q_ptr, k_ptr, v_ptr, o_ptr, seq, sm_scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    q_bp = tl.make_block_ptr(q_ptr, shape=(seq, D), strides=(D, 1), offsets=(start_m, 0), block_shape=(BLOCK_M, D),
                             order=(1, 0))
    kt_bp = tl.make_block_ptr(k_ptr, shape=(D, seq), strides=(1, D), offsets=(0, 0), block_shape=(D, BLOCK_N),
                              order=(0, 1))
    v_bp = tl.make_block_ptr(v_ptr, shape=(seq, D), strides=(D, 1), offsets=(0, 0), block_shape=(BLOCK_N, D),
                             order=(1, 0))
    q = tl.load(q_bp, boundary_check=(0,), padding_option="zero")
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for start_n in range(0, seq, BLOCK_N):
        kt = tl.load(kt_bp, boundary_check=(1,), padding_option="zero")
        cols = start_n + tl.arange(0, BLOCK_N)
        qk = tl.where(cols[None, :] < seq, tl.dot(q, kt) * sm_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_bp, boundary_check=(0,), padding_option="zero")
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
        kt_bp = tl.advance(kt_bp, (0, BLOCK_N))
        v_bp = tl.advance(v_bp, (BLOCK_N, 0))
    o_bp = tl.make_block_ptr(o_ptr, shape=(seq, D), strides=(D, 1), offsets=(start_m, 0), block_shape=(BLOCK_M, D),
                             order=(1, 0))
    tl.store(o_bp, acc / l_i[:, None], boundary_check=(0,))


@has_them
def test_a_tiled_copy_with_boundary_check_matches_torch():
    x = torch.randn(20, 12)
    y = torch.zeros(20, 12)
    tiled_copy[(3, 2)](x, y, 20, 12, 12, BM=8, BN=8)        # tails in both dimensions
    assert torch.equal(y, x * 2)


@has_them
def test_padding_option_zero_fills_what_lies_past_the_shape():
    x = torch.randn(10, 6)
    out = torch.full((16, 8), -7.0)
    padded_tiles[(2, 1)](x, out, 10, 6, BM=8, BN=8)
    expected = torch.zeros(16, 8)
    expected[:10, :6] = x
    assert torch.equal(out, expected + 1)


@has_them
def test_an_attention_loop_over_advanced_block_pointers_matches_torch():
    torch.manual_seed(0)
    seq, d = 40, 16
    q, k, v = torch.randn(seq, d), torch.randn(seq, d), torch.randn(seq, d)
    o = torch.zeros(seq, d)
    scale = 1.0 / math.sqrt(d)
    attention[(triton.cdiv(seq, 16),)](q, k, v, o, seq, scale, D=d, BLOCK_M=16, BLOCK_N=16)
    expected = torch.softmax(q @ k.T * scale, dim=1) @ v
    torch.testing.assert_close(o, expected, rtol=1e-4, atol=1e-4)


# --- through the real compilers --------------------------------------------------------------------------
def _cli(capsys, *args):
    try:
        rc = main(["npu-compile", *args])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@needs_tools
@has_them
def test_a_tiled_copy_with_block_pointers_compiles(capsys):
    rc, out, _ = _cli(capsys, f"{HERE}::tiled_copy", "-s", "x=*fp32,y=*fp32,M=i32,N=i32,stride_m=i32",
                      "-c", "BM=8,BN=8")
    assert rc == 0, out
    assert "accepted: kernel tiled_copy" in out


def test_the_default_line_gives_the_compiler_tt_make_tensor_ptr_and_tt_advance():
    """What triton-ascend's own frontend (Triton 3.5) gives its adapter; stock 3.8 emulates block
    pointers with tensors of pointers instead, which is why the sim extra stops below 3.8."""
    from triton_dist.backend_ascend.frontend import build_ttir
    if tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 8):
        pytest.skip(f"triton {triton.__version__} emulates block pointers (3.8) or has none (3.9)")
    module, _ = build_ttir(attention, {"q_ptr": "*fp32", "k_ptr": "*fp32", "v_ptr": "*fp32", "o_ptr": "*fp32",
                                       "seq": "i32", "sm_scale": "fp32"}, {"D": 16, "BLOCK_M": 16, "BLOCK_N": 16})
    text = module.str_nodebug()
    assert "tt.make_tensor_ptr" in text and "tt.advance" in text


@needs_tools
@has_them
def test_an_attention_loop_with_block_pointers_compiles(capsys):
    rc, out, _ = _cli(capsys, f"{HERE}::attention", "-s",
                      "q_ptr=*fp32,k_ptr=*fp32,v_ptr=*fp32,o_ptr=*fp32,seq=i32,sm_scale=fp32",
                      "-c", "D=16,BLOCK_M=16,BLOCK_N=16")
    assert rc == 0, out
    assert "accepted: kernel attention" in out


# --- a line without them -----------------------------------------------------------------------------------
def test_without_block_pointers_the_simulator_names_the_lines_that_have_them(monkeypatch):
    """The refusal as it is installed on a line without tl.advance (3.9), emulated here by taking
    tl.advance away from this line's language."""
    if block_pointers.removed():
        pytest.skip(f"triton {triton.__version__} has no block pointers: the next test checks its refusal")
    monkeypatch.delattr(tl, "advance")
    for mod in (tl, tl.core):
        monkeypatch.setattr(mod, "make_block_ptr", mod.make_block_ptr)
    monkeypatch.setattr(tl.core, "advance", tl.core.advance)
    monkeypatch.setattr(tl, "_triton_dist_block_pointers", False, raising=False)
    block_pointers.install()
    with pytest.raises(triton_dist.TritonDistError, match=r"tl.make_block_ptr: block pointers .* were removed from "
                                                          r"stock triton in 3.9(.|\n)*stock triton 3.5 to 3.8"):
        tiled_copy[(1, 1)](torch.zeros(8, 8), torch.zeros(8, 8), 8, 8, 8, BM=8, BN=8)


V39 = os.path.join(ROOT, ".venv-triton-3.9.0", "bin", "python")
needs_39 = pytest.mark.skipif(not os.path.exists(V39), reason="no .venv-triton-3.9.0 (bash scripts/triton_venv.sh "
                                                               "3.9.0 makes it; CI does)")


@needs_39
def test_on_triton_3_9_the_simulator_and_npu_compile_name_the_lines_that_have_them(tmp_path):
    # one process of triton 3.9.0: the simulator's launch, then npu-compile with the real tools where
    # they are here (else `triton-dist lower`: the same frontend)
    command = "lower" if TOOLS.missing else "npu-compile"
    tools_env = {} if TOOLS.missing else {toolchain.ADAPTER_ENV: TOOLS.adapter, toolchain.COMPILER_ENV: TOOLS.compiler}
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import contextlib, io, os, sys, torch
        sys.path.insert(0, {os.path.dirname(HERE)!r})
        os.environ.update({tools_env!r})
        import triton_dist
        from triton_dist.cli import main
        from test_block_ptr import tiled_copy
        try:
            tiled_copy[(1, 1)](torch.zeros(8, 8), torch.zeros(8, 8), 8, 8, 8, BM=8, BN=8)
        except triton_dist.TritonDistError as e:
            print("REFUSED", e)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                rc = main([{command!r}, {HERE + "::tiled_copy"!r}, "-s", "x=*fp32,y=*fp32,M=i32,N=i32,stride_m=i32",
                           "-c", "BM=8,BN=8"])
            except SystemExit as e:
                rc = e.code
        print("EXIT", rc)
        print("STDERR", err.getvalue())
    """))
    run = subprocess.run([V39, "-W", "ignore", str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    out = run.stdout
    assert "REFUSED tl.make_block_ptr: block pointers" in out, out + run.stderr
    assert "this environment has triton 3.9.0" in out and LINES in out, out
    compiled = out.partition("EXIT ")[2]
    assert compiled.startswith("2\n"), (command, out)
    assert "cannot lower kernel tiled_copy" in compiled and LINES in compiled, (command, compiled)
    assert "Block pointers have been removed" not in out     # Triton's own words replaced
