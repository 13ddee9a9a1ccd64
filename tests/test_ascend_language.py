"""triton-ascend's language on stock triton (issue 31 item 2): kernels written as triton-ascend's
tutorials and pytest_ut tests write them, run on the simulator against torch/numpy and traced by
the Ascend frontend (and compiled by the real NPU compilers where they are here).

- non-power-of-two aranges, block shapes and tl.dot shapes: triton-ascend lifts stock Triton's
  rule (python/triton/language/semantic.py:634-638, _utils.py:53-55 at triton-lang/triton-ascend
  a84b1eb5; triton_dist/language/ascend_shapes.py), and keeps its other checks (numel limit,
  end > start), with its messages;
- sync_block_all with each of its modes ("all_sub_vector": the vector sub-cores of each block);
- cast(..., overflow_mode=): "saturate" clamps, "trunc" wraps (vec_ops.py:508-544), tl.cast takes
  the mode without using it (core.py:1956-1977);
- extension.parallel loops and extension enums as module-level globals;
each traced for the NPU, and compiled by triton-adapter-opt and bishengir-compile where they are
here (a non-power-of-two kernel's TTIR passes run in triton-ascend's libtriton:
backend_ascend/ascend_ttir.py).
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cann import extension as al

import triton_dist
from triton_dist.backend_ascend.frontend import build_ttir
from triton_dist.sim import interp


def _run(body):
    return triton_dist.launch(body, world_size=1, memory_model="coherent").values[0]


# --- non-power-of-two shapes (tutorial 01's vector add with a block of 326; pytest_ut's small dots) ---

@triton.jit
def add_block(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def small_dot(a, b, c, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    rm, rk, rn = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    A = tl.load(a + rm[:, None] * K + rk[None, :])
    B = tl.load(b + rk[:, None] * N + rn[None, :])
    acc = tl.zeros((M, N), tl.float32)
    acc += tl.dot(A, B)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def arange_from(out, START: tl.constexpr, END: tl.constexpr):
    r = tl.arange(START, END)
    tl.store(out + r - START, r)


def test_non_power_of_two_block_runs_on_the_simulator():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)

    def body():
        out = torch.zeros(1000)
        add_block[(triton.cdiv(1000, 326),)](x, y, out, 1000, BLOCK=326)
        return out
    torch.testing.assert_close(_run(body), x + y)


def test_a_2x3_by_3x5_dot_runs_on_the_simulator():
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(2, 3, generator=g), torch.randn(3, 5, generator=g)

    def body():
        c = torch.zeros(2, 5)
        small_dot[(1,)](a, b, c, M=2, K=3, N=5)
        return c
    torch.testing.assert_close(_run(body), a @ b)


def test_arange_keeps_triton_ascends_other_checks():
    def body(start, end):
        out = torch.zeros(max(end - start, 1), dtype=torch.int32)
        arange_from[(1,)](out, START=start, END=end)
        return out
    np.testing.assert_array_equal(_run(lambda: body(2, 5)).numpy(), np.arange(2, 5))
    with pytest.raises(triton_dist.RankError, match="arange's end argument must be greater than the start argument"):
        _run(lambda: body(3, 3))
    with pytest.raises(triton_dist.RankError, match=r"numel \(1048577\) exceeds triton maximum tensor numel"):
        _run(lambda: body(0, 1048577))


def test_a_gpu_compile_in_the_same_process_keeps_stock_tritons_rule():
    """Outside the simulator's program instances and the Ascend trace, stock Triton's rule stands."""
    from triton.language.core import block_type
    with pytest.raises(ValueError, match="must be a power of 2"):
        block_type(tl.float32, [3])


# --- sync_block_all with every mode triton-ascend takes (pytest_ut/test_sync_block_all.py's modes) ---

@triton.jit
def sub_vector_exchange(x, out, slots, got, ONLY_BLOCK0: tl.constexpr):
    """A mix kernel (tl.dot) naming sub_vec_id: each block runs on its 2 vector sub-cores. Each
    sub-core writes its slot, meets the other sub-core of its block, reads the other's slot."""
    pid = tl.program_id(0)
    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]
    tl.store(out + pid * 256 + offs, tl.dot(tl.load(x + offs), tl.load(x + offs)))
    sv = al.sub_vec_id()
    one = tl.arange(0, 1)
    tl.store(slots + pid * 2 + sv + one, tl.full((1,), 10, tl.int32) * pid + sv + 1)
    if ONLY_BLOCK0:
        if pid == 0:        # a barrier of the launch's vector cores would wait for block 1 forever
            al.sync_block_all("all_sub_vector", 11)
    else:
        al.sync_block_all("all_sub_vector", 11)
    tl.store(got + pid * 2 + sv + one, tl.load(slots + pid * 2 + (1 - sv) + one))


@pytest.mark.parametrize("only_block0", [False, True])
def test_all_sub_vector_is_a_barrier_of_each_blocks_vector_sub_cores(only_block0):
    def body():
        x = torch.eye(16)
        out, slots, got = torch.zeros(2 * 256), torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
        sub_vector_exchange[(2,)](x, out, slots, got, ONLY_BLOCK0=only_block0)
        return got.tolist()
    for seed in range(3):
        res = triton_dist.launch(body, world_size=1, schedule="pct", seed=seed, timeout=60)
        got = res.values[0]
        assert got[:2] == [2, 1], got          # block 0: each sub-core sees the other's write, in any order
        if not only_block0:
            assert got[2:] == [12, 11], got


@pytest.mark.parametrize("mode", ["all", "all_cube", "all_vector", "all_sub_vector"])
def test_sync_block_all_takes_every_mode_of_triton_ascend(mode):
    """Each mode of its core.py:243 assert runs (a kernel of one vector core: no partner to wait for
    in the cube / sub-vector modes, the launch's one core in the others)."""
    @triton.jit
    def k(out, MODE: tl.constexpr):
        tl.store(out + tl.arange(0, 1), tl.full((1,), 1, tl.int32))
        al.sync_block_all(MODE, 3)
        tl.store(out + 1 + tl.arange(0, 1), tl.load(out + tl.arange(0, 1)) + 1)

    def body():
        out = torch.zeros(2, dtype=torch.int32)
        k[(1,)](out, MODE=mode)
        return out.tolist()
    assert _run(body) == [1, 2]
    # the simulator's words, triton-ascend's (core.py:243 "only supports all_cube/all_vector/all/all_sub_vector"),
    # or the bare assert of its test double
    with pytest.raises(triton_dist.RankError,
                       match="all_cube, all_vector, all, all_sub_vector|all_cube/all_vector/all/all_sub_vector|AssertionError"):
        _run(lambda: k[(1,)](torch.zeros(2, dtype=torch.int32), MODE="all_subvector"))


# --- cast(..., overflow_mode=) (pytest_ut/test_cast_full.py's kernels, vec_ops.py's cast) ---

@triton.jit
def cast_kernel(x, out, N: tl.constexpr, DST: tl.constexpr, MODE: tl.constexpr, HOW: tl.constexpr):
    r = tl.arange(0, N)
    v = tl.load(x + r)
    if HOW == 0:
        y = v.cast(DST, overflow_mode=MODE)
    elif HOW == 1:
        y = al.cast(v, DST, overflow_mode=MODE)
    else:
        y = tl.cast(v, dtype=DST, overflow_mode=MODE)        # triton-ascend's tl.cast drops the mode
    tl.store(out + r, y)


def _cast(x, dst_torch, dst_tl, mode, how):
    def body():
        out = torch.zeros(x.numel(), dtype=dst_torch)
        cast_kernel[(1,)](x, out, N=x.numel(), DST=dst_tl, MODE=mode, HOW=how)
        return out
    return _run(body)


CAST_CASES = [
    # (source values, source dtype, target torch dtype, target tl dtype)
    ([-1000, -129, -128, -5, 0, 7, 127, 128, 300, 70000], torch.int32, torch.int8, tl.int8),
    ([-40000, -1, 0, 255, 256, 1000, 65535, 65536], torch.int32, torch.int16, tl.int16),
    ([-1e6, -200.7, -128.5, -3.7, 0.0, 2.9, 127.9, 128.0, 1e9, 6.5], torch.float32, torch.int8, tl.int8),
    ([-1e10, -3e9, -1.5, 2.5, 2147483520.0, 3e9, 1e20, 4.0], torch.float32, torch.int32, tl.int32),
    ([-1e6, -70000.0, -65504.0, 1.5, 65504.0, 70000.0, 1e30, 3.0], torch.float32, torch.float16, tl.float16),
]


@pytest.mark.parametrize("values,src,dst_torch,dst_tl", CAST_CASES)
@pytest.mark.parametrize("how", [0, 1])
def test_saturate_clamps_to_the_target_range(values, src, dst_torch, dst_tl, how):
    x = torch.tensor(values, dtype=src)
    got = _cast(x, dst_torch, dst_tl, "saturate", how)
    if dst_torch.is_floating_point:
        lim = torch.finfo(dst_torch).max
        want = x.double().clamp(-lim, lim).to(dst_torch)
    else:
        info = torch.iinfo(dst_torch)
        want = x.double().trunc().clamp(info.min, info.max).to(dst_torch)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_trunc_wraps_and_tl_cast_takes_the_mode_without_using_it():
    x = torch.tensor([-1000, -129, -128, -5, 0, 7, 127, 128, 300, 70000], dtype=torch.int32)
    wrapped = torch.from_numpy(x.numpy().astype(np.int8))           # two's complement: the low 8 bits
    for how, mode in ((0, "trunc"), (1, "trunc"), (2, "saturate"), (2, "trunc")):
        torch.testing.assert_close(_cast(x, torch.int8, tl.int8, mode, how), wrapped, rtol=0, atol=0)


def test_an_unknown_overflow_mode_is_refused_in_triton_ascends_words():
    x = torch.arange(4, dtype=torch.int32)
    with pytest.raises(triton_dist.RankError, match="Unknown overflow_mode:wrap is found"):
        _cast(x, torch.int8, tl.int8, "wrap", 0)


# --- extension enums as module globals, extension.parallel (triton-ascend's tutorials' style) ---

PIPE_GLOBAL = al.PIPE
VECTOR_PIPE = al.PIPE.PIPE_V


@triton.jit
def parallel_rows(x, out, ROWS: tl.constexpr, COLS: tl.constexpr):
    c = tl.arange(0, COLS)
    for i in al.parallel(0, ROWS, 1, bind_sub_block=False):
        tl.store(out + i * COLS + c, tl.load(x + i * COLS + c) * 2)
    for i in al.parallel(ROWS, loop_unroll_factor=1):
        al.sync_block_all("all_vector", 0) if PIPE_GLOBAL.PIPE_V == VECTOR_PIPE else None


def test_parallel_loops_and_enum_globals_run_on_the_simulator():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)

    def body():
        out = torch.zeros(12)
        parallel_rows[(1,)](x, out, ROWS=3, COLS=4)
        return out.view(3, 4)
    torch.testing.assert_close(_run(body), x * 2)


# --- the same kernels traced for the NPU and given to the real compilers (npu-compile) ---

def _tools_missing():
    from triton_dist.backend_ascend import toolchain
    return toolchain.find().missing


needs_tools = pytest.mark.skipif(bool(_tools_missing()), reason="; ".join(_tools_missing()))
ADD_SIG = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}


def _compile(kernel, sig, consts=None):
    from triton_dist.backend_ascend import pipeline
    from triton_dist.backend_ascend.ascend_ttir import Unavailable
    try:
        return pipeline.compile_kernel(kernel, sig, consts)
    except Unavailable as e:            # offline: triton-ascend's libtriton cannot be fetched
        pytest.skip(str(e))


@needs_tools
def test_non_power_of_two_blocks_and_dots_are_accepted_by_the_real_compilers():
    out = _compile(add_block, ADD_SIG, {"BLOCK": 326})
    assert out.accepted, out.report()
    out = _compile(small_dot, {"a": "*fp32", "b": "*fp32", "c": "*fp32"}, {"M": 2, "K": 3, "N": 5})
    assert out.accepted, out.report()


@triton.jit
def reduce_scan_rows(x, mx, cs, gray, w, COLS: tl.constexpr):
    """A row of COLS: its max; 32 pixels of 3 channels: weighted (tl.sum over (32, 3)) and their running
    sums along the 3 channels (tl.cumsum: the interpreter's scan runs the combine per step)."""
    c = tl.arange(0, COLS)
    v = tl.load(x + c)
    tl.store(mx + tl.arange(0, 1), tl.full((1,), 0.0, tl.float32) + tl.max(tl.abs(v), axis=0))
    pix, ch = tl.arange(0, 32), tl.arange(0, 3)
    rgb = tl.load(x + pix[:, None] * 3 + ch[None, :])
    tl.store(cs + pix[:, None] * 3 + ch[None, :], tl.cumsum(rgb, axis=1))
    tl.store(gray + pix, tl.sum(rgb * tl.load(w + ch)[None, :], axis=1))


REDUCE_SIG = {"x": "*fp32", "mx": "*fp32", "cs": "*fp32", "gray": "*fp32", "w": "*fp32"}


def test_reductions_and_scans_over_non_power_of_two_blocks_run_on_the_simulator():
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(326, generator=g), torch.tensor([0.299, 0.587, 0.114])

    def body():
        mx, cs, gray = torch.zeros(1), torch.zeros(96), torch.zeros(32)
        reduce_scan_rows[(1,)](x, mx, cs, gray, w, COLS=326)
        return mx, cs, gray
    mx, cs, gray = _run(body)
    torch.testing.assert_close(mx[0], x.abs().max())
    torch.testing.assert_close(cs.view(32, 3), torch.cumsum(x[:96].view(32, 3), 1))
    torch.testing.assert_close(gray, x[:96].view(32, 3) @ w)


@needs_tools
def test_reductions_and_scans_over_non_power_of_two_blocks_are_accepted_by_the_real_compilers():
    out = _compile(reduce_scan_rows, REDUCE_SIG, {"COLS": 326})
    assert out.accepted, out.report()


@needs_tools
def test_a_non_power_of_two_block_too_large_for_the_unified_buffer_is_refused_by_bishengir():
    out = _compile(add_block, ADD_SIG, {"BLOCK": 65000})
    assert not out.accepted and out.failed_at == "bishengir-compile", out.report()
    assert any("ub overflow" in e for e in out.errors), out.report()


@needs_tools
def test_the_ascend_trace_keeps_the_non_power_of_two_shapes():
    from triton_dist.backend_ascend.ascend_ttir import Unavailable
    try:
        module, _ = build_ttir(add_block, ADD_SIG, {"BLOCK": 326})
    except Unavailable as e:
        pytest.skip(str(e))
    text = module.str_nodebug()
    assert "tensor<326xf32>" in text and "tt.make_range" in text and " loc(" not in text


def test_the_ascend_trace_still_refuses_what_triton_ascend_refuses():
    with pytest.raises(triton_dist.TritonDistError, match="arange's end argument must be greater than the start"):
        build_ttir(arange_from, {"out": "*i32"}, {"START": 4, "END": 4})
    with pytest.raises(triton_dist.TritonDistError, match=r"numel \(1048577\) exceeds triton maximum tensor numel"):
        build_ttir(arange_from, {"out": "*i32"}, {"START": 0, "END": 1048577})


@triton.jit
def parallel_copy(x, out, ROWS: tl.constexpr, COLS: tl.constexpr):
    """triton-ascend tutorial style: rows in an extension.parallel loop, a pipe enum read from a
    module-level global."""
    c = tl.arange(0, COLS)
    for i in al.parallel(0, ROWS, 1, bind_sub_block=False):
        acc = tl.zeros((COLS,), tl.float32)
        for _ in range(2):                              # a plain loop inside: not marked parallel
            acc += tl.load(x + i * COLS + c)
        tl.store(out + i * COLS + c, acc)
    if PIPE_GLOBAL.PIPE_V == VECTOR_PIPE:
        tl.store(out + c, tl.load(x + c))


@triton.jit
def saturating_cast(x, out, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out + r, tl.load(x + r).cast(tl.uint8, overflow_mode="saturate"))


# On triton-ascend's main line its own code generator and extension trace parallel loops and casts
# (code_generator.py:1192, vec_ops.py:508); backend_ascend's trace of them is for stock triton.
stock_frontend = pytest.mark.skipif("triton-ascend" in interp.API.line,
                                    reason="triton-ascend's main line traces these with its own frontend")


@stock_frontend
def test_parallel_loops_and_enum_globals_trace_for_the_npu():
    module, _ = build_ttir(parallel_copy, {"x": "*fp32", "out": "*fp32"}, {"ROWS": 64, "COLS": 16})
    text = module.str_nodebug()
    # the parallel loop's scf.for carries hivm.parallel_loop, as triton-ascend's code generator sets
    # it (code_generator.py:1266-1267); the plain loop inside does not
    assert text.count("scf.for") == 2 and text.count("hivm.parallel_loop") == 1, text


@stock_frontend
def test_a_saturating_cast_traces_as_triton_ascend_emits_it():
    """An unsigned narrowing under "saturate" goes through fp32 (vec_ops.py:458-466)."""
    module, _ = build_ttir(saturating_cast, {"x": "*i32", "out": "*u8"}, {"N": 16})
    text = module.str_nodebug()
    assert "arith.sitofp" in text and "arith.fptoui" in text, text


@triton.jit
def fp32_to_int8(x, out, N: tl.constexpr, MODE: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out + r, tl.load(x + r).cast(tl.int8, overflow_mode=MODE))


@needs_tools
@stock_frontend
@pytest.mark.parametrize("mode,conversion", [("saturate", "vcast_half_to_int8_t_1d_with_mode"),
                                             ("trunc", "vcast_int32_t_to_int8_t_1d_with_overflow")])
def test_the_overflow_mode_reaches_the_npu_compiler(tmp_path, mode, conversion):
    """The cast's result is marked `annotation.mark {overflow_mode = ...}` (vec_ops.py:536-541), and
    bishengir-compile lowers the two modes to different conversions: measured, its own output."""
    from triton_dist.backend_ascend import pipeline
    out = pipeline.compile_kernel(fp32_to_int8, {"x": "*fp32", "out": "*i8"}, {"N": 16, "MODE": mode},
                                  keep=str(tmp_path))
    assert out.accepted, out.report()
    carried = (tmp_path / "kernel.carried.ttir.mlir").read_text()
    assert f'annotation.mark %' in carried and f'{{overflow_mode = "{mode}"}}' in carried, carried
    assert conversion in (tmp_path / "kernel.convert-hivm-to-std.mlir").read_text()


@needs_tools
@stock_frontend
def test_parallel_enum_and_cast_kernels_are_accepted_by_the_real_compilers(tmp_path):
    from triton_dist.backend_ascend import cache, pipeline
    # through the verdict cache, as npu-compile and the launch check compile: its key walks the
    # kernel's globals (Triton's DependenciesFinder refuses a plain function such as parallel was)
    out = pipeline.compile_kernel(parallel_copy, {"x": "*fp32", "out": "*fp32"}, {"ROWS": 64, "COLS": 16},
                                  cache=cache.Cache(str(tmp_path)))
    assert out.accepted, out.report()
    out = _compile(saturating_cast, {"x": "*i32", "out": "*u8"}, {"N": 16})
    assert out.accepted, out.report()


@triton.jit
def neighbour_after_sync_all(slots, out, MODE: tl.constexpr):
    pid = tl.program_id(0)
    one = tl.arange(0, 1)
    tl.store(slots + pid + one, tl.full((1,), 1, tl.int32) + pid)      # a tile store: a DMA (MTE3) in flight
    al.sync_block_all(MODE, 0)
    other = (pid + 1) % tl.num_programs(0)
    tl.store(out + pid + one, tl.load(slots + other + one))


@pytest.mark.parametrize("mode", ["all", "all_vector"])
def test_sync_block_all_completes_the_stores_in_flight_first(mode):
    """Each mode drains the core's pipes before the cross-core flags (PIPE_ALL: ascend_ir.cc:138-166,
    HIVMDecomposeOp.cpp's pipe_barrier), so under the default (ascend) memory model a neighbour
    reads the store made before the barrier."""
    def body():
        slots, out = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
        neighbour_after_sync_all[(4,)](slots, out, MODE=mode)
        return out.tolist()
    for seed in range(3):
        assert triton_dist.launch(body, world_size=1, schedule="pct", seed=seed).values == [[2, 3, 4, 1]]
