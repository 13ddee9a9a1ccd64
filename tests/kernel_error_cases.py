"""Kernels that raise, run both by Triton's plain interpreter (a subprocess without
triton_dist: the oracle) and by the simulator (tests/test_kernel_errors.py).  This module
imports no triton_dist, so the plain run is Triton's alone."""
import triton
import triton.language as tl


@triton.jit
def arange_kernel(out):
    tl.store(out + tl.arange(4, 2), 1.0)        # ValueError inside Triton's semantic (triton-ascend's too)


@triton.jit
def _helper(x):
    return tl.arange(4, 2) + x


@triton.jit
def helper_kernel(out):
    tl.store(out + _helper(0), 1.0)             # the same, raised in a @jit helper


@triton.jit
def static_kernel(out, N: tl.constexpr):
    tl.static_assert(N > 4, "N must exceed 4")  # AssertionError
    tl.store(out, 1.0)


@triton.jit
def type_kernel(out):
    x = tl.load(out)
    tl.store(out, x + "a")                      # AttributeError


@triton.jit
def overflow_kernel(out):
    huge: tl.constexpr = 0xFFFFFFFFFFFFFF       # Triton's test_core.py::test_scalar_overflow
    x = tl.full((), 32, dtype=tl.int32)
    tl.store(out, (x + huge).to(tl.float32))   # "out of range"


CASES = {"arange": (arange_kernel, {}), "helper": (helper_kernel, {}), "static": (static_kernel, {"N": 2}),
         "type": (type_kernel, {}), "overflow": (overflow_kernel, {})}


def outcome(name, out, grid=(1,)):
    """(type name, is a triton.TritonError, type name of its __cause__, str) of what the launch raised."""
    kernel, kwargs = CASES[name]
    try:
        kernel[grid](out, **kwargs)
    except Exception as e:  # noqa: BLE001 - what was raised is the result
        return [type(e).__name__, isinstance(e, triton.TritonError), type(e.__cause__).__name__, str(e)]
    return None


if __name__ == "__main__":          # the plain interpreter's outcomes, as JSON
    import json

    import torch
    print(json.dumps({n: outcome(n, torch.zeros(8)) for n in CASES}))
