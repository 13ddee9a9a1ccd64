"""The NPU runtime path (backend="npu"): shmem (hicann/shmem) symmetric heap, torch_npu, hccl."""
from __future__ import annotations

from triton_dist.backend import Backend, is_ascend
from triton_dist.errors import TritonDistError


def _missing() -> str:
    import importlib.util
    need = []
    if not is_ascend():
        need.append("an Ascend NPU (npu-smi is not on PATH)")
    for mod in ("torch_npu", "shmem"):
        if importlib.util.find_spec(mod) is None:
            need.append(f"the {mod} package")
    return ", ".join(need)


class NpuBackend(Backend):
    name = "npu"

    def __init__(self):
        missing = _missing()
        if missing:
            raise TritonDistError(f"backend 'npu' needs {missing}; use TRITON_DIST_BACKEND=sim on this machine")
        raise TritonDistError("backend 'npu': the runtime path is not built yet (see the backend_ascend issue)")

    def device_call(self, family, *args):
        raise NotImplementedError

    def init(self, rank=None, world_size=None, **options):
        raise NotImplementedError

    def finalize(self):
        raise NotImplementedError

    def rank(self):
        raise NotImplementedError

    def world_size(self):
        raise NotImplementedError

    def device(self):
        raise NotImplementedError

    def symm_tensor(self, shape, dtype):
        raise NotImplementedError

    def free(self, t):
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError
