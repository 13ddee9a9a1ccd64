"""The Ascend NPU backend: the HIVM lowering (checkable on a CPU) and the NPU runtime.

Nothing here imports CANN, torch_npu or shmem at import time.
"""
from triton_dist.backend import is_ascend  # noqa: F401
