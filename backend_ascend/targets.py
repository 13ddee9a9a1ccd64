"""The NPU chips `npu-compile --target` takes, and each chip's Unified Buffer size.

Which targets exist is the installed bishengir-compile's own answer (its --help's --target values,
pipeline.known_targets): never a list kept here.  What this module adds is the size of each
family's Unified Buffer, the limit PlanMemory checks (`ub overflow, requires N bits while M bits
available!`), from AscendNPU-IR's target specs:
bishengir/include/bishengir/Dialect/HACC/Targets/NPUTargetSpec.td at commit
52f96a130b52fa3d10a236aaa2e1f868f1578b88 (each spec's `UbSize`, in bits).  The installed
bishengir-compile 1.2.0 states the same limits (measured: 1572864 bits for Ascend910B4 and
Ascend910_9392, 2031616 bits for Ascend950PR_9599).  A target whose family is not below (the
tool's own `Unknown`) has no size here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

SPEC = ("AscendNPU-IR bishengir/include/bishengir/Dialect/HACC/Targets/NPUTargetSpec.td "
        "@52f96a130b52fa3d10a236aaa2e1f868f1578b88")


@dataclass(frozen=True)
class Family:
    name: str
    pattern: str          # the spec names of this family (the def names of NPUTargetSpec.td)
    ub_bits: int
    arch: str
    source: str           # file:line of UbSize

    @property
    def ub_bytes(self) -> int:
        return self.ub_bits // 8


FAMILIES = (
    Family("Atlas A2 (Ascend910B)", r"Ascend910B", 1572864, "dav-c220", "NPUTargetSpec.td:73-74"),
    Family("Atlas A3 (Ascend910_93)", r"Ascend910_93", 1572864, "dav-c220", "NPUTargetSpec.td:165-166"),
    # 248 KiB: "reserve 8KB for compiler" (the spec's own comment) of a 256 KiB buffer
    Family("Ascend950 (A5)", r"Ascend910_95|Ascend950", 2031616, "dav-c310", "NPUTargetSpec.td:223-224"),
    Family("Ascend310B", r"Ascend310B", 2097152, "dav-m300", "NPUTargetSpec.td:125-126"),
)


def family(target: str):
    """The family of a --target value, or None (a name AscendNPU-IR's specs do not group)."""
    for f in FAMILIES:
        if re.match(f.pattern, str(target)):
            return f
    return None


def ub_bytes(target: str):
    f = family(target)
    return None if f is None else f.ub_bytes


def describe(target: str) -> str:
    f = family(target)
    if f is None:
        return f"{target}: Unified Buffer size not in AscendNPU-IR's target specs"
    return f"{target}: {f.name}, {f.arch}, Unified Buffer {f.ub_bytes // 1024} KiB ({f.ub_bits} bits; {f.source})"


def listing(known) -> str:
    """The targets of this bishengir-compile, one a line with its Unified Buffer."""
    return "\n".join(describe(t) for t in known) + f"\n(Unified Buffer sizes: {SPEC})"
