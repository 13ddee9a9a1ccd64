"""Sorts and flips: extension.sort on fp32 and bf16 rows, in 3-D, and extension.flip."""
import torch
import triton
import triton.language as tl
import triton.language.extra.cann.extension as extension

from . import Case, Compile, EXACT, TA, gen, randn


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sort.py (sort_kernel_2d)
@triton.jit
def sort_rows_kernel(X, Z, N: tl.constexpr, M: tl.constexpr, descending: tl.constexpr):
    off2d = tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :]
    tl.store(Z + off2d, extension.sort(tl.load(X + off2d), descending=descending, dim=1))


def _sort_run(x, descending):
    z = torch.zeros_like(x)
    sort_rows_kernel[(1,)](x, z, x.shape[0], x.shape[1], descending)
    return z


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_sort.py (sort_kernel_3d)
@triton.jit
def sort_3d_kernel(X, Z, D0: tl.constexpr, D1: tl.constexpr, D2: tl.constexpr, descending: tl.constexpr):
    off = (tl.arange(0, D0)[:, None, None] * D1 * D2 + tl.arange(0, D1)[None, :, None] * D2
           + tl.arange(0, D2)[None, None, :])
    tl.store(Z + off, extension.sort(tl.load(X + off), descending=descending, dim=2))


def _sort3_run(x):
    z = torch.zeros_like(x)
    sort_3d_kernel[(1,)](x, z, *x.shape, True)
    return z


# style: triton-lang/triton-ascend third_party/ascend/unittest/pytest_ut/test_flip.py
@triton.jit
def flip_tail_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # reverses each block of BLOCK elements (the blocks of a sequence, read backwards)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, extension.flip(x, 0), mask=offs < n)


def _flip_run(x):
    out = torch.empty_like(x)
    flip_tail_kernel[(x.numel() // 16,)](x, out, x.numel(), BLOCK=16)
    return out


CASES = [
    Case("sort_rows_fp32", TA + "third_party/ascend/unittest/pytest_ut/test_sort.py",
         sort_rows_kernel, lambda: dict(x=randn((16, 16), 91), descending=False), _sort_run,
         lambda x, descending: torch.sort(x, descending=descending)[0],
         [Compile({"X": "*fp32", "Z": "*fp32"}, {"N": 16, "M": 16, "descending": False})], **EXACT),
    Case("sort_rows_bf16_descending", TA + "third_party/ascend/unittest/pytest_ut/test_sort.py",
         sort_rows_kernel, lambda: dict(x=randn((8, 16), 92, torch.bfloat16), descending=True), _sort_run,
         lambda x, descending: torch.sort(x, descending=descending)[0],
         [Compile({"X": "*bf16", "Z": "*bf16"}, {"N": 8, "M": 16, "descending": True})], **EXACT),
    Case("sort_3d_int16", TA + "third_party/ascend/unittest/pytest_ut/test_sort.py",
         sort_3d_kernel, lambda: dict(x=torch.randint(-500, 500, (4, 4, 16), generator=gen(93)).to(torch.int16)),
         _sort3_run, lambda x: torch.sort(x, descending=True)[0],
         [Compile({"X": "*i16", "Z": "*i16"}, {"D0": 4, "D1": 4, "D2": 16, "descending": True})], **EXACT),
    Case("flip_blocks", TA + "third_party/ascend/unittest/pytest_ut/test_flip.py",
         flip_tail_kernel, lambda: dict(x=randn(64, 94)), _flip_run, lambda x: x.view(-1, 16).flip(1).reshape(-1),
         [Compile({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16})], **EXACT),
]
