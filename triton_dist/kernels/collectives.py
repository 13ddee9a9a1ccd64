"""AllGather, AllToAll, ReduceScatter and AllReduce (one-shot push and ring) on symmetric memory.

Every op flattens its input and cuts the per-rank chunk into PARTs; program instance g of
the launch owns part g of every chunk and runs its own pipeline with its own signal slots,
so parts progress independently (tile-level signals).  Data goes through the op's
symmetric workspace (see _common.py for the phases and epochs that make reuse safe):

- gather (all_gather, all_to_all): push my part to every peer with putmem_signal (data,
  then the slot `me` of that part SET to the epoch), copy my own part straight to the
  output, then for each peer, left neighbour first (it pushed to me first): wait, consume
  the token, copy its part out.
- reduce (reduce_scatter, one-shot all_reduce): push my part (of the peer's chunk) to every
  peer, SET my own slot too, then one dl.wait on the n consecutive slots of the part, and
  sum the n contributions in rank order in fp32 (the same order on every rank, so every
  rank of an all_reduce gets bit-identical results).
- ring all_reduce (the seed's algorithm): n-1 reduce-scatter steps, each adding the local
  chunk to what the left neighbour sent and storing the sum straight into the right
  neighbour's receive buffer of that step (remote block store, fence, notify), then n-1
  all-gather steps forwarding the fully reduced chunks around the ring.  Every step has
  its own receive buffer and slot, so nothing is overwritten within a call.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.errors import TritonDistError
from triton_dist.language.extra import libshmem_device as shm
# Every backend must give these ops' results bit for bit: they copy, or add in a fixed order
# (rank order, fp32; the ring hop by hop) with IEEE arithmetic, the same operations on any
# device (triton_dist.testing compares them exactly across backends)
from triton_dist.testing import bit_identical

from triton_dist.kernels import _common as C

MIN_PART = 512        # elements: below this a part is not worth its own program and signal
MAX_PARTS = 8         # program instances per launch of the element-wise collectives
MAX_BLOCK = 2048      # elements per block load/store


@triton.jit(**C.ONE_COMPILE_FOR_EVERY_EPOCH)
def _gather_kernel(x, ws, sig, out, E, PART, epoch,
                   SCATTER: tl.constexpr, ES: tl.constexpr, BLOCK: tl.constexpr):
    """all_gather (SCATTER=False: every peer gets all of x) or all_to_all (SCATTER=True:
    peer d gets chunk d of x).  ws holds n chunks of E elements (slot per source rank);
    sig holds n slots per part, slot (g * n + src)."""
    g = tl.program_id(0)
    me = dl.rank()
    n = dl.num_ranks()
    start = g * PART
    cnt = tl.minimum(PART, E - start)
    # producer: push my part to every peer, right neighbour first
    for i in range(1, n):
        peer = (me + i) % n
        src = x + start
        if SCATTER:
            src = x + peer * E + start
        shm.putmem_signal(ws + me * E + start, src, cnt * ES, sig + (g * n + me) * shm.SIGNAL_SLOT_STRIDE_INT32,
                          epoch, shm.ACLSHMEM_SIGNAL_SET, peer)
    # my own part needs no transfer
    offs = tl.arange(0, BLOCK)
    own = x + start
    if SCATTER:
        own = x + me * E + start
    for off in range(0, cnt, BLOCK):
        m = off + offs < cnt
        tl.store(out + me * E + start + off + offs, tl.load(own + off + offs, mask=m), mask=m)
    # consumer: the left neighbour pushed to me first
    for i in range(1, n):
        src_rank = (me + n - i) % n
        tok = dl.wait(sig + (g * n + src_rank) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
        buf = dl.consume_token(ws, tok) + src_rank * E + start
        for off in range(0, cnt, BLOCK):
            m = off + offs < cnt
            tl.store(out + src_rank * E + start + off + offs, tl.load(buf + off + offs, mask=m), mask=m)


@triton.jit(**C.ONE_COMPILE_FOR_EVERY_EPOCH)
def _reduce_kernel(x, ws, sig, out, E, PART, epoch,
                   SCATTER: tl.constexpr, ES: tl.constexpr, BLOCK: tl.constexpr):
    """reduce_scatter (SCATTER=True: peer d gets chunk d of x) or one-shot all_reduce
    (SCATTER=False: every peer gets all of x).  out = sum over ranks, in rank order."""
    g = tl.program_id(0)
    me = dl.rank()
    n = dl.num_ranks()
    start = g * PART
    cnt = tl.minimum(PART, E - start)
    slots = sig + g * n * shm.SIGNAL_SLOT_STRIDE_INT32
    for i in range(1, n):
        peer = (me + i) % n
        src = x + start
        if SCATTER:
            src = x + peer * E + start
        shm.putmem_signal(ws + me * E + start, src, cnt * ES, slots + me * shm.SIGNAL_SLOT_STRIDE_INT32,
                          epoch, shm.ACLSHMEM_SIGNAL_SET, peer)
    # my own contribution is read from x: mark its slot so one wait covers all n slots
    dl.notify(slots + me * shm.SIGNAL_SLOT_STRIDE_INT32, me, signal=epoch, sig_op="set")
    tok = dl.wait(slots, n, "gpu", "acquire", epoch)
    buf = dl.consume_token(ws, tok)
    own = x + start
    if SCATTER:
        own = x + me * E + start
    offs = tl.arange(0, BLOCK)
    for off in range(0, cnt, BLOCK):
        m = off + offs < cnt
        acc = tl.full((BLOCK,), 0.0, tl.float32)
        for src_rank in range(0, n):
            if src_rank == me:
                acc += tl.load(own + off + offs, mask=m).to(tl.float32)
            else:
                acc += tl.load(buf + src_rank * E + start + off + offs, mask=m).to(tl.float32)
        tl.store(out + start + off + offs, acc.to(out.dtype.element_ty), mask=m)


@triton.jit(**C.ONE_COMPILE_FOR_EVERY_EPOCH)
def _ring_kernel(x, ws, sig, out, E, CH, PART, epoch, BLOCK: tl.constexpr):
    """Ring all_reduce.  x is cut into n chunks of CH elements (the last may be shorter);
    program g owns part g (PART elements) of every chunk.  ws: n-1 reduce-scatter receive
    buffers, then n-1 all-gather receive buffers, CH elements each.  Slots: (step * G + g)
    for reduce-scatter steps, ((n - 1 + step) * G + g) for all-gather steps."""
    g = tl.program_id(0)
    G = tl.num_programs(0)
    me = dl.rank()
    n = dl.num_ranks()
    right = (me + 1) % n
    lo = g * PART
    offs = tl.arange(0, BLOCK)
    rws = dl.symm_at(ws, right)
    AG = (n - 1) * CH
    # ---- reduce-scatter: at step s send chunk (me - s) = x + what the left sent at step s-1
    for s in range(0, n - 1):
        c = (me - s + n) % n
        cnt = tl.minimum(tl.minimum(PART, CH - lo), E - c * CH - lo)
        # the token is chosen in the branch, not the pointer: triton-adapter-opt 3.2.0 crashes on a pointer
        # yielded by scf.if (docs/ascend.md, "What the real compilers refuse").  Step 0 reads nothing from ws,
        # so its token of 0 (no wait) orders nothing and is never used for a load.
        tok = 0
        if s > 0:
            tok = dl.wait(sig + ((s - 1) * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
        rbuf = dl.consume_token(ws, tok)
        for off in range(0, cnt, BLOCK):
            m = off + offs < cnt
            v = tl.load(x + c * CH + lo + off + offs, mask=m).to(tl.float32)
            if s > 0:
                v += tl.load(rbuf + (s - 1) * CH + lo + off + offs, mask=m).to(tl.float32)
            tl.store(rws + s * CH + lo + off + offs, v.to(out.dtype.element_ty), mask=m)
        shm.fence()             # the data is in the peer's memory before the signal
        dl.notify(sig + (s * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, right, signal=epoch, sig_op="set")
    # ---- my fully reduced chunk: (me + 1)
    c = (me + 1) % n
    cnt = tl.minimum(tl.minimum(PART, CH - lo), E - c * CH - lo)
    tok = 0                     # as above: one rank reads nothing from ws
    if n > 1:
        tok = dl.wait(sig + ((n - 2) * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
    rbuf = dl.consume_token(ws, tok)
    for off in range(0, cnt, BLOCK):
        m = off + offs < cnt
        v = tl.load(x + c * CH + lo + off + offs, mask=m).to(tl.float32)
        if n > 1:
            v += tl.load(rbuf + (n - 2) * CH + lo + off + offs, mask=m).to(tl.float32)
        r = v.to(out.dtype.element_ty)
        tl.store(out + c * CH + lo + off + offs, r, mask=m)
        if n > 1:
            tl.store(rws + AG + lo + off + offs, r, mask=m)
    if n > 1:
        shm.fence()
        dl.notify(sig + ((n - 1) * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, right, signal=epoch, sig_op="set")
    # ---- all-gather: at step s receive chunk (me - s), forward it unless the ring is done
    for s in range(0, n - 1):
        c = (me - s + n) % n
        cnt = tl.minimum(tl.minimum(PART, CH - lo), E - c * CH - lo)
        tok = dl.wait(sig + ((n - 1 + s) * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, 1, "gpu", "acquire", epoch)
        rbuf = dl.consume_token(ws, tok)
        for off in range(0, cnt, BLOCK):
            m = off + offs < cnt
            v = tl.load(rbuf + AG + s * CH + lo + off + offs, mask=m)
            tl.store(out + c * CH + lo + off + offs, v, mask=m)
            if s < n - 2:
                tl.store(rws + AG + (s + 1) * CH + lo + off + offs, v, mask=m)
        if s < n - 2:
            shm.fence()
            dl.notify(sig + ((n + s) * G + g) * shm.SIGNAL_SLOT_STRIDE_INT32, right, signal=epoch, sig_op="set")


# ---- host side ---------------------------------------------------------------------------------

def _parts(elems: int) -> tuple[int, int, int]:
    """(parts G, PART elements, BLOCK) for a per-rank chunk of `elems` elements."""
    most, fewest = C.profile().parts(MAX_PARTS, MIN_PART)
    g = max(1, min(most, C.cdiv(elems, fewest)))
    part = C._round_up(C.cdiv(elems, g), 16)
    g = max(1, C.cdiv(elems, part))
    block = min(MAX_BLOCK, C.next_pow2(part))
    return g, part, block


def _run_push(op: str, kernel, x: torch.Tensor, out_shape, E: int, scatter: bool) -> torch.Tensor:
    """Launch a push kernel (gather or reduce) over this rank's E elements per peer."""
    n = C.world()[1]
    C.check_size(op, n * E, x.element_size())
    out = torch.empty(out_shape, dtype=x.dtype, device=triton_dist.device())
    if E == 0:
        return out
    G, PART, BLOCK = _parts(E)
    ph = C.workspace(op).acquire(n * E * x.element_size(), n * G)
    ws = ph.view(x.dtype, 0, n * E)
    kernel[(G,)](x, ws, ph.sig, out, E, PART, ph.epoch, SCATTER=scatter, ES=x.element_size(), BLOCK=BLOCK)
    return out


def _run_gather(op: str, x: torch.Tensor, scatter: bool) -> torch.Tensor:
    n = C.world()[1]
    if scatter:
        C.check_rows_divisible(op, "x", x.shape[0], n)
        return _run_push(op, _gather_kernel, x, x.shape, x.numel() // n, scatter)
    return _run_push(op, _gather_kernel, x, (n * x.shape[0],) + tuple(x.shape[1:]), x.numel(), scatter)


def all_gather(x: torch.Tensor) -> torch.Tensor:
    """Concatenation of every rank's x along dim 0, in rank order (collective)."""
    x = C.check_tensor("all_gather", "x", x, min_dim=1)
    return bit_identical(_run_gather("all_gather", x, scatter=False))


def all_to_all(x: torch.Tensor) -> torch.Tensor:
    """x cut into world_size equal chunks along dim 0, chunk j sent to rank j; the result
    stacks the chunks received, in rank order (collective)."""
    x = C.check_tensor("all_to_all", "x", x, min_dim=1)
    return bit_identical(_run_gather("all_to_all", x, scatter=True))


def _run_reduce(op: str, x: torch.Tensor, scatter: bool) -> torch.Tensor:
    n = C.world()[1]
    if scatter:
        rows = C.check_rows_divisible(op, "x", x.shape[0], n)
        return _run_push(op, _reduce_kernel, x, (rows,) + tuple(x.shape[1:]), x.numel() // n, scatter)
    return _run_push(op, _reduce_kernel, x, x.shape, x.numel(), scatter)


def reduce_scatter(x: torch.Tensor) -> torch.Tensor:
    """Sum over ranks of x (dim 0 = world_size * m); returns this rank's m rows (collective)."""
    x = C.check_tensor("reduce_scatter", "x", x, min_dim=1)
    return bit_identical(_run_reduce("reduce_scatter", x, scatter=True))


def _run_ring(x: torch.Tensor) -> torch.Tensor:
    op = "all_reduce_ring"
    r, n = C.world()
    E = x.numel()
    out = torch.empty(x.shape, dtype=x.dtype, device=triton_dist.device())
    if E == 0:
        return out
    CH = C._round_up(C.cdiv(E, n), 16)
    C.check_size("all_reduce", 2 * n * CH, x.element_size())
    G, PART, BLOCK = _parts(CH)
    ph = C.workspace(op).acquire(max(1, 2 * (n - 1) * CH) * x.element_size(), max(1, 2 * (n - 1) * G))
    ws = ph.view(x.dtype, 0, max(1, 2 * (n - 1) * CH))
    _ring_kernel[(G,)](x, ws, ph.sig, out, E, CH, PART, ph.epoch, BLOCK=BLOCK)
    return out


ALL_REDUCE_METHODS = ("one_shot", "ring")


def all_reduce(x: torch.Tensor, method: str = "one_shot") -> torch.Tensor:
    """Sum over ranks of x (collective).  method="one_shot": every rank pushes x to every
    peer and reduces locally (one step, n-1 full copies per rank); method="ring": the
    bandwidth-optimal ring (2(n-1) steps of 1/n of x each)."""
    if method not in ALL_REDUCE_METHODS:
        raise TritonDistError(f"kernels.all_reduce: method must be one of {ALL_REDUCE_METHODS}, got {method!r}")
    x = C.check_tensor("all_reduce", "x", x)
    if method == "ring":
        return bit_identical(_run_ring(x))
    return bit_identical(_run_reduce("all_reduce_one_shot", x, scatter=False))
