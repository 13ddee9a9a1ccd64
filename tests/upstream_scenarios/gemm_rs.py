"""Scenario of upstream tutorial 02-ascend-gemm-reduce-scatter (small shapes; kernel in
gemm_reduce.py): C_rank (fp32, M/world x N) = rows of rank's part of sum_i A_i @ B_i."""
import torch
import torch.distributed as dist

import shmem as ash

import common
from gemm_reduce import (BLOCK_K, BLOCK_M, BLOCK_N, BUFFERS, COMM_M, COMM_N, NCORE, PVALUE, K, N,
                         gemm_reduce_kernel)

M_PER_RANK = 32


def inputs(i, world):
    g = torch.Generator().manual_seed(42 + i)
    return (torch.randn(M_PER_RANK * world, K, generator=g, dtype=torch.float16),
            torch.randn(K, N, generator=g, dtype=torch.float16))


def main():
    rank, world = common.init()
    a, b = (t.npu() for t in inputs(rank, world))
    c = torch.zeros(M_PER_RANK, N, dtype=torch.float32).npu()
    peer_mem = ash.aclshmem_create_tensor([BLOCK_M * PVALUE * world * BUFFERS * BLOCK_N * (N // BLOCK_N)],
                                          dtype=torch.float32, device_id=rank)
    dist.barrier()
    gemm_reduce_kernel[(NCORE, 1, 1)](a, b, c, peer_mem, rank, world, M_PER_RANK, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                                      PVALUE, BUFFERS, COMM_M, COMM_N, True)
    total = sum(x.float() @ y.float() for x, y in (inputs(i, world) for i in range(world)))
    golden = total[rank * M_PER_RANK:(rank + 1) * M_PER_RANK]
    torch.testing.assert_close(c.cpu().half(), golden.half(), rtol=1e-3, atol=1e-3)
    dist.barrier()
    ash.aclshmem_free_tensor(peer_mem)
    common.finish()


if __name__ == "__main__":
    main()
