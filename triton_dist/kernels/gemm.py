"""AllGather+GEMM and GEMM+ReduceScatter with tile-level overlap (the seeds' producer/consumer model).

ag_gemm(a_shard, b) = all_gather(a_shard) @ b
    Producers push this rank's A tiles (BLOCK_M rows of the shard) into every workspace,
    this rank's own included, with putmem_signal, one 64-byte slot per (source rank, tile);
    they copy into their own workspace first, then serve the peer that needs this rank's
    tiles soonest (rank me-1, then me-2, ...).
    Consumers run the GEMM over output tiles with the seeds' swizzle
        pid_m = (pid_m + rank * tiles_per_rank) % total_m_tiles
    so every rank starts on its own shard and reaches the tiles of rank me+1, me+2, ... when
    they have most likely arrived; every tile is `dl.wait`ed for and its pointer passed
    through `dl.consume_token` before it is loaded.  The own shard goes through the
    workspace (one local copy of m x K) so that a tile's pointer is never chosen in a branch:
    triton-adapter-opt 3.2.0 crashes on that (docs/ascend.md, "What the real compilers refuse").

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

from triton_dist.kernels import _common as C
# the cross-core flag ids and helpers (cube and vector halves of a mix kernel; _cross_core.py says why)
from triton_dist.kernels._cross_core import CUBE_TO_VECTOR, HAS_CROSS_CORE_FLAGS, VECTOR_TO_CUBE, al

# program instances per launch (an NPU has 20-24 AI cores; producers and consumers wait for
# each other, so a launch must fit the cores: the simulator models them, sim/device.py)
AG_PRODUCERS = 2      # AG+GEMM: pushes are cheap DMA, few programs suffice
AG_CONSUMERS = 8      # AG+GEMM: GEMM programs
RS_PRODUCERS = 6      # GEMM+RS: GEMM programs
RS_CONSUMERS = 2      # GEMM+RS: reduce programs


@triton.jit
def _tile_matmul(a_ptrs, b_ptrs, a_rows, b_cols, rk, K, N, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, UPCAST: tl.constexpr, PREC: tl.constexpr):
    """One BMxBN output tile: sum over K of A[rows, k:k+BK] @ B[k:k+BK, cols], in fp32, masked."""
    acc = tl.full((BM, BN), 0.0, tl.float32)
    for k0 in range(0, K, BK):
        k_left = K - k0
        at = tl.load(a_ptrs, mask=a_rows & (rk[None, :] < k_left), other=0.0)
        bt = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & b_cols, other=0.0)
        if UPCAST:
            at = at.to(tl.float32)
            bt = bt.to(tl.float32)
        acc += tl.dot(at, bt, input_precision=PREC)
        a_ptrs += BK
        b_ptrs += BK * N
    return acc


@triton.jit
def _cube_then_vector():
    """On an NPU, what the cube half did before (a tl.dot result stored) happens before what the
    vector half does after (its copy of shm.fence()/dl.notify): _cross_core.py says why and cites."""
    if HAS_CROSS_CORE_FLAGS:
        al.sync_block_set("cube", "vector", CUBE_TO_VECTOR)
        al.sync_block_wait("cube", "vector", CUBE_TO_VECTOR)


@triton.jit
def _vector_then_cube():
    """On an NPU, what the vector half did before (dl.wait returned; a notify sent) happens before
    what the cube half does after (the loads feeding a tl.dot; its next store)."""
    if HAS_CROSS_CORE_FLAGS:
        al.sync_block_set("vector", "cube", VECTOR_TO_CUBE)
        al.sync_block_wait("vector", "cube", VECTOR_TO_CUBE)


@triton.jit
def _grouped(w, ROWS, TN, GM: tl.constexpr):
    """Tile w of a ROWS x TN grid of tiles, in groups of GM tile rows (column by column inside
    a group), so tiles that run together share B columns in L2; GM = 1 is row-major order."""
    per_group = GM * TN
    first = (w // per_group) * GM
    size = tl.minimum(ROWS - first, GM)
    return first + (w % per_group) % size, (w % per_group) // size


# One kernel per op holds both roles.  Programs [0, NP) produce and the others consume; a producer-only
# launch passes NP = its grid size, a consumer-only launch NP = 0.

@triton.jit(**C.ONE_COMPILE_FOR_EVERY_EPOCH)
def _ag_gemm_kernel(a, b, ws, sig, out, m, N, K, T, epoch, NP: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ES: tl.constexpr, UPCAST: tl.constexpr,
                    PREC: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    me = dl.rank()
    n = dl.num_ranks()
    if pid < NP:
        # ---- producer: push my tiles, into my own workspace first (my consumers start on them), then
        # rank me-1 (it needs them soonest), me-2, ...
        for w in range(pid, n * T, NP):
            peer = (me - w // T + n) % n
            t = w % T
            rows = tl.minimum(BM, m - t * BM)
            shm.putmem_signal(ws + (me * m + t * BM) * K, a + t * BM * K, rows * K * ES,
                              sig + (me * T + t) * shm.SIGNAL_SLOT_STRIDE_INT32, epoch,
                              shm.ACLSHMEM_SIGNAL_SET, peer)
    else:
        # ---- consumer: GEMM over output tiles, my own shard first (swizzle)
        c = pid - NP
        NC = tl.num_programs(0) - NP
        TN = (N + BN - 1) // BN
        total_m = n * T
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        for w in range(c, total_m * TN, NC):
            gm, gn = _grouped(w, total_m, TN, GM)
            pid_m = (gm + me * T) % total_m
            n0 = gn * BN
            src = pid_m // T
            t = pid_m % T
            rows = tl.minimum(BM, m - t * BM)
            # every tile of A, my own too, is read from the workspace after its wait: one pointer, chosen in
            # no branch (triton-adapter-opt 3.2.0 crashes on a pointer yielded by scf.if, docs/ascend.md
            # "What the real compilers refuse"); my own tiles cost one local copy by my producers
            tok = dl.wait(sig + pid_m * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
            # on an NPU the wait blocks in the vector half and the loads feeding the dot are the cube
            # half's; nothing else orders them (_cross_core.py): the cube waits for the vector's wait
            _vector_then_cube()
            base = dl.consume_token(ws + (src * m + t * BM) * K, tok)
            rn = n0 + tl.arange(0, BN)
            a_ptrs = base + rm[:, None] * K + rk[None, :]
            b_ptrs = b + rk[:, None] * N + rn[None, :]
            a_rows = rm[:, None] < rows
            b_cols = rn[None, :] < N
            acc = _tile_matmul(a_ptrs, b_ptrs, a_rows, b_cols, rk, K, N, BM, BN, BK, UPCAST, PREC)
            optr = out + (src * m + t * BM + rm[:, None]) * N + rn[None, :]
            tl.store(optr, acc.to(out.dtype.element_ty), mask=(rm[:, None] < rows) & (rn[None, :] < N))
            _cube_then_vector()     # the vector waits for the cube's tile: a flag holds 15 sets at most


@triton.jit(**C.ONE_COMPILE_FOR_EVERY_EPOCH)
def _gemm_rs_kernel(a, b, ws, sig, out, m, N, K, T, epoch, NP: tl.constexpr,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UPCAST: tl.constexpr,
                    PREC: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    me = dl.rank()
    n = dl.num_ranks()
    TN = (N + BN - 1) // BN
    per_dst = T * TN
    rm = tl.arange(0, BM)
    if pid < NP:
        # ---- producer: GEMM tiles, chunk of rank me+1 first and my own last; each tile goes
        # straight into its destination's workspace (slot me), then its signal is SET there
        rk = tl.arange(0, BK)
        for w in range(pid, n * per_dst, NP):
            dst = (me + 1 + w // per_dst) % n
            t, tn = _grouped(w % per_dst, T, TN, GM)
            rn = tn * BN + tl.arange(0, BN)
            rows = tl.minimum(BM, m - t * BM)
            a_ptrs = a + (dst * m + t * BM + rm[:, None]) * K + rk[None, :]
            b_ptrs = b + rk[:, None] * N + rn[None, :]
            a_rows = rm[:, None] < rows
            b_cols = rn[None, :] < N
            acc = _tile_matmul(a_ptrs, b_ptrs, a_rows, b_cols, rk, K, N, BM, BN, BK, UPCAST, PREC)
            remote = dl.symm_at(ws, dst)
            tl.store(remote + (me * m + t * BM + rm[:, None]) * N + rn[None, :], acc.to(ws.dtype.element_ty),
                     mask=(rm[:, None] < rows) & (rn[None, :] < N))
            # on an NPU the store above is the cube half's, the fence and the notify run in the vector half
            # too, and the compiler orders nothing between them (_cross_core.py): the vector waits for it
            _cube_then_vector()
            shm.fence()                           # the tile is in dst's memory before its signal
            dl.notify(sig + (me * per_dst + t * TN + tn) * shm.SIGNAL_SLOT_STRIDE_INT32, dst, signal=epoch,
                      sig_op="set")
            _vector_then_cube()   # and the cube waits for the signal: a flag holds 15 sets at most
    else:
        # ---- consumer: reduce my chunk's tiles as they come, in production order (rank me-1
        # first, my own last), in fp32
        c = pid - NP
        NC = tl.num_programs(0) - NP
        for w in range(c, per_dst, NC):
            t, tn = _grouped(w, T, TN, GM)          # the order the producers make them in
            rn = tn * BN + tl.arange(0, BN)
            rows = tl.minimum(BM, m - t * BM)
            mask = (rm[:, None] < rows) & (rn[None, :] < N)
            acc = tl.full((BM, BN), 0.0, tl.float32)
            for i in range(1, n + 1):
                src = (me - i + n) % n
                tok = dl.wait(sig + (src * per_dst + t * TN + tn) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire",
                              epoch)
                buf = dl.consume_token(ws, tok)
                acc += tl.load(buf + (src * m + t * BM + rm[:, None]) * N + rn[None, :], mask=mask).to(tl.float32)
            tl.store(out + (t * BM + rm[:, None]) * N + rn[None, :], acc.to(out.dtype.element_ty), mask=mask)


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


def _programs(op, given, default):
    if given is None:
        return default
    if not isinstance(given, int) or isinstance(given, bool) or given < 1:
        raise TritonDistError(f"kernels.{op}: program counts must be positive ints, got {given!r}")
    return given


def _setup(op, a, block_m, block_n, block_k, producers, consumers, group_m, heavy):
    """(compile-time arguments and launch options, most producers, most consumers) for this call
    on this backend."""
    prof = C.profile()
    (dm, dn, dk), launch_opts = prof.gemm(a.dtype)
    BM, BN, BK = _blocks(op, dm if block_m is None else block_m, dn if block_n is None else block_n,
                         dk if block_k is None else block_k)
    dp, dc = prof.programs(*(AG_PRODUCERS, AG_CONSUMERS) if op == "ag_gemm" else (RS_PRODUCERS, RS_CONSUMERS),
                           heavy=heavy, K=a.shape[1])
    meta = dict(BM=BM, BN=BN, BK=BK, UPCAST=C.dot_upcast(a.dtype), PREC=C.dot_precision(a.dtype),
                GM=C.check_block(op, "group_m", prof.group_m if group_m is None else group_m), **launch_opts)
    return meta, _programs(op, producers, dp), _programs(op, consumers, dc)


def ag_gemm(a_shard: torch.Tensor, b: torch.Tensor, *, launches: int = 1,
            block_m: int | None = None, block_n: int | None = None, block_k: int | None = None,
            producers: int | None = None, consumers: int | None = None, group_m: int | None = None) -> torch.Tensor:
    """all_gather(a_shard) @ b, the gather overlapped with the GEMM tile by tile (collective).

    a_shard: (m, K) on every rank; b: (K, N), the same on every rank.  Returns (world_size * m, N).
    Block sizes, program counts and group_m (output tiles are visited in groups of group_m
    tile rows, for L2 reuse) default to what suits the backend (kernels/_common.Profile).
    """
    op = "ag_gemm"
    C.check_launches(op, launches)
    a, b = _check_gemm(op, a_shard, b, "a_shard")
    meta, max_np, max_nc = _setup(op, a, block_m, block_n, block_k, producers, consumers, group_m, heavy="consumer")
    BM, BN = meta["BM"], meta["BN"]
    r, n = C.world()
    m, K = a.shape
    N = b.shape[1]
    C.check_size(op, max(n * m * K, n * m * N, K * N), a.element_size())
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
    NC = min(max_nc, n * T * TN)
    NP = min(max_np, n * T)             # my own tiles are copied into my workspace too (the kernel says why)
    args = (a, b, ws, ph.sig, out, m, N, K, T, ph.epoch)
    meta["ES"] = ES
    if launches == 1:
        _ag_gemm_kernel[(NP + NC,)](*args, NP=NP, **meta)
    else:
        _ag_gemm_kernel[(NP,)](*args, NP=NP, **meta)           # producers only: never wait
        _ag_gemm_kernel[(NC,)](*args, NP=0, **meta)            # consumers only
    return out


def gemm_rs(a: torch.Tensor, b: torch.Tensor, *, launches: int = 1,
            block_m: int | None = None, block_n: int | None = None, block_k: int | None = None,
            producers: int | None = None, consumers: int | None = None, group_m: int | None = None) -> torch.Tensor:
    """reduce_scatter(a @ b): every rank holds its own K-slice, a: (M, K_local), b: (K_local, N);
    returns this rank's M / world_size rows of the sum, reduced tile by tile as the GEMM
    produces them (collective).  Block sizes, program counts and group_m default to what suits
    the backend (kernels/_common.Profile)."""
    op = "gemm_rs"
    C.check_launches(op, launches)
    a, b = _check_gemm(op, a, b, "a")
    meta, max_np, max_nc = _setup(op, a, block_m, block_n, block_k, producers, consumers, group_m, heavy="producer")
    BM, BN = meta["BM"], meta["BN"]
    r, n = C.world()
    M, K = a.shape
    N = b.shape[1]
    m = C.check_rows_divisible(op, "a", M, n)
    C.check_size(op, max(M * K, n * m * N, K * N), a.element_size())
    out = torch.empty((m, N), dtype=a.dtype, device=triton_dist.device())
    if out.numel() == 0:
        return out
    T = C.cdiv(m, BM)
    TN = C.cdiv(N, BN)
    ph = C.workspace(op).acquire(n * m * N * a.element_size(), n * T * TN)
    ws = ph.view(a.dtype, 0, n * m * N)
    NP = min(max_np, n * T * TN)
    NC = min(max_nc, T * TN)
    args = (a, b, ws, ph.sig, out, m, N, K, T, ph.epoch)
    if launches == 1:
        _gemm_rs_kernel[(NP + NC,)](*args, NP=NP, **meta)
    else:
        _gemm_rs_kernel[(NP,)](*args, NP=NP, **meta)           # GEMM producers only: never wait
        _gemm_rs_kernel[(NC,)](*args, NP=0, **meta)            # reduce consumers only
    return out
