"""Scenario of upstream test_symm_at: each rank reads its right neighbour's symmetric int64[32]
(arange + 100 * rank) through dl.symm_at into a plain output, then barrier_all_vec."""
import shmem as ash
import torch
import torch.distributed as dist
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device

import common


@triton.jit
def read_neighbour(remote_ptr, output_ptr, rank, world_size):
    if sub_vec_id() == 0:
        peer = dl.symm_at(remote_ptr, (rank + 1) % world_size)
        offs = tl.arange(0, 32)
        tl.store(output_ptr + offs, tl.load(peer + offs))
    libshmem_device.barrier_all_vec()


def main():
    rank, world = common.init()
    data = ash.aclshmem_create_tensor([32], dtype=torch.int64, device_id=rank)
    data.copy_(torch.arange(32, dtype=torch.int64) + rank * 100)
    everyone = [None] * world
    dist.all_gather_object(everyone, data.cpu().clone())
    out = torch.zeros([32], dtype=torch.int64).npu()
    dist.barrier()
    read_neighbour[(1, 1, 1)](data, out, rank, world)
    assert torch.equal(out.cpu(), everyone[(rank + 1) % world]), f"rank {rank}: {out[:4].tolist()}"
    ash.aclshmem_free_tensor(data)
    common.finish()


if __name__ == "__main__":
    main()
