"""Compiled mode: how triton-ascend's extension ops are carried through stock Triton's frontend.

`triton.language.extra.cann.extension`'s data ops (extract_slice, insert_slice, get_element,
sort, flip, gather_out_to_ub, scatter_ub_to_out, index_put, index_select_simd) and
sync_block_set / sync_block_wait / sync_block_all become ops stock Triton's C++ builder cannot
create (tt.sort, tensor.extract_slice, hivm.hir.sync_block_set, ...).  So, traced for a device,
each call is emitted as a group of markers the stock builder can make, all
`tt.extern_elementwise` of the reserved library EXT_LIBNAME, not pure (Triton's CSE, DCE, LICM
and reorder-broadcast then keep every marker, in program order):

- one marker per value operand (a tile, a scalar or a pointer), of the operand's own type:
      %m = tt.extern_elementwise %x {..., triton_dist.ext = "{op, id, role: operand, index}"} : (T) -> T
- one result marker: on a zero tile of the result's shape for a tile result (the Elementwise
  trait wants a tile operand of the result's shape), without operands for a scalar result or
  for an op without a result (then its i32 result is unused):
      %r = tt.extern_elementwise %zeros {..., triton_dist.ext = "{op, id, role: result, static}"} : (R) -> R
  `static` holds what the op takes as constants (sizes, strides, dim, descending, mode, ...), and
  says for each list entry whether it is a constant or operand k.

backend_ascend/extension_ops.py rewrites each group into the op triton-ascend's own frontend
emits (its table cites where), before triton-adapter-opt runs.  The markers never reach a
device: a compile that does not rewrite them fails to link the library's symbols.
"""
from __future__ import annotations

import itertools
import json

import triton.language as tl

from triton_dist.errors import TritonDistError

EXT_LIBNAME = "triton_dist.ascend_ext"
EXT_ATTR = "triton_dist.ext"
SYMBOL_PREFIX = "triton_dist.ext."

_ids = itertools.count()


def _device_library(_semantic):
    """The registered device library (backend 'cuda''s) this compile links, if any: then it is not a
    compile for an NPU."""
    from triton_dist import registry
    options = getattr(_semantic.builder, "options", None)
    for name, _path in getattr(options, "extern_libs", None) or ():
        if registry.device_library_emitter(name) is not None:
            return name
    return None


def _refuse_other_device_libraries(op, _semantic):
    """A compile that links a registered device library (backend 'cuda''s) is not for an NPU: the
    markers would end as calls of symbols nothing defines, so say what is wrong instead."""
    name = _device_library(_semantic)
    if name is not None:
        raise TritonDistError(f"triton.language.extra.cann.extension.{op} is triton-ascend's (an Ascend NPU "
                              f"op): a kernel compiled with device library {name!r} cannot use it; it runs on "
                              f"the simulator and compiles for the NPU (triton-dist npu-compile)")


class _Group:
    """The markers of one extension-op call."""

    def __init__(self, op, _semantic):
        _refuse_other_device_libraries(op, _semantic)
        self.op, self.semantic, self.id = op, _semantic, next(_ids)
        self.operands = 0

    def _marker(self, handles, ret_ir, info):
        b = self.semantic.builder
        h = b.create_extern_elementwise(EXT_LIBNAME, "", SYMBOL_PREFIX + self.op, handles, ret_ir, False)
        h.set_attr(EXT_ATTR, b.get_string_attr(json.dumps(dict(op=self.op, id=self.id, **info), sort_keys=True)))
        return h

    def operand(self, x):
        """x (a tl.tensor) as operand k of the op: ["operand", k] for `static`."""
        if not isinstance(x, tl.tensor):
            raise TritonDistError(f"{self.op}: expected a tensor operand, got {x!r}")
        k = self.operands
        self.operands += 1
        self._marker([x.handle], x.type.to_ir(self.semantic.builder), {"role": "operand", "index": k})
        return ["operand", k]

    def value(self, v):
        """An int, or a scalar tensor made an operand: what `static` holds for a list entry."""
        if isinstance(v, tl.constexpr):
            v = v.value
        if isinstance(v, bool) or not isinstance(v, (int, tl.tensor)):
            raise TritonDistError(f"{self.op}: expected an int or a scalar integer tensor, got {v!r}")
        if isinstance(v, tl.tensor):
            if v.type.is_block() or not v.type.scalar.is_int():
                raise TritonDistError(f"{self.op}: expected a scalar integer, got a {v.type}")
            return self.operand(v)
        return int(v)

    def result(self, ret_ty, static):
        """The result marker; returns the tl.tensor standing for the op's result (None: no result)."""
        info = {"role": "result", "static": static}
        if ret_ty is None:
            self._marker([], tl.int32.to_ir(self.semantic.builder), info)
            return None
        if ret_ty.is_block():
            elem = ret_ty.scalar
            if elem.is_ptr():
                raise TritonDistError(f"{self.op}: a tile of pointers as the result cannot be compiled for the NPU "
                                      f"here (triton_dist carries tiles of numbers only)")
            seed = self.semantic.full([_int(d) for d in ret_ty.shape], 0, elem)
            h = self._marker([seed.handle], ret_ty.to_ir(self.semantic.builder), info)
        else:
            h = self._marker([], ret_ty.to_ir(self.semantic.builder), info)
        return tl.tensor(h, ret_ty)


def _int(d):
    return int(getattr(d, "value", d))


def _pipe_name(p):
    if p is None:
        return None
    p = getattr(p, "value", p)
    return getattr(p, "name", None) or str(getattr(p, "value", p))


# --- the ops (arguments already checked by the caller, sim/compat/cann.py, as triton-ascend checks them) ---
def extract_slice(ful, offsets, sizes, strides, _semantic):
    g = _Group("extract_slice", _semantic)
    src = g.operand(ful)
    offs = [g.value(o) for o in offsets]
    return g.result(tl.block_type(ful.type.scalar, [_int(v) for v in sizes]),
                    dict(src=src, offsets=offs, sizes=[_int(v) for v in sizes], strides=[_int(v) for v in strides]))


def insert_slice(ful, sub, offsets, sizes, strides, _semantic):
    g = _Group("insert_slice", _semantic)
    dst, src = g.operand(ful), g.operand(sub)
    offs = [g.value(o) for o in offsets]
    return g.result(ful.type, dict(dst=dst, src=src, offsets=offs, sizes=[_int(v) for v in sizes],
                                   strides=[_int(v) for v in strides]))


def get_element(src, indices, _semantic):
    g = _Group("get_element", _semantic)
    s = g.operand(src)
    return g.result(src.type.scalar, dict(src=s, indices=[g.value(i) for i in indices]))


def sort(x, dim, descending, _semantic):
    g = _Group("sort", _semantic)
    return g.result(x.type, dict(src=g.operand(x), dim=int(dim), descending=bool(descending)))


def flip(x, dim, _semantic):
    g = _Group("flip", _semantic)
    return g.result(x.type, dict(src=g.operand(x), dim=int(dim)))


def gather_out_to_ub(src, index, index_boundary, dim, src_stride, end_offset, start_offset, other, _semantic):
    g = _Group("gather_out_to_ub", _semantic)
    st = dict(src=g.operand(src), index=g.operand(index), index_boundary=int(index_boundary), dim=int(dim),
              src_stride=[g.value(v) for v in src_stride], end_offset=[g.value(v) for v in end_offset],
              start_offset=[g.value(v) for v in start_offset], other=None)
    if other is not None:
        if not isinstance(other, tl.tensor):
            other = _semantic.to_tensor(other)
        st["other"] = g.operand(_semantic.cast(other, src.type.scalar.element_ty))
    return g.result(tl.block_type(src.type.scalar.element_ty, [_int(d) for d in index.shape]), st)


def scatter_ub_to_out(ptr, value, index, index_boundary, dim, dst_stride, end_offset, start_offset, _semantic):
    g = _Group("scatter_ub_to_out", _semantic)
    st = dict(ptr=g.operand(ptr), value=g.operand(value), index=g.operand(index),
              index_boundary=int(index_boundary), dim=int(dim), dst_stride=[g.value(v) for v in dst_stride],
              end_offset=[g.value(v) for v in end_offset], start_offset=[g.value(v) for v in start_offset])
    g.result(None, st)


def index_put(ptr, index, value, dim, index_boundary, end_offset, start_offset, dst_stride, _semantic):
    if len(index.shape) != 1:       # triton-ascend flattens the index first (extension/mem_ops.py:129-133 at a84b1eb5)
        n = 1
        for d in index.shape:
            n *= _int(d)
        index = _semantic.reshape(index, [n], True)
    g = _Group("index_put", _semantic)
    st = dict(ptr=g.operand(ptr), index=g.operand(index), value=g.operand(value), dim=int(dim),
              index_boundary=int(index_boundary), end_offset=[g.value(v) for v in end_offset],
              start_offset=[g.value(v) for v in start_offset], dst_stride=[g.value(v) for v in dst_stride])
    g.result(None, st)


def index_select_simd(src, index, dim, src_shape, src_offset, read_shape, ret_shape, _semantic):
    g = _Group("index_select_simd", _semantic)
    st = dict(src=g.operand(src), index=g.operand(index), dim=int(dim), src_shape=[g.value(v) for v in src_shape],
              src_offset=[g.value(v) for v in src_offset], read_shape=[_int(v) for v in read_shape])
    return g.result(tl.block_type(src.type.scalar.element_ty, [_int(d) for d in ret_shape]), st)


def sync_block(which, sender, receiver, event_id, sender_pipe, receiver_pipe, _semantic):
    """sync_block_set / sync_block_wait (which = "set" / "wait").  For a device library's compile
    (backend cuda) nothing: the flag orders the cube and the vector half of one block, which a GPU
    program does not have (it runs the dot, the store and the signal in its one program order), so
    a kernel that orders its halves for the NPU (the library's gemm_rs, ag_gemm) compiles unchanged
    there.  sync_block_all, a barrier across blocks, has a meaning there and stays refused."""
    if _device_library(_semantic) is not None:
        return None
    g = _Group(f"sync_block_{which}", _semantic)
    g.result(None, dict(sender=sender, receiver=receiver, event_id=g.value(event_id),
                        sender_pipe=_pipe_name(sender_pipe), receiver_pipe=_pipe_name(receiver_pipe)))


def sync_block_all(mode, event_id, _semantic):
    g = _Group("sync_block_all", _semantic)
    g.result(None, dict(mode=mode, event_id=int(event_id)))


def annotation_mark(x, key, value, _semantic):
    """A compile hint on the value x: `annotation.mark %x {key = "value"}`, as triton-ascend's
    compile_hint_impl makes it (extension/aux_ops.py:96-117 at MAIN, builder ascend_ir.cc:597-603);
    cast(..., overflow_mode=) marks its result so (sim/compat/ascend_cast.py)."""
    g = _Group("annotation_mark", _semantic)
    g.result(None, dict(src=g.operand(x), key=str(key), value=str(value)))

