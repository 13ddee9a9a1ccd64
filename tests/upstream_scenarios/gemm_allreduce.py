"""Scenario of upstream tutorial 03-ascend-gemm-allreduce-oneshot (small shapes; kernel in
gemm_reduce.py): every rank's C (fp32, M x N) = sum_i A_i @ B_i, pulled one-shot from every
rank and added with tl.atomic_add."""
import torch
import torch.distributed as dist

import shmem as ash

import common
from gemm_reduce import (BLOCK_K, BLOCK_M, BLOCK_N, BUFFERS, COMM_M, COMM_N, NCORE, PVALUE, K, N,
                         gemm_reduce_kernel)

M = 32


def main():
    rank, world = common.init()
    torch.manual_seed(42 + rank)
    a = torch.randn(M, K, dtype=torch.float16).npu()
    b = torch.randn(K, N, dtype=torch.float16).npu()
    c = torch.zeros(M, N, dtype=torch.float32).npu()
    peer_mem = ash.aclshmem_create_tensor([BLOCK_M * PVALUE * BUFFERS * BLOCK_N * (N // BLOCK_N)],
                                          dtype=torch.float32, device_id=rank)
    dist.barrier()
    gemm_reduce_kernel[(NCORE, 1, 1)](a, b, c, peer_mem, rank, world, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K,
                                      PVALUE, BUFFERS, COMM_M, COMM_N, False)
    golden = a.float() @ b.float()
    dist.all_reduce(golden)
    torch.testing.assert_close(c.cpu().half(), golden.cpu().half(), rtol=1e-3, atol=1e-3)
    dist.barrier()
    ash.aclshmem_free_tensor(peer_mem)
    common.finish()


if __name__ == "__main__":
    main()
