"""State copies of recurrent (mamba-style) models: a gather-scatter of per-request state blocks across
layers, with a negative step meaning "leave this one"."""
import torch
import triton
import triton.language as tl

from . import EXACT, SGL, Case, Compile, gen, randn


# style: sgl-project/sgl-kernel-npu python/sgl_kernel_npu/sgl_kernel_npu/mamba/mamba_state_update_triton.py
@triton.jit
def state_scatter_kernel(dst_ptr, src_ptr, dst_idx_ptr, src_idx_ptr, step_ptr, layer_stride, slot_stride,
                         step_stride, dst_layer_stride, dst_slot_stride, h_dim, dim_v, dim_k, num_layers,
                         H_BLOCK: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_K: tl.constexpr):
    req = tl.program_id(0)
    dst_slot = tl.load(dst_idx_ptr + req)
    src_slot = tl.load(src_idx_ptr + req)
    step = tl.load(step_ptr + req)
    if step < 0:                                   # nothing accepted for this request: its state stays
        return
    h = tl.arange(0, H_BLOCK)
    v = tl.arange(0, BLOCK_V)
    k = tl.arange(0, BLOCK_K)
    for layer in range(num_layers):
        src = (src_ptr + tl.cast(layer, tl.int64) * layer_stride + tl.cast(src_slot, tl.int64) * slot_stride
               + tl.cast(step, tl.int64) * step_stride)
        dst = dst_ptr + tl.cast(layer, tl.int64) * dst_layer_stride + tl.cast(dst_slot, tl.int64) * dst_slot_stride
        for h0 in range(0, h_dim, H_BLOCK):                    # h_dim = 5 in blocks of 4: a masked tail
            hh = h0 + h
            m = (hh < h_dim)[:, None, None] & (v < dim_v)[None, :, None] & (k < dim_k)[None, None, :]
            off = hh[:, None, None] * dim_v * dim_k + v[None, :, None] * dim_k + k[None, None, :]
            tl.store(dst + off, tl.load(src + off, mask=m, other=0), mask=m)


L, SLOTS, REQS, STEPS, H, DV, DK = 2, 6, 4, 3, 5, 6, 8


def _inputs():
    return dict(dst=randn((L, SLOTS, H, DV, DK), 151), src=randn((L, REQS, STEPS, H, DV, DK), 152),
                dst_idx=torch.tensor([4, 0, 2, 5], dtype=torch.int32),
                src_idx=torch.randperm(REQS, generator=gen(153)).to(torch.int32),
                step=torch.tensor([2, -1, 0, 1], dtype=torch.int32))


def _run(dst, src, dst_idx, src_idx, step):
    dst = dst.clone()
    state_scatter_kernel[(REQS,)](dst, src, dst_idx, src_idx, step, src.stride(0), src.stride(1), src.stride(2),
                                  dst.stride(0), dst.stride(1), H, DV, DK, L, H_BLOCK=4,
                                  BLOCK_V=triton.next_power_of_2(DV), BLOCK_K=DK)
    return dst


def _ref(dst, src, dst_idx, src_idx, step):
    out = dst.clone()
    for r in range(REQS):
        if step[r] >= 0:
            out[:, dst_idx[r]] = src[:, src_idx[r], step[r]]
    return out


CASES = [
    Case("mamba_state_scatter", SGL + "python/sgl_kernel_npu/sgl_kernel_npu/mamba/mamba_state_update_triton.py",
         state_scatter_kernel, _inputs, _run, _ref,
         [Compile({"dst_ptr": "*fp32", "src_ptr": "*fp32", "dst_idx_ptr": "*i32", "src_idx_ptr": "*i32",
                   "step_ptr": "*i32", "layer_stride": "i32", "slot_stride": "i32", "step_stride": "i32",
                   "dst_layer_stride": "i32", "dst_slot_stride": "i32", "h_dim": "i32", "dim_v": "i32",
                   "dim_k": "i32", "num_layers": "i32"}, {"H_BLOCK": 4, "BLOCK_V": 8, "BLOCK_K": 8})], **EXACT),
]
