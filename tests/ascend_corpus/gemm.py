"""GEMMs: an autotuned masked GEMM (every config checked), and one with @triton.heuristics."""
import torch
import triton
import triton.language as tl

from . import Case, Compile, FP32_MATH, TA, randn


# style: triton-lang/triton-ascend third_party/ascend/tutorials/05-matrix-multiplication.py
@triton.autotune(configs=[triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}),
                          triton.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16})],
                 key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_base = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_base = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_base + k * BLOCK_SIZE_K * stride_ak,
                    mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_SIZE_K), other=0.0)
        b = tl.load(b_base + k * BLOCK_SIZE_K * stride_bk,
                    mask=(offs_bn[None, :] < N) & (offs_k[:, None] < K - k * BLOCK_SIZE_K), other=0.0)
        acc = tl.dot(a, b, acc)
    c_ptrs = c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


def _mm_run(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1))
    return c


_MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
           "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
           "stride_cm": "i32", "stride_cn": "i32"}


# style: triton-lang/triton-ascend third_party/ascend/tutorials/05-matrix-multiplication.py (with @triton.heuristics)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def matmul_bias_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=rm[:, None] < M, other=0.0)
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        else:
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                        mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _mmb_run(a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N)
    matmul_bias_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, bias, c, M, N, K, BLOCK_M=16, BLOCK_N=16,
                                                                 BLOCK_K=16)
    return c


CASES = [
    Case("matmul_autotuned_fp16", TA + "third_party/ascend/tutorials/05-matrix-multiplication.py",
         matmul_kernel, lambda: dict(a=randn((40, 72), 131, torch.float16), b=randn((72, 50), 132, torch.float16)),
         _mm_run, lambda a, b: (a.float() @ b.float()).to(torch.float16),
         [Compile(_MM_SIG, {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32}),
          Compile(_MM_SIG, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16})], atol=2e-2, rtol=2e-3),
    Case("matmul_bias_heuristics", TA + "third_party/ascend/tutorials/05-matrix-multiplication.py",
         matmul_bias_kernel, lambda: dict(a=randn((24, 40), 133), b=randn((40, 20), 134), bias=randn(20, 135)),
         _mmb_run, lambda a, b, bias: a @ b + bias,
         [Compile({"a_ptr": "*fp32", "b_ptr": "*fp32", "bias_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                   "K": "i32"}, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "EVEN_K": False})], **FP32_MATH),
]
