"""Logits processing on half-precision logits, as samplers write it: a min-p filter (bf16 max and
comparisons), repetition/frequency/presence penalties (fp16), a log-softmax over bf16 rows."""
import torch
import triton
import triton.language as tl

from . import BF16, EXACT, FP16, VA, Case, Compile, gen, randn

BF = torch.bfloat16


# style: vllm-project/vllm-ascend vllm_ascend/worker/v2/sample/min_p.py
@triton.jit
def min_p_kernel(in_logits_ptr, out_logits_ptr, logits_stride, min_p_ptr, vocab_size, num_tokens,
                 BLOCK_SIZE: tl.constexpr):
    per_core = (num_tokens + tl.num_programs(0) - 1) // tl.num_programs(0)
    start = tl.program_id(0) * per_core
    for tok in tl.range(start, tl.minimum(start + per_core, num_tokens)):
        min_p = tl.load(min_p_ptr + tok).to(tl.float32)
        max_val = float("-inf")
        for i in range(0, vocab_size, BLOCK_SIZE):               # the row's max, in the logits' dtype
            cols = i + tl.arange(0, BLOCK_SIZE)
            logits = tl.load(in_logits_ptr + tok * logits_stride + cols, mask=cols < vocab_size, other=float("-inf"))
            max_val = tl.max(tl.maximum(logits, max_val))
        threshold = max_val.to(tl.float32) + tl.log(min_p)
        for i in range(0, vocab_size, BLOCK_SIZE):
            cols = i + tl.arange(0, BLOCK_SIZE)
            m = cols < vocab_size
            logits = tl.load(in_logits_ptr + tok * logits_stride + cols, mask=m, other=float("-inf"))
            tl.store(out_logits_ptr + tok * logits_stride + cols, tl.where(logits < threshold, float("-inf"), logits),
                     mask=m)


def _min_p_inputs():
    return dict(logits=randn((5, 300), 161, BF, 3.0), min_p=torch.tensor([0.1, 0.05, 0.5, 0.01, 0.2]))


def _min_p_run(logits, min_p):
    out = torch.empty_like(logits)
    min_p_kernel[(2,)](logits, out, logits.stride(0), min_p, logits.shape[1], logits.shape[0], BLOCK_SIZE=128)
    return out


def _min_p_ref(logits, min_p):
    thr = logits.float().amax(-1, keepdim=True) + torch.log(min_p)[:, None]
    return torch.where(logits.float() < thr, torch.tensor(float("-inf")), logits.float()).to(BF)


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/penalty.py
@triton.jit
def penalties_kernel(logits_ptr, prompt_mask_ptr, counts_ptr, rep_ptr, freq_ptr, pres_ptr, num_seqs, vocab_size,
                     BLOCK_SIZE: tl.constexpr):
    per_prog = (num_seqs + tl.num_programs(0) - 1) // tl.num_programs(0)
    start = tl.program_id(0) * per_prog
    for seq in range(start, tl.minimum(start + per_prog, num_seqs)):
        rep = tl.load(rep_ptr + seq)
        freq = tl.load(freq_ptr + seq)
        pres = tl.load(pres_ptr + seq)
        for v0 in range(0, vocab_size, BLOCK_SIZE):
            v = v0 + tl.arange(0, BLOCK_SIZE)
            m = v < vocab_size
            logits = tl.load(logits_ptr + seq * vocab_size + v, mask=m, other=0.0)
            seen = tl.load(prompt_mask_ptr + seq * vocab_size + v, mask=m, other=0).to(tl.int1)
            counts = tl.load(counts_ptr + seq * vocab_size + v, mask=m, other=0)
            seen = seen | (counts > 0)
            factor = tl.where(seen, rep, 1.0)
            logits = tl.where(logits > 0.0, logits / factor, logits * factor)      # fp16 compare, scale
            logits -= freq * counts.to(tl.float32) + pres * (counts > 0).to(tl.float32)
            tl.store(logits_ptr + seq * vocab_size + v, logits, mask=m)


def _pen_inputs():
    S, V = 4, 200
    return dict(logits=randn((S, V), 162, torch.float16, 2.0),
                prompt=(torch.rand(S, V, generator=gen(163)) < 0.1).to(torch.int8),
                counts=torch.randint(0, 3, (S, V), generator=gen(164), dtype=torch.int32) *
                (torch.rand(S, V, generator=gen(165)) < 0.2),
                rep=torch.tensor([1.0, 1.2, 1.5, 2.0]), freq=torch.tensor([0.0, 0.1, 0.5, 0.2]),
                pres=torch.tensor([0.0, 0.3, 0.0, 1.0]))


def _pen_run(logits, prompt, counts, rep, freq, pres):
    logits = logits.clone()
    penalties_kernel[(3,)](logits, prompt, counts, rep, freq, pres, logits.shape[0], logits.shape[1], BLOCK_SIZE=64)
    return logits


def _pen_ref(logits, prompt, counts, rep, freq, pres):
    seen = prompt.bool() | (counts > 0)
    factor = torch.where(seen, rep[:, None], torch.tensor(1.0))
    x = logits.float()
    x = torch.where(x > 0, x / factor, x * factor)
    x = x - (freq[:, None] * counts + pres[:, None] * (counts > 0))
    return x.to(torch.float16)


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/batch_invariant/softmax.py (a log-softmax row)
@triton.jit
def log_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=float("-inf"))
    shifted = x - tl.max(x, axis=0)                         # bf16 max and subtraction
    lse = tl.log(tl.sum(tl.exp(shifted.to(tl.float32)), axis=0))
    tl.store(out_ptr + row * n_cols + cols, (shifted.to(tl.float32) - lse).to(out_ptr.dtype.element_ty), mask=m)


def _lsm_run(x):
    out = torch.empty_like(x)
    log_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def _lsm_ref(x):
    shifted = (x - x.amax(-1, keepdim=True))              # torch rounds the bf16 difference too
    return (shifted.float() - torch.logsumexp(shifted.float(), -1, keepdim=True)).to(BF)


CASES = [
    Case("min_p_filter_bf16", VA + "vllm_ascend/worker/v2/sample/min_p.py",
         min_p_kernel, _min_p_inputs, _min_p_run, _min_p_ref,
         [Compile({"in_logits_ptr": "*bf16", "out_logits_ptr": "*bf16", "logits_stride": "i32", "min_p_ptr": "*fp32",
                   "vocab_size": "i32", "num_tokens": "i32"}, {"BLOCK_SIZE": 128})], **EXACT),
    Case("penalties_fp16", VA + "vllm_ascend/ops/triton/penalty.py",
         penalties_kernel, _pen_inputs, _pen_run, _pen_ref,
         [Compile({"logits_ptr": "*fp16", "prompt_mask_ptr": "*i8", "counts_ptr": "*i32", "rep_ptr": "*fp32",
                   "freq_ptr": "*fp32", "pres_ptr": "*fp32", "num_seqs": "i32", "vocab_size": "i32"},
                  {"BLOCK_SIZE": 64})], **FP16),
    Case("log_softmax_bf16", VA + "vllm_ascend/ops/triton/batch_invariant/softmax.py",
         log_softmax_kernel, lambda: dict(x=randn((6, 150), 166, BF, 4.0)), _lsm_run, _lsm_ref,
         [Compile({"x_ptr": "*bf16", "out_ptr": "*bf16", "n_cols": "i32"}, {"BLOCK": 256})], **BF16),
]
