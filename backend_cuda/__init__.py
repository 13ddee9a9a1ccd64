"""backend="cuda": the same kernels on NVIDIA GPUs (docs/cuda.md).

- runtime.py   host side: CudaBackend (torch symmetric memory heap), missing()
- devlib.py    the device library: the aclshmem symbols, for NVPTX, as LLVM IR -> bitcode
- emit.py      compiled mode: dl.* / libshmem_device.* become calls into that library
- loader.py    per-module device state, filled by Triton's kernel-load hook
- launch.py    forked ranks, one per GPU
Importing this package touches no GPU; CUDA is first used by CudaBackend.init().
"""
