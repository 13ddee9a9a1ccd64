"""Block pointers on a triton line that removed them: a refusal that names the lines that have them.

triton-ascend's kernels use block pointers (`tl.make_block_ptr`, `tl.advance`, `tl.load(bp,
boundary_check=..., padding_option=...)`: its third_party/ascend/tutorials/04-fused-attention.py
at a84b1eb5, lines 76-77 and 142); its main line is
Triton 3.5, where they exist.  Stock triton, measured with each line's own interpreter (the
simulator) and frontend (`triton-dist npu-compile`, whose TTIR triton-ascend 3.2.0's
triton-adapter-opt accepts) on a 2-D tiled copy with boundary_check and padding:

| stock triton | simulator | npu-compile: what the frontend gives triton-adapter-opt |
| --- | --- | --- |
| 3.5.1, 3.6.0 | run | `tt.make_tensor_ptr` / `tt.advance`, as triton-ascend's frontend: accepted |
| 3.7.1 | run (`tl.make_block_ptr` warns that it is deprecated) | the same: accepted |
| 3.8.0 | run (warns) | tensors of pointers and masks (Python emulation in triton/language/core.py): accepted, but not the form triton-ascend gives |
| 3.9.0 | removed: `make_block_ptr` raises NotImplementedError("Block pointers have been removed in favor of the tensor descriptor API"), `tl.advance` is gone | the same |

So the `sim` extra takes triton>=3.5,<3.8 (pyproject.toml).  On a line without them (found by
feature detection: no `tl.advance`) install() makes both builtins raise TritonDistError naming
the lines that have them, in the simulator and in npu-compile alike, instead of Triton's message.
"""
from __future__ import annotations

from triton_dist.errors import TritonDistError

LINES = ("stock triton 3.5 to 3.8 (3.5 to 3.7 give them to the NPU compiler as triton-ascend's frontend does: "
         "`pip install .[sim]` installs one of those, scripts/setup.sh 3.6.0) and triton-ascend")


def removed() -> bool:
    """Does the installed triton lack block pointers?  (3.9 dropped tl.advance and left a
    make_block_ptr that raises.)"""
    import triton.language as tl
    return bool(getattr(tl, "_triton_dist_block_pointers", False)) or not hasattr(tl, "advance")


def message(what: str) -> str:
    import triton
    return (f"{what}: block pointers (tl.make_block_ptr, tl.advance) were removed from stock triton in 3.9, and this "
            f"environment has triton {triton.__version__}.  triton-ascend's kernels use them (its main line is "
            f"Triton 3.5); they exist in {LINES}.  Install one of those lines, or rewrite the kernel with "
            f"tl.make_tensor_descriptor")


def install() -> None:
    """On a line without block pointers: tl.make_block_ptr and tl.advance raise the refusal."""
    import triton.language as tl
    if getattr(tl, "_triton_dist_block_pointers", False) or not removed():
        return
    builtin = tl.core.builtin

    @builtin
    def make_block_ptr(base, shape, strides, offsets, block_shape, order, _semantic=None):
        raise TritonDistError(message("tl.make_block_ptr"))

    @builtin
    def advance(base, offsets, _semantic=None):
        raise TritonDistError(message("tl.advance"))

    for mod in (tl, tl.core):
        mod.make_block_ptr = make_block_ptr
        mod.advance = advance
    tl._triton_dist_block_pointers = True
