"""Tile-order helpers that upstream Triton-distributed's Ascend tutorials import
(`from triton_dist.language.extra.ascend.algorithm import dist_swizzle2d_Nz, gemm_swizzle2d_Nz`),
with the same names, arguments and results, written here from their definition (pure integer
index maps; docs/device_model.md cites the upstream file).  All operands are non-negative.

dist_swizzle2d_Nz: the order in which a communication loop visits (data tile, peer rank):
every data tile for each rank offset, the peer staggered by the tile index, so programs
working at the same time target different peers.

gemm_swizzle2d_Nz: the order of GEMM output tiles: columns cut into bands of
`swizzle_offset` tiles (the last band narrower); inside a band row by row, column fastest;
even bands top-down, odd bands bottom-up (a serpentine that keeps B tiles in cache).
"""
import triton
import triton.language as tl


@triton.jit
def dist_swizzle2d_Nz(iter_id, rank_size, data_row_shape, data_col_shape, tile_row_shape, tile_col_shape,
                      comm_npu_split=1):
    """-> (data_row_idx, data_col_idx, rank_idx, comm_row_size, comm_col_size) of iteration
    `iter_id`: the data tile (in tiles), the rank it goes to or comes from, and the tile's
    extent (smaller at the ragged edge).  comm_npu_split groups the ranks."""
    n_rows = tl.cdiv(data_row_shape, tile_row_shape)
    n_cols = tl.cdiv(data_col_shape, tile_col_shape)
    n_tiles = n_rows * n_cols
    rank_stride = rank_size // comm_npu_split
    n_groups = tl.cdiv(rank_size, comm_npu_split)
    per_group = comm_npu_split * n_tiles
    group = iter_id // per_group
    within = iter_id % per_group
    # the last group of ranks may be smaller than comm_npu_split
    group_size = tl.where(group == n_groups - 1, rank_size - comm_npu_split * group, comm_npu_split)
    tile = within // group_size
    r = group * comm_npu_split + within % group_size
    r = (r * rank_stride) % rank_stride + (r * rank_stride) // rank_size
    rank_idx = (r + tile) % rank_size
    data_row_idx = tile // n_cols
    data_col_idx = tile % n_cols
    comm_row_size = tl.minimum(data_row_shape - data_row_idx * tile_row_shape, tile_row_shape)
    comm_col_size = tl.minimum(data_col_shape - data_col_idx * tile_col_shape, tile_col_shape)
    return data_row_idx, data_col_idx, rank_idx, comm_row_size, comm_col_size


@triton.jit
def gemm_swizzle2d_Nz(iter_id, data_row_shape, data_col_shape, tile_row_shape, tile_col_shape, swizzle_offset=7):
    """-> (data_row_idx, data_col_idx): the output tile (in tiles) of iteration `iter_id`."""
    n_rows = tl.cdiv(data_row_shape, tile_row_shape)
    n_cols = tl.cdiv(data_col_shape, tile_col_shape)
    n_bands = tl.cdiv(n_cols, swizzle_offset)
    band = iter_id // (swizzle_offset * n_rows)
    within = iter_id % (swizzle_offset * n_rows)
    width = tl.where(band == n_bands - 1, n_cols - swizzle_offset * band, swizzle_offset)
    row = within // width
    col = band * swizzle_offset + within % width
    row = tl.where(band % 2 == 1, n_rows - 1 - row, row)
    return row, col
