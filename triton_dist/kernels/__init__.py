"""The kernel library: collectives and overlapped GEMMs on symmetric memory.

    from triton_dist import kernels
    y = kernels.all_gather(x)                 # inside ranks of triton_dist.launch or torchrun

Every op is collective (all ranks call it, in the same order, with the same shapes),
returns a new tensor on triton_dist.device(), accepts float32, float16 and bfloat16 and
any world size; the data moves through symmetric memory inside @triton.jit kernels with
`dl.*` and `libshmem_device.*`.

- all_gather(x):       concatenation of every rank's x along dim 0, in rank order
- reduce_scatter(x):   sum over ranks of x (dim 0 = world_size * m); this rank's m rows
- all_reduce(x, method="one_shot" | "ring"): sum over ranks
- all_to_all(x):       chunk j of x (dim 0 cut in world_size) goes to rank j; the result
                       stacks the chunks received, in rank order
- ag_gemm(a_shard, b): all_gather(a_shard) @ b, overlapped tile by tile
- gemm_rs(a, b):       reduce_scatter(a @ b), each rank holding its own K-slice, overlapped

The library keeps one symmetric workspace per op between calls (see _common.py for why
reusing its signal slots is safe without resets); free_workspaces() gives them back
(collective).
"""
from ._common import free_workspaces, workspace_bytes
from .collectives import ALL_REDUCE_METHODS, all_gather, all_reduce, all_to_all, reduce_scatter
from .gemm import ag_gemm, gemm_rs

__all__ = ["all_gather", "reduce_scatter", "all_reduce", "all_to_all", "ag_gemm", "gemm_rs",
           "free_workspaces", "workspace_bytes", "ALL_REDUCE_METHODS"]
