"""Scatters and concatenation: rows written into a cache by slot (index_put), values scattered along a
dimension (scatter_ub_to_out), a sorted-index gather that skips repeated rows, a concatenation built
with insert_slice at non-power-of-two widths."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import EXACT, TA, Case, Compile, gen, randn


# style: triton-lang/triton-ascend third_party/ascend/language/cann/extension/mem_ops.py (index_put docstring)
@triton.jit
def cache_write_kernel(cache_ptr, slot_ptr, new_ptr, N_NEW: tl.constexpr, D: tl.constexpr, SLOTS: tl.constexpr):
    rows = tl.arange(0, N_NEW)
    slots = tl.load(slot_ptr + rows)
    new = tl.load(new_ptr + rows[:, None] * D + tl.arange(0, D)[None, :])
    # cache[slots[i], 0:D] = new[i]; a slot >= SLOTS (padding) writes nothing
    extension.index_put(cache_ptr, slots, new, 0, SLOTS, (N_NEW, D), (0, 0), (D, 1))


def _cw_inputs():
    return dict(cache=randn((10, 16), 171), slots=torch.tensor([7, 2, 10, 4], dtype=torch.int32),
                new=randn((4, 16), 172))


def _cw_run(cache, slots, new):
    cache = cache.clone()
    cache_write_kernel[(1,)](cache, slots, new, N_NEW=4, D=16, SLOTS=10)
    return cache


def _cw_ref(cache, slots, new):
    out = cache.clone()
    for i, s in enumerate(slots.tolist()):
        if s < 10:
            out[s] = new[i]
    return out


# style: triton-lang/triton-ascend third_party/ascend/language/cann/extension/mem_ops.py (scatter_ub_to_out docstring)
@triton.jit
def scatter_rows_kernel(dst_ptr, value_ptr, index_ptr, R: tl.constexpr, C: tl.constexpr, BOUND: tl.constexpr):
    r = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    # dst[index[i][j]][j] = value[i][j] for index < BOUND
    extension.scatter_ub_to_out(dst_ptr, tl.load(value_ptr + r), tl.load(index_ptr + r), BOUND, 0, (C, 1), (R, C),
                                (0, 0))


def _sr_inputs():
    # a permutation per column: no two values of a column land on one row
    idx = torch.stack([torch.randperm(6, generator=gen(173 + j))[:4] for j in range(8)], 1).to(torch.int32)
    return dict(dst=torch.zeros(6, 8), value=randn((4, 8), 174), idx=idx)


def _sr_run(dst, value, idx):
    dst = dst.clone()
    scatter_rows_kernel[(1,)](dst, value, idx, R=4, C=8, BOUND=6)
    return dst


def _sr_ref(dst, value, idx):
    return dst.clone().scatter_(0, idx.long(), value)


# style: triton-lang/triton-ascend third_party/ascend/tutorials/10-gather_sorted.py
@triton.jit
def gather_sorted_kernel(emb_ptr, sorted_idx_ptr, aux_idx_ptr, res_ptr, rows, cols, ROWS_PER_CORE: tl.constexpr,
                         COL_BLOCK: tl.constexpr):
    first = tl.program_id(0) * ROWS_PER_CORE
    for c0 in tl.range(0, cols, COL_BLOCK):
        c = c0 + tl.arange(0, COL_BLOCK)
        cm = c < cols
        emb = tl.zeros((COL_BLOCK,), dtype=emb_ptr.type.element_ty)
        prev = tl.cast(-1, tl.int32)
        for r in tl.range(first, tl.minimum(first + ROWS_PER_CORE, rows)):
            e = tl.load(sorted_idx_ptr + r)
            if e != prev:                                       # sorted: a repeated row is not read again
                emb = tl.load(emb_ptr + e * cols + c, cm)
            tl.store(res_ptr + tl.load(aux_idx_ptr + r) * cols + c, emb, cm)
            prev = e


def _gs_inputs():
    idx = torch.randint(0, 12, (19,), generator=gen(175))
    sorted_idx, aux = torch.sort(idx)
    return dict(emb=randn((12, 40), 176), sorted_idx=sorted_idx.to(torch.int32), aux=aux.to(torch.int32))


def _gs_run(emb, sorted_idx, aux):
    res = torch.zeros(sorted_idx.shape[0], emb.shape[1])
    gather_sorted_kernel[(triton.cdiv(19, 5),)](emb, sorted_idx, aux, res, 19, emb.shape[1], ROWS_PER_CORE=5,
                                                COL_BLOCK=32)
    return res


def _gs_ref(emb, sorted_idx, aux):
    res = torch.zeros(sorted_idx.shape[0], emb.shape[1])
    res[aux.long()] = emb[sorted_idx.long()]
    return res


# style: triton-lang/triton-ascend third_party/ascend/tutorials/15-cat-helper-func.py
@triton.jit
def cat_dim1_kernel(in_ptr0, in_ptr1, out_ptr0, in0_x: tl.constexpr, in1_x: tl.constexpr, y0_numel,
                    Y0BLOCK: tl.constexpr, Y0BLOCK_SUB: tl.constexpr):
    y0_offset = tl.program_id(0) * Y0BLOCK
    base_y0 = tl.arange(0, Y0BLOCK_SUB)
    in0_cols = tl.arange(0, in0_x)[None, :]                         # widths 5 and 11: not powers of two
    in1_cols = tl.arange(0, in1_x)[None, :]
    out_cols = tl.arange(0, in0_x + in1_x)[None, :]
    for loop in range((Y0BLOCK + Y0BLOCK_SUB - 1) // Y0BLOCK_SUB):
        y0 = y0_offset + loop * Y0BLOCK_SUB + base_y0[:, None]
        y0_mask = y0 < min(Y0BLOCK + y0_offset, y0_numel)
        a = tl.load(in_ptr0 + in0_cols + in0_x * y0, y0_mask)
        b = tl.load(in_ptr1 + in1_cols + in1_x * y0, y0_mask)
        t = tl.zeros((Y0BLOCK_SUB, in0_x + in1_x), dtype=a.dtype)
        t = extension.insert_slice(t, a, [0, 0], [Y0BLOCK_SUB, in0_x], [1, 1])
        t = extension.insert_slice(t, b, [0, in0_x], [Y0BLOCK_SUB, in1_x], [1, 1])
        tl.store(out_ptr0 + out_cols + (in0_x + in1_x) * y0, t, y0_mask)


def _cat_run(a, b):
    out = torch.empty(a.shape[0], a.shape[1] + b.shape[1], dtype=a.dtype)
    cat_dim1_kernel[(triton.cdiv(a.shape[0], 8),)](a, b, out, a.shape[1], b.shape[1], a.shape[0], Y0BLOCK=8,
                                                   Y0BLOCK_SUB=4)
    return out


CASES = [
    Case("index_put_cache_rows", TA + "third_party/ascend/language/cann/extension/mem_ops.py",
         cache_write_kernel, _cw_inputs, _cw_run, _cw_ref,
         [Compile({"cache_ptr": "*fp32", "slot_ptr": "*i32", "new_ptr": "*fp32"}, {"N_NEW": 4, "D": 16, "SLOTS": 10},
                  expect="cannot lower")], **EXACT),
    Case("scatter_ub_to_out_rows", TA + "third_party/ascend/language/cann/extension/mem_ops.py",
         scatter_rows_kernel, _sr_inputs, _sr_run, _sr_ref,
         [Compile({"dst_ptr": "*fp32", "value_ptr": "*fp32", "index_ptr": "*i32"}, {"R": 4, "C": 8, "BOUND": 6},
                  expect="cannot lower")], **EXACT),
    Case("gather_sorted_skip_repeats", TA + "third_party/ascend/tutorials/10-gather_sorted.py",
         gather_sorted_kernel, _gs_inputs, _gs_run, _gs_ref,
         [Compile({"emb_ptr": "*fp32", "sorted_idx_ptr": "*i32", "aux_idx_ptr": "*i32", "res_ptr": "*fp32",
                   "rows": "i32", "cols": "i32"}, {"ROWS_PER_CORE": 5, "COL_BLOCK": 32})], **EXACT),
    Case("cat_dim1_insert_slice_5_11", TA + "third_party/ascend/tutorials/15-cat-helper-func.py",
         cat_dim1_kernel, lambda: dict(a=randn((21, 5), 177), b=randn((21, 11), 178)), _cat_run,
         lambda a, b: torch.cat([a, b], 1),
         [Compile({"in_ptr0": "*fp32", "in_ptr1": "*fp32", "out_ptr0": "*fp32", "y0_numel": "i32"},
                  {"in0_x": 5, "in1_x": 11, "Y0BLOCK": 8, "Y0BLOCK_SUB": 4})], **EXACT),
]
