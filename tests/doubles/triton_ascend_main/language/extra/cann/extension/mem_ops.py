"""Test double of extension/mem_ops.py (triton-ascend a84b1eb5): index_put (:38),
gather_out_to_ub (:164), scatter_ub_to_out (:295), index_select_simd (:432): the offsets and
strides become builder values (_utils.py _convert_elem_to_ir_value: get_int64/get_int32) and
the builder method of that name is called with triton-ascend's argument order."""
import triton.language as tl
from triton.language.core import _unwrap_if_constexpr, builtin, tensor


def _ir(builder, elem, require_i64):
    elem = _unwrap_if_constexpr(elem)
    if isinstance(elem, int):
        return builder.get_int64(elem) if require_i64 else builder.get_int32(elem)
    return elem.handle


@builtin
def index_put(ptr, index, value, dim, index_boundary, end_offset, start_offset, dst_stride, _semantic=None):
    b, i64 = _semantic.builder, index.dtype.is_int64()
    dim, index_boundary = _unwrap_if_constexpr(dim), _unwrap_if_constexpr(index_boundary)
    return tl.tensor(b.create_index_put(ptr.handle, index.handle, value.handle, dim, index_boundary,
                                        [_ir(b, e, i64) for e in end_offset], [_ir(b, e, i64) for e in start_offset],
                                        [_ir(b, e, i64) for e in dst_stride]), tl.void)


@builtin
def gather_out_to_ub(src, index, index_boundary, dim, src_stride, end_offset, start_offset, other=None,
                     _semantic=None):
    b = _semantic.builder
    dim, index_boundary = _unwrap_if_constexpr(dim), _unwrap_if_constexpr(index_boundary)
    if other is not None:
        other = _semantic.cast(other, src.dtype.element_ty)
    ret = b.create_gather_out_to_ub(src.handle, index.handle, index_boundary, dim,
                                    [_ir(b, e, True) for e in src_stride], [_ir(b, e, False) for e in end_offset],
                                    [_ir(b, e, False) for e in start_offset], other.handle if other else None)
    return tl.tensor(ret, tl.block_type(src.dtype.element_ty, [_unwrap_if_constexpr(s) for s in index.shape]))


@builtin
def scatter_ub_to_out(ptr, value, index, index_boundary, dim, dst_stride, end_offset, start_offset, _semantic=None):
    b = _semantic.builder
    dim, index_boundary = _unwrap_if_constexpr(dim), _unwrap_if_constexpr(index_boundary)
    return tl.tensor(b.create_scatter_ub_to_out(ptr.handle, value.handle, index.handle, index_boundary, dim,
                                                [_ir(b, e, True) for e in dst_stride],
                                                [_ir(b, e, False) for e in end_offset],
                                                [_ir(b, e, False) for e in start_offset]), tl.void)


@builtin
def index_select_simd(src, dim, index, src_shape, src_offset, read_shape, _semantic=None) -> tensor:
    dim = _unwrap_if_constexpr(dim)
    src_shape = [_unwrap_if_constexpr(s) for s in src_shape]
    src_offset = [_unwrap_if_constexpr(s) for s in src_offset]
    read_shape = [_unwrap_if_constexpr(s) for s in read_shape]
    shape = [index.shape[0] if i == dim else read_shape[i] for i in range(len(src_shape))]
    out = _semantic.builder.create_index_select_simd(src.handle, index.handle, dim, src_shape, src_offset, read_shape,
                                                     shape)
    return tl.tensor(out, tl.block_type(src.type.element_ty, shape))
