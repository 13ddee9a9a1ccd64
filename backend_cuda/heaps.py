"""Where a rank's symmetric heap comes from, and how its peers' heaps are mapped.

- `symm_mem_heap`: torch symmetric memory (one rank per GPU, the normal case): one buffer
  rendezvoused over the process group's store; `get_buffer(peer)` is the peer's heap mapped
  here (NVLink peer mapping).
- `ipc_heap`: CUDA IPC handles (cuIpcGetMemHandle / cuIpcOpenMemHandle through the driver),
  for ranks that share a GPU: torch symmetric memory refuses two ranks on one device, while
  IPC maps another process's memory on the same GPU as well as on a peer GPU.
Both return (local heap tensor, base address of every rank's heap in this process, close).
"""
from __future__ import annotations

import ctypes
import warnings

from triton_dist.errors import TritonDistError

from .loader import _driver


def symm_mem_heap(nbytes, device, group):
    import torch
    from torch.distributed import _symmetric_memory as symm_mem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)     # deprecated (and unneeded) in newer torch
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            symm_mem.enable_symm_mem_for_group(group.group_name)
    heap = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
    handle = symm_mem.rendezvous(heap, group.group_name)
    me = group.rank()
    bases = [heap.data_ptr() if p == me else handle.get_buffer(p, (nbytes,), torch.uint8, 0).data_ptr()
             for p in range(group.size())]
    return heap, bases, lambda: None, handle


class _IpcHandle(ctypes.Structure):
    # bytes, not c_char: a c_char array field reads back cut at its first NUL byte
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


def _check(rc, what):
    if rc != 0:
        raise TritonDistError(f"{what} failed with CUDA error {rc}")


def ipc_heap(nbytes, device, all_gather):
    """all_gather(obj) -> list of every rank's obj (a host collective)."""
    import torch
    cu = _driver()
    heap = torch.empty(nbytes, dtype=torch.uint8, device=device)
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    _check(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(heap.data_ptr())),
           "cuMemGetAddressRange")
    handle = _IpcHandle()
    _check(cu.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle (is PYTORCH_CUDA_ALLOC_CONF "
           "expandable_segments on? IPC needs plain allocations)")
    mine = (bytes(handle.reserved), heap.data_ptr() - base.value)
    everyone = all_gather(mine)
    opened, bases = [], []
    for raw, offset in everyone:
        if (raw, offset) == mine:
            bases.append(heap.data_ptr())
            continue
        h = _IpcHandle.from_buffer_copy(raw)
        ptr = ctypes.c_uint64(0)
        _check(cu.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")  # 1: lazy peer access
        opened.append(ptr.value)
        bases.append(ptr.value + offset)

    def close():
        for p in opened:
            cu.cuIpcCloseMemHandle(ctypes.c_uint64(p))
        opened.clear()
    return heap, bases, close, None
