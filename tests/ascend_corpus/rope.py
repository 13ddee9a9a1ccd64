"""Rotary embedding (neox style, bf16 q/k, fp32 cos/sin cache indexed by position)."""
import torch
import triton
import triton.language as tl

from . import BF16, Case, Compile, VA, gen, randn

BF = torch.bfloat16


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/rope.py
@triton.jit
def rope_neox_kernel(q_ptr, q_row_stride, k_ptr, k_row_stride, cos_sin_ptr, cos_sin_row_stride, pos_ptr, num_tokens,
                     n_qh: tl.constexpr, n_kh: tl.constexpr, hd: tl.constexpr, rope_dim: tl.constexpr,
                     pad_rope_dim: tl.constexpr):
    half = tl.arange(0, pad_rope_dim // 2)
    hmask = half < rope_dim // 2
    for row in tl.range(tl.program_id(0).to(tl.int64), num_tokens, tl.num_programs(0)):
        pos = tl.load(pos_ptr + row).to(tl.int64)
        cos = tl.load(cos_sin_ptr + pos * cos_sin_row_stride + half, mask=hmask, other=0).to(tl.float32)
        sin = tl.load(cos_sin_ptr + pos * cos_sin_row_stride + rope_dim // 2 + half, mask=hmask, other=0).to(tl.float32)
        qh = tl.arange(0, n_qh)[:, None] * hd
        m = (tl.arange(0, n_qh)[:, None] < n_qh) & hmask[None, :]
        q1 = tl.load(q_ptr + row * q_row_stride + qh + half[None, :], mask=m, other=0).to(tl.float32)
        q2 = tl.load(q_ptr + row * q_row_stride + qh + rope_dim // 2 + half[None, :], mask=m, other=0).to(tl.float32)
        tl.store(q_ptr + row * q_row_stride + qh + half[None, :], (q1 * cos - q2 * sin).to(q_ptr.dtype.element_ty),
                 mask=m)
        tl.store(q_ptr + row * q_row_stride + qh + rope_dim // 2 + half[None, :],
                 (q2 * cos + q1 * sin).to(q_ptr.dtype.element_ty), mask=m)
        kh = tl.arange(0, n_kh)[:, None] * hd
        km = (tl.arange(0, n_kh)[:, None] < n_kh) & hmask[None, :]
        k1 = tl.load(k_ptr + row * k_row_stride + kh + half[None, :], mask=km, other=0).to(tl.float32)
        k2 = tl.load(k_ptr + row * k_row_stride + kh + rope_dim // 2 + half[None, :], mask=km, other=0).to(tl.float32)
        tl.store(k_ptr + row * k_row_stride + kh + half[None, :], (k1 * cos - k2 * sin).to(k_ptr.dtype.element_ty),
                 mask=km)
        tl.store(k_ptr + row * k_row_stride + kh + rope_dim // 2 + half[None, :],
                 (k2 * cos + k1 * sin).to(k_ptr.dtype.element_ty), mask=km)


T, NQ, NK, HD, RD = 5, 4, 2, 32, 24          # rope_dim 24 < head_dim 32: half of 12, padded to 16


def _rope_inputs():
    inv = 1.0 / (10000 ** (torch.arange(0, RD, 2, dtype=torch.float32) / RD))
    ang = torch.arange(16, dtype=torch.float32)[:, None] * inv[None, :]
    return dict(q=randn((T, NQ, HD), 141, BF), k=randn((T, NK, HD), 142, BF),
                cos_sin=torch.cat([ang.cos(), ang.sin()], -1), pos=torch.randint(0, 16, (T,), generator=gen(143)))


def _rope_run(q, k, cos_sin, pos):
    q, k = q.clone(), k.clone()
    rope_neox_kernel[(2,)](q, q.stride(0), k, k.stride(0), cos_sin, cos_sin.stride(0), pos, T, NQ, NK, HD, RD,
                           triton.next_power_of_2(RD))
    return q, k


def _rope_ref(q, k, cos_sin, pos):
    cos, sin = cos_sin[pos.long(), :RD // 2][:, None, :], cos_sin[pos.long(), RD // 2:][:, None, :]

    def rot(x):
        x = x.float().clone()
        x1, x2 = x[..., :RD // 2].clone(), x[..., RD // 2:RD].clone()
        x[..., :RD // 2] = x1 * cos - x2 * sin
        x[..., RD // 2:RD] = x2 * cos + x1 * sin
        return x.to(BF)
    return rot(q), rot(k)


CASES = [
    Case("rope_neox_bf16", VA + "vllm_ascend/ops/triton/rope.py",
         rope_neox_kernel, _rope_inputs, _rope_run, _rope_ref,
         [Compile({"q_ptr": "*bf16", "q_row_stride": "i32", "k_ptr": "*bf16", "k_row_stride": "i32",
                   "cos_sin_ptr": "*fp32", "cos_sin_row_stride": "i32", "pos_ptr": "*i64", "num_tokens": "i32"},
                  {"n_qh": NQ, "n_kh": NK, "hd": HD, "rope_dim": RD, "pad_rope_dim": 32})], **BF16),
]
