"""Cross-core flags for the library's mix kernels: a tl.dot and distributed ops in one kernel.

On an Ascend NPU the compiler splits such a kernel in two: the cube half (the dot, the loads
that feed it, the store of its result: `fixpipe`) and the vector half (everything else).
bishengir-compile 1.2.0's hivm-split-mix-kernel keeps every distributed op in *both* halves and
inserts no flag for the data the cube half writes to or reads from global memory (AscendNPU-IR
v1.2.0 lib/Dialect/HIVM/Transforms/SplitMixKernel.cpp, inferDistributedCoreType, lines 346-367;
read from the compiled module in docs/ascend.md, "What it runs, and the compiler findings").
So, with nothing else said, the vector half's notify can run before the cube's store to the
peer has landed, and the cube can load a peer's tile before the vector's dl.wait returned.

The ordering is the kernel author's, with triton-ascend's cross-core flags, the way its own
test orders a dot's store before the vector reloads it (sync_block_set("cube", "vector", id)
then sync_block_wait with the same id: triton-ascend a84b1eb5,
third_party/ascend/unittest/pytest_ut/test_sync_block.py:57-61; the API and the id range 0-15:
docs/zh/triton_api/Extension_Ops/sync_block.md).  A set is issued by the sender's half only and
a wait blocks the receiver's half only (triton-ascend ascend_ir.cc GetCore), so one call of each,
in source order, is the whole handshake.  A flag counts at most 15 pending sets (CANN
asc_sync_block_wait: "同一个flagID的计数器最多设置15次"), so a loop that sets one every
iteration must also make the setter wait for the other side, as sync_block.md section 5.2's
flash-attention loop does with a flag each way.

This module holds what the kernels' flag helpers (kernels/gemm.py _cube_then_vector,
_vector_then_cube) need: the extension module `al`, whether it is there, and the flag ids.
On backends without triton-ascend's extension (backend cuda: a GPU program runs the dot, the
store and the signal in one program order, and the fence orders the store before the signal)
HAS_CROSS_CORE_FLAGS is False and the helpers' flag calls are never traced: no-ops; in a process
where the simulator provides the extension, a compile for CUDA's device library emits nothing for
them (triton_dist/language/_ext_emit.py, sync_block).
The simulator provides the extension (sim/compat/cann.py) and runs a block that names the
flags as a cube and a vector instance (sim/core_split.py); backend hivm runs the compiled halves
with these flags and reports a missing one as MixOrderHazard.
"""
from __future__ import annotations

import types

import triton
import triton.language as tl

try:        # triton-ascend's own module, or the simulator's stand-in where no triton-ascend is installed
    from triton.language.extra.cann import extension as al       # noqa: F401 (the kernels use it)
    HAS_CROSS_CORE_FLAGS = tl.constexpr(True)
except ImportError:         # backend cuda: no such module, and no cross-core split to order
    HAS_CROSS_CORE_FLAGS = tl.constexpr(False)

    @triton.jit
    def _no_flag(sender: tl.constexpr, receiver: tl.constexpr, event: tl.constexpr):
        # never traced (HAS_CROSS_CORE_FLAGS guards every call); a @jit function because Triton's
        # dependency walk resolves the names of untaken branches too and refuses plain callables
        pass

    al = types.ModuleType("no_cross_core_flags", "stands in where triton-ascend's extension is absent")
    al.sync_block_set = al.sync_block_wait = _no_flag

# The flag ids.  bishengir-compile adds cross-core flags of its own to a mix kernel (a bf16/fp16 dot
# whose operands the vector half upcasts reaches the cube through a workspace, flags 0-8 in
# gemm_rs's module), and a flag id is one counter whoever sets it: an id the compiler also uses
# would let our wait take the compiler's set.  Its cross-core solver hands out ids 0-13 and keeps
# the last two back (AscendNPU-IR v1.2.0 GraphSyncSolver/Utility.h:36,43 CROSS_CORE_EVENT_ID_NUM 16,
# reservedCrossCoreEventIdNum 2; Utility.cpp:288-291) for the cross-core barrier it may insert
# itself (Utility.h:41-42, SyncSolverCodeGen.cpp:142-170).  So the library takes 14 and 15, one per
# direction; that the compiler made no flag with either in the library's modules is checked by
# tests/test_hivm_mix_order.py (the compiler's ids are attributes there, ours SSA constants).
CUBE_TO_VECTOR = tl.constexpr(15)
VECTOR_TO_CUBE = tl.constexpr(14)
