"""Compiled mode: emitting distributed ops into a kernel's IR (see backend_ascend)."""
from triton_dist.errors import TritonDistError


def emit(op, operands, _semantic, **attrs):
    raise TritonDistError(
        f"dl.{op}: compiled mode is not available yet; run kernels on the simulator "
        f"(TRITON_DIST_BACKEND=sim)")
