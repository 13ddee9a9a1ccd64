"""Refusals of the real NPU compilers that are known, explained and recorded (docs/ascend.md, "What the
real compilers refuse"): the one table of them.

Under `pytest --npu-compile` / `launch(..., npu_compile=True)` a refusal that matches an entry
here (the kernel, and the compiler's own line) does not fail the launch: it is reported as a
known limit, by name, in the session's summary.  Any other refusal of the same kernel still
fails.  tests/test_npu_compile.py checks that every entry still reproduces, so an entry that the
tools or the kernel outgrow is noticed (and removed).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownLimit:
    kernel: str         # "path/from/repo.py::name" of the kernel's source file
    error: str          # a substring of one of the compiler's error lines
    what: str           # the limit, in a sentence
    launch: tuple = ()  # (signature, constexprs) of a launch that shows it (the test recompiles it)
    doc: str = "docs/ascend.md, \"What the real compilers refuse\""


# A pointer yielded by scf.if crashes triton-adapter-opt 3.2.0 (SIGSEGV), with or without distributed ops
# (tests/test_npu_compile.py::test_a_pointer_chosen_in_a_branch_crashes_the_adapter, a reduced kernel).  The
# library's _ring_kernel and _ag_gemm_kernel met it until they chose no pointer in a branch; no entry here.

# shm.barrier_all() is CUBE_AND_VECTOR (docs/semantics.md §6); in a vector-only kernel that also stores the
# result of another distributed op, bishengir-compile 1.2.0 crashes in hivm-mark-real-core-type
# (tests/test_npu_compile.py::test_barrier_all_with_a_dist_result_stored_in_a_vector_kernel_crashes_bishengir).
_BARRIER_ALL = ("bishengir-compile 1.2.0 crashes on shm.barrier_all() (CUBE_AND_VECTOR) in a vector-only kernel "
                "that stores the result of another distributed op, here {}")

LIMITS = (
    KnownLimit("tests/upstream_scenarios/barrier_ops.py::ring_world", "bishengir-compile crashed (SIGSEGV",
               _BARRIER_ALL.format("upstream's test_barrier_ops (VEC=False): a store through shm.remote_ptr between "
                                   "two barrier_all"),
               ({"counter": "*i64", "rank": "i32", "world": "i32"}, {"VEC": False})),
)


def match(kernel_path: str, errors) -> KnownLimit | None:
    """The entry for a refusal of the kernel at `kernel_path` (its file relative to the repository,
    '::', its name) with these error lines, or None."""
    for limit in LIMITS:
        if kernel_path.endswith(limit.kernel) and any(limit.error in e for e in errors):
            return limit
    return None
