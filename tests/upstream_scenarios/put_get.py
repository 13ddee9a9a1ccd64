"""Scenario of upstream test_put_get_mem (program 0 only): int32[32] symmetric src (arange +
1000 * rank) and dst; each transfer moves src to the ring neighbour's dst (put) or fetches it
from the other neighbour (get), then dst must hold arange + 1000 * (rank - 1) % world.
Transfers: putmem + a hand-made barrier kernel; putmem_nbi + quiet; putmem_signal + a wait
kernel; putmem_signal_nbi + quiet + wait; getmem; getmem_nbi + quiet.  The signal array is
int32[world] with adjacent slots (not 64-byte padded), as upstream allocates it."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import shmem as ash
from triton_dist.language.extra import libshmem_device as shm

import common

NBYTES = 128


@triton.jit
def put(dst, src, peer, NBYTES: tl.constexpr, NBI: tl.constexpr):
    if tl.program_id(0) == 0:
        if NBI:
            shm.putmem_nbi(dst, src, NBYTES, peer)
            shm.quiet()
        else:
            shm.putmem(dst, src, NBYTES, peer)


@triton.jit
def get(dst, src, peer, NBYTES: tl.constexpr, NBI: tl.constexpr):
    if tl.program_id(0) == 0:
        if NBI:
            shm.getmem_nbi(dst, src, NBYTES, peer)
            shm.quiet()
        else:
            shm.getmem(dst, src, NBYTES, peer)


@triton.jit
def put_signal(dst, src, sig, epoch, my_rank, peer, NBYTES: tl.constexpr, NBI: tl.constexpr):
    if tl.program_id(0) == 0:
        if NBI:
            shm.putmem_signal_nbi(dst, src, NBYTES, sig + my_rank, epoch, shm.ACLSHMEM_SIGNAL_SET, peer)
            shm.quiet()
        else:
            shm.putmem_signal(dst, src, NBYTES, sig + my_rank, epoch, shm.ACLSHMEM_SIGNAL_SET, peer)


@triton.jit
def signal_wait(sig, recv_peer, epoch):
    if tl.program_id(0) == 0:
        shm.signal_wait_until(sig + recv_peer, shm.ACLSHMEM_CMP_GE, epoch)


@triton.jit
def sync_barrier(sync, my_rank, world, epoch):
    # upstream's barrier made of signals: my slot := epoch, pushed to every peer, then wait
    # for every peer's slot to reach epoch
    if tl.program_id(0) == 0:
        tl.store(sync + my_rank, epoch)
        for peer in range(world):
            if peer != my_rank:
                shm.putmem_signal(sync + my_rank, sync + my_rank, 4, sync + my_rank, epoch,
                                  shm.ACLSHMEM_SIGNAL_SET, peer)
        for peer in range(world):
            if peer != my_rank:
                shm.signal_wait_until(sync + peer, shm.ACLSHMEM_CMP_GE, epoch)


def main():
    rank, world = common.init()
    send_peer, recv_peer = (rank + 1) % world, (rank - 1) % world
    src = ash.aclshmem_create_tensor([32], dtype=torch.int32, device_id=rank)
    dst = ash.aclshmem_create_tensor([32], dtype=torch.int32, device_id=rank)
    signal = ash.aclshmem_create_tensor([world], dtype=torch.int32, device_id=rank)
    sync = ash.aclshmem_create_tensor([world], dtype=torch.int32, device_id=rank)
    signal.zero_()          # aclshmem_malloc does not zero (upstream test_put_get_mem.py L162 zeroes its signals)
    sync.zero_()
    src.copy_(torch.arange(32, dtype=torch.int32) + rank * 1000)
    want = torch.arange(32, dtype=torch.int32) + recv_peer * 1000
    epoch = 0

    def check(what):
        assert torch.equal(dst.cpu(), want), f"rank {rank} {what}: dst[:3] = {dst[:3].tolist()}"
        dst.fill_(-1)
        dist.barrier()

    dst.fill_(-1)
    dist.barrier()
    put[(1, 1, 1)](dst, src, send_peer, NBYTES, False)
    epoch += 1
    sync_barrier[(1, 1, 1)](sync, rank, world, epoch)
    check("putmem + signal barrier")

    put[(1, 1, 1)](dst, src, send_peer, NBYTES, True)
    dist.barrier()
    check("putmem_nbi + quiet")

    for nbi in (False, True):
        epoch += 1
        put_signal[(1, 1, 1)](dst, src, signal, epoch, rank, send_peer, NBYTES, nbi)
        signal_wait[(1, 1, 1)](signal, recv_peer, epoch)
        check(f"putmem_signal{'_nbi' if nbi else ''}")

    for nbi in (False, True):
        get[(1, 1, 1)](dst, src, recv_peer, NBYTES, nbi)
        dist.barrier()
        check(f"getmem{'_nbi' if nbi else ''}")

    for t in (sync, signal, dst, src):
        ash.aclshmem_free_tensor(t)
    common.finish()


if __name__ == "__main__":
    main()
