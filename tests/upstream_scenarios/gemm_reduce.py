"""The kernel of the GEMM+ReduceScatter and GEMM+AllReduce scenarios (upstream tutorials 02 and
03, small shapes): per outer step, every program computes its GEMM tiles of A_rank @ B_rank into
the rank's local symmetric buffer (fp32), barrier_all, then vector sub-core 0 of each program
pulls the tiles it reduces from every rank (dist_swizzle2d_Nz staggers the source rank) and
adds them into C with tl.atomic_add.  Double-buffered: no barrier at the end of a step (the
next step's barrier orders the pulls of step s before the overwrite at step s + 2).

Reduce-scatter: output rows are M_PER_RANK per rank; step s covers rows s*CHUNK.. of every
rank's part, and each rank pulls only its own part.  All-reduce: step s covers rows s*CHUNK..
of the whole output and every rank pulls all of it."""
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device
from triton_dist.language.extra.ascend.algorithm import dist_swizzle2d_Nz, gemm_swizzle2d_Nz

N, K = 32, 32
BLOCK_M, BLOCK_N, BLOCK_K, PVALUE, BUFFERS = 16, 16, 16, 1, 2
COMM_M, COMM_N = 8, 16
NCORE = 4


@triton.jit
def gemm_reduce_kernel(a_ptr, b_ptr, c_ptr, peer_mem, rank, rank_size, M_PART: tl.constexpr, N: tl.constexpr,
                       K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       PVALUE: tl.constexpr, BUFFERS: tl.constexpr, COMM_M: tl.constexpr, COMM_N: tl.constexpr,
                       SCATTER: tl.constexpr):
    pid = tl.program_id(0)
    ncore = tl.num_programs(0)
    CHUNK: tl.constexpr = BLOCK_M * PVALUE
    parts = rank_size if SCATTER else 1          # row parts in one step: one per rank for RS
    step_rows = parts * CHUNK
    for step in range(tl.cdiv(M_PART, CHUNK)):
        buffer_id = step % BUFFERS
        # 1. GEMM tiles of this step into my local buffer
        n_tiles = tl.cdiv(step_rows, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for block_id in range(pid, n_tiles, ncore):
            tm, tn = gemm_swizzle2d_Nz(block_id, step_rows, N, BLOCK_M, BLOCK_N)
            part = tm // PVALUE
            local_m = (tm % PVALUE) * BLOCK_M
            rm = tl.arange(0, BLOCK_M)
            rn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
            rk = tl.arange(0, BLOCK_K)
            a_rows = part * M_PART + step * CHUNK + local_m + rm
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for kk in range(0, K, BLOCK_K):
                a = tl.load(a_ptr + a_rows[:, None] * K + kk + rk[None, :])
                b = tl.load(b_ptr + (kk + rk)[:, None] * N + rn[None, :])
                acc += tl.dot(a, b)
            buf_rows = buffer_id * step_rows + part * CHUNK + local_m + rm
            tl.store(peer_mem + buf_rows[:, None] * N + rn[None, :], acc)
        libshmem_device.barrier_all()
        # 2. pull my rows of this step from every rank and add them into C
        if sub_vec_id() == 0:
            my_part = rank if SCATTER else 0
            n_comm = tl.cdiv(CHUNK, COMM_M) * tl.cdiv(N, COMM_N) * rank_size
            for idx in range(pid, n_comm, ncore):
                bm, bn, target, rows, cols = dist_swizzle2d_Nz(idx, rank_size, CHUNK, N, COMM_M, COMM_N)
                r = tl.arange(0, COMM_M)[:, None]
                c = tl.arange(0, COMM_N)[None, :]
                mask = (r < rows) & (c < cols)
                src = dl.symm_at(peer_mem, target)
                src_rows = buffer_id * step_rows + my_part * CHUNK + bm * COMM_M + r
                tile = tl.load(src + src_rows * N + bn * COMM_N + c, mask=mask)
                c_rows = step * CHUNK + bm * COMM_M + r
                tl.atomic_add(c_ptr + c_rows * N + bn * COMM_N + c, tile, mask=mask)
