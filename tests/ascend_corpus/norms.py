"""Norms in bf16 (and one fp32): RMSNorm, LayerNorm, add + RMSNorm + bias (plain and int8-quantised), L2 norm."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as al

from . import BF16, Case, Compile, FP32_MATH, SGL, TA, VA, gen, randn

BF = torch.bfloat16


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/batch_invariant/rmsnorm.py
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row_step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    for row in tl.range(tl.program_id(0), n_rows, row_step):
        x = tl.load(x_ptr + row * n_cols + cols, mask=col_mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(out_ptr + row * n_cols + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=col_mask)


def _rms_run(x, w):
    out = torch.empty_like(x)
    rows, cols = x.shape
    rmsnorm_kernel[(4,)](x, w, out, rows, cols, 1e-6, BLOCK_SIZE=triton.next_power_of_2(cols))
    return out


def _rms_ref(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


# style: triton-lang/triton-ascend third_party/ascend/tutorials/03-layer-norm.py
@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):                     # N = 200 in blocks of 64: a masked last block
        cols = off + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        d = tl.where(cols < N, tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32) - mean, 0.)
        acc += d * d
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        tl.store(Y + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


def _ln_inputs():
    return dict(x=(-2.3 + 0.5 * randn((6, 200), 21)).to(BF), w=torch.rand(200, generator=gen(22)).to(BF),
                b=torch.rand(200, generator=gen(23)).to(BF))


def _ln_run(x, w, b):
    y = torch.empty_like(x)
    mean, rstd = torch.empty(x.shape[0]), torch.empty(x.shape[0])
    layer_norm_fwd_kernel[(x.shape[0],)](x, y, w, b, mean, rstd, x.stride(0), x.shape[1], 1e-5, BLOCK_SIZE=64)
    return y, mean


def _ln_ref(x, w, b):
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[1],), w.float(), b.float(), 1e-5).to(BF)
    return y, x.float().mean(-1)


# style: sgl-project/sgl-kernel-npu python/sgl_kernel_npu/sgl_kernel_npu/norm/add_rmsnorm_bias.py
@triton.jit
def add_rmsnorm_bias_kernel(input_ptr, residual_ptr, weight_ptr, bias_ptr, scale_ptr, offset_ptr, output_ptr,
                            output2_ptr, batch_size, hidden_size: tl.constexpr, eps: tl.constexpr,
                            BLOCK_SIZE: tl.constexpr, COL_BLOCK_SIZE: tl.constexpr, QUANT: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_SIZE)
    valid = cols < hidden_size
    weight = tl.load(weight_ptr + cols, mask=valid, other=0.0)
    offs = row_start * hidden_size + cols
    for i in tl.range(row_start, batch_size, row_step):
        h = tl.load(input_ptr + offs, mask=valid, other=0.0)
        h += tl.load(residual_ptr + offs, mask=valid, other=0.0)          # bf16 + bf16
        tl.store(output2_ptr + offs, h, mask=valid)
        hf = h.to(tl.float32)
        rstd = 1 / tl.sqrt(tl.sum(hf * hf) / hidden_size + eps)
        hf = hf * rstd * weight + tl.load(bias_ptr + cols, mask=valid, other=0.0)
        if QUANT:
            sub_cols = tl.arange(0, COL_BLOCK_SIZE)
            for c0 in range(0, hidden_size, COL_BLOCK_SIZE):
                c = c0 + sub_cols
                m2 = c < hidden_size
                part = al.extract_slice(hf, (c0,), (COL_BLOCK_SIZE,), (1,))
                q = part * tl.load(scale_ptr + c, mask=m2, other=0.0) + tl.load(offset_ptr + c, mask=m2, other=0.0)
                tl.store(output_ptr + i * hidden_size + c, q.cast(tl.int8, overflow_mode="saturate"), mask=m2)
        else:
            tl.store(output_ptr + offs, hf, mask=valid)
        offs += row_step * hidden_size


def _arb_inputs():
    h = 96
    return dict(x=randn((5, h), 31, BF), r=randn((5, h), 32, BF), w=randn(h, 33, BF), b=randn(h, 34, BF, 0.1))


def _arb_run(x, r, w, b):
    rows, h = x.shape
    out, out2 = torch.empty_like(x), torch.empty_like(x)
    add_rmsnorm_bias_kernel[(2,)](x, r, w, b, None, None, out, out2, rows, h, 1e-6, BLOCK_SIZE=128,
                                  COL_BLOCK_SIZE=32, QUANT=False)
    return out, out2


def _arb_ref(x, r, w, b):
    h = x + r                                           # torch rounds the bf16 sum, as the NPU's bf16 add
    hf = h.float()
    y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float() + b.float()
    return y.to(BF), h


def _arbq_inputs():
    d = _arb_inputs()
    return dict(**d, scale=torch.full((96,), 80.0), offset=torch.zeros(96))        # some values saturate


def _arbq_run(x, r, w, b, scale, offset):
    rows, h = x.shape
    out, out2 = torch.empty(rows, h, dtype=torch.int8), torch.empty_like(x)
    add_rmsnorm_bias_kernel[(2,)](x, r, w, b, scale, offset, out, out2, rows, h, 1e-6, BLOCK_SIZE=128,
                                  COL_BLOCK_SIZE=32, QUANT=True)
    return out.float(), out2


def _arbq_ref(x, r, w, b, scale, offset):
    y, h = _arb_ref(x, r, w, b)
    hf = h.float()
    yf = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float() + b.float()
    # a float -> int8 cast truncates toward zero (fptosi), "saturate" clamps to int8's range
    q = torch.trunc(yf * scale + offset).clamp(-128, 127)
    return q, h


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/fla/l2norm.py
@triton.jit
def l2norm_fwd_kernel(x, y, eps, NB, T, D: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    i_t = tl.program_id(0)
    rows = i_t * BT + tl.arange(0, BT)
    cols = tl.arange(0, BD)
    m = (rows[:, None] < T) & (cols[None, :] < D)
    b = tl.load(x + rows[:, None] * D + cols[None, :], mask=m, other=0.0).to(tl.float32)
    rnorm = 1 / tl.sqrt(tl.sum(b * b, 1) + eps)
    tl.store(y + rows[:, None] * D + cols[None, :], (b * rnorm[:, None]).to(y.dtype.element_ty), mask=m)


def _l2_run(x):
    y = torch.empty_like(x)
    T, D = x.shape
    l2norm_fwd_kernel[(triton.cdiv(T, 16),)](x, y, 1e-6, triton.cdiv(T, 16), T, D=D, BT=16, BD=64)
    return y


CASES = [
    Case("rmsnorm_bf16", VA + "vllm_ascend/ops/triton/batch_invariant/rmsnorm.py",
         rmsnorm_kernel, lambda: dict(x=randn((9, 100), 41, BF), w=randn(100, 42, BF)), _rms_run, _rms_ref,
         [Compile({"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16", "n_rows": "i32", "n_cols": "i32",
                   "eps": "fp32"}, {"BLOCK_SIZE": 128})], **BF16),
    Case("layer_norm_bf16", TA + "third_party/ascend/tutorials/03-layer-norm.py",
         layer_norm_fwd_kernel, _ln_inputs, _ln_run, _ln_ref,
         [Compile({"X": "*bf16", "Y": "*bf16", "W": "*bf16", "B": "*bf16", "Mean": "*fp32", "Rstd": "*fp32",
                   "stride": "i32", "N": "i32", "eps": "fp32"}, {"BLOCK_SIZE": 64})], **BF16),
    Case("add_rmsnorm_bias_bf16", SGL + "python/sgl_kernel_npu/sgl_kernel_npu/norm/add_rmsnorm_bias.py",
         add_rmsnorm_bias_kernel, _arb_inputs, _arb_run, _arb_ref,
         [Compile({"input_ptr": "*bf16", "residual_ptr": "*bf16", "weight_ptr": "*bf16", "bias_ptr": "*bf16",
                   "output_ptr": "*bf16", "output2_ptr": "*bf16", "batch_size": "i32"},
                  {"scale_ptr": None, "offset_ptr": None, "hidden_size": 96, "eps": 1e-6, "BLOCK_SIZE": 128,
                   "COL_BLOCK_SIZE": 32, "QUANT": False})], **BF16),
    Case("add_rmsnorm_bias_int8_quant", SGL + "python/sgl_kernel_npu/sgl_kernel_npu/norm/add_rmsnorm_bias.py",
         add_rmsnorm_bias_kernel, _arbq_inputs, _arbq_run, _arbq_ref,
         [Compile({"input_ptr": "*bf16", "residual_ptr": "*bf16", "weight_ptr": "*bf16", "bias_ptr": "*bf16",
                   "scale_ptr": "*fp32", "offset_ptr": "*fp32", "output_ptr": "*i8", "output2_ptr": "*bf16",
                   "batch_size": "i32"},
                  {"hidden_size": 96, "eps": 1e-6, "BLOCK_SIZE": 128, "COL_BLOCK_SIZE": 32, "QUANT": True})],
         atol=1.0, rtol=0.0),       # one int8 step: fp32 sums in another order may truncate to either side
    Case("l2norm_rows", VA + "vllm_ascend/ops/triton/fla/l2norm.py",
         l2norm_fwd_kernel, lambda: dict(x=randn((40, 64), 43)), _l2_run,
         lambda x: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + 1e-6),
         [Compile({"x": "*fp32", "y": "*fp32", "eps": "fp32", "NB": "i32", "T": "i32"},
                  {"D": 64, "BT": 16, "BD": 64})], **FP32_MATH),
]
