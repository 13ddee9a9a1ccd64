"""Argument checks shared by every backend's host API (one place, one wording)."""
from __future__ import annotations

import operator

from .errors import TritonDistError


def symm_shape_dtype(shape, dtype):
    """symm_tensor's (shape, dtype), checked: a tuple of non-negative ints and a torch.dtype."""
    import torch
    try:
        # operator.index, not int(): 2.5 or "3" must not silently become 2 or 3 elements
        shape = tuple(_dim(s) for s in (shape if isinstance(shape, (tuple, list, torch.Size)) else (shape,)))
    except (TypeError, ValueError):
        raise TritonDistError(f"symm_tensor: shape must be a tuple of ints, got {shape!r}; "
                              f"e.g. symm_tensor((4, 8), torch.float32)") from None
    if any(s < 0 for s in shape):
        raise TritonDistError(f"symm_tensor: negative dimension in shape {shape}")
    if not isinstance(dtype, torch.dtype):
        raise TritonDistError(f"symm_tensor: dtype must be a torch.dtype, got {dtype!r}")
    return shape, dtype


def _dim(s) -> int:
    if isinstance(s, bool):
        raise TypeError("a bool is not a dimension")
    return operator.index(s)


def require_agreement(what: str, values: list) -> None:
    """values[r] is what rank r passed to a collective; they must all be equal."""
    if any(v != values[0] for v in values):
        detail = "; ".join(f"rank {r}: {v}" for r, v in enumerate(values))
        raise TritonDistError(
            f"{what} is collective: every rank must call it in the same order with the same "
            f"arguments, but they differ ({detail})")


def symm_nbytes(shape, dtype) -> int:
    """Bytes of a tensor of this (checked) shape and dtype."""
    import torch
    numel = 1
    for s in shape:
        numel *= s
    return numel * torch.empty((), dtype=dtype).element_size()


def tensor_address(t) -> int:
    """Where tensor t starts in memory, zero-size tensors included (their data_ptr() is 0):
    the address of its storage plus its offset in it."""
    return t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()
