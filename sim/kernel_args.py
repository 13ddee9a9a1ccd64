"""The tensors a kernel's arguments reach memory through, named as the user wrote them.

Two rooms walk a launch's arguments the same way: the interpreter's grid call (sim/interp.py:
a tensor on a device other than the CPU is refused, naming it) and the autotuner
(sim/autotune.py: each config starts from a copy of the tensors, and what it leaves in them
is compared with the others').  The walk lives
here, below both, so neither imports the other for it.
"""
from __future__ import annotations

from triton.runtime import interpreter as _interp


def is_tensor(x) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "untyped_storage")


def tensors_in(name: str, a):
    """The tensors a kernel argument reaches memory through, with how to name each: the
    argument itself, the members of a tuple (at any depth), the base of a host tensor
    descriptor (triton.tools.tensor_descriptor.TensorDescriptor), as the interpreter's own
    _init_args_hst walks them."""
    t = _interp._unwrap_tensor(a)
    if is_tensor(t):
        yield name, t
    elif isinstance(a, (tuple, list)):
        for i, x in enumerate(a):
            yield from tensors_in(f"{name}[{i}]", x)
    elif hasattr(a, "base") and hasattr(a, "block_shape"):
        yield from tensors_in(f"{name}.base", a.base)
