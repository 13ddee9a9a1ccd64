"""Activations in bf16: SiLU-and-mul (SwiGLU), SwigluStep with extract_slice halves, GELU (tanh)."""
import math

import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import BF16, Case, Compile, TA, VA, randn

BF = torch.bfloat16


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/activation/swiglu_quant.py
@triton.jit
def silu_and_mul_kernel(x_ptr, out_ptr, total_rows, HALF_COLS: tl.constexpr, NUM_CORES: tl.constexpr):
    rows_per_core = (total_rows - 1) // NUM_CORES + 1
    pid = tl.program_id(0)
    row_begin = pid * rows_per_core
    if row_begin >= total_rows:
        return
    row_end = tl.minimum(row_begin + rows_per_core, total_rows)
    cols = tl.arange(0, HALF_COLS)
    for row in range(row_begin, row_end):
        gate = tl.load(x_ptr + row * 2 * HALF_COLS + cols)
        up = tl.load(x_ptr + row * 2 * HALF_COLS + HALF_COLS + cols)
        out = gate * tl.sigmoid(gate.to(tl.float32)).to(gate.dtype) * up          # bf16 products, as users write
        tl.store(out_ptr + row * HALF_COLS + cols, out)


def _silu_run(x):
    rows = x.shape[0]
    out = torch.empty(rows, x.shape[1] // 2, dtype=x.dtype)
    silu_and_mul_kernel[(4,)](x, out, rows, HALF_COLS=x.shape[1] // 2, NUM_CORES=4)
    return out


def _silu_ref(x):
    h = x.shape[1] // 2
    g, u = x[:, :h], x[:, h:]
    return g * torch.sigmoid(g.float()).to(BF) * u


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/activation/swiglustep.py
@triton.jit
def swiglustep_kernel(x_ptr, out_ptr, M, TOTAL_COLS: tl.constexpr, HALF_COLS: tl.constexpr, LIMIT: tl.constexpr,
                      NUM_CORES: tl.constexpr):
    block = (M - 1) // NUM_CORES + 1
    pid = tl.program_id(0)
    if pid * block >= M:
        return
    for row in range(pid * block, tl.minimum((pid + 1) * block, M)):
        x_row = tl.load(x_ptr + row * TOTAL_COLS + tl.arange(0, TOTAL_COLS))
        gate = extension.extract_slice(x_row, offsets=(0,), sizes=(HALF_COLS,), strides=(1,)).to(tl.float32)
        up = extension.extract_slice(x_row, offsets=(HALF_COLS,), sizes=(HALF_COLS,), strides=(1,)).to(tl.float32)
        s = tl.minimum(gate * tl.sigmoid(gate), LIMIT)          # silu first, then the upper clamp
        up = tl.maximum(-LIMIT, tl.minimum(up, LIMIT))
        tl.store(out_ptr + row * HALF_COLS + tl.arange(0, HALF_COLS), (s * up).to(out_ptr.dtype.element_ty))


def _step_run(x):
    M = x.shape[0]
    out = torch.empty(M, x.shape[1] // 2, dtype=x.dtype)
    swiglustep_kernel[(3,)](x, out, M, TOTAL_COLS=x.shape[1], HALF_COLS=x.shape[1] // 2, LIMIT=1.5, NUM_CORES=3)
    return out


def _step_ref(x):
    h = x.shape[1] // 2
    g, u = x[:, :h].float(), x[:, h:].float()
    return (torch.nn.functional.silu(g).clamp(max=1.5) * u.clamp(-1.5, 1.5)).to(BF)


# style: triton-lang/triton-ascend third_party/ascend/tutorials/01-vector-add.py (masked 1-D element-wise)
@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)          # computed in bf16, as the kernel is written
    y = 0.5 * x * (1 + (2 * tl.sigmoid(2 * inner.to(tl.float32)) - 1).to(x.dtype))   # tanh(u) = 2 sigmoid(2u) - 1
    tl.store(out_ptr + offs, y, mask=m)


def _gelu_run(x):
    out = torch.empty_like(x)
    gelu_tanh_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK_SIZE=128)
    return out


CASES = [
    Case("silu_and_mul_bf16", VA + "vllm_ascend/ops/triton/activation/swiglu_quant.py",
         silu_and_mul_kernel, lambda: dict(x=randn((10, 128), 51, BF)), _silu_run, _silu_ref,
         [Compile({"x_ptr": "*bf16", "out_ptr": "*bf16", "total_rows": "i32"}, {"HALF_COLS": 64, "NUM_CORES": 4})],
         atol=3e-2, rtol=2e-2),
    Case("swiglustep_bf16", VA + "vllm_ascend/ops/triton/activation/swiglustep.py",
         swiglustep_kernel, lambda: dict(x=randn((7, 64), 52, BF, 2.0)), _step_run, _step_ref,
         [Compile({"x_ptr": "*bf16", "out_ptr": "*bf16", "M": "i32"},
                  {"TOTAL_COLS": 64, "HALF_COLS": 32, "LIMIT": 1.5, "NUM_CORES": 3})], **BF16),
    Case("gelu_tanh_bf16", TA + "third_party/ascend/tutorials/01-vector-add.py",
         gelu_tanh_kernel, lambda: dict(x=randn(1000, 53, BF, 2.0)), _gelu_run,
         lambda x: torch.nn.functional.gelu(x.float(), approximate="tanh").to(BF),
         [Compile({"x_ptr": "*bf16", "out_ptr": "*bf16", "n": "i32"}, {"BLOCK_SIZE": 128})],
         atol=4e-2, rtol=3e-2),     # several bf16 roundings inside the kernel against torch's fp32 GELU
]
