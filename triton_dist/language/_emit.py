"""Compiled mode: how a distributed op is carried through Triton's stock frontend.

Stock Triton has no distributed dialect, so each `dl.*` op (and every `dl.extern_call`,
which is what `libshmem_device.*` goes through) is emitted as one

    %r = tt.extern_elementwise %a, %b {libname = "triton_dist.dist", libpath = "",
           pure = <no memory effects>, symbol = "<see below>",
           triton_dist.op = "<op>", triton_dist.<attr> = ...} : (...) -> T

The op is recognised by the reserved library name CARRIER_LIBNAME and nothing else;
what it is comes from the explicit `triton_dist.op` attribute (one of CARRIER_OPS), and
its options from the other `triton_dist.*` attributes (never from names or text):

| triton_dist.op  | operands                          | result        | attributes                         |
| --------------- | --------------------------------- | ------------- | ---------------------------------- |
| rank, num_ranks | -                                 | i32           | axis (i32)                         |
| symm_at         | ptr, rank:i32                     | ptr type      | -                                  |
| notify          | ptr, rank:i32, signal:i64         | (void)        | sig_op, comm_scope, signal_dtype   |
| wait            | ptr, n:i32, wait_value:<elem>     | i32 (token)   | scope, semantic                    |
| consume_token   | value, token                      | value's type  | -                                  |
| extern_call     | the call's arguments              | ret (or void) | lib_name, lib_path                 |
| sub_vec_id      | -                                 | i64           | -                                  |

sub_vec_id is not a distributed op: it is triton-ascend's builtin (triton.language.extra.cann.
extension, sim/compat/cann.py where no triton-ascend is installed), carried the same way so that
the Ascend lowering can emit its HIVM op (backend_ascend/hivm.py, HIVM_BUILTINS).

`symbol` is the aclshmem symbol for extern_call and `triton_dist.<op>` for the dl ops
(their symbol depends on types the lowering reads from the IR, docs/semantics.md §6).
`signal_dtype` is the Triton name of the signal's element type ("int32", "int64",
"uint64"): the IR's integer types are signless, so int64 and uint64 are told apart by it.
An op without a result (`triton_dist.void`) still has one i32 result, because
`tt.extern_elementwise` needs one; it is never used and the lowering drops it.
`pure` follows the op's memory effects in triton_dist/symbols.py, so Triton's own passes
(CSE, DCE, LICM) treat the carrier exactly as they would the real op.

backend_ascend (ConvertTritonDistributedToHIVM) turns every carrier into a
`hivm.hir.custom`.  A kernel compiled for CUDA gets no carriers: it calls the same symbols
in the CUDA device library (backend_cuda/emit.py), found through the registry by the
library's name.  The simulator never reaches this module: when interpreting, the dl ops
run their primitive before getting here.
"""
from __future__ import annotations


import triton.language as tl

from triton_dist import registry
from triton_dist import symbols as S
from triton_dist.errors import TritonDistError

CARRIER_OP = "tt.extern_elementwise"
CARRIER_LIBNAME = "triton_dist.dist"
ATTR_PREFIX = "triton_dist."
OP_ATTR = ATTR_PREFIX + "op"
VOID_ATTR = ATTR_PREFIX + "void"
CARRIER_OPS = ("rank", "num_ranks", "symm_at", "notify", "wait", "consume_token", "extern_call", "sub_vec_id")


def _tensor(x, _semantic, dtype=None):
    """x as a tl.tensor (Python numbers become constants), cast to dtype when given."""
    x = x.value if isinstance(x, tl.constexpr) else x
    if not isinstance(x, tl.tensor):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise TritonDistError(f"expected a number or a tensor, got {x!r}")
        x = _semantic.to_tensor(x)
    if dtype is not None and x.type.scalar != dtype:
        if x.type.is_block():
            raise TritonDistError(f"expected a scalar {dtype}, got a block {x.type}")
        x = _semantic.cast(x, dtype)
    return x


def _carrier(_semantic, op, symbol, operands, ret_ty, pure, attrs):
    b = _semantic.builder
    void = ret_ty is None
    ty = tl.int32 if void else ret_ty
    handle = b.create_extern_elementwise(CARRIER_LIBNAME, "", symbol, [o.handle for o in operands],
                                         ty.to_ir(b), bool(pure))
    handle.set_attr(OP_ATTR, b.get_string_attr(op))
    for key, value in attrs.items():
        if isinstance(value, bool):
            attr = b.get_bool_attr(value)
        elif isinstance(value, int):
            attr = b.get_int32_attr(value)
        else:
            attr = b.get_string_attr(str(value))
        handle.set_attr(ATTR_PREFIX + key, attr)
    if void:
        handle.set_attr(VOID_ATTR, b.get_unit_attr())
        return None
    return tl.tensor(handle, ty)


def _pure(op):
    return S.DL_OPS[op].effects == S.NONE


def _device_library_emitter(_semantic):
    """The emitter of a device library this compile links (registered under the triton_dist.
    device_libraries entry-point group by its backend, e.g. backend 'cuda'), or None: then
    the op is carried to the lowering as a carrier.  The Ascend frontend links none."""
    options = getattr(_semantic.builder, "options", None)
    for name, _path in getattr(options, "extern_libs", None) or ():
        emitter = registry.device_library_emitter(name)
        if emitter is not None:
            return emitter
    return None


def emit(op, operands, _semantic, **attrs):
    """Emit dl.<op> into the kernel being compiled (see the module docstring).

    A kernel that links a registered device library (the CUDA one) calls the aclshmem
    symbols directly, through that library's emitter (backend_cuda/emit.py).
    """
    emitter = _device_library_emitter(_semantic)
    if emitter is not None:
        return emitter(op, operands, _semantic, **attrs)
    if op in ("rank", "num_ranks"):
        axis = attrs.get("axis", -1)
        return _carrier(_semantic, op, ATTR_PREFIX + op, [], tl.int32, _pure(op), {"axis": int(axis)})
    if op == "symm_at":
        ptr, rank = operands
        return _carrier(_semantic, op, ATTR_PREFIX + op, [ptr, _tensor(rank, _semantic, tl.int32)],
                        ptr.type, _pure(op), {})
    if op == "notify":
        ptr, rank, signal = operands
        return _carrier(_semantic, op, ATTR_PREFIX + op,
                        [ptr, _tensor(rank, _semantic, tl.int32), _tensor(signal, _semantic, tl.int64)],
                        None, _pure(op),
                        {"sig_op": attrs["sig_op"], "comm_scope": attrs["comm_scope"],
                         "signal_dtype": ptr.type.element_ty.name})
    if op == "wait":
        ptr, n, wait_value = operands
        elem = ptr.type.element_ty
        return _carrier(_semantic, op, ATTR_PREFIX + op,
                        [ptr, _tensor(n, _semantic, tl.int32), _tensor(wait_value, _semantic, elem)],
                        tl.int32, _pure(op), {"scope": attrs["scope"], "semantic": attrs["semantic"]})
    if op == "consume_token":
        value, token = operands
        value = _tensor(value, _semantic)
        return _carrier(_semantic, op, ATTR_PREFIX + op, [value, _tensor(token, _semantic)],
                        value.type, _pure(op), {})
    if op == "sub_vec_id":
        return _carrier(_semantic, op, ATTR_PREFIX + op, [], tl.int64, True, {})
    if op == "extern_call":
        ret = attrs.get("ret")
        ret_ty = None if ret is None or ret == () else ret
        args = [_tensor(a, _semantic) for a in operands]
        return _carrier(_semantic, op, attrs["symbol"], args, ret_ty, bool(attrs.get("is_pure")),
                        {"lib_name": attrs.get("lib_name") or "", "lib_path": attrs.get("lib_path") or ""})
    raise TritonDistError(f"dl.{op}: no compiled form is defined for this op (known: {', '.join(CARRIER_OPS)})")
