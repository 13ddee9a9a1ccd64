"""The `dl` language: distributed primitives usable inside @triton.jit kernels.

    import triton_dist.language as dl

Signatures follow Triton-distributed (docs/semantics.md §5).  Each op is a Triton builtin:
interpreted, it runs on the active backend (the simulator); compiled, it is emitted into
the kernel's IR (triton_dist.language._emit).
"""
from __future__ import annotations

import triton.language as tl

from triton_dist import symbols as S
from triton_dist.backend import calling
from triton_dist.errors import TritonDistError

from . import _dispatch as D


if tl.pointer_type.__hash__ is None:
    # extern_call keys its symbol table by argument types, pointers included (as
    # Triton-distributed does); triton's pointer_type defines __eq__ but no hash.
    tl.pointer_type.__hash__ = lambda self: hash(("pointer", str(self.element_ty), self.address_space))


def dist_builtin(fn):
    """Mark fn as a Triton builtin: the compiler passes `_semantic`; the interpreter passes none."""
    setattr(fn, tl.core.TRITON_BUILTIN, True)
    return fn


def _compiled(*args, **kwargs):
    """Compiled mode: emit the op into the kernel's IR (see _emit.py)."""
    from ._emit import emit
    return emit(*args, **kwargs)


def _where():
    from triton_dist import backend
    return backend.active().kernel_line(3)


def _scalar_ptr(x, op):
    if not D.is_pointer(x):
        raise TritonDistError(f"{_where()}: {op} takes a pointer, got {getattr(x, 'type', type(x).__name__)}")
    if x.type.is_block():
        raise TritonDistError(f"{_where()}: {op} takes a scalar pointer, got a block of pointers "
                              f"{x.type}; pass the base pointer")
    return x


def check_int_arg(x, call, param, dtype_name, meaning, _semantic):
    """An integer argument (a rank, a byte count, a team, ...) of `call`, checked as far as it is
    known: a Python number when compiling too, a tensor's value where it is known (the
    simulator).  A float is refused, never truncated (dl.notify(sig, 0.5) would signal rank 0),
    and a value outside `dtype_name` is refused, never wrapped (nbytes=-4 as a uint32)."""
    v = D.unwrap(x)
    if isinstance(v, tl.tensor):
        if not v.type.scalar.is_int() or v.type.scalar.is_ptr():
            raise TritonDistError(f"{_where()}: {call}: {param} must be {meaning}, got a value of type "
                                  f"{v.type}; pass an integer")
        if not D.interpreting(_semantic):
            return
        v = D.to_py(v, f"{call} {param}")
    if isinstance(v, bool) or not isinstance(v, int):
        kind = type(v).__name__
        raise TritonDistError(f"{_where()}: {call}: {param} must be {meaning}, got {v!r} (a {kind}, which "
                              f"would be truncated); pass an integer")
    lo, hi = S.INT_RANGES[dtype_name]
    if not lo <= v <= hi:
        raise TritonDistError(f"{_where()}: {call}: {param} must be {meaning}, got {v}: outside {dtype_name} "
                              f"({lo}..{hi}), so it would wrap around to another value")


RANK = "a rank: an integer in 0..num_ranks()-1"


def check_value_fits(ptr, value, what, _semantic):
    """Reject a signal/wait value that does not fit the signal's dtype (docs/device_model.md: it would be
    truncated; 2**32 waited on an int32 slot is 0).  One rule for every backend: a constant
    is checked when compiling too, a value known only at run time where it is known (the
    simulator)."""
    v = D.unwrap(value)
    if isinstance(v, tl.tensor):
        if not D.interpreting(_semantic):
            return
        v = D.to_py(v, what)
    err = S.value_fit_error(what, D.pointer_dtype(ptr).name, v)
    if err is not None:
        raise TritonDistError(f"{_where()}: {err}")


@dist_builtin
def rank(axis=-1, _semantic=None):
    """This PE's rank, 0..num_ranks()-1.

    Dtypes: returns int32.  `axis` is taken for compatibility with Triton-distributed (device
    meshes); only -1, the whole world, has a meaning here.
    NPU: reads the device library's state at a fixed place; no memory traffic, pure
    (docs/semantics.md §2).
    Symbol: aclshmem_my_pe (the lowering drops the axis operand).
    Simulator: the rank of the process running the kernel.
    """
    if D.interpreting(_semantic):
        return D.scalar(D.run("aclshmem_my_pe"), tl.int32)
    return _compiled("rank", [], _semantic, axis=D.unwrap(axis))


@dist_builtin
def num_ranks(axis=-1, _semantic=None):
    """The number of PEs (ranks) of the job.

    Dtypes: returns int32; `axis` as for dl.rank.
    NPU: reads the device library's state; pure (docs/semantics.md §2).
    Symbol: aclshmem_n_pes (the axis operand dropped).
    Simulator: the world size of the launch.
    """
    if D.interpreting(_semantic):
        return D.scalar(D.run("aclshmem_n_pes"), tl.int32)
    return _compiled("num_ranks", [], _semantic, axis=D.unwrap(axis))


@dist_builtin
def symm_at(ptr, rank, _semantic=None):
    """The address of `ptr`'s counterpart in the symmetric heap of PE `rank`.

    Dtypes: `ptr` a scalar pointer into the local symmetric heap (a tensor from
    triton_dist.symm_tensor, or an offset into one), element type bf16, fp16, fp32, int8..int64
    or uint8..uint64; `rank` an int32 in 0..num_ranks()-1.  Returns a pointer of ptr's type.
    NPU: address arithmetic only, `heap_base[rank] + (ptr - my_heap_base)`; loads and stores
    through the result reach the peer's memory (docs/semantics.md §2).
    Symbol: aclshmem_ptr_<type> (e.g. aclshmem_ptr_float).
    Simulator: the same arithmetic over the simulated heaps, which every rank maps; a pointer
    outside the local heap or a rank out of range is a TritonDistError naming the kernel line.
    """
    _scalar_ptr(ptr, "dl.symm_at")
    check_int_arg(rank, "dl.symm_at", "rank", "int32", RANK, _semantic)
    if D.interpreting(_semantic):
        with calling("dl.symm_at"):
            out = D.run("aclshmem_ptr", D.to_py(ptr, "dl.symm_at"), int(D.to_py(rank, "dl.symm_at rank")))
        return D.pointer(out.addr, ptr.type)
    return _compiled("symm_at", [ptr, rank], _semantic)


@dist_builtin
def notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node", _semantic=None):
    """Set, or add `signal` to, the signal slot at `ptr` on PE `rank`.

    Dtypes: `ptr` a scalar pointer to a signal in the symmetric heap: int32 (sig_op "set" or
    "add") or int64/uint64 ("set" only); `rank` an int32 in 0..num_ranks()-1; `signal` an
    integer that fits the slot's dtype.  `sig_op` is "set" or "add"; `comm_scope` ("gpu",
    "intra_node", "inter_node") is carried as an attribute and changes nothing on Ascend.
    NPU: SET is a scalar store to the peer's slot and a dcci of its line (not atomic); ADD an
    atomic add that bypasses the data cache.  There is no pipe barrier before it: data written
    by tl.store before the notify may land after it, so put libshmem_device.fence() between
    them (docs/semantics.md §1, §3).
    Symbol: aclshmemx_signal_op for an int32 signal (0 for set, 1 for add);
    aclshmem_int64_p / aclshmem_uint64_p for a 64-bit one.
    Simulator: SET goes through the core's modelled data cache and is written back by its dcci;
    ADD is an atomic add; the kernel's earlier stores are DMAs in flight that may land after it
    (sim/primitives.py, sim/dma.py).
    """
    _scalar_ptr(ptr, "dl.notify")
    check_int_arg(rank, "dl.notify", "rank", "int32", RANK, _semantic)
    sig_op, comm_scope = D.unwrap(sig_op), D.unwrap(comm_scope)
    if comm_scope not in S.COMM_SCOPES:
        raise TritonDistError(f"{_where()}: dl.notify: comm_scope must be one of {sorted(S.COMM_SCOPES)}, "
                              f"got {comm_scope!r}")
    try:
        symbol = S.notify_symbol(D.pointer_dtype(ptr).name, sig_op)
    except ValueError as e:
        raise TritonDistError(f"{_where()}: {e}") from None
    check_value_fits(ptr, signal, "dl.notify: signal", _semantic)
    if D.interpreting(_semantic):
        p = D.to_py(ptr, "dl.notify")
        r = int(D.to_py(rank, "dl.notify rank"))
        v = int(D.to_py(signal, "dl.notify signal"))
        with calling("dl.notify"):
            if symbol == "aclshmemx_signal_op":
                D.run("aclshmemx_signal_op", p, v, S.SIG_OPS[sig_op], r)
            else:
                D.run("aclshmem_p", p, v, r)
        return None
    return _compiled("notify", [ptr, rank, signal], _semantic, sig_op=sig_op, comm_scope=comm_scope, symbol=symbol)


@dist_builtin
def wait(barrierPtrs, numBarriers, scope, semantic, waitValue=1, _semantic=None):
    """Wait until each of `numBarriers` signal slots, 64 bytes apart, equals `waitValue`.

    Dtypes: `barrierPtrs` a scalar pointer to int32, int64, uint32 or uint64 slots in the
    symmetric heap (slot i at byte offset 64*i: SIGNAL_SLOT_STRIDE elements apart);
    `numBarriers` an integer >= 0; `waitValue` an integer that fits the slot's dtype.  `scope`
    ("gpu", "cta", "sys") and `semantic` ("acquire", "release", "acq_rel", "relaxed") are
    carried as attributes.  Returns an int32 token for dl.consume_token.
    NPU: for each slot, dcci the line and read it until it equals waitValue; never writes the
    slot (whoever resets it owns the reset) (docs/semantics.md §3).
    Symbol: aclshmem_wait_<type>, <type> int32 or int64 (an unsigned slot uses the signed
    wrapper of its width).
    Simulator: every round is a scheduling point; a wait nothing can end is reported as a
    DeadlockError naming the rank, core, line, slot and the value awaited versus seen.
    """
    _scalar_ptr(barrierPtrs, "dl.wait")
    check_int_arg(numBarriers, "dl.wait", "numBarriers", "int32",
                  "a count of signal slots (an integer >= 0)", _semantic)
    try:        # one rule for every backend (triton_dist/symbols.py): integer signals only
        S.wait_symbol(D.pointer_dtype(barrierPtrs).name)
    except ValueError as e:
        raise TritonDistError(f"{_where()}: {e}") from None
    scope, semantic = D.unwrap(scope), D.unwrap(semantic)
    if scope not in S.WAIT_SCOPES:
        raise TritonDistError(f"{_where()}: dl.wait: scope must be one of {S.WAIT_SCOPES}, got {scope!r}")
    if semantic not in S.WAIT_SEMANTICS:
        raise TritonDistError(f"{_where()}: dl.wait: semantic must be one of {S.WAIT_SEMANTICS}, got {semantic!r}")
    check_value_fits(barrierPtrs, waitValue, "dl.wait: waitValue", _semantic)
    if D.interpreting(_semantic):
        with calling("dl.wait"):
            tok = D.run("aclshmem_wait", D.to_py(barrierPtrs, "dl.wait"),
                        int(D.to_py(numBarriers, "dl.wait numBarriers")), D.to_py(waitValue, "dl.wait waitValue"))
        return D.scalar(tok, tl.int32)
    return _compiled("wait", [barrierPtrs, numBarriers, waitValue], _semantic, scope=scope, semantic=semantic)


@dist_builtin
def consume_token(value, token, _semantic=None):
    """`value` unchanged, made to depend on the dl.wait that returned `token`.

    Dtypes: `value` any scalar, tensor or pointer (a pointer block of rank 1 to 5); `token`
    the int32 a dl.wait returned.  Returns `value`, same type.
    NPU: no instruction: it orders later loads through `value` after the wait (a data
    dependence the compiler keeps) (docs/semantics.md §3).
    Symbol: aclshmem_consume_token_<type>; for pointers aclshmem_consume_token_<type>_ptr_<r>d.
    Simulator: returns `value`; the race detector orders loads through it after the wait and
    reports a load that skipped it.
    """
    if D.interpreting(_semantic):
        with calling("dl.consume_token"):
            return D.run("aclshmem_consume_token", value, token)
    return _compiled("consume_token", [value, token], _semantic)


@dist_builtin
def extern_call(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, _semantic=None):
    """Call the device-library symbol that `arg_type_symbol_dict` gives for the arguments' types.

    Dtypes: `args` scalars or pointers; `arg_type_symbol_dict` maps a tuple of Triton types to
    (symbol, return type) (Triton-distributed's form); `is_pure` says the call has no memory
    effects.  Every libshmem_device function is one such call.
    NPU: a call of that aclshmem symbol (its `_mlir_ciface_` wrapper) (docs/semantics.md §6).
    Symbol: the one chosen from `arg_type_symbol_dict`.
    Simulator: runs the primitive of the symbol's family (triton_dist/symbols.py ->
    sim/primitives.py); a symbol it does not implement is a TritonDistError listing those it does.
    """
    lib_name, lib_path, is_pure = D.unwrap(lib_name), D.unwrap(lib_path), D.unwrap(is_pure)
    args = [D.unwrap(a) for a in args]
    types = tuple(a.type.scalar if isinstance(a, tl.tensor) else None for a in args)
    match = None
    for arg_types, (symbol, ret) in arg_type_symbol_dict.items():
        if len(arg_types) == len(types) and all(t is None or t == want for t, want in zip(types, arg_types)):
            match = (symbol, ret)
            break
    if match is None:
        raise TritonDistError(f"{_where()}: extern_call into {lib_name}: no symbol for argument types "
                              f"{[str(t) for t in types]}; known: {[list(map(str, k)) for k in arg_type_symbol_dict]}")
    symbol, ret = match
    if D.interpreting(_semantic):
        with calling(f"dl.extern_call({symbol})"):       # libshmem_device.* name themselves first
            out = D.run(S.family_of(symbol), *[D.to_py(a, f"extern_call {symbol}") for a in args])
        if ret is None or ret == () or out is None:
            return None
        if isinstance(ret, tl.pointer_type):
            return D.pointer(out.addr, ret)
        return D.scalar(out, ret)
    return _compiled("extern_call", args, _semantic, lib_name=lib_name, lib_path=lib_path, symbol=symbol,
                 ret=ret, is_pure=bool(is_pure))


__all__ = ["rank", "num_ranks", "symm_at", "notify", "wait", "consume_token", "extern_call"]
