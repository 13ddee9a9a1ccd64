"""A small distributed kernel: every rank pushes its block to every peer and signals it.

Run it as 4 simulated ranks:          python examples/hello_allgather.py
or under torchrun (any backend):      torchrun --nproc-per-node=4 examples/hello_allgather.py
"""
import sys

import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm

SLOT = 16  # int32 signal slots are 64 bytes apart


@triton.jit
def allgather_kernel(x, gathered, sig, N: tl.constexpr, SLOT: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    # push my block into slot `me` of every peer's buffer, then raise that peer's signal `me`
    for peer in range(0, n):
        shm.putmem_signal(gathered + me * N, x, N * 4, sig + me * SLOT, 1, shm.ACLSHMEM_SIGNAL_SET, peer)
    # wait for all n blocks, then nothing more is in flight towards us
    token = dl.wait(sig, n, "sys", "acquire", waitValue=1)
    gathered = dl.consume_token(gathered, token)


def main():
    triton_dist.init()
    rank, world = triton_dist.rank(), triton_dist.world_size()
    n = 8
    x = triton_dist.symm_tensor((n,), torch.float32)
    gathered = triton_dist.symm_tensor((world * n,), torch.float32)
    sig = triton_dist.symm_tensor((world * SLOT,), torch.int32)
    x.copy_(torch.arange(n, dtype=torch.float32) + 100 * rank)
    triton_dist.barrier()
    allgather_kernel[(1,)](x, gathered, sig, N=n, SLOT=SLOT)
    want = torch.cat([torch.arange(n, dtype=torch.float32) + 100 * r for r in range(world)])
    ok = torch.equal(gathered.cpu(), want)
    triton_dist.barrier()
    if rank == 0:
        print(f"allgather on {world} ranks: {'OK' if ok else 'WRONG'}; rank 0 holds {gathered.tolist()}")
    return ok


if __name__ == "__main__":
    # one rank under torchrun / `triton-dist run`, else 4 simulated ranks
    sys.exit(triton_dist.main_or_launch(main, world_size=4))
