"""Scenario of upstream tutorial 01-ascend-allgather-gemm (small shapes): push all-gather of A
into every rank's symmetric buffer by vector sub-core 0 of each program (tiles ordered by
dist_swizzle2d_Nz, targets staggered), barrier_all, then the GEMM of the gathered rows against
B with tl.dot (tiles ordered by gemm_swizzle2d_Nz); outer steps over row chunks of
BLOCK_M * PVALUE rows, double-buffered (BUFFERS = 2).  Golden: all_gather(A) @ B."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import shmem as ash
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device
from triton_dist.language.extra.ascend.algorithm import dist_swizzle2d_Nz, gemm_swizzle2d_Nz

import common

M, N, K = 64, 32, 32                  # per-rank rows of A; B is K x N
BLOCK_M, BLOCK_N, BLOCK_K, PVALUE, BUFFERS = 16, 16, 16, 2, 2
COMM_M, COMM_K = 8, 16
NCORE = 4


@triton.jit
def ag_gemm_kernel(a_ptr, b_ptr, c_ptr, peer_mem, rank, rank_size, M: tl.constexpr, N: tl.constexpr,
                   K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   PVALUE: tl.constexpr, BUFFERS: tl.constexpr, COMM_M: tl.constexpr, COMM_K: tl.constexpr):
    pid = tl.program_id(0)
    ncore = tl.num_programs(0)
    CHUNK: tl.constexpr = BLOCK_M * PVALUE
    buffer_rows = CHUNK * rank_size
    for step in range(tl.cdiv(M, CHUNK)):
        buffer_id = step % BUFFERS
        actual_m = tl.minimum(CHUNK, M - step * CHUNK)
        # 1. push my rows of this chunk to every rank (one vector sub-core per block)
        if sub_vec_id() == 0:
            n_comm = tl.cdiv(actual_m, COMM_M) * tl.cdiv(K, COMM_K) * rank_size
            for k in range(pid, n_comm, ncore):
                bm, bk, target, rows, cols = dist_swizzle2d_Nz(k, rank_size, actual_m, K, COMM_M, COMM_K)
                r = tl.arange(0, COMM_M)[:, None]
                c = tl.arange(0, COMM_K)[None, :]
                mask = (r < rows) & (c < cols)
                tile = tl.load(a_ptr + (step * CHUNK + bm * COMM_M + r) * K + bk * COMM_K + c, mask=mask)
                dst_row = buffer_id * buffer_rows + rank * CHUNK + bm * COMM_M + r
                dst = dl.symm_at(peer_mem, target)
                tl.store(dst + dst_row * K + bk * COMM_K + c, tile, mask=mask)
        libshmem_device.barrier_all()
        # 2. GEMM of every rank's rows of this chunk, from my local buffer
        n_tiles = tl.cdiv(rank_size * CHUNK, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for block_id in range(pid, n_tiles, ncore):
            tm, tn = gemm_swizzle2d_Nz(block_id, rank_size * CHUNK, N, BLOCK_M, BLOCK_N)
            src_rank = tm // PVALUE
            local_m = (tm % PVALUE) * BLOCK_M
            rm = tl.arange(0, BLOCK_M)
            rn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
            rk = tl.arange(0, BLOCK_K)
            row_ok = (local_m + rm) < actual_m
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            a_rows = buffer_id * buffer_rows + src_rank * CHUNK + local_m + rm
            for kk in range(0, K, BLOCK_K):
                a = tl.load(peer_mem + a_rows[:, None] * K + kk + rk[None, :], mask=row_ok[:, None], other=0.0)
                b = tl.load(b_ptr + (kk + rk)[:, None] * N + rn[None, :])
                acc += tl.dot(a, b)
            c_rows = src_rank * M + step * CHUNK + local_m + rm
            tl.store(c_ptr + c_rows[:, None] * N + rn[None, :], acc.to(tl.float16), mask=row_ok[:, None])


def main():
    rank, world = common.init()
    torch.manual_seed(42 + rank)
    a = torch.randn(M, K, dtype=torch.float16).npu()
    torch.manual_seed(7)
    b = torch.randn(K, N, dtype=torch.float16).npu()
    c = torch.zeros(M * world, N, dtype=torch.float16).npu()
    peer_mem = ash.aclshmem_create_tensor([BLOCK_M * PVALUE * world * BUFFERS * max(K, BLOCK_K)],
                                          dtype=torch.float16, device_id=rank)
    dist.barrier()
    assert NCORE <= 20, "block num should less than or equal physical aicore num"
    ag_gemm_kernel[(NCORE, 1, 1)](a, b, c, peer_mem, rank, world, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, PVALUE,
                                  BUFFERS, COMM_M, COMM_K)
    gathered = [torch.empty_like(a) for _ in range(world)]
    dist.all_gather(gathered, a)
    golden = (torch.cat(gathered).float() @ b.float()).half()
    torch.testing.assert_close(c.cpu(), golden.cpu(), rtol=1e-3, atol=1e-3)
    dist.barrier()
    ash.aclshmem_free_tensor(peer_mem)
    common.finish()


if __name__ == "__main__":
    main()
