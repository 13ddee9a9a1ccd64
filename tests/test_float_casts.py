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


# ---- the float8 codecs (sim/float_casts.py) against torch's conversions --------------------------

def test_fp8_decode_and_round_to_nearest_even_match_torch_on_every_code_and_midpoint():
    import triton.language as tl
    from triton_dist.sim.float_casts import decode, encode
    g = torch.Generator().manual_seed(1)
    for tdt, dt in ((torch.float8_e5m2, tl.float8e5), (torch.float8_e4m3fn, tl.float8e4nv)):
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
        values = codes.view(tdt).float().numpy()
        got = decode(codes.numpy(), dt)
        nan = np.isnan(values)
        assert np.array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan], values[~nan])
        finite = np.sort(values[np.isfinite(values)])
        # every code, every midpoint between neighbours (the ties), either side of them, random
        # values of every scale, the overflow region, inf and NaN
        mids = (finite[:-1] / 2 + finite[1:] / 2).astype(np.float32)
        x = np.concatenate([finite, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
                            *(torch.randn(20000, generator=g).numpy() * s for s in (1e-5, 1e-2, 1.0, 1e2, 1e4)),
                            np.array([6e4, 6.2e4, 1e6, -1e6, 470.0, 480.0, np.inf, -np.inf, np.nan], np.float32)])
        x = x.astype(np.float32)
        want = torch.from_numpy(x).to(tdt).view(torch.uint8).numpy()
        bits = encode(x, dt)
        ok = np.isnan(x)
        assert np.isnan(decode(bits[ok], dt)).all()
        np.testing.assert_array_equal(bits[~ok], want[~ok], err_msg=str(tdt))
