"""Scenario of upstream test_wait_notify: ranks != 0 store rank*100 + pid into rank 0's
symmetric int64 data with a scalar store, then notify rank 0's int64 signal (set, 1) -- with
no fence in between, as upstream writes it (evidence D: not ordered by the code read); rank 0
waits for world-1 signals, consumes the token and copies the data out.
`--fence` adds libshmem_device.fence() between the store and the notify (the fixed twin)."""
import sys

import torch
import torch.distributed as dist
import triton
import triton.language as tl
from triton.language.extra.cann.extension import sub_vec_id

import shmem as ash
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device

import common


@triton.jit
def producer(data_ptr, signal_ptr, rank, world_size, FENCE: tl.constexpr):
    pid = tl.program_id(0)
    if sub_vec_id() == 0:
        tl.store(dl.symm_at(data_ptr, 0) + pid, rank * 100 + pid)
        if FENCE:
            libshmem_device.fence()
        dl.notify(signal_ptr, 0, signal=1, sig_op="set", comm_scope="intra_node")


@triton.jit
def consumer(data_ptr, signal_ptr, output_ptr, rank, world_size):
    pid = tl.program_id(0)
    if sub_vec_id() == 0:
        token = dl.wait(signal_ptr, world_size - 1, scope="gpu", semantic="acquire", waitValue=1)
        data_ptr = dl.consume_token(data_ptr, token)
        tl.store(output_ptr + pid, tl.load(data_ptr + pid))


def main():
    rank, world = common.init()
    data = ash.aclshmem_create_tensor([32], dtype=torch.int64, device_id=rank)
    signal = ash.aclshmem_create_tensor([1], dtype=torch.int64, device_id=rank)   # as upstream: world 2
    signal.zero_()          # as upstream (test_wait_notify.py L68-69): aclshmem_malloc does not zero
    out = torch.zeros([32], dtype=torch.int64).npu()
    dist.barrier()
    if rank != 0:
        producer[(1, 1, 1)](data, signal, rank, world, "--fence" in sys.argv[1:])
    else:
        consumer[(1, 1, 1)](data, signal, out, rank, world)
        want = torch.zeros([32], dtype=torch.int64)
        want[0] = (world - 1) * 100
        assert torch.equal(out.cpu(), want), f"rank 0 read {out[:2].tolist()}"
    dist.barrier()
    ash.aclshmem_free_tensor(signal)
    ash.aclshmem_free_tensor(data)
    common.finish()


if __name__ == "__main__":
    main()
