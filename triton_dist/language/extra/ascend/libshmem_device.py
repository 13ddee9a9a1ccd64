"""libshmem_device for Ascend: the aclshmem device library as seen from a Triton kernel.

Each function picks its symbol from triton_dist/symbols.py (SHMEM_OPS) and goes through
`dl.extern_call`: the simulator runs the primitive of that symbol, a compiled kernel
calls the symbol itself.  The constants are constexprs so kernels can use them.
"""
from __future__ import annotations

import triton.language as tl

from triton_dist import symbols as S
from triton_dist.backend import calling
from triton_dist.errors import TritonDistError
from triton_dist.language import RANK, _where, check_int_arg, check_value_fits, dist_builtin, extern_call
from triton_dist.language import _dispatch as D

ACLSHMEM_SIGNAL_SET = tl.constexpr(S.ACLSHMEM_SIGNAL_SET)
ACLSHMEM_SIGNAL_ADD = tl.constexpr(S.ACLSHMEM_SIGNAL_ADD)
ACLSHMEM_CMP_EQ = tl.constexpr(S.ACLSHMEM_CMP_EQ)
ACLSHMEM_CMP_NE = tl.constexpr(S.ACLSHMEM_CMP_NE)
ACLSHMEM_CMP_GT = tl.constexpr(S.ACLSHMEM_CMP_GT)
ACLSHMEM_CMP_GE = tl.constexpr(S.ACLSHMEM_CMP_GE)
ACLSHMEM_CMP_LT = tl.constexpr(S.ACLSHMEM_CMP_LT)
ACLSHMEM_CMP_LE = tl.constexpr(S.ACLSHMEM_CMP_LE)
ACLSHMEM_TEAM_WORLD = tl.constexpr(S.ACLSHMEM_TEAM_WORLD)
ACLSHMEM_TEAM_INVALID = tl.constexpr(-1)
SIGNAL_SLOT_STRIDE_INT32 = tl.constexpr(S.signal_slot_stride(4))
SIGNAL_SLOT_STRIDE_INT64 = tl.constexpr(S.signal_slot_stride(8))

LIB = "libshmem_device"
_I32, _U32 = tl.int32, tl.uint32
_PI32 = tl.pointer_type(tl.int32)
_RMA_TYPES = [t for t in (tl.float16, tl.float32, tl.bfloat16, tl.int8, tl.int16, tl.int32, tl.int64,
                          tl.uint8, tl.uint16, tl.uint32, tl.uint64)]


def _sym(op, dtype=None):
    spec = S.SHMEM_OPS[op]
    if "{type}" in spec.symbol and (dtype is None or dtype.name not in S.TYPE_NAMES):
        raise TritonDistError(_type_error(op, dtype))
    return spec.symbol_for(S.TYPE_NAMES.get(dtype.name) if dtype is not None else None)


def _type_error(op, dtype) -> str:
    template = S.SHMEM_OPS[op].symbol.replace("{type}", "<type>")
    return (f"{_where()}: libshmem_device.{op}: no {template} for element type {dtype}: the device library "
            f"defines it for {', '.join(S.TYPE_NAMES)} only; use one of those dtypes for the buffers "
            f"(e.g. torch.float32 for fp64 data)")


# What each integer parameter is, for the messages of check_int_arg.
_MEANING = {"pe": RANK, "nbytes": "a byte count: an integer in 0..4294967295 (uint32)",
            "team": "a team index (an integer; ACLSHMEM_TEAM_WORLD is 0)"}


def _cast(x, dtype, _semantic, op="?", param="?"):
    """Cast a value to the symbol's parameter type (a no-op for Python ints when interpreting),
    after checking it is an integer that fits it (check_int_arg: never truncated or wrapped)."""
    check_int_arg(x, f"libshmem_device.{op}", param, dtype.name,
                  _MEANING.get(param, f"an integer that fits {dtype.name}"), _semantic)
    x = D.unwrap(x)
    if not isinstance(x, tl.tensor):
        return D.scalar(int(x), dtype) if D.interpreting(_semantic) else _semantic.cast(_semantic.to_tensor(x), dtype)
    if x.type.scalar == dtype:
        return x
    if D.interpreting(_semantic):
        return D.scalar(D.to_py(x), dtype)
    return _semantic.cast(x, dtype)


def _call(op, args, types, ret, _semantic, pure=False):
    symbol = _sym(op, _elem(args, types))
    with calling(f"libshmem_device.{op}"):
        return extern_call(LIB, "", args, {tuple(types): (symbol, ret)}, pure, _semantic=_semantic)


def _elem(args, types):
    spec_types = [t for t in types if isinstance(t, tl.pointer_type)]
    return spec_types[0].element_ty if spec_types else None


@dist_builtin
def my_pe(_semantic=None):
    """This PE's rank.

    Dtypes: returns int32.
    NPU: reads the device library's state; pure (docs/semantics.md §2).
    Symbol: aclshmem_my_pe.
    Simulator: the rank of the process running the kernel (as dl.rank).
    """
    return _call("my_pe", [], [], _I32, _semantic, pure=True)


@dist_builtin
def n_pes(_semantic=None):
    """The number of PEs.

    Dtypes: returns int32.
    NPU: reads the device library's state; pure.
    Symbol: aclshmem_n_pes.
    Simulator: the world size of the launch (as dl.num_ranks).
    """
    return _call("n_pes", [], [], _I32, _semantic, pure=True)


@dist_builtin
def team_my_pe(team, _semantic=None):
    """This PE's index in `team`, or -1 if it is not a member or the team does not exist.

    Dtypes: `team` an int32 team index (ACLSHMEM_TEAM_WORLD is 0; teams come from the host's
    team_split_strided); returns int32.
    NPU: reads the team's record in the device state.
    Symbol: aclshmem_team_my_pe.
    Simulator: the teams the host made (sim/teams.py), with the device library's answers.
    """
    return _call("team_my_pe", [_cast(team, _I32, _semantic, "team_my_pe", "team")], [_I32], _I32, _semantic,
                 pure=True)


@dist_builtin
def team_n_pes(team, _semantic=None):
    """The number of PEs in `team`, or -1 for an invalid or unknown team.

    Dtypes: `team` an int32 team index; returns int32.
    NPU: reads the team's record in the device state.
    Symbol: aclshmem_team_n_pes.
    Simulator: sim/teams.py.
    """
    return _call("team_n_pes", [_cast(team, _I32, _semantic, "team_n_pes", "team")], [_I32], _I32, _semantic,
                 pure=True)


@dist_builtin
def team_translate_pe(src_team, src_pe, dest_team, _semantic=None):
    """The index in `dest_team` of member `src_pe` of `src_team`; -1 if a team is invalid or
    the PE is not in it (teams come from the host's team_split_strided).

    Dtypes: all three int32; returns int32.
    NPU: arithmetic on the two teams' (start, stride, size).
    Symbol: aclshmem_team_translate_pe.
    Simulator: sim/teams.py; -1 also where the device library reads an entry it never wrote.
    """
    op = "team_translate_pe"
    return _call(op, [_cast(src_team, _I32, _semantic, op, "team"), _cast(src_pe, _I32, _semantic, op, "src_pe"),
                      _cast(dest_team, _I32, _semantic, op, "team")], [_I32, _I32, _I32], _I32, _semantic,
                 pure=True)


def _ptr_arg(p, what):
    p = D.unwrap(p)
    if not D.is_pointer(p) or p.type.is_block():
        raise TritonDistError(f"libshmem_device.{what}: expected a scalar pointer, got "
                              f"{getattr(p, 'type', type(p).__name__)}")
    return p


@dist_builtin
def remote_ptr(local_ptr, pe, _semantic=None):
    """The address of `local_ptr`'s counterpart on PE `pe` (the same as dl.symm_at).

    Dtypes: `local_ptr` a scalar pointer into the local symmetric heap, element type bf16,
    fp16, fp32, int8..int64 or uint8..uint64 (no fp64); `pe` an int32 in 0..n_pes()-1.
    Returns a pointer of local_ptr's type.
    NPU: `heap_base[pe] + (local_ptr - my_heap_base)` (docs/semantics.md §2).
    Symbol: aclshmem_ptr_<type> (typed, as the device library's wrappers are).
    Simulator: the same arithmetic; an address outside the local heap or a PE out of range is a
    TritonDistError naming the kernel line.
    """
    p = _ptr_arg(local_ptr, "remote_ptr")
    symbol = _sym("remote_ptr", p.type.element_ty)
    with calling("libshmem_device.remote_ptr"):
        return extern_call(LIB, "", [p, _cast(pe, _I32, _semantic, "remote_ptr", "pe")],
                           {(p.type, _I32): (symbol, p.type)}, False, _semantic=_semantic)


@dist_builtin
def int_p(dest, value, pe, _semantic=None):
    """Store the int32 `value` into `dest` on PE `pe`: a signal SET.

    Dtypes: `dest` a scalar int32 pointer into the symmetric heap; `value` int32; `pe` an int32
    in 0..n_pes()-1.
    NPU: a scalar store to the peer's address, then dcci of its line; not atomic; no pipe
    barrier before it (docs/semantics.md §3).
    Symbol: aclshmem_int32_p.
    Simulator: a store through the core's modelled data cache written back by its dcci.
    """
    p = _ptr_arg(dest, "int_p")
    if p.type.element_ty != tl.int32:
        raise TritonDistError(f"libshmem_device.int_p: dest must point to int32, got {p.type}")
    return _call("int_p", [p, _cast(value, _I32, _semantic, "int_p", "value"), _cast(pe, _I32, _semantic, "int_p", "pe")],
                 [_PI32, _I32, _I32], (), _semantic)


@dist_builtin
def int64_p(dest, value, pe, _semantic=None):
    """Store the int64 `value` into `dest` on PE `pe`: a 64-bit signal SET.

    Dtypes: `dest` a scalar int64 pointer into the symmetric heap; `value` int64; `pe` int32.
    NPU: a scalar store to the peer's address, then dcci of its line (docs/semantics.md §3).
    Symbol: aclshmem_int64_p.
    Simulator: as int_p, 8 bytes.
    """
    p = _ptr_arg(dest, "int64_p")
    if p.type.element_ty != tl.int64:
        raise TritonDistError(f"libshmem_device.int64_p: dest must point to int64, got {p.type}")
    return _call("int64_p", [p, _cast(value, tl.int64, _semantic, "int64_p", "value"),
                             _cast(pe, _I32, _semantic, "int64_p", "pe")],
                 [p.type, tl.int64, _I32], (), _semantic)


def _rma(op, dest, source, nbytes, pe, _semantic):
    d, s = _ptr_arg(dest, op), _ptr_arg(source, op)
    if d.type != s.type:
        raise TritonDistError(f"libshmem_device.{op}: dest and source must have the same pointer type, "
                              f"got {d.type} and {s.type}")
    if d.type.element_ty not in _RMA_TYPES:
        raise TritonDistError(_type_error(op, d.type.element_ty))
    return _call(op, [d, s, _cast(nbytes, _U32, _semantic, op, "nbytes"), _cast(pe, _I32, _semantic, op, "pe")],
                 [d.type, s.type, _U32, _I32], (), _semantic)


@dist_builtin
def putmem(dest, source, nbytes, pe, _semantic=None):
    """Copy `nbytes` from local `source` to `dest` on PE `pe`; complete when it returns.

    Dtypes: `dest`, `source` scalar pointers of the same type, element bf16, fp16, fp32,
    int8..int64 or uint8..uint64 (no fp64); `dest` in the symmetric heap; `nbytes` a byte count
    in 0..2**32-1 (uint32); `pe` an int32 in 0..n_pes()-1.
    NPU: a DMA GM -> unified buffer -> the peer's GM in chunks, on a vector core
    (docs/semantics.md §3).
    Symbol: aclshmem_<type>_putmem (e.g. aclshmem_float_putmem).
    Simulator: copies at once (a scheduling point); both ranges are checked against live
    buffers; the core's own stores in flight to either range land first.
    """
    return _rma("putmem", dest, source, nbytes, pe, _semantic)


@dist_builtin
def getmem(dest, source, nbytes, pe, _semantic=None):
    """Copy `nbytes` from `source` on PE `pe` to local `dest`; complete when it returns.

    Dtypes: as putmem; `source` in the symmetric heap.
    NPU: a DMA from the peer's GM through the unified buffer (docs/semantics.md §3).
    Symbol: aclshmem_<type>_getmem.
    Simulator: copies at once, as putmem.
    """
    return _rma("getmem", dest, source, nbytes, pe, _semantic)


@dist_builtin
def putmem_nbi(dest, source, nbytes, pe, _semantic=None):
    """Start copying `nbytes` from local `source` to `dest` on PE `pe`; it completes at the
    next quiet/fence, barrier, or the end of the kernel.

    Dtypes: as putmem.
    NPU: the DMA is issued and not waited for (docs/semantics.md §3).
    Symbol: aclshmem_<type>_putmem_nbi.
    Simulator: queued on the core and performed at quiet/fence/barrier/kernel end; the race
    detector reports a use of the data before then.
    """
    return _rma("putmem_nbi", dest, source, nbytes, pe, _semantic)


@dist_builtin
def getmem_nbi(dest, source, nbytes, pe, _semantic=None):
    """Start copying `nbytes` from `source` on PE `pe` to local `dest`; complete at the next
    quiet/fence, barrier or kernel end.

    Dtypes: as putmem.
    NPU: the DMA is issued and not waited for.
    Symbol: aclshmem_<type>_getmem_nbi.
    Simulator: queued, as putmem_nbi.
    """
    return _rma("getmem_nbi", dest, source, nbytes, pe, _semantic)


def _sig_ptr(sig_addr, what):
    s = _ptr_arg(sig_addr, what)
    if s.type.element_ty != tl.int32:
        raise TritonDistError(f"libshmem_device.{what}: signals are int32 on Ascend, got {s.type}")
    return s


def _putmem_signal(op, dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic):
    d, s = _ptr_arg(dest, op), _ptr_arg(source, op)
    if d.type != s.type:
        raise TritonDistError(f"libshmem_device.{op}: dest and source must have the same pointer type, "
                              f"got {d.type} and {s.type}")
    if d.type.element_ty not in _RMA_TYPES:
        raise TritonDistError(_type_error(op, d.type.element_ty))
    sig = _sig_ptr(sig_addr, op)
    check_value_fits(sig, signal, f"libshmem_device.{op}: signal", _semantic)
    return _call(op, [d, s, _cast(nbytes, _U32, _semantic, op, "nbytes"), sig,
                      _cast(signal, _I32, _semantic, op, "signal"), _cast(sig_op, _I32, _semantic, op, "sig_op"),
                      _cast(pe, _I32, _semantic, op, "pe")],
                 [d.type, s.type, _U32, _PI32, _I32, _I32, _I32], (), _semantic)


@dist_builtin
def putmem_signal(dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic=None):
    """putmem, then a signal op on PE `pe`: the data lands before the signal.

    Dtypes: `dest`, `source` as putmem; `sig_addr` a scalar int32 pointer into the symmetric
    heap; `signal` an int32; `sig_op` ACLSHMEM_SIGNAL_SET or ACLSHMEM_SIGNAL_ADD; `pe` int32.
    NPU: the put, aclshmem_quiet (everything the core issued before lands too), then the SET or
    ADD (docs/semantics.md §3).
    Symbol: aclshmem_<type>_putmem_signal.
    Simulator: the copy, the core's pending transfers and stores, then signal_op; never
    overtaken by the data.
    """
    return _putmem_signal("putmem_signal", dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic)


@dist_builtin
def putmem_signal_nbi(dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic=None):
    """putmem_nbi, then a signal op ordered after the data, both completing later.

    Dtypes: as putmem_signal.
    NPU: put_nbi, aclshmem_fence, then the signal (docs/semantics.md §3).
    Symbol: aclshmem_<type>_putmem_signal_nbi.
    Simulator: the copy and the signal are queued on the core in that order and performed at
    quiet/fence/barrier/kernel end; the signal slot is checked at once.
    """
    return _putmem_signal("putmem_signal_nbi", dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic)


@dist_builtin
def signal_op(sig_addr, signal, sig_op, pe, _semantic=None):
    """SET `signal` into, or ADD it to, the int32 signal at `sig_addr` on PE `pe`.

    Dtypes: `sig_addr` a scalar int32 pointer into the symmetric heap; `signal` int32;
    `sig_op` ACLSHMEM_SIGNAL_SET (0) or ACLSHMEM_SIGNAL_ADD (1); `pe` int32.
    NPU: SET = scalar store + dcci of the line; ADD = an atomic add that bypasses the cache; no
    pipe barrier before either (fence first after tl.store of the data) (docs/semantics.md §3).
    Symbol: aclshmemx_signal_op.
    Simulator: as dl.notify on an int32 signal.
    """
    sig = _sig_ptr(sig_addr, "signal_op")
    check_value_fits(sig, signal, "libshmem_device.signal_op: signal", _semantic)
    op = "signal_op"
    return _call(op, [sig, _cast(signal, _I32, _semantic, op, "signal"), _cast(sig_op, _I32, _semantic, op, "sig_op"),
                      _cast(pe, _I32, _semantic, op, "pe")], [_PI32, _I32, _I32, _I32], (), _semantic)


@dist_builtin
def signal_wait_until(sig_addr, cmp_, cmp_val, _semantic=None):
    """Wait until `cmp(*sig_addr, cmp_val)` holds; return the value that satisfied it.

    Dtypes: `sig_addr` a scalar int32 pointer into the symmetric heap; `cmp_` one of
    ACLSHMEM_CMP_EQ, NE, GT, GE, LT, LE (0..5); `cmp_val` int32; returns int32.
    NPU: dcci the line and read it until the comparison holds (docs/semantics.md §3).
    Symbol: aclshmem_signal_wait_until.
    Simulator: every round a scheduling point; a wait nothing can end is a DeadlockError.
    """
    sig = _sig_ptr(sig_addr, "signal_wait_until")
    check_value_fits(sig, cmp_val, "libshmem_device.signal_wait_until: cmp_val", _semantic)
    op = "signal_wait_until"
    return _call(op, [sig, _cast(cmp_, _I32, _semantic, op, "cmp"), _cast(cmp_val, _I32, _semantic, op, "cmp_val")],
                 [_PI32, _I32, _I32], _I32, _semantic)


@dist_builtin
def barrier_all(_semantic=None):
    """Barrier of every core of every PE.

    Dtypes: none.
    NPU: the device library's centralized pull barrier with the +1 rule; every core of the
    kernel must call it (docs/semantics.md §3).  Its core type is CUBE_AND_VECTOR.
    Symbol: aclshmem_barrier_all.
    Simulator: the same algorithm over the simulated counter and flags in each heap's reserved
    area, after the core's pending transfers and stores in flight complete (that the NPU
    completes them there is inferred, not verified: docs/device_model.md);
    `barrier_plus_one=False` turns the +1 rule off to show why it is needed.
    """
    return _call("barrier_all", [], [], (), _semantic)


@dist_builtin
def barrier_all_vec(_semantic=None):
    """barrier_all over the vector cores only.

    Dtypes: none.
    NPU: the pull barrier, vector cores only; core type VECTOR (docs/semantics.md §3, §6).
    Symbol: aclshmemx_barrier_all_vec.
    Simulator: as barrier_all (the simulator's program instances are the vector cores).
    """
    return _call("barrier_all_vec", [], [], (), _semantic)


@dist_builtin
def barrier(team, _semantic=None):
    """Barrier of the members of `team`; returns at once for ACLSHMEM_TEAM_INVALID (-1).

    Dtypes: `team` an int32 team index.
    NPU: the pull barrier over the team's members with that team's counter and flag
    (docs/semantics.md §3).
    Symbol: aclshmem_barrier.
    Simulator: sim/teams.py's team, its own counter and flag; a non-member or unknown team is a
    TritonDistError.
    """
    return _call("barrier", [_cast(team, _I32, _semantic, "barrier", "team")], [_I32], (), _semantic)


@dist_builtin
def barrier_vec(team, _semantic=None):
    """barrier(team) among the vector cores only.

    Dtypes: `team` an int32 team index.
    NPU: the pull barrier over the team, vector cores only.
    Symbol: aclshmemx_barrier_vec.
    Simulator: as barrier (the simulator's program instances are the vector cores).
    """
    return _call("barrier_vec", [_cast(team, _I32, _semantic, "barrier_vec", "team")], [_I32], (), _semantic)


@dist_builtin
def quiet(_semantic=None):
    """Complete every transfer and store this core issued, and clean its data cache.

    Dtypes: none.
    NPU: a pipe barrier (PipeBarrier<PIPE_ALL>) then dcci of the entire data cache; the same
    function as fence (docs/semantics.md §3).
    Symbol: aclshmem_quiet.
    Simulator: performs the core's queued _nbi transfers and lands its stores in flight, then
    writes back and drops its cached lines.
    """
    return _call("quiet", [], [], (), _semantic)


@dist_builtin
def fence(_semantic=None):
    """Order this core's earlier transfers and stores before its later ones (a signal after
    tl.store of the data needs it).

    Dtypes: none.
    NPU: the same function as quiet: pipe barrier + dcci of the entire cache
    (docs/semantics.md §3).
    Symbol: aclshmem_fence.
    Simulator: as quiet; the race detector names a missing fence between a store and the signal
    a peer waits on.
    """
    return _call("fence", [], [], (), _semantic)
