"""Test double of extension/vec_ops.py (triton-ascend a84b1eb5): insert_slice (:36),
extract_slice (:85), get_element (:130), flip (:171), sort (:322): each checks its arguments as
there (in part) and calls the builder method of that name."""
import triton.language as tl
from triton.language.core import _unwrap_if_constexpr, builtin, constexpr, tensor


def _ints(values):
    # a kernel's tuple arrives as a tl.tuple of constexprs on the 3.5 frontend
    return [int(_unwrap_if_constexpr(v)) for v in values]


def _handles(values, _semantic):
    out = []
    for v in values:
        v = _semantic.to_tensor(v) if isinstance(v, constexpr) else v
        out.append(v.handle if isinstance(v, tensor) else v)
    return out


@builtin
def insert_slice(ful, sub, offsets, sizes, strides, _semantic=None, _generator=None) -> tensor:
    assert len(ful.shape) == len(offsets) == len(sizes) == len(strides)
    out = _semantic.builder.create_insert_slice(ful.handle, sub.handle, _handles(offsets, _semantic), _ints(sizes),
                                                _ints(strides))
    return tensor(out, tl.block_type(ful.type.scalar, ful.shape))


@builtin
def extract_slice(ful, offsets, sizes, strides, _semantic=None, _generator=None) -> tensor:
    assert len(ful.shape) == len(offsets) == len(sizes) == len(strides)
    out = _semantic.builder.create_extract_slice(ful.handle, _handles(offsets, _semantic), _ints(sizes), _ints(strides))
    return tensor(out, tl.block_type(ful.type.scalar, _ints(sizes)))


@builtin
def get_element(src, indice, _semantic=None, _generator=None):
    if len(src.shape) != len(indice):
        raise ValueError("Indice's rank must be equal to src tensor's rank")
    return tensor(_semantic.builder.create_extract_scalar(src.handle, _handles(indice, _semantic)), src.type.scalar)


@builtin
def flip(ptr, dim=-1, _semantic=None, _generator=None):
    dim = int(_unwrap_if_constexpr(dim))
    dim = len(ptr.shape) - 1 if dim == -1 else dim
    return tensor(_semantic.builder.create_flip(ptr.handle, dim), type=ptr.type)


@builtin
def sort(ptr, dim=-1, descending=False, _semantic=None):
    dim = int(_unwrap_if_constexpr(dim))
    rank = len(ptr.shape)
    if (dim + rank if dim < 0 else dim) != rank - 1:
        raise ValueError("ascend.sort only supports sorting along the last dimension")
    return tensor(_semantic.builder.create_sort(ptr.handle, rank - 1, bool(_unwrap_if_constexpr(descending))),
                  type=ptr.type)
