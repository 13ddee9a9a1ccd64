"""triton_dist.language.extra.ascend.algorithm: the swizzles upstream's Ascend tutorials import,
against small cases worked out by hand from their definition (evidence F)."""
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.language.extra.ascend.algorithm import dist_swizzle2d_Nz, gemm_swizzle2d_Nz


@triton.jit
def gemm_order_kernel(out, N_ITERS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr, TR: tl.constexpr,
                      TC: tl.constexpr, SWZ: tl.constexpr):
    for i in range(N_ITERS):
        r, c = gemm_swizzle2d_Nz(i, ROWS, COLS, TR, TC, SWZ)
        tl.store(out + 2 * i, r)
        tl.store(out + 2 * i + 1, c)


@triton.jit
def dist_order_kernel(out, N_ITERS: tl.constexpr, RANKS: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
                      TR: tl.constexpr, TC: tl.constexpr, SPLIT: tl.constexpr):
    for i in range(N_ITERS):
        r, c, rank, nr, nc = dist_swizzle2d_Nz(i, RANKS, ROWS, COLS, TR, TC, SPLIT)
        tl.store(out + 5 * i, r)
        tl.store(out + 5 * i + 1, c)
        tl.store(out + 5 * i + 2, rank)
        tl.store(out + 5 * i + 3, nr)
        tl.store(out + 5 * i + 4, nc)


def _gemm(n, *shape):
    out = torch.full((2 * n,), -1, dtype=torch.int32)
    gemm_order_kernel[(1,)](out, n, *shape)
    return [tuple(p) for p in out.view(n, 2).tolist()]


def _dist(n, *shape):
    out = torch.full((5 * n,), -1, dtype=torch.int32)
    dist_order_kernel[(1,)](out, n, *shape)
    return [tuple(p) for p in out.view(n, 5).tolist()]


def _on_sim(fn, *args):
    return triton_dist.launch(fn, *args, world_size=1, backend="sim").values[0]


def test_gemm_swizzle_serpentine_bands():
    # 2 x 3 tiles (rows 16 = 2 tiles of 8, cols 24 = 3 tiles of 8), bands of 2 columns:
    # band 0 (cols 0-1) top-down row by row; band 1 (col 2 alone) bottom-up.
    assert _on_sim(_gemm, 6, 16, 24, 8, 8, 2) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (0, 2)]


def test_gemm_swizzle_ragged_and_default_offset():
    # rows 20 in tiles of 8 -> 3 tile rows; cols 80 in tiles of 8 -> 10 tile columns; offset 7:
    # band 0 = cols 0-6 (21 tiles), band 1 = cols 7-9 (9 tiles), bottom-up
    got = _on_sim(_gemm, 30, 20, 80, 8, 8, 7)
    assert got[:8] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (1, 0)]
    assert got[20] == (2, 6)
    assert got[21:] == [(2, 7), (2, 8), (2, 9), (1, 7), (1, 8), (1, 9), (0, 7), (0, 8), (0, 9)]
    assert sorted(got) == [(r, c) for r in range(3) for c in range(10)]   # every tile once


def test_dist_swizzle_staggers_the_peer_by_tile():
    # 2 ranks, 30 x 256 data in 20 x 256 tiles -> 2 tile rows (the second 10 rows high), 1 column:
    # for rank offset 0 tile d goes to rank d, for offset 1 to rank (1 + d) % 2
    assert _on_sim(_dist, 4, 2, 30, 256, 20, 256, 1) == [
        (0, 0, 0, 20, 256), (1, 0, 1, 10, 256), (0, 0, 1, 20, 256), (1, 0, 0, 10, 256)]


def test_dist_swizzle_ragged_columns_and_three_ranks():
    # 3 ranks, one tile row of 8 rows, 20 columns in tiles of 16 -> 2 tile columns (16, 4)
    got = _on_sim(_dist, 6, 3, 8, 20, 8, 16, 1)
    assert got == [(0, 0, 0, 8, 16), (0, 1, 1, 8, 4), (0, 0, 1, 8, 16), (0, 1, 2, 8, 4),
                   (0, 0, 2, 8, 16), (0, 1, 0, 8, 4)]


def test_dist_swizzle_npu_split():
    # comm_npu_split 2 over 4 ranks, one tile: groups of 2 iterations; r = t*2 + u%2, then
    # r*2 // 4 (rank_stride 2): iterations 0..3 -> ranks 0, 0, 1, 1
    assert [g[2] for g in _on_sim(_dist, 4, 4, 8, 8, 8, 8, 2)] == [0, 0, 1, 1]
