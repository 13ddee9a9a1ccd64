"""Users' silent-miscompile threads tried against triton-ascend 3.2.0's compilers through backend
hivm (the module bishengir-compile hands to hivmc, run on the CPU), each compared with torch.

A thread that reproduces is a test that asserts the compiled result differs from torch the way
the thread says (so it fails the day the compiler is fixed, and the docs line is then to move);
a thread that does not reproduce is a test that asserts agreement, with a line in docs/ascend.md.
"""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton.language.extra.cann import extension as ascend_ext


def _missing():
    from triton_dist.backend_ascend.cpu_run.backend import HivmBackend
    return HivmBackend.missing()


pytestmark = pytest.mark.skipif(bool(_missing()), reason=f"backend hivm cannot run here: {'; '.join(_missing())}")


# triton-lang/triton-ascend #2290: `(vec_bool != scalar_true)` reported to fold to all-true,
# whether the scalar comes from tl.load or is a literal
@triton.jit
def ne_loaded_true(x_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    b = tl.load(x_ptr + offs) > 0.0
    t = tl.load(flag_ptr) != 0          # a scalar i1, true at run time
    tl.store(out_ptr + offs, (b != t).to(tl.float32))


@triton.jit
def ne_literal_true(x_ptr, flag_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    b = tl.load(x_ptr + offs) > 0.0
    tl.store(out_ptr + offs, (b != True).to(tl.float32))  # noqa: E712 (the thread's form)


# triton-lang/triton-ascend #1416: a program reading back, through the same indirect addresses,
# what it has just stored got other values (a load moved before the store; PR #2172)
@triton.jit
def store_then_reload(idx_ptr, x_ptr, out_ptr, res_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    idx = tl.load(idx_ptr + offs)
    tl.store(out_ptr + idx, tl.load(x_ptr + offs) + 1.0)
    tl.store(res_ptr + offs, tl.load(out_ptr + idx) * 2.0)


def _ne_true(kernel):
    torch.manual_seed(0)
    x = torch.randn(64)
    out = torch.full((64,), float("nan"))
    kernel[(1,)](x, torch.ones(1, dtype=torch.int32), out, BLOCK=64)
    return out, (x <= 0).float()        # b != True is not b


def _reload():
    torch.manual_seed(0)
    idx = torch.randperm(64, dtype=torch.int32)
    x = torch.randn(64)
    out, res = torch.zeros(64), torch.full((64,), float("nan"))
    store_then_reload[(1,)](idx, x, out, res, BLOCK=64)
    return res, (x + 1.0) * 2.0


def _module(kernel, signature, constexprs):
    from triton_dist.backend_ascend.cpu_run import stages, stages_ir
    _, text = stages_ir.compiled_ir(kernel, signature, constexprs, after=stages.FINAL)
    return text


# REPRODUCES with bishengir-compile 1.2.0 / triton-adapter-opt 3.2.0: the i1 compare is done in
# f16, the vector side through vcast_bool_to_half (true -> 1.0) and the scalar side through
# arith.sitofp (true -> -1.0: i1 is signed), so `half(b) == -1.0` never holds and the vnot makes
# every lane true.  Read from the module after convert-hivm-to-std: the adapter's output still
# compares i1 tensors; bishengir-compile's hfusion-normalize-ops makes the f16 compare.  That the
# NPU's vcast_bool_to_half gives 1.0 for true (as the numpy template does) is inferred.
@pytest.mark.parametrize("kernel, scalar", [(ne_loaded_true, "arith.sitofp %4 : i1 to f16"),
                                            (ne_literal_true, "arith.constant -1.000000e+00 : f16")],
                         ids=["loaded", "literal"])
def test_2290_vec_bool_ne_scalar_true_compiles_to_all_true(kernel, scalar):
    (got, want), = triton_dist.launch(_ne_true, kernel, world_size=1, backend="hivm").values
    assert 0 < want.sum() < 64          # the oracle (torch) has both values, so all-true shows
    assert torch.equal(got, torch.ones(64)), f"compiled {got.tolist()} (the thread: all true; torch {want.tolist()})"
    # the reason, in the compiled module: the scalar true becomes -1.0 before the f16 compare
    text = _module(kernel, {"x_ptr": "*fp32", "flag_ptr": "*i32", "out_ptr": "*fp32"}, {"BLOCK": 64})
    assert scalar in text and "vcast_bool_to_half_1d" in text and "vcmp_eq_1d_half" in text and "vnot_1d_bool" in text


# DOES NOT REPRODUCE here: the 3.2.0 compilers lower the indirect store and the indirect reload
# to scalar loops over the UB index tile, in program order (store loop, then reload loop), and
# the compiled kernel agrees with torch.  The thread's fix (PR #2172) is on the main line's
# indirect-access rewrite, which 3.2.0 does not run.
def test_1416_same_program_reload_reads_its_own_store():
    (got, want), = triton_dist.launch(_reload, world_size=1, backend="hivm").values
    assert torch.equal(got, want), f"compiled {got.tolist()} != torch {want.tolist()}"


# vllm-ascend PR #14806: `tl.sum` over an i1 mask, reported wrong on the NPU.  DOES NOT REPRODUCE
# here: stock Triton's tl.sum (which traces the kernels here) widens an integer narrower than 32
# bits before reducing (triton/language/standard.py, _pick_sum_dtype, 3.6.0), so the compilers
# never see an i1 reduction; triton-ascend's own frontend was not tried.
@triton.jit
def count_positive(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs) > 0.0, axis=0))


def _count():
    torch.manual_seed(0)
    x = torch.randn(64)
    out = torch.full((1,), -1, dtype=torch.int32)
    count_positive[(1,)](x, out, BLOCK=64)
    return out.item(), int((x > 0).sum())


def test_14806_sum_of_a_bool_mask_counts_its_true_lanes():
    (got, want), = triton_dist.launch(_count, world_size=1, backend="hivm").values
    assert 0 < want < 64 and got == want


# A backend gap the differential run found (conformance case int_binary_ops: the compiled kernel called
# vshls_vs/vshrs_vs_1d_int32_t, not implemented): now templates_extra.py.  torch is the oracle, with
# negative values so that the right shift's sign fill shows.
@triton.jit
def shift_by_scalar(x_ptr, left_ptr, right_ptr, s, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(left_ptr + offs, x << s)
    tl.store(right_ptr + offs, x >> s)


def _shifts():
    x = torch.arange(-32, 32, dtype=torch.int32) * 977
    left, right = torch.zeros_like(x), torch.zeros_like(x)
    shift_by_scalar[(1,)](x, left, right, 3, BLOCK=64)
    return torch.equal(left, x << 3), torch.equal(right, x >> 3)


def test_an_int32_shift_by_a_scalar_runs_compiled_and_matches_torch():
    (left_ok, right_ok), = triton_dist.launch(_shifts, world_size=1, backend="hivm").values
    assert left_ok and right_ok


# A backend bug the differential run found (conformance case float_unary_ops): the compiler range-reduces
# tl.sin with vcast_float_to_float_1d_with_mode (round to an integral value, Cast1D.cpp:164-171), which the
# numpy template copied unrounded, so sin came out near 0.  torch is the oracle; the compiled kernel's own
# polynomial differs from libm in the last bits, hence the tolerance.
@triton.jit
def sine(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.sin(tl.load(x_ptr + offs)))


def _sine():
    x = torch.linspace(-20.0, 20.0, 64)
    out = torch.full((64,), float("nan"))
    sine[(1,)](x, out, BLOCK=64)
    return (out.double() - torch.sin(x.double())).abs().max().item()


def test_sin_range_reduction_rounds_as_the_cast_mode_says():
    (err,), = [triton_dist.launch(_sine, world_size=1, backend="hivm").values]
    assert err < 1e-5, err


# Found by the differential run (conformance cases atomics, spin_lock).  Atomics on global memory run
# inside the compiler's block-ordered lock (sync_block_lock/unlock, SyncBlockLock.cpp; the lock words
# sized by the module's infer_sync_block_lock_num_function): a backend gap, now templates_extra.py.
@triton.jit
def count_and_max(cnt_ptr, mx_ptr):
    pid = tl.program_id(0)
    tl.atomic_add(cnt_ptr, 1)
    tl.atomic_max(mx_ptr, pid * 3 - 20)


def _atomics():
    cnt, mx = torch.zeros(1, dtype=torch.int32), torch.full((1,), -100, dtype=torch.int32)
    count_and_max[(12,)](cnt, mx)
    return cnt.item(), mx.item()


def test_atomics_run_under_the_compilers_block_ordered_lock_and_match_torch():
    (got,), = [triton_dist.launch(_atomics, world_size=1, backend="hivm").values]
    assert got == (12, 11 * 3 - 20), got


# COMPILER FINDING (reproduces with triton-adapter-opt 3.2.0): tl.atomic_cas returns the memory as it is
# *after* the swap, not the value it found.  The adapter's output (kernel.ttadapter-out.mlir) writes the
# compare-and-select with a linalg.generic into the pointer's memref and then copies that memref out
# (memref.copy after the generic) as the result.  So `while tl.atomic_cas(lock, 0, 1) == 1: pass` (the
# spin lock of Triton's test_core.py::test_atomic_cas) never leaves the loop: the block that takes the
# lock sees 1 and spins (on the NPU a hang, here the launch's timeout).  Triton's semantics (and torch
# as the oracle here): the old value, 0.
@triton.jit
def cas_once(lock_ptr, old_ptr):
    tl.store(old_ptr, tl.atomic_cas(lock_ptr, 0, 1))


def _cas():
    lock, old = torch.zeros(1, dtype=torch.int32), torch.full((1,), -1, dtype=torch.int32)
    cas_once[(1,)](lock, old)
    return old.item(), lock.item()


def test_atomic_cas_returns_the_swapped_in_value_not_the_old_one():
    (old, lock), = triton_dist.launch(_cas, world_size=1, backend="hivm").values
    assert lock == 1                    # the swap happened (torch: lock 0 -> 1)
    assert old == 1, f"compiled atomic_cas returned {old} (Triton's semantics: the old value, 0)"
    # the reason, in the adapter's output: the result is copied out of the lock's memref after the generic
    import os
    import tempfile
    from triton_dist.backend_ascend import pipeline, toolchain
    with tempfile.TemporaryDirectory() as work:
        assert pipeline._compile(cas_once, "cas_once", {"lock_ptr": "*i32", "old_ptr": "*i32"}, {},
                                 pipeline.DEFAULT_TARGET, None, work, toolchain.find()).accepted
        with open(os.path.join(work, "kernel.ttadapter-out.mlir")) as f:
            text = f.read()
    generic = text.index("linalg.generic")
    lock_view = text[generic:].split("outs(", 1)[1].split(" ", 1)[0]          # the memref the swap writes
    assert f"memref.copy {lock_view}, " in text[generic:], text[generic:generic + 1500]


# Backend gaps the differential run found (conformance case reductions_and_scans), now templates_extra.py:
# the index-returning reductions (reduce_max_with_index_left_ar, reduce_min_with_index_left_ra) and the
# running product (cumprod_ra).  torch is the oracle; the rows hold ties so that the first index shows.
@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def index_reductions(x_ptr, mx_ptr, imx_ptr, imn_ptr, prod_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None]
    c = tl.arange(0, N)[None, :]
    v = tl.load(x_ptr + r * N + c)
    mx, idx = tl.max(v, axis=1, return_indices=True)
    tl.store(mx_ptr + tl.arange(0, M), mx)
    tl.store(imx_ptr + tl.arange(0, M), idx)
    tl.store(imn_ptr + tl.arange(0, N), tl.argmin(v, axis=0))
    tl.store(prod_ptr + r * N + c, tl.associative_scan(v, 0, _mul))


def _index_reductions():
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0, 0.5, 3.0, 1.0, 2.0],
                      [-1.0, -1.0, 0.5, 0.5, -3.0, -3.0, 2.0, 2.0],
                      [0.5, 2.0, -0.5, 1.5, -1.0, 0.25, 1.0, -2.0],
                      [2.0, 0.5, 0.5, -2.0, 1.5, 0.5, -0.5, 0.5]])
    mx, imx = torch.zeros(4), torch.full((4,), -1, dtype=torch.int32)
    imn, prod = torch.full((8,), -1, dtype=torch.int32), torch.zeros(4, 8)
    index_reductions[(1,)](x, mx, imx, imn, prod, M=4, N=8)
    want_mx, want_imx = x.max(dim=1)            # torch: the first index of the maximum
    return (torch.equal(mx, want_mx), imx.tolist(), want_imx.tolist(), imn.tolist(), x.argmin(dim=0).tolist(),
            torch.equal(prod, torch.cumprod(x, dim=0)))


def test_index_reductions_and_a_running_product_match_torch():
    (mx_ok, imx, want_imx, imn, want_imn, prod_ok), = triton_dist.launch(_index_reductions, world_size=1,
                                                                        backend="hivm").values
    assert mx_ok and prod_ok
    assert imx == want_imx and imn == want_imn, (imx, want_imx, imn, want_imn)


# COMPILER FINDING (the #2332 class, for stores; found by the differential run: corpus case
# rejection_greedy_spec_len_1): two masked stores into the even and odd elements of a row pair
# (out + offs * 2, out + offs * 2 + 1) are compiled with a read of the whole span (load_gm_to_ubuf of
# 2 * BLOCK elements), so the tail block's masked-off lanes read past the tensor: on the NPU the MTE fault
# (error 507035), reported here with the buffer and the masked source lines.  The twin with the buffer
# padded to the grid agrees with torch, the masked-off lanes left as they were.
@triton.jit
def strided_tail_store(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, m)
    tl.store(out_ptr + offs * 2, x, m)
    tl.store(out_ptr + offs * 2 + 1, x + 1, m & (x % 2 == 0))


def _strided_tail(rows):
    x = torch.arange(13, dtype=torch.int32) + 100
    out = torch.full((rows, 2), -1, dtype=torch.int32)
    strided_tail_store[(4,)](out, x, 13, BLOCK=4)
    want = torch.full((rows, 2), -1, dtype=torch.int32)
    want[:13, 0] = x
    want[:13, 1] = torch.where(x % 2 == 0, x + 1, -1)
    return torch.equal(out, want)


def test_a_strided_masked_store_reads_the_whole_span_and_faults_in_the_tail_block():
    from triton_dist.backend_ascend.cpu_run import memory as M
    with pytest.raises(triton_dist.RankError) as e:
        triton_dist.launch(_strided_tail, 13, world_size=1, backend="hivm")
    msg = str(e.value)
    assert M.MTE_OUT_OF_RANGE in msg and "argument 'out_ptr' (int32[13, 2])" in msg, msg
    assert "bytes 96..128 of a 104-byte buffer" in msg and "masked by `m`" in msg, msg
    (ok,), = [triton_dist.launch(_strided_tail, 16, world_size=1, backend="hivm").values]
    assert ok


# Backend gaps the differential run found (corpus cases sort_*, topk_logits_mask_sort, flip_blocks,
# rejection_greedy_spec_len_1), now templates_extra.py: triton-ascend's extension sort (ascending,
# descending) and flip.  torch is the oracle.
@triton.jit
def sort_and_flip(x_ptr, up_ptr, down_ptr, rev_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    tl.store(up_ptr + i, ascend_ext.sort(x, descending=False, dim=0))
    tl.store(down_ptr + i, ascend_ext.sort(x, descending=True, dim=0))
    tl.store(rev_ptr + i, ascend_ext.flip(x, 0))


def _sort_and_flip():
    x = torch.randn(32, generator=torch.Generator().manual_seed(3))
    up, down, rev = (torch.zeros(32) for _ in range(3))
    sort_and_flip[(1,)](x, up, down, rev, N=32)
    return (torch.equal(up, torch.sort(x).values), torch.equal(down, torch.sort(x, descending=True).values),
            torch.equal(rev, torch.flip(x, (0,))))


def test_sort_and_flip_run_compiled_and_match_torch():
    (got,), = [triton_dist.launch(_sort_and_flip, world_size=1, backend="hivm").values]
    assert got == (True, True, True), got


# Backend gaps the differential run found (corpus cases attention_*_block_ptr_fp16), now templates_extra.py:
# mma_tile_<A>_to_<C>_tb (tl.dot with a transposed right operand) and broadcast_last_axis_align_2d.
# torch is the oracle; M, N and K all differ so that a transposition mistaken shows.
@triton.jit
def dot_b_transposed(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[:, None] * K + rk[None, :])              # N x K, used as its transpose
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, tl.trans(b)))


def _dot_bt():
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(16, 32, generator=g).half(), torch.randn(64, 32, generator=g).half()
    c = torch.full((16, 64), float("nan"))
    dot_b_transposed[(1,)](a, b, c, M=16, N=64, K=32)
    return (c.double() - a.double() @ b.double().T).abs().max().item()


def test_a_dot_with_a_transposed_operand_matches_torch():
    from triton_dist.backend_ascend.cpu_run import stages, stages_ir
    _, text = stages_ir.compiled_ir(dot_b_transposed, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                                    {"M": 16, "N": 64, "K": 32}, after=stages.FINAL)
    assert "mma_tile_half_to_float_tb" in text          # the template this covers
    (err,), = [triton_dist.launch(_dot_bt, world_size=1, backend="hivm").values]
    assert err < 1e-3, err
