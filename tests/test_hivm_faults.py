"""The NPU's faults where the compiled code leaves the buffers, for the accesses the compiler
emits inline (backend hivm): scalar global loads and stores (`memref.load`/`memref.store` of a
gm memref after convert-hivm-to-std), checked against the live buffers like the template calls'
copies (backend_ascend/cpu_run/rewrite.py gm_scalar_accesses, memory.py gm_scalar_fault)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_dist


def _missing():
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"backend hivm cannot run here: {'; '.join(_missing())}")


@triton.jit
def gather_one(idx_ptr, x_ptr, out_ptr):
    # one program per output: a scalar index, then a scalar load through it (both emitted inline
    # as memref.load of a gm memref, no template call)
    i = tl.load(idx_ptr + tl.program_id(0))
    tl.store(out_ptr + tl.program_id(0), tl.load(x_ptr + i) * 2.0)


@triton.jit
def gather_many(idx_ptr, x_ptr, out_ptr, n, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    # an indirect load: the 3.2.0 adapter emits it as a loop of scalar loads (memref.load of gm)
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    if MASKED:
        v = tl.load(x_ptr + idx, mask=idx < n, other=-1.0)
    else:
        v = tl.load(x_ptr + idx)
    tl.store(out_ptr + offs, v)


def _gather_many(idx, masked, n=40):
    x = torch.arange(40, dtype=torch.float32) * 0.5
    out = torch.full((16,), float("nan"))
    gather_many[(1,)](idx, x, out, n, MASKED=masked, BLOCK=16)
    ref = torch.where(idx < n, x[idx.clamp(max=39).long()], torch.tensor(-1.0))
    return torch.equal(out, ref)


def _gather(last):
    x = torch.arange(40, dtype=torch.float32) * 0.5
    idx = torch.tensor([3, 0, 17, last], dtype=torch.int32)
    out = torch.full((4,), float("nan"))
    gather_one[(4,)](idx, x, out)
    return torch.equal(out, x[idx.long()] * 2.0)


def _launch(fn, *args):
    return triton_dist.launch(fn, *args, world_size=1, backend="hivm")


def test_a_scalar_load_off_the_end_faults_and_its_in_bounds_twin_agrees_with_torch():
    with pytest.raises(Exception) as info:
        _launch(_gather, 40)                   # x has 40 elements: index 40 is the first byte past it
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg and "scalar load (memref.load of 4 bytes" in msg
    assert "argument 'x_ptr' (float32[40]): bytes 160..164 of a 160-byte buffer" in msg
    assert "block 3" in msg and "test_hivm_faults.py:" in msg       # the program, and the source line
    assert _launch(_gather, 39).values == [True]
    with pytest.raises(Exception, match=r"argument 'x_ptr' \(float32\[40\]\): bytes -4..0 of a 160-byte buffer "
                                        r"\(the first byte outside it at offset -4\)"):
        _launch(_gather, -1)                  # before x's first byte: named against x, the closest buffer


def test_an_indirect_load_with_an_index_off_the_end_faults_and_in_bounds_agrees_with_torch():
    idx = torch.arange(16, dtype=torch.int32) * 2 + 3        # 3, 5, ..., 33: inside x
    assert _launch(_gather_many, idx, False).values == [True]
    bad = idx.clone()
    bad[11] = 41                                             # one lane reads 4 bytes past x's end + 1 element
    with pytest.raises(Exception) as info:
        _launch(_gather_many, bad, False)
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg
    assert "argument 'x_ptr' (float32[40]): bytes 164..168 of a 160-byte buffer" in msg


def test_a_masked_indirect_load_still_reads_its_masked_off_lanes_and_faults():
    # triton-ascend #2332's class, for a gather: the 3.2.0 adapter loads every lane in its scalar
    # loop and applies the mask afterwards (kernel.ttadapter-out.mlir: scf.for of memref.load, then
    # arith.select), so an index the mask keeps off is still read
    bad = torch.arange(16, dtype=torch.int32) * 2 + 3
    bad[11] = 41                                             # masked off by idx < n
    with pytest.raises(Exception) as info:
        _launch(_gather_many, bad, True)
    msg = str(info.value)
    assert "out-of-range scalar GM access" in msg and "bytes 164..168 of a 160-byte buffer" in msg
    assert "masked by `idx < n`: the source keeps this lane off, the compiled code still accesses it" in msg
    # the twin: masked-off lanes whose addresses stay inside x (n = 20 of its 40): they are read,
    # harmlessly, and the select gives `other` as torch does
    assert _launch(_gather_many, torch.arange(16, dtype=torch.int32) * 2 + 3, True, 20).values == [True]


# --- UB alignment (triton-ascend #1277) and the transpose template ----------------------------
@triton.jit
def permute_then_dot(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    # triton-ascend #1277's kernel: maximum -> permute -> minimum -> dot, fp16 in, fp32 out
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs[:, None] * BLOCK + offs[None, :])
    y = tl.load(y_ptr + offs[:, None] * BLOCK + offs[None, :])
    t = tl.permute(tl.maximum(x, y), (1, 0))
    d = tl.dot(x, tl.minimum(y, t), out_dtype=tl.float32)
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], d)


def _permute_then_dot(block):
    v = torch.arange(block * block, dtype=torch.float32).reshape(block, block)
    x, y = (v / 97.0).half(), ((v.flip(0) + 11.0) / 89.0).half()
    out = torch.zeros(block, block)
    permute_then_dot[(1,)](x, y, out, BLOCK=block)
    ref = x.float() @ torch.minimum(y, torch.maximum(x, y).T).float()
    return torch.allclose(out, ref, rtol=1e-5, atol=1e-3)


def test_1277_permute_then_dot_runs_and_agrees_with_torch():
    # DOES NOT REPRODUCE with the 3.2.0 compilers and v1.2.0's template library: at BLOCK=32 (the
    # thread's shape) no vector operand is misaligned; at 16 and 8 each vector core's half of the
    # tile starts 16 (8) bytes into a 32-byte block (hivm-split-mix-kernel's column split), and the
    # element-wise, select and compare templates it reaches run such operands on the scalar unit
    # (memory.handles_unaligned): no fault, the result agrees with torch
    assert _launch(_permute_then_dot, 32).values == [True]
    assert _launch(_permute_then_dot, 16).values == [True]


@triton.jit
def transpose(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :], tl.trans(x))


def _transposes(shapes):
    ok = []
    for m, n, dtype in shapes:
        x = torch.randn(m, n).to(dtype)
        out = torch.zeros(n, m, dtype=dtype)
        transpose[(1,)](x, out, M=m, N=n)
        ok.append(torch.equal(out, x.T))
    return ok


def test_tl_trans_runs_the_transpose_template_and_agrees_with_torch():
    # transpose_2d_with_last_axis_<T> (templates_layout.py): every shape here takes the vnchwconv
    # path (PlanMemory gives the tiles whole-block row strides; 4x2 fp32 rounds up to 8x16 -> 16x8);
    # the scalar path is the unit test's below
    shapes = [(16, 8, torch.float32), (8, 16, torch.float32), (32, 32, torch.float16), (4, 2, torch.float32),
              (2, 16, torch.float16), (64, 32, torch.int32)]
    assert _launch(_transposes, shapes).values == [[True] * len(shapes)]


@triton.jit
def permute_3d(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P0: tl.constexpr,
               P1: tl.constexpr, P2: tl.constexpr, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, A)[:, None, None] * B * C + tl.arange(0, B)[None, :, None] * C
                + tl.arange(0, C)[None, None, :])
    tl.store(out_ptr + tl.arange(0, D0)[:, None, None] * D1 * D2 + tl.arange(0, D1)[None, :, None] * D2
             + tl.arange(0, D2)[None, None, :], tl.permute(x, (P0, P1, P2)))


def _permutes(cases):
    ok = []
    for (a, b, c), p, dtype in cases:
        x = torch.randn(a, b, c).to(dtype)
        want = x.permute(*p)
        out = torch.zeros(want.shape, dtype=dtype)
        permute_3d[(1,)](x, out, A=a, B=b, C=c, P0=p[0], P1=p[1], P2=p[2], D0=want.shape[0], D1=want.shape[1],
                         D2=want.shape[2])
        ok.append(torch.equal(out, want))
    return ok


def test_3d_permutes_run_the_3d_transpose_templates_and_agree_with_torch():
    # (1, 0, 2): transpose_3d_without_last_axis; (2, 1, 0): transpose_3d_with_last_axis; the others
    # compose them with the 2-D one
    cases = [((4, 8, 16), (1, 0, 2), torch.float32), ((8, 16, 16), (1, 0, 2), torch.float16),
             ((4, 8, 16), (2, 1, 0), torch.float32), ((2, 4, 8), (2, 1, 0), torch.float16),
             ((2, 8, 8), (2, 0, 1), torch.float32)]
    assert _launch(_permutes, cases).values == [[True] * len(cases)]


def _descriptor(base, offset, sizes, strides):
    import ctypes
    d = (ctypes.c_int64 * (3 + 2 * len(sizes)))(base, base, offset, *sizes, *strides)
    return d, ctypes.addressof(d)


def _ub_state(M):
    import numpy as np
    ub = np.zeros(192 * 1024, dtype=np.uint8)
    M.set_state(M.BlockState(spaces={"ub": ub}, sizes={"ub": len(ub), "ub_align": 32}, kernel="k"))
    return ub


def test_misaligned_operands_fault_only_for_templates_without_a_scalar_fallback():
    from triton_dist.backend_ascend.cpu_run import memory as M
    ub = _ub_state(M)
    try:
        keep, odd = _descriptor(ub.ctypes.data, 8, (16, 8), (16, 1))     # fp16 16x8 at byte 16
        M.check_ub(M.view(odd, 2, 2), "vmax_2d_half operand")             # EltWise2D.cpp: scalar head
        M.check_ub(M.view(odd, 2, 2), "vsel_vv_1d_bool_half operand")     # SelUtils.h: scalar select
        with pytest.raises(M.DeviceFault, match="unaligned UB VEC access: .*reduce_max_ar_half operand starts at "
                                                "UB byte 16"):
            M.check_ub(M.view(odd, 2, 2), "reduce_max_ar_half operand")
    finally:
        M.set_state(None)


def test_the_transpose_template_checks_its_rounded_up_region_and_takes_the_scalar_path_when_unaligned():
    import numpy as np
    from triton_dist.backend_ascend.cpu_run import memory as M, templates_layout
    ub = _ub_state(M)
    f32 = ub.view(np.float32)
    run = templates_layout.handler("transpose_2d_with_last_axis_float", ["ptr", "ptr"])
    try:
        f32[:12] = np.arange(12)
        # unaligned: a 3x4 source at element 0 with row stride 4 (16 bytes): the scalar loop
        k1, src = _descriptor(ub.ctypes.data, 0, (3, 4), (4, 1))
        k2, dst = _descriptor(ub.ctypes.data, 64, (4, 3), (3, 1))
        run(src, dst)
        assert np.array_equal(f32[64:76].reshape(4, 3), np.arange(12, dtype=np.float32).reshape(3, 4).T)
        # aligned 16x8 -> 8x16 at the end of UB: vnchwconv writes whole blocks, in bounds
        end = len(f32)
        k3, src = _descriptor(ub.ctypes.data, 0, (16, 8), (8, 1))
        k4, dst = _descriptor(ub.ctypes.data, end - 128, (8, 16), (16, 1))
        run(src, dst)
        # a 9-row destination rounds up to 16 rows (CEIL_FACTOR(9, 8) = 16): past UB's end, faulted
        k5, src = _descriptor(ub.ctypes.data, 0, (16, 9), (16, 1))
        k6, dst = _descriptor(ub.ctypes.data, end - 160, (9, 16), (16, 1))
        with pytest.raises(M.DeviceFault, match="beyond the 192 KiB"):
            run(src, dst)
    finally:
        M.set_state(None)


# --- tl.flip: hivm.hir.bitcast and the xor reductions (triton-ascend #1638) --------------------
@triton.jit
def flip_rows(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr):
    off = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + off, tl.flip(tl.load(x_ptr + off), DIM))


def _flips(cases):
    ok = []
    for m, n, dim, dtype in cases:
        x = (torch.randn(m, n) * 100).to(dtype)
        out = torch.zeros(m, n, dtype=dtype)
        flip_rows[(1,)](x, out, M=m, N=n, DIM=dim)
        ok.append(torch.equal(out, x.flip(dim)))
    return ok


def test_tl_flip_runs_compiled_and_agrees_with_torch_and_64x64_overflows_ub_as_in_1638():
    # stock tl.flip swaps halves by xor-reducing 2x2x... reshapes of the bits: the module holds
    # hivm.hir.bitcast (f32 <-> i32, rewrite.bitcasts) and reduce_xori_{ra0a1,ara,aar} (templates_layout)
    cases = [(16, 16, 1, torch.float32), (16, 16, 0, torch.float32), (32, 64, 1, torch.float16)]
    assert _launch(_flips, cases).values == [[True] * len(cases)]
    # triton-ascend #1638: a 64x64 flip is refused by bishengir-compile ("ub overflow"; the reshape
    # to 64x2x2x2x2x2x2 of i32 is what fills UB), as the thread reports on the NPU's compiler
    with pytest.raises(Exception, match=r"(?s)ub overflow, requires \d+ bits while 1572864 bits available.*"
                                        r"64x2x2x2x2x2x2"):
        _launch(_flips, [(64, 64, 1, torch.float32)])


def test_a_bitcast_between_widths_is_refused_by_name():
    from triton_dist.backend_ascend.cpu_run import rewrite
    same = ("    %1 = hivm.hir.bitcast %0 : memref<2x2xf32, strided<[8, 1]>, #hivm.address_space<ub>> -> "
            "memref<2x2xi32, strided<[8, 1]>, #hivm.address_space<ub>>\n")
    assert "builtin.unrealized_conversion_cast %0" in rewrite.bitcasts(same)
    wider = same.replace("2x2xi32", "2x2xi64")
    with pytest.raises(rewrite.RewriteError, match="a hivm.hir.bitcast the CPU run does not lower.*2x2xi64"):
        rewrite.bitcasts(wider)
