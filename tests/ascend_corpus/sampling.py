"""Sampling: greedy rejection sampling (one kernel with vllm-ascend's read before the tensor, which the
simulator must keep reporting; one without it) and a top-k logits mask through extension.sort."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import Case, Compile, Differs, EXACT, VA, gen, randn


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/reject_sample.py (rejection_greedy_sample_triton)
@triton.jit
def rejection_greedy_kernel(out_ptr, cu_num_draft_ptr, draft_ptr, target_argmax_ptr, bonus_ptr, vec_len,
                            max_spec_len, BLOCK_SIZE: tl.constexpr, MASK_FIRST: tl.constexpr):
    block_idx = tl.program_id(0)
    offset = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offset < vec_len
    # as vllm-ascend writes it: at offset 0 the load still reads cu_num_draft[-1], 4 bytes before the tensor
    # (MASK_FIRST: the fix, the read masked off there)
    first = (offset > 0) if MASK_FIRST else (offset >= 0)
    start_idx = tl.where(offset == 0, 0, tl.load(cu_num_draft_ptr + offset - 1, mask & first))
    end_idx = tl.load(cu_num_draft_ptr + offset, mask)
    n_draft = end_idx - start_idx
    for pos in range(0, BLOCK_SIZE):
        n = extension.get_element(n_draft, (pos,))
        s = extension.get_element(start_idx, (pos,))
        row = block_idx * BLOCK_SIZE + pos
        if row < vec_len:
            rejected = False
            for i in range(n):
                if not rejected:
                    d = tl.load(draft_ptr + s + i)
                    t = tl.load(target_argmax_ptr + s + i)
                    tl.store(out_ptr + row * (max_spec_len + 1) + i, t)
                    if d != t:
                        rejected = True
            if not rejected:
                tl.store(out_ptr + row * (max_spec_len + 1) + n, tl.load(bonus_ptr + row))


def _rg_inputs():
    cu = torch.tensor([2, 3, 6, 6, 9], dtype=torch.int32)
    target = torch.randint(0, 5, (9,), generator=gen(111), dtype=torch.int32)
    draft = torch.where(torch.rand(9, generator=gen(112)) < 0.6, target, target + 1)
    return dict(cu=cu, draft=draft, target=target, bonus=torch.arange(100, 105, dtype=torch.int32))


def _rg_run(cu, draft, target, bonus, mask_first=False):
    out = torch.full((5, 4), -1, dtype=torch.int32)
    rejection_greedy_kernel[(2,)](out, cu, draft, target, bonus, 5, 3, BLOCK_SIZE=4, MASK_FIRST=mask_first)
    return out


def _rg_ref(cu, draft, target, bonus, mask_first=True):
    out = torch.full((5, 4), -1, dtype=torch.int32)
    start = 0
    for r, end in enumerate(cu.tolist()):
        for i in range(end - start):
            out[r, i] = target[start + i]
            if draft[start + i] != target[start + i]:
                break
        else:
            out[r, end - start] = bonus[r]
        start = end
    return out


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/reject_sample.py (rejection_greedy_sample_spec_len_1_triton)
@triton.jit
def rejection_greedy_spec1_kernel(out_ptr, draft_ptr, target_argmax_ptr, bonus_ptr, vec_len, BLOCK_SIZE: tl.constexpr):
    offset = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offset < vec_len
    draft = tl.load(draft_ptr + offset, mask)
    target = tl.load(target_argmax_ptr + offset, mask)
    tl.store(out_ptr + offset * 2, target, mask)
    tl.store(out_ptr + offset * 2 + 1, tl.load(bonus_ptr + offset, mask), (draft == target) & mask)


def _rg1_inputs():
    target = torch.randint(0, 9, (13,), generator=gen(113), dtype=torch.int32)
    draft = torch.where(torch.rand(13, generator=gen(114)) < 0.5, target, (target + 3) % 9)
    return dict(draft=draft, target=target, bonus=torch.arange(50, 63, dtype=torch.int32))


def _rg1_run(draft, target, bonus):
    out = torch.full((13, 2), -1, dtype=torch.int32)
    rejection_greedy_spec1_kernel[(triton.cdiv(13, 4),)](out, draft, target, bonus, 13, BLOCK_SIZE=4)
    return out


def _rg1_ref(draft, target, bonus):
    out = torch.full((13, 2), -1, dtype=torch.int32)
    out[:, 0] = target
    out[:, 1] = torch.where(draft == target, bonus, -1)
    return out


# style: vllm-project/vllm-ascend vllm_ascend/ops/triton/v2/sample/apply_top_k_top_p_triton.py (top-k logits mask)
@triton.jit
def topk_mask_kernel(logits_ptr, k_ptr, out_ptr, V: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, V)
    logits = tl.load(logits_ptr + row * V + cols)
    k = tl.load(k_ptr + row)
    ranked = extension.sort(logits, 0, descending=True)
    kth = tl.min(tl.where(cols < k, ranked, float("inf")), axis=0)           # the k-th largest
    tl.store(out_ptr + row * V + cols, tl.where(logits >= kth, logits, float("-inf")))


def _topk_run(logits, k):
    out = torch.empty_like(logits)
    topk_mask_kernel[(logits.shape[0],)](logits, k, out, V=logits.shape[1])
    return out


def _topk_ref(logits, k):
    out = torch.full_like(logits, float("-inf"))
    for r in range(logits.shape[0]):
        kth = torch.topk(logits[r], int(k[r])).values[-1]
        out[r] = torch.where(logits[r] >= kth, logits[r], out[r])
    return out


CASES = [
    Case("rejection_greedy_reads_before_offset_0", VA + "vllm_ascend/ops/triton/reject_sample.py",
         rejection_greedy_kernel, _rg_inputs, _rg_run, None,
         [Compile({"out_ptr": "*i32", "cu_num_draft_ptr": "*i32", "draft_ptr": "*i32", "target_argmax_ptr": "*i32",
                   "bonus_ptr": "*i32", "vec_len": "i32", "max_spec_len": "i32"},
                  {"BLOCK_SIZE": 4, "MASK_FIRST": False})],
         # the real bug stays reported: a load 4 bytes before cu_num_draft at offset 0
         sim_error=r"load of int32 at offset -4 of tensor argument 'cu_num_draft_ptr' of rejection_greedy_kernel "
                   r"is out of bounds",
         on_backend={"hivm": Differs("reports the fault", r"The DDR address of the MTE instruction is out of range.*"
                                     r"reads argument 'cu_num_draft_ptr' \(int32\[5\]\): bytes -4\.\.",
                                     "the compiled load of block 0 starts 4 bytes before cu_num_draft, "
                                     "as on the NPU")}),
    Case("rejection_greedy_first_read_masked", VA + "vllm_ascend/ops/triton/reject_sample.py",
         rejection_greedy_kernel, lambda: dict(_rg_inputs(), mask_first=True), _rg_run, _rg_ref,
         [Compile({"out_ptr": "*i32", "cu_num_draft_ptr": "*i32", "draft_ptr": "*i32", "target_argmax_ptr": "*i32",
                   "bonus_ptr": "*i32", "vec_len": "i32", "max_spec_len": "i32"},
                  # the fix, `mask & (offset > 0)`, aborts triton-ascend 3.2.0's adapter (also in a kernel of
                  # plain tl ops, measured): the real compiler's verdict, to be seen on the main line's
                  {"BLOCK_SIZE": 4, "MASK_FIRST": True}, expect="triton-adapter-opt crashed (SIGABRT")], **EXACT),
    Case("rejection_greedy_spec_len_1", VA + "vllm_ascend/ops/triton/reject_sample.py",
         rejection_greedy_spec1_kernel, _rg1_inputs, _rg1_run, _rg1_ref,
         [Compile({"out_ptr": "*i32", "draft_ptr": "*i32", "target_argmax_ptr": "*i32", "bonus_ptr": "*i32",
                   "vec_len": "i32"}, {"BLOCK_SIZE": 4})],
         on_backend={"hivm": Differs(
             "compiler finding", r"The DDR address of the MTE instruction is out of range.*reads argument 'out_ptr'",
             "the #2332 class for stores: the two masked stores into a row pair's even and odd elements are compiled "
             "with a read of the whole 2*BLOCK span, so the tail block reads past out_ptr (docs/ascend.md; "
             "tests/test_hivm_findings.py::"
             "test_a_strided_masked_store_reads_the_whole_span_and_faults_in_the_tail_block)")},
         **EXACT),
    Case("topk_logits_mask_sort", VA + "vllm_ascend/ops/triton/v2/sample/apply_top_k_top_p_triton.py",
         topk_mask_kernel, lambda: dict(logits=randn((6, 64), 115), k=torch.tensor([1, 5, 64, 10, 3, 32],
                                                                                  dtype=torch.int32)),
         _topk_run, _topk_ref,
         [Compile({"logits_ptr": "*fp32", "k_ptr": "*i32", "out_ptr": "*fp32"}, {"V": 64})], **EXACT),
]
