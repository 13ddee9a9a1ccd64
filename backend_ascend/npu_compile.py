"""Device side of the NPU path: ConvertTritonDistributedToHIVM inside triton-ascend's compiler.

On an NPU, kernels are compiled by triton-ascend.  Its frontend is Triton's, so the dl /
libshmem_device calls arrive in the TTIR as the carriers of triton_dist/language/_emit.py.
install() wraps triton-ascend's `ttadapter` stage (TTIR -> Linalg) so that, first thing,
the same lowering `backend_ascend.lower` runs on a CPU turns every carrier into its
`hivm.hir.custom` op, with the module-wide facts (the core type depends on whether the
module holds a dot; gm_addr_args_indices on the enclosing function's arguments) fixed
there, where the whole module is visible.  Each op also gets the `bitcode` attribute
that triton-ascend's custom ops carry: the aclshmem device library to link, whose path
comes from TRITON_DIST_ACLSHMEM_BITCODE.

Nothing here is imported before an NPU backend is created.
"""
from __future__ import annotations

import os
import tempfile

from triton_dist.errors import TritonDistError

BITCODE_ENV = "TRITON_DIST_ACLSHMEM_BITCODE"


def bitcode_path() -> str:
    """The aclshmem device-library bitcode kernels link against (absolute path)."""
    path = os.environ.get(BITCODE_ENV, "").strip()
    if not path:
        raise TritonDistError(
            f"{BITCODE_ENV} is not set: kernels that use dl.* or libshmem_device.* on the NPU link the "
            f"aclshmem device library; build it from hicann/shmem (its device bitcode, a .bc file) and "
            f"set {BITCODE_ENV}=/path/to/that.bc")
    if not os.path.isfile(path):
        raise TritonDistError(f"{BITCODE_ENV}={path}: no such file; point it at the aclshmem device-library "
                              f"bitcode (.bc) built from hicann/shmem")
    return os.path.abspath(path)


def lower_module(module):
    """The ttadapter pre-step: a module whose distributed carriers became hivm.hir.custom ops.

    The text is parsed back in the module's own context, where triton-ascend has loaded
    the HIVM dialect.  A module without distributed ops is returned as it is.
    """
    from triton._C.libtriton import ir

    from .hivm import LoweringError, convert_text, module_facts
    has_dot, count = module_facts(module)
    if count == 0:
        return module
    text, n = convert_text(str(module), has_dot=has_dot, bitcode=bitcode_path())
    if n != count:
        raise LoweringError(f"the module holds {count} distributed ops but {n} were lowered; this is a bug in "
                            f"backend_ascend.hivm")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.dist.ttir.mlir")
        with open(path, "w") as f:
            f.write(text)
        lowered = ir.parse_mlir_module(path, module.context)
    lowered.context = module.context
    return lowered


def install() -> None:
    """Make triton-ascend run the distributed lowering at the start of its ttadapter stage."""
    try:
        from triton.backends.ascend.compiler import AscendBackend
    except ImportError as e:
        raise TritonDistError(
            f"backend 'npu' compiles kernels with triton-ascend, which is not importable here ({e}); install "
            f"triton-ascend (its main line: the custom-op support the lowering relies on is not in the "
            f"3.2.0 wheel)") from None
    if getattr(AscendBackend, "_triton_dist_lowering", False):
        return
    original = AscendBackend.add_stages

    def add_stages(self, stages, options, *args, **kwargs):
        original(self, stages, options, *args, **kwargs)
        if "ttadapter" in stages:
            ttadapter = stages["ttadapter"]
            stages["ttadapter"] = lambda src, metadata: ttadapter(lower_module(src), metadata)

    AscendBackend.add_stages = add_stages
    AscendBackend._triton_dist_lowering = True
