"""Ring AllReduce (the seed's algorithm): n-1 reduce-scatter steps, then n-1 all-gather steps,
each moving 1/n of the data to the right neighbour, every part of the data pipelined on
its own program with its own signals.

Run it as 4 simulated ranks:          python examples/allreduce_ring.py
or under torchrun (any backend):      torchrun --nproc-per-node=4 examples/allreduce_ring.py

torch.distributed.all_reduce is the oracle; the one-shot variant runs too for comparison.
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
    x = torch.randn(37, 101, generator=torch.Generator().manual_seed(rank)).to(dev)

    ring = kernels.all_reduce(x, method="ring")
    one_shot = kernels.all_reduce(x, method="one_shot")

    want = x.clone()
    dist.all_reduce(want)
    err = (ring - want).abs().max().item()
    ok = torch.allclose(ring, want, rtol=1e-5, atol=1e-5) and torch.allclose(one_shot, want, rtol=1e-5, atol=1e-5)
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    if rank == 0:
        print(f"ring allreduce of {tuple(x.shape)} on {world} ranks: {'OK' if all(oks) else 'WRONG'}; "
              f"max |ring - torch| on rank 0 = {err:.2e}")
    kernels.free_workspaces()          # collective: give the library's symmetric buffers back
    return ok


if __name__ == "__main__":
    # one rank under torchrun / `triton-dist run`, else 4 simulated ranks
    sys.exit(triton_dist.main_or_launch(main, world_size=4))
