"""Softmax (persistent rows, masked columns; and a whole-row block that overflows the UB) and a fused
attention forward written with block pointers (tl.make_block_ptr / tl.advance)."""
import torch
import triton
import triton.language as tl

from . import Case, Compile, FP32_MATH, TA, randn


# style: triton-lang/triton-ascend third_party/ascend/tutorials/02-fused-softmax.py
@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step):
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask, other=-float("inf"))
        numerator = tl.exp(row - tl.max(row, axis=0))
        tl.store(output_ptr + row_idx * output_row_stride + col_offsets, numerator / tl.sum(numerator, axis=0),
                 mask=mask)


def _softmax_run(x):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    softmax_kernel[(min(8, n_rows), 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                           triton.next_power_of_2(n_cols))
    return y


_SOFTMAX_SIG = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
                "n_rows": "i32", "n_cols": "i32"}


# style: triton-lang/triton-ascend third_party/ascend/tutorials/04-fused-attention.py
@triton.jit
def _attn_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, qk_scale, N_CTX: tl.constexpr, BLOCK_N: tl.constexpr):
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K_block_ptr)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp(qk - m_ij[:, None])
        alpha = tl.math.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V_block_ptr)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
        K_block_ptr = tl.advance(K_block_ptr, (BLOCK_N, 0))
        V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
    return acc, l_i, m_i


# style: triton-lang/triton-ascend third_party/ascend/tutorials/04-fused-attention.py
@triton.jit
def attn_fwd_kernel(Q, K, V, Out, sm_scale, stride_qh: tl.constexpr, stride_qm: tl.constexpr, H: tl.constexpr,
                    N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    NUM_BLOCKS_M: tl.constexpr = N_CTX // BLOCK_M
    for task in range(tl.program_id(0), NUM_BLOCKS_M * H, tl.num_programs(0)):
        off_h = task // NUM_BLOCKS_M
        m_blk = task % NUM_BLOCKS_M
        base = off_h.to(tl.int64) * stride_qh
        Q_bp = tl.make_block_ptr(base=Q + base, shape=(N_CTX, HEAD_DIM), strides=(stride_qm, 1),
                                 offsets=(m_blk * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
        K_bp = tl.make_block_ptr(base=K + base, shape=(N_CTX, HEAD_DIM), strides=(stride_qm, 1),
                                 offsets=(0, 0), block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
        V_bp = tl.make_block_ptr(base=V + base, shape=(N_CTX, HEAD_DIM), strides=(stride_qm, 1),
                                 offsets=(0, 0), block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
        O_bp = tl.make_block_ptr(base=Out + base, shape=(N_CTX, HEAD_DIM), strides=(stride_qm, 1),
                                 offsets=(m_blk * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        q = tl.load(Q_bp)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_bp, V_bp, sm_scale, N_CTX, BLOCK_N)
        tl.store(O_bp, (acc / l_i[:, None]).to(Out.type.element_ty))


def _attn_inputs():
    return dict(q=randn((2, 32, 16), 121, torch.float16), k=randn((2, 32, 16), 122, torch.float16),
                v=randn((2, 32, 16), 123, torch.float16))


def _attn_run(q, k, v):
    o = torch.empty_like(q)
    H, N, D = q.shape
    attn_fwd_kernel[(4,)](q, k, v, o, 0.25, q.stride(0), q.stride(1), H, N, D, BLOCK_M=16, BLOCK_N=16)
    return o


def _attn_ref(q, k, v):
    # the tutorial starts l_i at 1.0 and m_i at -inf, so its denominator is sum(p) + exp(-inf - m) = sum(p)
    s = (q.float() @ k.float().transpose(1, 2)) * 0.25
    return torch.softmax(s, -1).to(torch.float16).float().__matmul__(v.float()).to(torch.float16)


# style: triton-lang/triton-ascend third_party/ascend/tutorials/04-fused-attention.py (_attn_fwd_inner's stages)
@triton.jit
def _causal_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, STAGE: tl.constexpr, offs_m, offs_n):
    if STAGE == 1:                                  # the blocks left of the diagonal: no mask
        tl.static_assert(BLOCK_M >= BLOCK_N)
        lo, hi = 0, start_m * BLOCK_M
    else:                                           # the diagonal block: the causal mask
        tl.static_assert(BLOCK_M >= BLOCK_N)
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    K_block_ptr = tl.advance(K_block_ptr, (lo, 0))
    V_block_ptr = tl.advance(V_block_ptr, (lo, 0))
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        qk = tl.dot(q, tl.trans(tl.load(K_block_ptr)))
        if STAGE == 2:
            causal = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(causal, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            qk = qk * qk_scale
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        p = tl.math.exp(qk)
        v = tl.load(V_block_ptr)
        alpha = tl.math.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
        V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
        K_block_ptr = tl.advance(K_block_ptr, (BLOCK_N, 0))
    return acc, l_i, m_i


# style: triton-lang/triton-ascend third_party/ascend/tutorials/04-fused-attention.py (STAGE 3: causal)
@triton.jit
def attn_fwd_causal_kernel(Q, K, V, M, Out, sm_scale, stride_qh: tl.constexpr, stride_qm: tl.constexpr,
                           H: tl.constexpr, N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    NUM_BLOCKS_M = N_CTX // BLOCK_M
    for task in range(tl.program_id(0), NUM_BLOCKS_M * H, 3):
        off_h = task // NUM_BLOCKS_M
        start_m = task % NUM_BLOCKS_M
        base = off_h.to(tl.int64) * stride_qh
        Q_bp = tl.make_block_ptr(Q + base, (N_CTX, HEAD_DIM), (stride_qm, 1), (start_m * BLOCK_M, 0),
                                 (BLOCK_M, HEAD_DIM), (1, 0))
        K_bp = tl.make_block_ptr(K + base, (N_CTX, HEAD_DIM), (stride_qm, 1), (0, 0), (BLOCK_N, HEAD_DIM), (1, 0))
        V_bp = tl.make_block_ptr(V + base, (N_CTX, HEAD_DIM), (stride_qm, 1), (0, 0), (BLOCK_N, HEAD_DIM), (1, 0))
        O_bp = tl.make_block_ptr(Out + base, (N_CTX, HEAD_DIM), (stride_qm, 1), (start_m * BLOCK_M, 0),
                                 (BLOCK_M, HEAD_DIM), (1, 0))
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        q = tl.load(Q_bp)
        if STAGE & 1:
            acc, l_i, m_i = _causal_inner(acc, l_i, m_i, q, K_bp, V_bp, start_m, sm_scale, BLOCK_M, BLOCK_N,
                                          4 - STAGE, offs_m, offs_n)
        if STAGE & 2:
            acc, l_i, m_i = _causal_inner(acc, l_i, m_i, q, K_bp, V_bp, start_m, sm_scale, BLOCK_M, BLOCK_N,
                                          2, offs_m, offs_n)
        m_i += tl.math.log(l_i)
        tl.store(M + off_h * N_CTX + offs_m, m_i)
        tl.store(O_bp, (acc / l_i[:, None]).to(Out.type.element_ty))


def _causal_run(q, k, v):
    o = torch.empty_like(q)
    H, N, D = q.shape
    m = torch.empty(H, N)
    attn_fwd_causal_kernel[(3,)](q, k, v, m, o, 0.25, q.stride(0), q.stride(1), H, N, D, BLOCK_M=16, BLOCK_N=16,
                                 STAGE=3)
    return o, m


def _causal_ref(q, k, v):
    # the tutorial starts l_i at 1.0 with m_i = -inf, which adds nothing (exp(-inf)); masked scores get -1e6
    s = (q.float() @ k.float().transpose(1, 2)) * 0.25
    n = s.shape[-1]
    s = s + torch.where(torch.ones(n, n).tril().bool(), 0.0, -1.0e6)
    o = torch.softmax(s, -1).to(torch.float16).float() @ v.float()
    return o.to(torch.float16), torch.logsumexp(s, -1)


CASES = [
    Case("softmax_persistent_rows", TA + "third_party/ascend/tutorials/02-fused-softmax.py",
         softmax_kernel, lambda: dict(x=randn((19, 97), 124)), _softmax_run, lambda x: torch.softmax(x, 1),
         [Compile(_SOFTMAX_SIG, {"BLOCK_SIZE": 128})], **FP32_MATH),
    # a whole 65536-column row in one block: runs on the simulator, the NPU compiler says it does not fit
    Case("softmax_whole_row_ub_overflow", TA + "third_party/ascend/tutorials/02-fused-softmax.py",
         softmax_kernel, lambda: dict(x=randn((2, 65536), 125)), _softmax_run, lambda x: torch.softmax(x, 1),
         [Compile(_SOFTMAX_SIG, {"BLOCK_SIZE": 65536}, expect="ub overflow")], **FP32_MATH),
    Case("attention_fwd_block_ptr_fp16", TA + "third_party/ascend/tutorials/04-fused-attention.py",
         attn_fwd_kernel, _attn_inputs, _attn_run, _attn_ref,
         [Compile({"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32"},
                  {"stride_qh": 512, "stride_qm": 16, "H": 2, "N_CTX": 32, "HEAD_DIM": 16, "BLOCK_M": 16,
                   "BLOCK_N": 16})], atol=1e-2, rtol=1e-2, block_pointers=True),
    Case("attention_causal_block_ptr_fp16", TA + "third_party/ascend/tutorials/04-fused-attention.py",
         attn_fwd_causal_kernel, lambda: dict(q=randn((2, 48, 16), 126, torch.float16),
                                              k=randn((2, 48, 16), 127, torch.float16),
                                              v=randn((2, 48, 16), 128, torch.float16)), _causal_run, _causal_ref,
         [Compile({"Q": "*fp16", "K": "*fp16", "V": "*fp16", "M": "*fp32", "Out": "*fp16", "sm_scale": "fp32"},
                  {"stride_qh": 768, "stride_qm": 16, "H": 2, "N_CTX": 48, "HEAD_DIM": 16, "BLOCK_M": 16,
                   "BLOCK_N": 16, "STAGE": 3})], atol=1e-2, rtol=1e-2, block_pointers=True),
]
