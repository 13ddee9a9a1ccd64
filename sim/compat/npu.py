"""Run upstream Ascend host code on the simulator as written (`triton-dist run --shmem-compat`,
or TRITON_DIST_SHMEM_COMPAT=1 for any process that imports triton_dist, pytest included):

- `import shmem` resolves to sim/compat/shmem.py (the simulator's heap);
- `import torch_npu` resolves to an empty stand-in; `torch.npu.set_device/current_device/
  synchronize/device_count/is_available` exist; `.npu()`, `device="npu"`, `"npu:N"`,
  mean the CPU (not torch.device("npu")) (torch's factories and Tensor.to/.npu are wrapped);
- torch.distributed's `hccl` is `gloo`; init_process_group is a no-op when the launcher
  already made the group (ranks of triton-dist run), as is destroying that group.

Never on an NPU host: if a real `shmem` or `torch_npu` can be imported, install() refuses
(with what to do) rather than shadow it.  Everything here is patched in the calling process
only; `triton-dist run` calls it inside each forked rank.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import sys
import types

from triton_dist.errors import TritonDistError

ENV = "TRITON_DIST_SHMEM_COMPAT"
_installed = [False]

# torch functions that take device=...; their "npu" becomes "cpu"
_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "randperm", "tensor",
              "as_tensor", "eye", "linspace", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
              "randn_like", "randint_like", "empty_strided")


def _real(name: str) -> bool:
    if name in sys.modules:
        return not getattr(sys.modules[name], "__triton_dist_sim__", False)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _is_npu(d) -> bool:
    import torch
    if isinstance(d, torch.device):
        return d.type == "npu"
    return isinstance(d, str) and (d == "npu" or d.startswith("npu:"))


def _cpu_device(kwargs):
    if _is_npu(kwargs.get("device")):
        kwargs["device"] = "cpu"
    return kwargs


def _wrap_factory(fn):
    @functools.wraps(fn)
    def f(*args, **kwargs):
        return fn(*args, **_cpu_device(kwargs))
    return f


def _patch_torch():
    import torch
    import torch.distributed as dist
    # (torch.device("npu") is not mapped: naming torch's PrivateUse1 slot "npu" makes torch.distributed
    # look for an accelerator that is not there; strings "npu"/"npu:N" and .npu() are enough for upstream)
    for name in _FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, _wrap_factory(getattr(torch, name)))
    to = torch.Tensor.to

    def tensor_to(self, *args, **kwargs):
        args = tuple("cpu" if _is_npu(a) else a for a in args)
        return to(self, *args, **_cpu_device(kwargs))
    torch.Tensor.to = tensor_to
    torch.Tensor.npu = lambda self, *a, **k: self
    torch.Tensor.is_npu = property(lambda self: False)
    npu = types.ModuleType("torch.npu", "the simulator's stand-in: every NPU is the CPU")
    npu.set_device = lambda *a, **k: None
    npu.current_device = lambda: int(os.environ.get("LOCAL_RANK", 0))
    npu.device_count = lambda: int(os.environ.get("WORLD_SIZE", 1))
    npu.synchronize = lambda *a, **k: None
    npu.is_available = lambda: True
    npu.manual_seed = torch.manual_seed
    npu.manual_seed_all = torch.manual_seed
    npu.empty_cache = lambda: None
    torch.npu = npu
    sys.modules["torch.npu"] = npu

    init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if dist.is_initialized():
            return None       # the launcher's group (gloo) already joins every rank
        kwargs.pop("device_id", None)
        if backend is not None and "hccl" in str(backend):
            backend = "gloo"
        return init(backend, *args, **kwargs)
    dist.init_process_group = init_process_group
    new_group = dist.new_group

    def new_group_gloo(*args, **kwargs):
        if "hccl" in str(kwargs.get("backend", "")):
            kwargs["backend"] = "gloo"
        return new_group(*args, **kwargs)
    dist.new_group = new_group_gloo
    dist.destroy_process_group = lambda *a, **k: None      # the launcher owns the group


def install() -> None:
    """Make upstream Ascend host code run here; refuses where a real NPU stack is installed."""
    if _installed[0]:
        return
    for name in ("shmem", "torch_npu"):
        if _real(name):
            raise TritonDistError(f"--shmem-compat: a real {name!r} package is installed here, and the simulator "
                                  f"will not shadow it: run the script on the NPU, or without {name} "
                                  f"(e.g. in another virtual environment) to simulate it")
    from . import shmem
    shmem.__triton_dist_sim__ = True
    sys.modules["shmem"] = shmem
    stand_in = types.ModuleType("torch_npu", "the simulator's stand-in for torch_npu (sim/compat/npu.py)")
    stand_in.__triton_dist_sim__ = True
    sys.modules["torch_npu"] = stand_in
    _patch_torch()
    _installed[0] = True


def wanted() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")
