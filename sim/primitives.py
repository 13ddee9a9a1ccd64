"""The aclshmem device library, as the simulator runs it: one function per symbol family.

Why over 400 lines: one function per symbol family of the device library, each a few
lines, kept in one table-like file so it reads against triton_dist/symbols.py row by row.

Keys are the `family` column of triton_dist/symbols.py (the aclshmem symbol without its
type), so what the simulator runs is, name for name, what the NPU would link.  Each
function follows docs/semantics.md §3: SET = scalar store + dcci of the line; ADD = hardware
atomic that bypasses the cache; waits dcci the slot every round; quiet/fence clean the
whole cache; barrier_all is the pull barrier with the +1 rule.
"""
from __future__ import annotations

import numpy as np

from triton_dist import symbols as S
from triton_dist.backend import Ptr  # noqa: F401 - the pointer type of every primitive, re-exported
from triton_dist.backend import current_call
from triton_dist.errors import TritonDistError

from . import access, context, core_split, dma, teams
from . import board as B

PRIMITIVES: dict = {}


NP_DTYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
             "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
             "fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "bf16": np.uint16}


def primitive(family):
    def register(fn):
        PRIMITIVES[family] = fn
        return fn
    return register


def call(family: str, *args):
    fn = PRIMITIVES.get(family)
    if fn is None:
        raise TritonDistError(
            f"{context.kernel_line(3)}: the simulator has no implementation of aclshmem symbol "
            f"family {family!r}; known: {', '.join(sorted(PRIMITIVES))}")
    c = context.core()
    if c is not None and c.split is not None and not core_split.library_owned(c, family):
        # the cube instance of a split block (sim/core_split.py): the vector cores run the library
        return args[0] if family == "aclshmem_consume_token" else core_split.UNOWNED_RESULT.get(family)
    return fn(context.runtime(), *args)


def _core_or_error(what):
    c = context.core()
    if c is None:
        raise TritonDistError(f"{current_call(what)} is a device primitive: call it inside a @triton.jit kernel")
    return c


def _name(default: str) -> str:
    """The call the kernel wrote (dl.notify, libshmem_device.putmem_signal), for messages: a
    primitive serves several calls (triton_dist.backend.current_call)."""
    return current_call(default)


# ---- scalar access as the NPU does it: through the core's data cache ------------------------

def _load(rt, addr, np_dtype):
    return access.library_load(rt, addr, np_dtype)      # a scheduling point, through the cache


def _store(rt, addr, value, np_dtype):
    access.library_store(rt, addr, value, np_dtype)     # through the cache; callers dcci


def _dcci(rt, addr):
    # a separate instruction on the NPU: another core may run between a store and its dcci
    rt.sched.point("dcci", addr)
    rt.memory.dcci_line(addr)


def _trace(rt, name, **args):
    if rt.tracer:
        c = context.core()
        rt.tracer.instant(name, c.core if c is not None else -1, **args)


def _set_remote(rt, addr, value, np_dtype):
    """Signal SET: a plain scalar store, then dcci of that line. Not atomic."""
    if rt.observers is not None:
        rt.observers.signal(addr, np.dtype(np_dtype).itemsize, False, value)
    _store(rt, addr, value, np_dtype)
    _dcci(rt, addr)


def _add_remote(rt, addr, value, np_dtype):
    """Signal ADD: atomic add by a UB->GM copy in atomic-add mode; bypasses the cache."""
    rt.sched.point("signal add", addr, value)
    dma.depend(addr, addr + np.dtype(np_dtype).itemsize)
    if rt.observers is not None:
        rt.observers.signal(addr, np.dtype(np_dtype).itemsize, True, value)
    access.library_add(rt, addr, value, np_dtype)


def _poll(rt, addr, np_dtype):
    """One round of a device wait: dcci the slot, then read it."""
    def read():
        _dcci(rt, addr)
        return _load(rt, addr, np_dtype)
    return read


def _signal_dtype(ptr: Ptr, what: str):
    if ptr.dtype not in ("int32", "int64", "uint64"):
        raise TritonDistError(f"{context.kernel_line(4)}: {_name(what)}: signal dtype {ptr.dtype} is not allowed "
                              f"on Ascend; use int32 (set or add) or int64/uint64 (set only)")
    return NP_DTYPES[ptr.dtype]


# ---- queries ---------------------------------------------------------------------------------

@primitive("aclshmem_my_pe")
def my_pe(rt):
    return rt.rank


@primitive("aclshmem_n_pes")
def n_pes(rt):
    return rt.world_size


# teams (sim/teams.py): -1 for an invalid or unknown team, as the device library answers
@primitive("aclshmem_team_my_pe")
def team_my_pe(rt, team):
    return teams.my_pe(rt, team)


@primitive("aclshmem_team_n_pes")
def team_n_pes(rt, team):
    return teams.n_pes(rt, team)


@primitive("aclshmem_team_translate_pe")
def team_translate_pe(rt, src_team, pe, dest_team):
    return teams.translate_pe(rt, src_team, pe, dest_team)


@primitive("aclshmem_ptr")
def symm_ptr(rt, ptr: Ptr, pe: int) -> Ptr:
    """remote = heap_base_table[pe] + (ptr - my_heap_base)."""
    return Ptr(rt.translate(ptr.addr, pe, "dl.symm_at"), ptr.dtype)


# ---- signals ---------------------------------------------------------------------------------

@primitive("aclshmemx_signal_op")
def signal_op(rt, sig: Ptr, signal: int, sig_op: int, pe: int):
    what = _name("libshmem_device.signal_op")
    _core_or_error(what)
    if sig.dtype != "int32":
        raise TritonDistError(f"{context.kernel_line(3)}: {what} takes an int32 signal, got {sig.dtype}")
    remote = rt.translate(sig.addr, pe, what)
    rt.space.check(remote, remote + 4, f"{what} signal")
    _trace(rt, f"signal {'set' if sig_op == S.ACLSHMEM_SIGNAL_SET else 'add'} {signal} -> rank {pe}",
           target=rt.space.describe(remote))
    if sig_op == S.ACLSHMEM_SIGNAL_SET:
        _set_remote(rt, remote, signal, np.int32)
    elif sig_op == S.ACLSHMEM_SIGNAL_ADD:
        _add_remote(rt, remote, signal, np.int32)
    else:
        raise TritonDistError(f"{context.kernel_line(3)}: {what}: sig_op must be ACLSHMEM_SIGNAL_SET (0) or "
                              f"ACLSHMEM_SIGNAL_ADD (1), got {sig_op}")


@primitive("aclshmem_p")
def p(rt, dest: Ptr, value: int, pe: int):
    """int_p / int64_p / uint64_p: a SET (store + dcci) on the peer."""
    what = _name("libshmem_device.int_p")
    _core_or_error(what)
    np_dtype = NP_DTYPES[dest.dtype]
    remote = rt.translate(dest.addr, pe, what)
    rt.space.check(remote, remote + np.dtype(np_dtype).itemsize, f"{what} signal")
    _trace(rt, f"signal set {value} -> rank {pe}", target=rt.space.describe(remote))
    _set_remote(rt, remote, value, np_dtype)


@primitive("aclshmem_wait")
def wait(rt, slots: Ptr, n: int, value: int) -> int:
    """For each of n slots 64 bytes apart: dcci + read until == value. Never writes the slot."""
    what = _name("dl.wait")
    _core_or_error(what)
    np_dtype = _signal_dtype(slots, what)
    rt.heap_offset(slots.addr, what)
    if n < 0:
        raise TritonDistError(f"{context.kernel_line(3)}: {what}: numBarriers must be >= 0, got {n}")
    itemsize = np.dtype(np_dtype).itemsize
    rt.space.check(slots.addr, slots.addr + S.SIGNAL_SLOT_BYTES * max(n - 1, 0) + itemsize, what)
    value = np.asarray(value).astype(np_dtype).item()
    for i in range(n):
        addr = slots.addr + S.SIGNAL_SLOT_BYTES * i
        rt.wait_until("wait", addr, value, _poll(rt, addr, np_dtype), lambda v: v == value,
                      cond=B.COND_EQ, nbytes=itemsize)
    if rt.observers is not None:
        return rt.observers.observed([slots.addr + S.SIGNAL_SLOT_BYTES * i for i in range(n)], [value] * n,
                                     itemsize, token=True) or 0
    return 0


@primitive("aclshmem_consume_token")
def consume_token(rt, value, token):
    if rt.observers is not None:
        rt.observers.consume(value, token)
    return value


# the same comparisons, as the status board names them (the watchdog re-reads the slot)
_BOARD_CMP = {S.ACLSHMEM_CMP_EQ: B.COND_EQ, S.ACLSHMEM_CMP_NE: B.COND_NE, S.ACLSHMEM_CMP_GT: B.COND_GT,
              S.ACLSHMEM_CMP_GE: B.COND_GE, S.ACLSHMEM_CMP_LT: B.COND_LT, S.ACLSHMEM_CMP_LE: B.COND_LE}

_CMP = {
    S.ACLSHMEM_CMP_EQ: lambda a, b: a == b, S.ACLSHMEM_CMP_NE: lambda a, b: a != b,
    S.ACLSHMEM_CMP_GT: lambda a, b: a > b, S.ACLSHMEM_CMP_GE: lambda a, b: a >= b,
    S.ACLSHMEM_CMP_LT: lambda a, b: a < b, S.ACLSHMEM_CMP_LE: lambda a, b: a <= b,
}


@primitive("aclshmem_signal_wait_until")
def signal_wait_until(rt, sig: Ptr, cmp: int, val: int) -> int:
    what = _name("libshmem_device.signal_wait_until")
    _core_or_error(what)
    if sig.dtype != "int32":
        raise TritonDistError(f"{context.kernel_line(3)}: {what} takes an int32 signal, got {sig.dtype}")
    if cmp not in _CMP:
        raise TritonDistError(f"{context.kernel_line(3)}: {what}: cmp must be one of "
                              f"ACLSHMEM_CMP_EQ..LE (0..5), got {cmp}")
    rt.heap_offset(sig.addr, what)
    rt.space.check(sig.addr, sig.addr + 4, what)
    test = _CMP[cmp]
    v = rt.wait_until(f"signal_wait_until(sig {S.CMP_NAMES[cmp]} {val})", sig.addr, val,
                      _poll(rt, sig.addr, np.int32), lambda v: test(v, val), cond=_BOARD_CMP[cmp], nbytes=4)
    if rt.observers is not None:
        rt.observers.observed([sig.addr], [v], 4)
    return v


# ---- RMA -------------------------------------------------------------------------------------

def _rma(rt, what, dest: Ptr, src: Ptr, nbytes: int, pe: int, put: bool):
    what = _name(f"libshmem_device.{what}")
    if nbytes < 0:
        raise TritonDistError(f"{context.kernel_line(4)}: {what}: nbytes must be >= 0, got {nbytes}")
    if put:
        dst_addr, src_addr = rt.translate(dest.addr, pe, what), src.addr
    else:
        dst_addr, src_addr = dest.addr, rt.translate(src.addr, pe, what)
    if nbytes:
        rt.space.check(dst_addr, dst_addr + nbytes, f"{what} destination ({nbytes} bytes)")
        rt.space.check(src_addr, src_addr + nbytes, f"{what} source ({nbytes} bytes)")
    return dst_addr, src_addr


def _dma(rt, dst, src, nbytes):
    access.library_copy(rt, dst, src, nbytes)     # a scheduling point; the core's stores to either land first


def _transfer(rt, what, dest: Ptr, src: Ptr, nbytes: int, pe: int, put: bool, nbi: bool):
    """putmem/getmem and their _nbi forms: a blocking one copies now, a non-blocking one
    is queued on the core and completes at quiet/fence/barrier/kernel end."""
    c = _core_or_error(what)
    d, s = _rma(rt, what, dest, src, nbytes, pe, put)
    if rt.observers is not None:
        rt.observers.rma(d, s, nbytes, put=put, nbi=nbi)
    if nbi:
        c.pending.append(lambda: _dma(rt, d, s, nbytes))
    else:
        _dma(rt, d, s, nbytes)


@primitive("aclshmem_putmem")
def putmem(rt, dest: Ptr, src: Ptr, nbytes: int, pe: int):
    _transfer(rt, "putmem", dest, src, nbytes, pe, put=True, nbi=False)


@primitive("aclshmem_getmem")
def getmem(rt, dest: Ptr, src: Ptr, nbytes: int, pe: int):
    _transfer(rt, "getmem", dest, src, nbytes, pe, put=False, nbi=False)


@primitive("aclshmem_putmem_nbi")
def putmem_nbi(rt, dest: Ptr, src: Ptr, nbytes: int, pe: int):
    _transfer(rt, "putmem_nbi", dest, src, nbytes, pe, put=True, nbi=True)


@primitive("aclshmem_getmem_nbi")
def getmem_nbi(rt, dest: Ptr, src: Ptr, nbytes: int, pe: int):
    _transfer(rt, "getmem_nbi", dest, src, nbytes, pe, put=False, nbi=True)


def _signal_after(rt, sig: Ptr, signal, sig_op, pe):
    return lambda: signal_op(rt, sig, signal, sig_op, pe)


@primitive("aclshmem_putmem_signal")
def putmem_signal(rt, dest: Ptr, src: Ptr, nbytes: int, sig: Ptr, signal: int, sig_op: int, pe: int):
    c = _core_or_error("libshmem_device.putmem_signal")
    d, s = _rma(rt, "putmem_signal", dest, src, nbytes, pe, True)
    if rt.observers is not None:
        rt.observers.rma(d, s, nbytes, put=True, nbi=False,
                         signal_addr=rt.translate(sig.addr, pe, _name("libshmem_device.putmem_signal")),
                         signal_size=np.dtype(NP_DTYPES[sig.dtype]).itemsize)
    _dma(rt, d, s, nbytes)
    complete_pending(c)     # its quiet (SH shmem_device_so.hpp L54-70): everything issued before lands too
    if rt.observers is not None:
        rt.observers.quiet()     # that quiet is between the put and the signal: the data is performed first
    signal_op(rt, sig, signal, sig_op, pe)    # ordered after the data


@primitive("aclshmem_putmem_signal_nbi")
def putmem_signal_nbi(rt, dest: Ptr, src: Ptr, nbytes: int, sig: Ptr, signal: int, sig_op: int, pe: int):
    what = _name("libshmem_device.putmem_signal_nbi")
    c = _core_or_error(what)
    d, s = _rma(rt, "putmem_signal_nbi", dest, src, nbytes, pe, True)
    remote_sig = rt.translate(sig.addr, pe, what)
    rt.space.check(remote_sig, remote_sig + 4, f"{what} signal")   # now, not at quiet
    if rt.observers is not None:
        rt.observers.rma(d, s, nbytes, put=True, nbi=True, signal_addr=remote_sig,
                         signal_size=np.dtype(NP_DTYPES[sig.dtype]).itemsize)
    c.pending.append(lambda: _dma(rt, d, s, nbytes))
    c.pending.append(_signal_after(rt, sig, signal, sig_op, pe))


def complete_pending(c):
    """Complete this core's non-blocking transfers and stores in flight (sim/dma.py), in
    issue order.  Waiting for stores in flight is a scheduling point: other cores run while
    the pipes drain (at a fence, a barrier, the end of the core's program)."""
    if any(isinstance(e, dma.DmaStore) for e in c.pending):
        context.runtime().sched.point("dma drain")
    while c.pending:
        c.pending.pop(0)()


def _quiet(rt, what):
    """Pipe barrier (all issued transfers complete) + dcci of the entire cache: what the device
    library does for both quiet and fence (docs/semantics.md §3)."""
    c = _core_or_error(what)
    complete_pending(c)
    if rt.observers is not None:
        rt.observers.quiet()
    _trace(rt, f"{what} (dcci entire cache)")
    rt.memory.dcci_all()


@primitive("aclshmem_quiet")
def quiet(rt):
    _quiet(rt, "quiet")


@primitive("aclshmem_fence")
def fence(rt):
    _quiet(rt, "fence")


# ---- barrier -----------------------------------------------------------------------------------

def _barrier(rt, what, team=S.ACLSHMEM_TEAM_WORLD):
    """The centralized pull barrier of the device library (docs/semantics.md §3), over the members of
    `team`, with that team's counter and flags (sim/teams.py)."""
    c = _core_or_error(what)
    t = teams.get(rt, team)
    if t is None:
        if int(team) == teams.INVALID:
            return                      # ACLSHMEM_TEAM_INVALID: the library returns at once
        raise TritonDistError(f"{context.kernel_line(4)}: {_name(what)}: team {team} does not exist on rank {rt.rank} "
                              f"(make it with team_split_strided on the host; non-members get -1)")
    me = t.index_of(rt.rank)
    if me == teams.INVALID:
        raise TritonDistError(f"{context.kernel_line(4)}: {_name(what)}: rank {rt.rank} is not a member of team {team}")
    counter_off, flag_off = teams.sync_offsets(team)
    complete_pending(c)
    if rt.observers is not None:
        rt.observers.quiet()
    heaps = rt.heaps
    my_base = heaps.bases[rt.rank]
    counter = my_base + counter_off
    # 1. count = load(sync_counter) + 1
    _dcci(rt, counter)
    count = _load(rt, counter, np.int32) + 1
    # 2. barrier of the local cores (the vector ones: in split blocks not the cube instances)
    core, ncores, group = core_split.library_cores(c)
    rt.core_barrier(c, group, ncores)
    # 3. vector cores share the PEs
    k = min(8, t.size, ncores)
    if core < k:
        for i in range(core, t.size, k):
            pe = t.pe(i)
            flag = heaps.bases[pe] + flag_off
            if pe == rt.rank:
                _set_remote(rt, flag, count, np.int32)
            else:
                plus_one = rt.barrier_plus_one
                v = rt.wait_until(f"{what} (flag of rank {pe})", flag, count, _poll(rt, flag, np.int32),
                                  (lambda v: v == count or v == count + 1) if plus_one else (lambda v: v == count),
                                  target=f"barrier flag of rank {pe}",
                                  cond=B.COND_EQ_OR_NEXT if plus_one else B.COND_EQ, nbytes=4)
                if rt.observers is not None:
                    rt.observers.observed([flag], [v], 4)
    # 4. store(sync_counter, count); barrier of the local cores
    if core == 0:
        _set_remote(rt, counter, count, np.int32)
    rt.core_barrier(c, group, ncores)


@primitive("aclshmem_barrier_all")
def barrier_all(rt):
    _barrier(rt, "barrier_all")


def _traced_barrier(inner):
    def run(rt, what, *team):
        if not rt.tracer:
            return inner(rt, what, *team)
        core = context.core().core if context.core() is not None else -1
        rt.tracer.begin(what, core)
        try:
            return inner(rt, what, *team)
        finally:
            rt.tracer.end(what, core)
    return run


_barrier = _traced_barrier(_barrier)


@primitive("aclshmemx_barrier_all_vec")
def barrier_all_vec(rt):
    _barrier(rt, "barrier_all_vec")


@primitive("aclshmem_barrier")
def barrier(rt, team):
    _barrier(rt, "barrier", team)


@primitive("aclshmemx_barrier_vec")
def barrier_vec(rt, team):
    # vector cores only; the simulator's instances are the vector cores (sim/compat/cann.py)
    _barrier(rt, "barrier_vec", team)
