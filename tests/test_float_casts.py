"""A float32 -> bfloat16 cast in a kernel rounds to nearest, ties to even, as the compiled kernel
does (Triton's semantics; found by the GPU run's --compare-backends: Triton's interpreter rounds
it toward zero, sim/float_casts.py).  The oracle is torch's own conversion."""
import numpy as np
import torch
import triton
import triton.language as tl

import triton_dist

# ties (low half exactly 0x8000) both ways, just above and below a tie, a carry into the
# exponent, the largest finite values (one rounds to inf), subnormals, zeros, inf and NaN
BITS = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x3FFFFFFF, 0x7F7F7FFF, 0x7F7FFFFF,
                 0x00008000, 0x00018000, 0x80000000, 0x00000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                 0xBF808000, 0xBF818001], dtype=np.uint32)


@triton.jit
def to_bf16_kernel(x, out, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out + r, tl.load(x + r).to(tl.bfloat16))


@triton.jit
def accumulate_to_bf16_kernel(x, out, N: tl.constexpr):
    r = tl.arange(0, N)
    acc = tl.load(x + r) * 3.0 + 0.1                 # fp32 arithmetic, then one rounding
    tl.store(out + r, acc.to(tl.bfloat16))


def _run(kernel, x: torch.Tensor) -> torch.Tensor:
    def body():
        out = torch.zeros(x.numel(), dtype=torch.bfloat16)
        kernel[(1,)](x.clone(), out, N=x.numel())
        return out
    return triton_dist.launch(body, world_size=1).values[0]


def test_edge_cases_round_like_torch():
    x = torch.from_numpy(BITS.view(np.float32).copy())
    got = _run(to_bf16_kernel, x)
    want = x.to(torch.bfloat16)
    nan = torch.isnan(x)
    assert torch.isnan(got[nan]).all(), "a NaN stays a NaN (its payload bits differ between converters)"
    np.testing.assert_array_equal(got[~nan].view(torch.int16).numpy(), want[~nan].view(torch.int16).numpy())


def test_random_values_after_arithmetic_round_like_torch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1024, generator=g)
    got = _run(accumulate_to_bf16_kernel, x)
    want = (x * 3.0 + 0.1).to(torch.bfloat16)
    np.testing.assert_array_equal(got.view(torch.int16).numpy(), want.view(torch.int16).numpy())
