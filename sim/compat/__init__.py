"""Compatibility layers that let upstream Ascend code run on the simulator unchanged.

- cann.py:  `triton.language.extra.cann.extension` (triton-ascend's builtins: sub_vec_id, ...),
            installed by the sim backend's select() only where no triton-ascend provides it;
- shmem.py: the `shmem` host package (aclshmem_init, aclshmem_create_tensor, ...), over the
            simulator's heap, installed by `triton-dist run --shmem-compat` / `--sim-shmem-compat`;
- torch_npu.py: hccl -> gloo and npu -> cpu for the same runs.
"""
