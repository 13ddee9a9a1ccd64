"""AllGather + GEMM, overlapped tile by tile: every rank holds a row shard of A and all of B;
the result is all_gather(A) @ B on every rank.

Run it as 4 simulated ranks:          python examples/ag_gemm.py
or under torchrun (any backend):      torchrun --nproc-per-node=4 examples/ag_gemm.py

Producers push this rank's A tiles to the peers and SET one signal slot per tile; the
GEMM consumers start on their own shard (swizzled tile order) and `dl.wait` for each
remote tile just before they need it.  torch.distributed (gloo on the simulator, hccl on
an NPU) and torch.matmul are the oracle.
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
    m, K, N = 40, 72, 56                       # none is a multiple of the 32x32x32 tiles
    a_shard = torch.randn(m, K, generator=torch.Generator().manual_seed(rank)).to(dev)
    b = torch.randn(K, N, generator=torch.Generator().manual_seed(1234)).to(dev)

    c = kernels.ag_gemm(a_shard, b)

    shards = [torch.empty_like(a_shard) for _ in range(world)]
    dist.all_gather(shards, a_shard)
    want = torch.cat(shards) @ b
    err = (c - want).abs().max().item()
    ok = tuple(c.shape) == (world * m, N) and torch.allclose(c, want, rtol=1e-4, atol=1e-4)
    triton_dist.barrier()
    if rank == 0:
        print(f"ag_gemm on {world} ranks: {'OK' if ok else 'WRONG'}; C is {tuple(c.shape)}, "
              f"max |C - torch| = {err:.2e}")
    kernels.free_workspaces()          # collective: give the library's symmetric buffers back
    return ok


if __name__ == "__main__":
    # one rank under torchrun / `triton-dist run`, else 4 simulated ranks
    sys.exit(triton_dist.main_or_launch(main, world_size=4))
