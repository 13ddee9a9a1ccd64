"""extract_slice / insert_slice inside one block, as triton-ascend's own tests use them."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import Case, Compile, FP32, TA, randn


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_extract_slice.py
@triton.jit
def add_head_slice_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr, HEAD: tl.constexpr):
    block_start = tl.program_id(axis=0) * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    out = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    head = extension.extract_slice(out, [0], [HEAD], [1])            # the first HEAD of this block's sums
    idx = block_start + tl.arange(0, HEAD)
    tl.store(output_ptr + idx, head, mask=idx < n_elements)


def _ahs_run(x, y):
    out = torch.zeros_like(x)
    add_head_slice_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK_SIZE=128, HEAD=32)
    return out


def _ahs_ref(x, y):
    want = torch.zeros_like(x)
    for s in range(0, x.numel(), 128):
        e = min(s + 32, x.numel())
        want[s:e] = x[s:e] + y[s:e]
    return want


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_insert_slice.py
@triton.jit
def add_into_slice_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
                          SLICE_OFFSET: tl.constexpr, SLICE_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    part = extension.extract_slice(x, [SLICE_OFFSET], [SLICE_SIZE], [1]) + \
        extension.extract_slice(y, [SLICE_OFFSET], [SLICE_SIZE], [1])
    out = tl.load(output_ptr + offsets, mask=mask)
    out = extension.insert_slice(out, part, [SLICE_OFFSET], [SLICE_SIZE], [1])
    tl.store(output_ptr + offsets, out, mask=mask)


def _ais_run(x, y):
    out = torch.full_like(x, 3.0)
    add_into_slice_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK_SIZE=64, SLICE_OFFSET=16,
                                                         SLICE_SIZE=32)
    return out


def _ais_ref(x, y):
    want = torch.full_like(x, 3.0)
    for s in range(0, x.numel(), 64):
        want[s + 16:s + 48] = x[s + 16:s + 48] + y[s + 16:s + 48]
    return want


CASES = [
    Case("extract_slice_head", TA + "third_party/ascend/unittest/pytest_ut/test_extract_slice.py",
         add_head_slice_kernel, lambda: dict(x=randn(300, 101), y=randn(300, 102)), _ahs_run, _ahs_ref,
         [Compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32"},
                  {"BLOCK_SIZE": 128, "HEAD": 32})], **FP32),
    Case("insert_slice_middle", TA + "third_party/ascend/unittest/pytest_ut/test_insert_slice.py",
         add_into_slice_kernel, lambda: dict(x=randn(256, 103), y=randn(256, 104)), _ais_run, _ais_ref,
         [Compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32"},
                  {"BLOCK_SIZE": 64, "SLICE_OFFSET": 16, "SLICE_SIZE": 32})], **FP32),
]
