"""The physical cores of each Ascend part: the one table, read by the simulator's device model
(sim/device.py) and by npu-compile's lint (backend_ascend/lint.py): two backend packages, which may
not import each other, so the table lives below both.

name -> (cube cores, vector cores); AscendNPU-IR bishengir/include/bishengir/Dialect/HACC/
Targets/NPUTargetSpec.td L85-118, L177-198 (@52f96a1).  An AI core is 1 cube + 2 vector cores.
"""
from __future__ import annotations

CORES = {
    "910B1": (24, 48), "910B2": (24, 48), "910B2C": (24, 48),
    "910B3": (20, 40), "910B4": (20, 40), "910B4-1": (20, 40),
    "910_9362": (20, 40), "910_9363": (20, 40), "910_9372": (20, 40), "910_9381": (24, 48),
}
