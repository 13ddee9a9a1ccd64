"""The NPU's grid limits and TRITON_ALL_BLOCKS_PARALLEL, as triton-ascend applies them (issue 34 §1-2).

Sources (triton-lang/triton-ascend, Ascend/AscendNPU-IR):
- the launch's block count is the uint16 `coreDim`, the product of the grid's dimensions
  (the launcher flattens the grid: "only 1D parallelization is supported for NPU",
  third_party/ascend/backend/driver.py:802, 816 at triton-ascend a84b1eb5);
- triton-ascend's JIT refuses a product above 65535 unless TRITON_ALL_BLOCKS_PARALLEL is set to
  anything but "0": `RuntimeError("grid should be less than 65536! You can try \\"export
  TRITON_ALL_BLOCKS_PARALLEL=1\\" to avoid this problem.")`
  (triton_patch/python/triton_patch/runtime/jit.py:692-694 at triton-ascend 0f7e0edb5);
- past that check the runtime itself refuses the launch: "coreDim=xxxx can't be greater than
  UINT16_MAX" (docs/en/migration_guide/migrate_from_gpu.md:117-125 at a84b1eb5);
- TRITON_ALL_BLOCKS_PARALLEL is on for "true"/"1" (any case; backend/utils.py:317-318 at
  a84b1eb5): the launcher caps the blocks at the physical cores, vector cores for a vector-only
  kernel, AI cores otherwise (driver.py:555-556, 825), and bishengir-compile's
  --enable-auto-blockify-loop (compiler.py:512-513, 721-722) wraps the kernel in
  `scf.for iv = GetBlockIdx() to logicalBlockNum step physicalBlockNum`, every program-id use
  rewritten to iv (AscendNPU-IR bishengir/lib/Dialect/HIVM/Transforms/AutoBlockifyParallelLoop.cpp
  :78-172 at 52f96a13): core p runs programs p, p + P, p + 2P, ... one after another, so a
  program waiting for a later program of its own core waits forever; triton-ascend's docs:
  "This option can be enabled only when the logic of the Triton kernel is insensitive to the
  execution sequence. Otherwise, a deadlock may occur." (docs/en/environment_variable_reference.md:30).
A value set but neither "0" nor "true"/"1" ("false", "yes") passes the JIT's check and enables no
loop: the runtime's coreDim error, as on the NPU (inferred from the two readings above, not run).
"""
from __future__ import annotations

import os

from triton_dist.errors import TritonDistError

# the board's kind prefix of a launch whose cores loop over programs (sim/board.py reads it): defined
# here, below the board, so that this module imports nothing of the simulator (docs/index.md "Layers")
LOOPED = "loop:"

CORE_DIM_MAX = 65535            # UINT16_MAX: the launch's coreDim
ENV = "TRITON_ALL_BLOCKS_PARALLEL"

FIX = (f"make the grid at most the physical cores (the vector cores for a kernel without tl.dot, "
       f"the AI cores with it) and loop inside the kernel: `for pid in range(tl.program_id(0), total, "
       f"tl.num_programs(0))`; or export {ENV}=1, only if no program waits for another (each core then "
       f"runs its programs one after another)")


def looped() -> bool:
    """Whether the cores loop over the programs (backend/utils.py:317-318 at a84b1eb5)."""
    return os.environ.get(ENV, "false").lower() in ("true", "1")


def check(kernel: str, grid) -> None:
    """Refuse a grid the NPU refuses, with its words and the fix."""
    n = grid[0] * grid[1] * grid[2]
    if n <= CORE_DIM_MAX:
        return
    shown = "x".join(str(g) for g in grid)
    if os.environ.get(ENV, "0") == "0":
        raise TritonDistError(
            f"kernel {kernel}: grid {shown} has {n} programs: grid should be less than 65536! You can try "
            f"\"export {ENV}=1\" to avoid this problem. (triton-ascend's launch raises this RuntimeError: "
            f"the NPU's block count coreDim, the product of the grid, is a uint16.) Fix: {FIX}")
    if not looped():
        raise TritonDistError(
            f"kernel {kernel}: grid {shown}: coreDim={n} can't be greater than UINT16_MAX ({ENV}="
            f"{os.environ.get(ENV)!r} passes triton-ascend's grid check but enables no loop over "
            f"programs: only \"1\" or \"true\" do). Fix: {FIX}")


def looped_line(nprog: int, ncores: int, kind: str, cores, sync: bool = False) -> str:
    """The deadlock report's line for a launch under TRITON_ALL_BLOCKS_PARALLEL=1.
    cores: (core, its program, state name) for each core that started."""
    waiting = [(c, p) for c, p, st in cores if st == "waiting"]
    later = []
    for c, p in waiting:
        nxt = list(range(p + ncores, nprog, ncores))
        if nxt:
            later.append(f"program{'s' if len(nxt) > 1 else ''} {_few(nxt)} after program {p} on core {c}")
    done = [c for c, _, st in cores if st == "finished"]
    now = ", ".join(f"program {p} on core {c}" for c, p in waiting[:8]) + (" ..." if len(waiting) > 8 else "")
    return (f"{ENV}=1: the grid of {nprog} programs runs on {ncores} {kind} cores, core p running programs "
            f"p, p+{ncores}, p+{2 * ncores}, ... one after another (AscendNPU-IR's auto-blockify loop): "
            f"{now} wait{'s' if len(waiting) == 1 else ''}"
            + (f"; still to run: {'; '.join(later)}" if later else "")
            + (f"; core{'s' if len(done) > 1 else ''} {', '.join(map(str, done))} finished" if done else "")
            + (f"; sync_block_all is then a barrier of the {ncores} cores launched, met once per round of "
               f"programs (inferred: the hardware barrier counts the blocks launched), so a core with fewer "
               f"programs ({nprog} is not a multiple of {ncores}) never arrives" if sync and nprog % ncores else "")
            + f". On the NPU this hangs: triton-ascend's docs say {ENV}=1 \"can be enabled only when the "
              f"logic of the Triton kernel is insensitive to the execution sequence. Otherwise, a deadlock "
              f"may occur.\" Fix: unset {ENV} (grid at most {CORE_DIM_MAX}), or make no program wait for a "
              f"later one of the same core")


def _few(xs) -> str:
    return ", ".join(map(str, xs[:4])) + (f", ... {xs[-1]}" if len(xs) > 4 else "")


# appended to the deadlock report's residency line when the waiting cores are in sync_block_all
SYNC_ALL_NOTE = (
    ". sync_block_all waits for every block of the launch, a block in it keeps its core, and a block not yet "
    "started needs a core that only a finished block frees: with more blocks than cores the device hangs "
    "(triton-ascend #1738 \"ext.sync_block_all causes device deadlock\"). Fix: launch at most as many blocks "
    "as cores and loop over the work inside the kernel, `for pid in range(tl.program_id(0), total, "
    "tl.num_programs(0))`, every block calling sync_block_all the same number of times")
