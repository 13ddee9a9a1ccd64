"""Backend "hivm": the kernel as the Ascend compiler made it, run natively on this CPU.

Per kernel launch (runner.py): the npu-compile pipeline's module after convert-hivm-to-std
(stages.py: the module hivmc would get) -> text rewrites of what the CPU runner cannot lower
(rewrite.py) -> AscendNPU-IR's CPU-runner passes and Triton's MLIR as translator (lower.py) ->
llvmlite LLJIT (jit.py).  The module's calls into the template library are numpy code
(templates.py), its aclshmem calls go to the backend interface the simulator implements
(shmem.py), every global-memory access of a template call is checked against the live
buffers (memory.py), and the programs run on the simulator's rank, dispatched onto its
physical cores (backend.py).  docs/ascend.md "Running the compiled kernel on the CPU" says
what this verifies and what it does not.
"""
