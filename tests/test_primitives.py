"""Semantics of every dl primitive and libshmem_device function (docs/semantics.md §3).

Every test runs on each backend of the `backend` fixture (the simulator, and the GPUs of a
session started with TRITON_DIST_BACKEND=cuda --backend cuda); tensors a kernel touches live
on triton_dist.device().  Oracles: the arithmetic of the test itself (ranks, ring
neighbours) and torch.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shm
from triton_dist.pytest_plugin import need_ranks

WORLD_SIZES = [1, 2, 3, 4]


@triton.jit
def ids_kernel(out):
    tl.store(out + 0, dl.rank())
    tl.store(out + 1, dl.num_ranks())
    tl.store(out + 2, shm.my_pe())
    tl.store(out + 3, shm.n_pes())
    tl.store(out + 4, shm.team_my_pe(shm.ACLSHMEM_TEAM_WORLD))
    tl.store(out + 5, shm.team_n_pes(shm.ACLSHMEM_TEAM_WORLD))


def _ids():
    out = torch.full((6,), -1, dtype=torch.int32, device=triton_dist.device())
    ids_kernel[(1,)](out)
    return out.tolist()


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_rank_ids(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_ids, world_size=n, backend=backend)
    assert res.values == [[r, n, r, n, r, n] for r in range(n)]


@triton.jit
def ring_read_kernel(buf, out, N: tl.constexpr):
    me = dl.rank()
    peer = (me + 1) % dl.num_ranks()
    offs = tl.arange(0, N)
    tl.store(out + offs, tl.load(dl.symm_at(buf, peer) + offs))


def _ring_read():
    r, n = triton_dist.rank(), triton_dist.world_size()
    buf = triton_dist.symm_tensor((32,), torch.float32)
    buf.copy_(torch.arange(32, dtype=torch.float32) + 100 * r)
    triton_dist.barrier()
    out = torch.zeros(32, device=triton_dist.device())
    ring_read_kernel[(1,)](buf, out, N=32)
    return out


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_symm_at_ring_read(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_ring_read, world_size=n, backend=backend)
    for r, v in enumerate(res.values):
        torch.testing.assert_close(v, torch.arange(32, dtype=torch.float32) + 100 * ((r + 1) % n))


@triton.jit
def notify_wait_kernel(data, sig, out, N: tl.constexpr, STRIDE: tl.constexpr):
    # Producer side: write my rank's block into every peer's slot `me`, then notify slot `me`.
    me = dl.rank()
    n = dl.num_ranks()
    offs = tl.arange(0, N)
    for p in range(0, n):
        tl.store(dl.symm_at(data, p) + me * N + offs, tl.full((N,), 0, tl.float32) + me + 1)
        # the store is a DMA that a signal may overtake (docs/device_model.md): fence before notify
        shm.fence()
        dl.notify(sig + me * STRIDE, p, signal=7, sig_op="set")
    # Consumer side: n slots, 64 bytes apart, all must become 7.
    tok = dl.wait(sig, n, "gpu", "acquire", waitValue=7)
    base = dl.consume_token(data, tok)
    for p in range(0, n):
        tl.store(out + p * N + offs, tl.load(base + p * N + offs))


def _notify_wait():
    n = triton_dist.world_size()
    data = triton_dist.symm_tensor((n * 8,), torch.float32)
    sig = triton_dist.symm_tensor((n * 16,), torch.int32)
    out = torch.zeros(n * 8, device=triton_dist.device())
    notify_wait_kernel[(1,)](data, sig, out, N=8, STRIDE=16)
    return out, sig.clone()


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_notify_wait_64_byte_slots(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_notify_wait, world_size=n, backend=backend)
    want = torch.arange(1, n + 1, dtype=torch.float32).repeat_interleave(8)
    for out, sig in res.values:
        torch.testing.assert_close(out, want)
        slots = sig.view(n, 16)
        assert slots[:, 0].tolist() == [7] * n          # the slot itself, one per 64 bytes
        assert slots[:, 1:].abs().sum().item() == 0    # nothing else in the line written


@triton.jit
def add_kernel(sig, out):
    n = dl.num_ranks()
    for p in range(0, n):
        dl.notify(sig, p, signal=dl.rank() + 1, sig_op="add")
    dl.wait(sig, 1, "sys", "acquire", waitValue=n * (n + 1) // 2)
    tl.store(out, tl.load(sig))


def _signal_add():
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(1, dtype=torch.int32, device=triton_dist.device())
    add_kernel[(1,)](sig, out)
    return out.item()


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_signal_add_is_atomic(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_signal_add, world_size=n, backend=backend)
    assert res.values == [n * (n + 1) // 2] * n


@triton.jit
def ping_pong_kernel(ping, pong, log, ROUNDS: tl.constexpr):
    me = dl.rank()
    for i in range(1, ROUNDS + 1):
        if me == 0:
            dl.notify(ping, 1, signal=i, sig_op="set")
            dl.wait(pong, 1, "sys", "acquire", waitValue=i)
            tl.store(log + i - 1, i)
        else:
            dl.wait(ping, 1, "sys", "acquire", waitValue=i)
            tl.store(log + i - 1, i * 10)
            dl.notify(pong, 0, signal=i, sig_op="set")


def _ping_pong():
    ping = triton_dist.symm_tensor((16,), torch.int32)
    pong = triton_dist.symm_tensor((16,), torch.int32)
    log = torch.zeros(30, dtype=torch.int32, device=triton_dist.device())
    ping_pong_kernel[(1,)](ping, pong, log, ROUNDS=30)
    return log.tolist(), ping[0].item(), pong[0].item()


def test_ping_pong_30_rounds(backend):
    need_ranks(backend, 2)
    res = triton_dist.launch(_ping_pong, world_size=2, backend=backend)
    assert res.values[0][0] == list(range(1, 31))
    assert res.values[1][0] == [10 * i for i in range(1, 31)]
    assert res.values[1][1] == 30 and res.values[0][2] == 30


@triton.jit
def put_get_kernel(src, dst_put, dst_get, sig, N: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    right = (me + 1) % n
    left = (me + n - 1) % n
    # put my block to the right neighbour, signal it; get the left neighbour's block
    shm.putmem_signal(dst_put, src, N * 4, sig, 1, shm.ACLSHMEM_SIGNAL_SET, right)
    shm.getmem(dst_get, src, N * 4, left)
    shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_EQ, 1)


def _put_get():
    r = triton_dist.rank()
    N = 64
    src = triton_dist.symm_tensor((N,), torch.float32)
    dst_put = triton_dist.symm_tensor((N,), torch.float32)
    dst_get = triton_dist.symm_tensor((N,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src.copy_(torch.randn(N, generator=torch.Generator().manual_seed(r)))   # drawn on the CPU, copied
    triton_dist.barrier()
    put_get_kernel[(1,)](src, dst_put, dst_get, sig, N=N)
    return dst_put.clone(), dst_get.clone()


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_putmem_getmem_ring(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_put_get, world_size=n, backend=backend)
    for r, (put, get) in enumerate(res.values):
        left = (r + n - 1) % n
        want = torch.randn(64, generator=torch.Generator().manual_seed(left))
        torch.testing.assert_close(put, want)
        torch.testing.assert_close(get, want)


@triton.jit
def nbi_kernel(src, dst, sig, N: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    right = (me + 1) % n
    shm.putmem_nbi(dst, src, N * 4, right)
    shm.quiet()                               # completes the put before the signal
    shm.signal_op(sig, 1, shm.ACLSHMEM_SIGNAL_ADD, right)
    shm.signal_wait_until(sig, shm.ACLSHMEM_CMP_GE, 1)
    shm.fence()


def _nbi():
    r = triton_dist.rank()
    src = triton_dist.symm_tensor((32,), torch.float32)
    dst = triton_dist.symm_tensor((32,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    src.fill_(r + 0.5)
    triton_dist.barrier()
    nbi_kernel[(1,)](src, dst, sig, N=32)
    return dst[0].item(), dst[-1].item()


@pytest.mark.parametrize("n", [2, 3])
def test_putmem_nbi_quiet_signal(backend, n):
    need_ranks(backend, n)
    res = triton_dist.launch(_nbi, world_size=n, backend=backend)
    assert res.values == [((r - 1) % n + 0.5, (r - 1) % n + 0.5) for r in range(n)]


@triton.jit
def int_p_kernel(dst, dst64):
    me = dl.rank()
    n = dl.num_ranks()
    shm.int_p(dst + me * 16, me + 40, (me + 1) % n)
    shm.int64_p(dst64 + me * 8, me.to(tl.int64) + 2**40, (me + 1) % n)
    shm.barrier_all()


def _int_p():
    n = triton_dist.world_size()
    dst = triton_dist.symm_tensor((n * 16,), torch.int32)
    dst64 = triton_dist.symm_tensor((n * 8,), torch.int64)
    int_p_kernel[(1,)](dst, dst64)
    return dst.view(n, 16)[:, 0].tolist(), dst64.view(n, 8)[:, 0].tolist()


def test_int_p_and_int64_p(backend):
    n = 3
    need_ranks(backend, n)
    res = triton_dist.launch(_int_p, world_size=n, backend=backend)
    for r, (v32, v64) in enumerate(res.values):
        left = (r - 1) % n
        assert v32[left] == left + 40 and sum(v32) == left + 40
        assert v64[left] == left + 2**40 and sum(v64) == left + 2**40


@triton.jit
def barrier_rounds_kernel(buf, out, ROUNDS: tl.constexpr):
    me = dl.rank()
    n = dl.num_ranks()
    for i in range(ROUNDS):
        # everyone writes round i into its own slot, barrier, then reads the left neighbour's
        tl.store(buf + tl.arange(0, 16), tl.full((16,), 0, tl.int32) + i * 100 + me)
        shm.barrier_all()
        left = (me + n - 1) % n
        v = tl.load(dl.symm_at(buf, left) + tl.arange(0, 16))
        tl.store(out + i * 16 + tl.arange(0, 16), v)
        shm.barrier_all()


def _barriers(cores):
    buf = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(10 * 16 * cores, dtype=torch.int32, device=triton_dist.device())
    barrier_rounds_kernel[(cores,)](buf, out, ROUNDS=10)
    return out.view(cores, 10, 16)[0, :, 0].tolist()


@pytest.mark.parametrize("n,cores", [(1, 1), (2, 1), (3, 1), (4, 1), (3, 3), (4, 2)])
def test_repeated_barrier_all(backend, n, cores):
    need_ranks(backend, n)
    res = triton_dist.launch(_barriers, cores, world_size=n, backend=backend)
    for r, vals in enumerate(res.values):
        assert vals == [i * 100 + (r - 1) % n for i in range(10)]


@triton.jit
def producer_consumer_kernel(data, sig, out, N: tl.constexpr):
    # One launch, two roles: program 1 produces, program 0 consumes, and program 0 starts
    # first in the grid; the consumer must wait for a producer that comes later.
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    if pid == 0:
        tok = dl.wait(sig, 1, "gpu", "acquire", waitValue=1)
        d = dl.consume_token(data, tok)
        tl.store(out + offs, tl.load(d + offs))
    else:
        tl.store(data + offs, offs.to(tl.float32) * 2)
        shm.fence()         # the store is a DMA a signal may overtake (docs/device_model.md)
        dl.notify(sig, dl.rank(), signal=1, sig_op="set")


def _prod_cons():
    data = triton_dist.symm_tensor((16,), torch.float32)
    sig = triton_dist.symm_tensor((16,), torch.int32)
    out = torch.zeros(16, device=triton_dist.device())
    producer_consumer_kernel[(2,)](data, sig, out, N=16)
    return out


def test_producer_consumer_in_one_launch(backend):
    need_ranks(backend, 2)
    res = triton_dist.launch(_prod_cons, world_size=2, backend=backend)
    for v in res.values:
        torch.testing.assert_close(v, torch.arange(16, dtype=torch.float32) * 2)


def test_symm_tensor_is_zero_filled_and_same_offset(backend):
    need_ranks(backend, 2)

    def body():
        a = triton_dist.symm_tensor((100,), torch.float32)
        a.fill_(5)
        triton_dist.free(a)
        b = triton_dist.symm_tensor((100,), torch.float32)  # reuses the freed space
        return b.abs().sum().item(), b.data_ptr() == a.data_ptr()
    res = triton_dist.launch(body, world_size=2, backend=backend)
    assert res.values == [(0.0, True), (0.0, True)]


@pytest.mark.backend_specific("returns the device name: 'cpu' on the simulator, 'cuda:r' on GPUs")
def test_device_of_the_backend_and_values_in_rank_order(backend):
    """The simulator's tensors live on the CPU; on cuda rank r has GPU r (r mod the GPU count
    where ranks share GPUs)."""
    need_ranks(backend, 3)
    res = triton_dist.launch(lambda: (triton_dist.rank(), str(triton_dist.device())), world_size=3,
                             backend=backend)
    gpus = 1
    if backend == "cuda":
        from triton_dist.backend_cuda.runtime import device_count
        gpus = device_count()
    want = {"sim": lambda r: "cpu", "cuda": lambda r: f"cuda:{r % gpus}", "npu": lambda r: f"npu:{r}"}[backend]
    assert res.values == [(r, want(r)) for r in range(3)]
