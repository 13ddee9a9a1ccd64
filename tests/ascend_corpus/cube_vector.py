"""Cube/vector kernels: a dot handed to the vector core through sync_block_set/wait (with the PIPE enum
as a module global), the vector work split by sub_vec_id, and sync_block_all barriers."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import Case, Compile, EXACT, FP32_MATH, TA, randn

pipe = extension.PIPE          # a module-level global of an extension enum, as triton-ascend's tests write it


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sync_block.py
@triton.jit
def matmul_exp_sync_kernel(A_ptr, B_ptr, C_ptr, TBuff_ptr, M, N, K: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1)
    one_r = tl.arange(0, 1)[:, None]
    one_c = tl.arange(0, 1)[None, :]
    ks = tl.arange(0, K)
    a = tl.load(A_ptr + (row + one_r) * K + ks[None, :])                  # [1, K]
    b = tl.load(B_ptr + ks[:, None] * N + (col + one_c))                  # [K, 1]
    t = TBuff_ptr + (row + one_r) * N + (col + one_c)
    tl.store(t, tl.dot(a, b))                                             # the cube writes the workspace
    extension.sync_block_set("cube", "vector", 5, pipe.PIPE_MTE1, pipe.PIPE_MTE3)
    extension.sync_block_wait("cube", "vector", 5, pipe.PIPE_MTE1, pipe.PIPE_MTE3)
    tl.store(C_ptr + (row + one_r) * N + (col + one_c), tl.exp(tl.load(t)))   # the vector reads it back


def _mes_run(a, b):
    M, K = a.shape
    N = b.shape[1]
    c, t = torch.zeros(M, N), torch.zeros(M, N)
    matmul_exp_sync_kernel[(M, N)](a, b, c, t, M, N, K)
    return c


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sub_vec_id.py
@triton.jit
def matmul_exp_sub_vec_kernel(A_ptr, B_ptr, C_ptr, TBuff_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                              SUB_M: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    acc = tl.dot(tl.load(A_ptr + rm * K + rk[None, :]), tl.load(B_ptr + rk[:, None] * N + rn))
    tl.store(TBuff_ptr + rm * N + rn, acc)
    # each vector sub-core takes SUB_M of the rows
    rows = extension.sub_vec_id() * SUB_M + tl.arange(0, SUB_M)[:, None]
    tl.store(C_ptr + rows * N + rn, tl.exp(tl.load(TBuff_ptr + rows * N + rn)))


def _mesv_run(a, b):
    M, K = a.shape
    N = b.shape[1]
    c, t = torch.zeros(M, N), torch.zeros(M, N)
    matmul_exp_sub_vec_kernel[(1,)](a, b, c, t, M, N, K, M // 2)
    return c


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sync_block_all.py
@triton.jit
def neighbour_after_barrier_kernel(slots, out, MODE: tl.constexpr, EVENT: tl.constexpr):
    pid = tl.program_id(0)
    one = tl.arange(0, 1)
    tl.store(slots + pid + one, tl.full((1,), 10, tl.int32) + pid)
    extension.sync_block_all(MODE, EVENT)                   # every core's slot is written past this point
    nxt = (pid + 1) % tl.num_programs(0)
    tl.store(out + pid + one, tl.load(slots + nxt + one))


def _nb_run(n, mode, event):
    slots, out = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
    neighbour_after_barrier_kernel[(n,)](slots, out, MODE=mode, EVENT=event)
    return out


def _nb_ref(n, mode, event):
    return (torch.arange(n, dtype=torch.int32) + 1) % n + 10


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sync_block_all.py (all_sub_vector)
@triton.jit
def sub_vector_swap_kernel(A_ptr, B_ptr, WS_ptr, C_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    HALF: tl.constexpr = M // 2
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    acc = tl.dot(tl.load(A_ptr + rm * K + rk[None, :]), tl.load(B_ptr + rk[:, None] * N + rn))
    tl.store(WS_ptr + rm * N + rn, acc)
    extension.sync_block_set("cube", "vector", 0)
    extension.sync_block_wait("cube", "vector", 0)
    sid = extension.sub_vec_id()
    mine = sid * HALF + tl.arange(0, HALF)[:, None]
    theirs = (1 - sid) * HALF + tl.arange(0, HALF)[:, None]
    v = tl.exp(tl.load(WS_ptr + mine * N + rn))
    tl.store(WS_ptr + M * N + mine * N + rn, v)           # each sub-core its half of exp(A @ B)
    extension.sync_block_all("all_sub_vector", 11)        # both halves written past this point
    tl.store(C_ptr + mine * N + rn, tl.load(WS_ptr + M * N + theirs * N + rn))    # the other sub-core's half


def _swap_run(a, b):
    M, K = a.shape
    N = b.shape[1]
    ws, c = torch.zeros(2 * M * N), torch.zeros(M, N)
    sub_vector_swap_kernel[(1,)](a, b, ws, c, M, N, K)
    return c


def _swap_ref(a, b):
    e = (a @ b).exp()
    h = a.shape[0] // 2
    return torch.cat([e[h:], e[:h]])


CASES = [
    Case("matmul_exp_sync_block", TA + "third_party/ascend/unittest/pytest_ut/test_sync_block.py",
         matmul_exp_sync_kernel, lambda: dict(a=randn((4, 4), 71), b=randn((4, 4), 72)), _mes_run,
         lambda a, b: (a @ b).exp(),
         [Compile({"A_ptr": "*fp32", "B_ptr": "*fp32", "C_ptr": "*fp32", "TBuff_ptr": "*fp32", "M": "i32",
                   "N": "i32"}, {"K": 4})], **FP32_MATH),
    Case("matmul_exp_sub_vec_id", TA + "third_party/ascend/unittest/pytest_ut/test_sub_vec_id.py",
         matmul_exp_sub_vec_kernel, lambda: dict(a=randn((2, 3), 73), b=randn((3, 5), 74)), _mesv_run,
         lambda a, b: (a @ b).exp(),
         [Compile({"A_ptr": "*fp32", "B_ptr": "*fp32", "C_ptr": "*fp32", "TBuff_ptr": "*fp32"},
                  {"M": 2, "N": 5, "K": 3, "SUB_M": 1})], **FP32_MATH),
    # 4 seeds of the random schedule: before sync_block_all drained the stores in flight (0c1cc5c), seeds 0-3
    # showed the stale slot in each of these three kernels (measured: all_vector seed 2, all 2, all_sub_vector 0, 3)
    Case("sync_block_all_vector", TA + "third_party/ascend/unittest/pytest_ut/test_sync_block_all.py",
         neighbour_after_barrier_kernel, lambda: dict(n=6, mode="all_vector", event=9), _nb_run, _nb_ref,
         [Compile({"slots": "*i32", "out": "*i32"}, {"MODE": "all_vector", "EVENT": 9})],
         seeds=tuple(range(4)), **EXACT),
    Case("sync_block_all_all", TA + "third_party/ascend/unittest/pytest_ut/test_sync_block_all.py",
         neighbour_after_barrier_kernel, lambda: dict(n=4, mode="all", event=10), _nb_run, _nb_ref,
         [Compile({"slots": "*i32", "out": "*i32"}, {"MODE": "all", "EVENT": 10})], seeds=tuple(range(4)), **EXACT),
    Case("sync_block_all_sub_vector", TA + "third_party/ascend/unittest/pytest_ut/test_sync_block_all.py",
         sub_vector_swap_kernel, lambda: dict(a=randn((4, 8), 75), b=randn((8, 16), 76)), _swap_run, _swap_ref,
         [Compile({"A_ptr": "*fp32", "B_ptr": "*fp32", "WS_ptr": "*fp32", "C_ptr": "*fp32"},
                  {"M": 4, "N": 16, "K": 8}, expect="cannot lower")], seeds=tuple(range(4)), **FP32_MATH),
]
