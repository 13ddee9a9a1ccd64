"""AllGather+GEMM and GEMM+ReduceScatter with tile-level overlap (the seeds' producer/consumer model).

ag_gemm(a_shard, b) = all_gather(a_shard) @ b
    Producers push this rank's A tiles (BLOCK_M rows of the shard) into every peer's
    workspace with putmem_signal, one 64-byte slot per (source rank, tile); they serve the
    peer that needs this rank's tiles soonest first (rank me-1, then me-2, ...).
    Consumers run the GEMM over output tiles with the seeds' swizzle
        pid_m = (pid_m + rank * tiles_per_rank) % total_m_tiles
    so every rank starts on its own shard (read straight from a_shard, no wait) and reaches
    the tiles of rank me+1, me+2, ... when they have most likely arrived; a remote tile is
    `dl.wait`ed for and its pointer passed through `dl.consume_token` before it is loaded.

gemm_rs(a, b) = reduce_scatter(a @ b), a: (M, K_local), b: (K_local, N)
    Producers run the GEMM, destination chunk by destination chunk starting with rank
    me+1 and ending with this rank's own chunk, store each finished tile straight into the
    destination's workspace (slot = this rank), fence, and SET that tile's signal there.
    Consumers reduce the tiles of this rank's chunk as they come: for each tile, wait for
    the contributions in the order they are produced (rank me-1 first, own last) and add
    them in fp32.

Both run producer and consumer programs in one launch (launches=1: the first programs of
the grid produce, the others consume, as the cube/vector split does on Ascend) or as two
launches (launches=2: a producer launch that never waits, then a consumer launch).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.errors import TritonDistError
from triton_dist.language.extra import libshmem_device as shm

from . import _common as C

MAX_CONSUMERS = 8
MAX_PRODUCERS = 8


@triton.jit
def _tile_dot(acc, a_base, a_rows, lda, b, ldb, n0, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    """acc += A[0:a_rows, :K] @ B[:K, n0:n0+BN] (masked), A row-major with leading dim lda."""
    rm = tl.arange(0, BM)
    rn = n0 + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(a_base + rm[:, None] * lda + kk[None, :], mask=(rm[:, None] < a_rows) & (kk[None, :] < K), other=0.0)
        bt = tl.load(b + kk[:, None] * ldb + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            bt = bt.to(tl.float32)
        acc += tl.dot(a, bt)
    return acc


# ---- AllGather + GEMM ------------------------------------------------------------------------

@triton.jit
def _ag_produce(p, P, a, ws, sig, m, K, T, epoch, BM: tl.constexpr, ES: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    for w in range(p, (n - 1) * T, P):
        peer = (me - 1 - w // T + n) % n       # rank me-1 needs my tiles first
        t = w % T
        rows = tl.minimum(BM, m - t * BM)
        shm.putmem_signal(ws + (me * m + t * BM) * K, a + t * BM * K, rows * K * ES,
                          sig + (me * T + t) * shm.SIGNAL_SLOT_STRIDE_INT32, epoch, shm.ACLSHMEM_SIGNAL_SET, peer)


@triton.jit
def _ag_consume(c, NC, a, b, ws, sig, out, m, N, K, T, epoch,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    TN = (N + BN - 1) // BN
    total_m = n * T
    rm = tl.arange(0, BM)
    for w in range(c, total_m * TN, NC):
        pid_m = (w // TN + me * T) % total_m     # swizzle: my own shard first
        n0 = (w % TN) * BN
        src = pid_m // T
        t = pid_m % T
        rows = tl.minimum(BM, m - t * BM)
        if src == me:
            base = a + t * BM * K
        else:
            tok = dl.wait(sig + pid_m * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
            base = dl.consume_token(ws + (src * m + t * BM) * K, tok)
        acc = tl.full((BM, BN), 0.0, tl.float32)
        acc = _tile_dot(acc, base, rows, K, b, N, n0, N, K, BM, BN, BK, UPCAST)
        rn = n0 + tl.arange(0, BN)
        optr = out + (src * m + t * BM + rm[:, None]) * N + rn[None, :]
        tl.store(optr, acc.to(out.dtype.element_ty), mask=(rm[:, None] < rows) & (rn[None, :] < N))


@triton.jit
def _ag_gemm_kernel(a, b, ws, sig, out, m, N, K, T, epoch, NP: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ES: tl.constexpr, UPCAST: tl.constexpr):
    """One launch: programs [0, NP) produce, the others consume."""
    pid = tl.program_id(0)
    if pid < NP:
        _ag_produce(pid, NP, a, ws, sig, m, K, T, epoch, BM, ES)
    else:
        _ag_consume(pid - NP, tl.num_programs(0) - NP, a, b, ws, sig, out, m, N, K, T, epoch, BM, BN, BK, UPCAST)


@triton.jit
def _ag_producer_kernel(a, ws, sig, m, K, T, epoch, BM: tl.constexpr, ES: tl.constexpr):
    _ag_produce(tl.program_id(0), tl.num_programs(0), a, ws, sig, m, K, T, epoch, BM, ES)


@triton.jit
def _ag_consumer_kernel(a, b, ws, sig, out, m, N, K, T, epoch,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    _ag_consume(tl.program_id(0), tl.num_programs(0), a, b, ws, sig, out, m, N, K, T, epoch, BM, BN, BK, UPCAST)


# ---- GEMM + ReduceScatter --------------------------------------------------------------------

@triton.jit
def _rs_produce(p, P, a, b, ws, sig, m, N, K, T, epoch,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    TN = (N + BN - 1) // BN
    per_dst = T * TN
    rm = tl.arange(0, BM)
    for w in range(p, n * per_dst, P):
        dst = (me + 1 + w // per_dst) % n        # rank me+1 first, my own chunk last
        t = (w % per_dst) // TN
        tn = w % TN
        n0 = tn * BN
        rows = tl.minimum(BM, m - t * BM)
        acc = tl.full((BM, BN), 0.0, tl.float32)
        acc = _tile_dot(acc, a + (dst * m + t * BM) * K, rows, K, b, N, n0, N, K, BM, BN, BK, UPCAST)
        rn = n0 + tl.arange(0, BN)
        remote = dl.symm_at(ws, dst)
        tl.store(remote + (me * m + t * BM + rm[:, None]) * N + rn[None, :], acc.to(ws.dtype.element_ty),
                 mask=(rm[:, None] < rows) & (rn[None, :] < N))
        shm.fence()                               # the tile is in dst's memory before its signal
        dl.notify(sig + (me * per_dst + t * TN + tn) * shm.SIGNAL_SLOT_STRIDE_INT32, dst, signal=epoch,
                  sig_op="set")


@triton.jit
def _rs_consume(c, NC, ws, sig, out, m, N, T, epoch, BM: tl.constexpr, BN: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    TN = (N + BN - 1) // BN
    per_dst = T * TN
    rm = tl.arange(0, BM)
    for w in range(c, per_dst, NC):
        t = w // TN
        n0 = (w % TN) * BN
        rows = tl.minimum(BM, m - t * BM)
        rn = n0 + tl.arange(0, BN)
        mask = (rm[:, None] < rows) & (rn[None, :] < N)
        acc = tl.full((BM, BN), 0.0, tl.float32)
        for i in range(1, n + 1):
            src = (me - i + n) % n                # in the order the tiles are produced
            tok = dl.wait(sig + (src * per_dst + w) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
            buf = dl.consume_token(ws, tok)
            acc += tl.load(buf + (src * m + t * BM + rm[:, None]) * N + rn[None, :], mask=mask).to(tl.float32)
        tl.store(out + (t * BM + rm[:, None]) * N + rn[None, :], acc.to(out.dtype.element_ty), mask=mask)


@triton.jit
def _gemm_rs_kernel(a, b, ws, sig, out, m, N, K, T, epoch, NP: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    """One launch: programs [0, NP) run the GEMM and push tiles, the others reduce."""
    pid = tl.program_id(0)
    if pid < NP:
        _rs_produce(pid, NP, a, b, ws, sig, m, N, K, T, epoch, BM, BN, BK, UPCAST)
    else:
        _rs_consume(pid - NP, tl.num_programs(0) - NP, ws, sig, out, m, N, T, epoch, BM, BN)


@triton.jit
def _rs_producer_kernel(a, b, ws, sig, m, N, K, T, epoch,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr):
    _rs_produce(tl.program_id(0), tl.num_programs(0), a, b, ws, sig, m, N, K, T, epoch, BM, BN, BK, UPCAST)


@triton.jit
def _rs_consumer_kernel(ws, sig, out, m, N, T, epoch, BM: tl.constexpr, BN: tl.constexpr):
    _rs_consume(tl.program_id(0), tl.num_programs(0), ws, sig, out, m, N, T, epoch, BM, BN)


# ---- host side ---------------------------------------------------------------------------------

def _check_gemm(op, a, b, a_name):
    a = C.check_tensor(op, a_name, a, ndim=2)
    b = C.check_tensor(op, "b", b, ndim=2)
    if a.dtype != b.dtype:
        raise TritonDistError(f"kernels.{op}: {a_name} and b must have the same dtype, got {a.dtype} and "
                              f"{b.dtype}; convert one with .to()")
    if a.shape[1] != b.shape[0]:
        raise TritonDistError(f"kernels.{op}: {a_name} is {tuple(a.shape)} and b is {tuple(b.shape)}: dim 1 of "
                              f"{a_name} must equal dim 0 of b (the K dimension)")
    return a, b


def _blocks(op, block_m, block_n, block_k):
    return (C.check_block(op, "block_m", block_m), C.check_block(op, "block_n", block_n),
            C.check_block(op, "block_k", block_k))


def ag_gemm(a_shard: torch.Tensor, b: torch.Tensor, *, launches: int = 1,
            block_m: int = 32, block_n: int = 32, block_k: int = 32) -> torch.Tensor:
    """all_gather(a_shard) @ b, the gather overlapped with the GEMM tile by tile (collective).

    a_shard: (m, K) on every rank; b: (K, N), the same on every rank.  Returns (world_size * m, N).
    """
    op = "ag_gemm"
    C.check_launches(op, launches)
    a, b = _check_gemm(op, a_shard, b, "a_shard")
    BM, BN, BK = _blocks(op, block_m, block_n, block_k)
    r, n = C.world()
    m, K = a.shape
    N = b.shape[1]
    C.check_size(op, max(n * m * K, n * m * N, K * N))
    out = torch.empty((n * m, N), dtype=a.dtype, device=triton_dist.device())
    if out.numel() == 0:
        return out
    if K == 0:
        return out.zero_()
    T = C.cdiv(m, BM)
    TN = C.cdiv(N, BN)
    ES = a.element_size()
    ph = C.workspace(op).acquire(n * m * K * ES, n * T)
    ws = ph.view(a.dtype, 0, n * m * K)
    NC = min(MAX_CONSUMERS, n * T * TN)
    NP = min(MAX_PRODUCERS // 4, (n - 1) * T)     # pushes are cheap DMA; few programs suffice
    up = C.dot_upcast(a.dtype)
    if launches == 1:
        _ag_gemm_kernel[(NP + NC,)](a, b, ws, ph.sig, out, m, N, K, T, ph.epoch, NP=NP,
                                    BM=BM, BN=BN, BK=BK, ES=ES, UPCAST=up)
    else:
        if NP:
            _ag_producer_kernel[(NP,)](a, ws, ph.sig, m, K, T, ph.epoch, BM=BM, ES=ES)
        _ag_consumer_kernel[(NC,)](a, b, ws, ph.sig, out, m, N, K, T, ph.epoch, BM=BM, BN=BN, BK=BK, UPCAST=up)
    return out


def gemm_rs(a: torch.Tensor, b: torch.Tensor, *, launches: int = 1,
            block_m: int = 32, block_n: int = 32, block_k: int = 32) -> torch.Tensor:
    """reduce_scatter(a @ b): every rank holds its own K-slice, a: (M, K_local), b: (K_local, N);
    returns this rank's M / world_size rows of the sum, reduced tile by tile as the GEMM
    produces them (collective)."""
    op = "gemm_rs"
    C.check_launches(op, launches)
    a, b = _check_gemm(op, a, b, "a")
    BM, BN, BK = _blocks(op, block_m, block_n, block_k)
    r, n = C.world()
    M, K = a.shape
    N = b.shape[1]
    m = C.check_rows_divisible(op, "a", M, n)
    C.check_size(op, max(M * K, n * m * N, K * N))
    out = torch.empty((m, N), dtype=a.dtype, device=triton_dist.device())
    if out.numel() == 0:
        return out
    T = C.cdiv(m, BM)
    TN = C.cdiv(N, BN)
    ph = C.workspace(op).acquire(n * m * N * a.element_size(), n * T * TN)
    ws = ph.view(a.dtype, 0, n * m * N)
    NP = min(MAX_PRODUCERS - 2, n * T * TN)
    NC = min(2, T * TN)
    up = C.dot_upcast(a.dtype)
    if launches == 1:
        _gemm_rs_kernel[(NP + NC,)](a, b, ws, ph.sig, out, m, N, K, T, ph.epoch, NP=NP,
                                    BM=BM, BN=BN, BK=BK, UPCAST=up)
    else:
        _rs_producer_kernel[(NP,)](a, b, ws, ph.sig, m, N, K, T, ph.epoch, BM=BM, BN=BN, BK=BK, UPCAST=up)
        _rs_consumer_kernel[(NC,)](ws, ph.sig, out, m, N, T, ph.epoch, BM=BM, BN=BN)
    return out
