"""Scenario of upstream test_my_pe / test_num_ranks (evidence F): 3 programs of one kernel each
add the rank (or the world size) to their own int64 element of a plain device tensor; only
vector sub-core 0 does it.  Host code as upstream writes it: hccl, shmem, .npu()."""
import shmem as ash
import torch
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import triton_dist.language as dl

import common


@triton.jit
def add_my_pe(ptr):
    pid = tl.program_id(0)
    if sub_vec_id() == 0:
        x = tl.load(ptr + pid)
        tl.store(ptr + pid, x + dl.rank())


@triton.jit
def add_num_ranks(ptr):
    pid = tl.program_id(0)
    if sub_vec_id() == 0:
        x = tl.load(ptr + pid)
        tl.store(ptr + pid, x + dl.num_ranks())


def main():
    rank, world = common.init()
    assert ash.my_pe() == rank and ash.pe_count() == world

    data = torch.zeros([32], dtype=torch.int64).npu()
    add_my_pe[(3, 1, 1)](data)
    want = torch.zeros([32], dtype=torch.int64)
    want[:3] += rank
    assert torch.equal(data.cpu(), want), f"rank {rank}: {data[:4].tolist()}"

    data = torch.zeros([32], dtype=torch.int64, device="npu")
    add_num_ranks[(3, 1, 1)](data)
    want = torch.zeros([32], dtype=torch.int64)
    want[:3] = world
    assert torch.equal(data.cpu(), want), f"rank {rank}: {data[:4].tolist()}"
    common.finish()


if __name__ == "__main__":
    main()
