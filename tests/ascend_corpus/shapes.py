"""Shapes triton-ascend allows and stock Triton does not: tl.arange(0, 3), a block of 326, a (2,3)@(3,5) dot.

triton-ascend checks power-of-two ranges only in SIMT mode (python/triton/language/semantic.py, arange)
and has the block-shape check commented out (validate_block_shape) - issue 31, "Why".
"""
import torch
import triton
import triton.language as tl

from . import Case, Compile, FP32, FP32_MATH, TA, gen, randn


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sub_vec_id.py (tl.arange over a
# non-power-of-two size)
@triton.jit
def rgb_to_gray_kernel(img_ptr, w_ptr, out_ptr, n_pixels, BLOCK: tl.constexpr):
    pix = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ch = tl.arange(0, 3)                                                    # three channels
    m = pix[:, None] < n_pixels
    rgb = tl.load(img_ptr + pix[:, None] * 3 + ch[None, :], mask=m, other=0.0)
    gray = tl.sum(rgb * tl.load(w_ptr + ch)[None, :], axis=1)
    tl.store(out_ptr + pix, gray, mask=pix < n_pixels)


def _gray_run(img, w):
    n = img.shape[0]
    out = torch.empty(n)
    rgb_to_gray_kernel[(triton.cdiv(n, 32),)](img, w, out, n, BLOCK=32)
    return out


# style: triton-lang/triton-ascend third_party/ascend/tutorials/02-fused-softmax.py (a row per program)
@triton.jit
def row_scale_326_kernel(x_ptr, out_ptr, n_rows, N_COLS: tl.constexpr):
    cols = tl.arange(0, N_COLS)                                             # a block of exactly 326: no mask
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * N_COLS + cols)
        tl.store(out_ptr + row * N_COLS + cols, x / tl.max(tl.abs(x), axis=0))


def _r326_run(x):
    out = torch.empty_like(x)
    row_scale_326_kernel[(3,)](x, out, x.shape[0], N_COLS=326)
    return out


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sync_block.py ((2,3) @ (3,5) case)
@triton.jit
def small_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    offs_m = tl.arange(0, M)
    offs_n = tl.arange(0, N)
    offs_k = tl.arange(0, K)
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], tl.dot(a, b))


def _dot_run(a, b):
    c = torch.empty(a.shape[0], b.shape[1])
    small_dot_kernel[(1,)](a, b, c, M=2, N=5, K=3)
    return c


CASES = [
    Case("arange3_rgb_to_gray", TA + "third_party/ascend/unittest/pytest_ut/test_sub_vec_id.py",
         rgb_to_gray_kernel,
         lambda: dict(img=torch.rand(100, 3, generator=gen(62)), w=torch.tensor([0.299, 0.587, 0.114])),
         _gray_run, lambda img, w: img @ w,
         [Compile({"img_ptr": "*fp32", "w_ptr": "*fp32", "out_ptr": "*fp32", "n_pixels": "i32"}, {"BLOCK": 32})],
         **FP32_MATH),
    Case("block_326_row_scale", TA + "third_party/ascend/tutorials/02-fused-softmax.py",
         row_scale_326_kernel, lambda: dict(x=randn((7, 326), 61)), _r326_run,
         lambda x: x / x.abs().amax(-1, keepdim=True),
         [Compile({"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32"}, {"N_COLS": 326})], **FP32),
    Case("dot_2x3_3x5", TA + "third_party/ascend/unittest/pytest_ut/test_sync_block.py",
         small_dot_kernel, lambda: dict(a=randn((2, 3), 62), b=randn((3, 5), 63)), _dot_run,
         lambda a, b: a @ b,
         [Compile({"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}, {"M": 2, "N": 5, "K": 3})], **FP32_MATH),
]
