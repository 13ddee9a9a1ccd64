"""GEMM + ReduceScatter, overlapped tile by tile: every rank holds a K-slice of A and of B;
rank r gets rows r*M/n .. (r+1)*M/n of sum over ranks of A_r @ B_r.

Run it as 4 simulated ranks:          python examples/gemm_rs.py
or under torchrun (any backend):      torchrun --nproc-per-node=4 examples/gemm_rs.py

The GEMM programs store each finished tile straight into the workspace of the rank that
owns those rows and SET that tile's signal there; the reduce programs of the owner add
the tiles up as they come.  torch.matmul + torch.distributed.all_reduce are the oracle.
"""
import sys

import torch
import torch.distributed as dist

import triton_dist
from triton_dist import kernels


def main():
    triton_dist.init()
    rank, world = triton_dist.rank(), triton_dist.world_size()
    dev = triton_dist.device()
    m, k_local, N = 24, 40, 56                 # rows per rank, this rank's K-slice, columns
    g = torch.Generator().manual_seed(rank)
    a = torch.randn(world * m, k_local, generator=g).to(dev)
    b = torch.randn(k_local, N, generator=g).to(dev)

    c = kernels.gemm_rs(a, b)

    full = a @ b
    dist.all_reduce(full)
    want = full[rank * m:(rank + 1) * m]
    err = (c - want).abs().max().item()
    ok = tuple(c.shape) == (m, N) and torch.allclose(c, want, rtol=1e-4, atol=1e-4)
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    if rank == 0:
        print(f"gemm_rs on {world} ranks: {'OK' if all(oks) else 'WRONG'}; each rank holds {tuple(c.shape)}, "
              f"max |C - torch| on rank 0 = {err:.2e}")
    kernels.free_workspaces()          # collective: give the library's symmetric buffers back
    return ok


if __name__ == "__main__":
    # one rank under torchrun / `triton-dist run`, else 4 simulated ranks
    sys.exit(triton_dist.main_or_launch(main, world_size=4))
