"""Scenario of upstream test_signal_op (int32 signal, program 0 only): (a) signal_wait_until
returns the value it saw (42, set by rank 1); (b) a ring of SETs, each rank waiting for its own;
(c) a 100-round ping-pong between ranks 0 and 1."""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import shmem as ash
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device

import common

ROUNDS = 100


@triton.jit
def wait_until_retval(sig, ret, rank):
    if tl.program_id(0) == 0:
        if rank == 0:
            v = libshmem_device.signal_wait_until(sig, libshmem_device.ACLSHMEM_CMP_EQ, 42)
            tl.store(ret, v)
        elif rank == 1:
            libshmem_device.signal_op(sig, 42, libshmem_device.ACLSHMEM_SIGNAL_SET, 0)


@triton.jit
def set_ring(sig, rank, world):
    if tl.program_id(0) == 0:
        nxt = (rank + 1) % world
        libshmem_device.signal_op(sig, nxt + 1, libshmem_device.ACLSHMEM_SIGNAL_SET, nxt)
        libshmem_device.signal_wait_until(sig, libshmem_device.ACLSHMEM_CMP_EQ, rank + 1)


@triton.jit
def ping_pong(sig, rank, ROUNDS: tl.constexpr):
    if tl.program_id(0) == 0:
        for n in range(ROUNDS):
            val = n + 1
            if rank == 0:
                libshmem_device.signal_wait_until(sig, libshmem_device.ACLSHMEM_CMP_EQ, val)
                libshmem_device.signal_op(sig, val, libshmem_device.ACLSHMEM_SIGNAL_SET, 1)
            elif rank == 1:
                libshmem_device.signal_op(sig, val, libshmem_device.ACLSHMEM_SIGNAL_SET, 0)
                libshmem_device.signal_wait_until(sig, libshmem_device.ACLSHMEM_CMP_EQ, val)


def main():
    rank, world = common.init()
    sig = ash.aclshmem_create_tensor([1], dtype=torch.int32, device_id=rank)
    ret = ash.aclshmem_create_tensor([1], dtype=torch.int32, device_id=rank)
    sig.zero_()         # aclshmem_malloc does not zero: rank 0 may read sig before rank 1 sets it
    dist.barrier()
    wait_until_retval[(1, 1, 1)](sig, ret, rank)
    dist.barrier()
    if rank == 0:
        assert ret.item() == 42, f"signal_wait_until returned {ret.item()}"

    sig.zero_()
    dist.barrier()
    set_ring[(1, 1, 1)](sig, rank, world)
    dist.barrier()
    assert sig.item() == rank + 1, f"rank {rank}: ring signal {sig.item()}"

    sig.zero_()
    dist.barrier()
    ping_pong[(1, 1, 1)](sig, rank, ROUNDS)
    dist.barrier()
    if rank == 0:
        assert sig.item() == ROUNDS, f"ping-pong ended at {sig.item()}"
    ash.aclshmem_free_tensor(ret)
    ash.aclshmem_free_tensor(sig)
    common.finish()


if __name__ == "__main__":
    main()
