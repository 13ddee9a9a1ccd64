"""A corpus of Triton kernels written in the styles of real Ascend users' kernels (issue 31 item 4).

Every kernel here is our own code.  Each carries a one-line comment naming the public kernel
whose style it follows (repository and file); none is copied.  One module per family; each
module lists its `CASES`.  A case is one kernel with

- `inputs()`: the inputs, seeded, built in the test process;
- `run(**inputs)`: the launch(es), run inside a simulated rank; returns what the kernel wrote;
- `ref(**inputs)`: the same computed by torch (the oracle), in the test process;
- `compiles`: the launches as Triton specializes them (signature, constexprs) and the verdict
  the real NPU compilers (triton-ascend's adapter + bishengir-compile) are expected to give.
  tests/test_ascend_corpus.py checks that these are the signatures the simulator saw launched;
- `on_backend`: where another backend (hivm: the compiled kernel run on this CPU) does not do what
  the simulator does, and why (a `Differs` per backend).

tests/test_ascend_corpus.py runs every case; scripts/corpus_table.py writes docs/corpus.md's table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

import triton_dist  # noqa: F401  (on stock triton it provides triton.language.extra.cann.extension: sim/compat/cann.py)

FAMILIES = ("elementwise", "norms", "activations", "shapes", "cube_vector", "gathers", "sorts", "slices", "sampling",
            "attention", "gemm", "rope", "state", "logits", "scatters")
# the repositories whose kernels the corpus is written like (Case.style = one of these + a path)
TA = "triton-lang/triton-ascend: "
VA = "vllm-project/vllm-ascend: "
SGL = "sgl-project/sgl-kernel-npu: "


@dataclass(frozen=True)
class Compile:
    signature: dict
    constexprs: dict = field(default_factory=dict)
    # "accepted"; or a line of the real compiler's refusal ("ub overflow"); or "cannot lower": a form
    # triton-ascend 3.2.0's adapter has no counterpart for (docs/ascend.md lists them), exit 2
    expect: str = "accepted"


# How a backend other than the simulator may differ, as docs/ascend.md classifies each outcome.
# "reports the fault": the simulator reports a bug of the kernel (sim_error) and the backend reports the
# same bug in its own words (the NPU's): the case passes there.  The others are that backend's known
# differences: the case is an xfail there, and a strict one (the test fails when the difference is gone).
DIFFERENCE_KINDS = ("reports the fault", "compiler finding", "compiler refusal", "model difference", "backend gap")


@dataclass(frozen=True)
class Differs:
    kind: str                         # one of DIFFERENCE_KINDS
    shows: str                        # a regex the backend's report (the rank's error) must match
    why: str                          # the cause, and where docs/ascend.md or a test pins it

    def __post_init__(self):
        assert self.kind in DIFFERENCE_KINDS, f"Differs.kind must be one of {DIFFERENCE_KINDS}, got {self.kind!r}"


@dataclass
class Case:
    name: str
    style: str                        # "owner/repo: path" of the public kernel this one is written like
    kernel: object                    # the @triton.jit function, or the @triton.autotune'd one
    inputs: Callable[[], dict]
    run: Callable[..., object]
    ref: Optional[Callable[..., object]]
    compiles: list
    atol: float = 1e-5
    rtol: float = 1e-5
    # the simulator must refuse the run with an error matching this (a real bug of the kernel's style)
    sim_error: Optional[str] = None
    # run under these seeds of the random schedule (each must match torch) instead of once on the free
    # schedule: for kernels whose result depends on the order of the cores (barriers)
    seeds: tuple = ()
    # uses tl.make_block_ptr / tl.advance, which stock triton 3.9 removed (triton_dist/language/block_pointers.py)
    block_pointers: bool = False
    # backend name -> Differs: where that backend's run is not the simulator's.  A config whose compile is
    # declared refused (Compile.expect) needs no line: a backend that runs compiled kernels (hivm) has
    # nothing to run there, and tests/test_ascend_corpus.py expects that refusal.
    on_backend: dict = field(default_factory=dict)
    family: str = ""

    @property
    def jit(self):
        """The @triton.jit function under an autotuner (what each config compiles)."""
        return getattr(self.kernel, "fn", None) if type(self.kernel).__name__ in ("Autotuner", "Heuristics") \
            else self.kernel


# tolerances fitting the dtype (torch.testing's defaults for bf16/fp16 are rtol 1.6e-2 / 1e-3)
BF16 = dict(atol=2e-2, rtol=1.6e-2)
FP16 = dict(atol=2e-3, rtol=1e-3)
FP32 = dict(atol=1e-5, rtol=1.3e-6)
FP32_MATH = dict(atol=1e-4, rtol=1e-4)         # exp/sqrt/dot accumulated in another order than torch's
EXACT = dict(atol=0, rtol=0)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(shape, seed, dtype=torch.float32, scale=1.0):
    return (torch.randn(shape, generator=gen(seed)) * scale).to(dtype)


def all_cases():
    import importlib
    cases = []
    for fam in FAMILIES:
        mod = importlib.import_module(f"{__name__}.{fam}")
        for c in mod.CASES:
            c.family = fam
            cases.append(c)
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"corpus case names must be unique: {sorted(dup)}"
    return cases
