"""Host set-up as upstream Ascend tests write it (evidence F, "common host pattern"): torch on
the NPU through torch_npu, torch.distributed over hccl, the shmem package with the MTE engine.
Run under `triton-dist run -n N --shmem-compat`, every line of it maps onto the simulator."""
import os

import shmem as ash
import torch
import torch.distributed as dist
import torch_npu  # noqa: F401 - as upstream imports it


def init(heap_bytes=64 << 20):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "29500")
    torch.npu.set_device(rank)
    dist.init_process_group(backend="hccl", init_method="env://")
    dist.barrier()
    ash.set_conf_store_tls(False, "")
    attr = ash.InitAttr()
    attr.my_rank = rank
    attr.n_ranks = world
    attr.local_mem_size = heap_bytes
    attr.ip_port = "tcp://127.0.0.1:8666"
    attr.option_attr.data_op_engine_type = ash.OpEngineType.MTE
    ret = ash.aclshmem_init(attr)
    assert ret == 0, f"aclshmem_init returned {ret}"
    return rank, world


def finish():
    dist.barrier()
    ash.aclshmem_finalize()
