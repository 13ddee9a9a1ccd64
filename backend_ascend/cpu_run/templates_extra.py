"""Template-library functions templates.py does not have yet, found missing by the differential
run of --compare-backends sim,hivm (docs/ascend.md, "What it runs, and the compiler findings").
Consulted after templates.handler (runner.Native), in its style: numpy over the operands'
checked views (templates.Call), each citing AscendNPU-IR v1.2.0's bishengir/lib/Template.

- vshls_vs / vshrs_vs_<R>d_<T>: element-wise shift by a scalar (VecUtils.h:1621-1629 (1-D),
  1778- (2-D): DECLARE_ELTWISE_VS(vshls, VectorOpTy::VSHL, ...), (vshrs, VectorOpTy::VSHR, ...),
  for int16/uint16/int32/uint32).  The right shift of a signed type is taken as arithmetic, as
  arith.shrsi (what Triton's >> on a signed int lowers to) defines it; the vector unit's VSHR on
  signed types is inferred to match, not verified.

- sync_block_lock / sync_block_unlock / free_lock_var (and their _with_subblock forms): the
  block-ordered ticket lock the compiler puts around atomics (Synchronization/SyncBlockLock/
  SyncBlockLock.cpp:20-140): lock waits until the int64 at lock_var equals the block's index
  (with_subblock: block * sub-block count + sub-block), unlock stores index + 1, free_lock_var
  takes and releases the lock unless lock_var is already past the block.  The wait polls with
  the GIL released; a block that waits LOCK_WAIT_S (TRITON_DIST_HIVM_FLAG_TIMEOUT) is reported.
- reduce_<max|min>_with_index_<left|right>_<r|ar|ra>_<T>(src, dst_value, dst_index, tmp[, init])
  (Vector/Reduction/ReductionUtils.h:900-990, ReduceWithIndexOpTy LEFT/RIGHT at 39-40): the
  extreme value and its int32 index along the reduced axis (ar: the last, ra: the first, r: the
  only one); LEFT takes the first index among equal values, RIGHT the last (inferred from the names).
- cumsum_ / cumprod_<r|ra|ara>[_reverse]_<T>(src, dst) (Vector/Cumulative/CumsumUtils.h:31-48,
  CumprodUtils.h:25-48): the running sum/product along the first axis of r and ra and the
  middle one of ara, from the end with _reverse.
- sort_<D>d_<T>(src, dst, tmp, descending) and sort_with_index_<D>d_<T>(src, dst, index, tmp,
  descending) (Vector/Sort/SortUtils.h:45-66): along the last axis; the indices of equal values in
  their first order (a stable sort: inferred).
- deinterleave_channel_<k>_from_2_channels_<D>d_<T>(src, dst) (Vector/Deinterleave/
  DeinterleaveUtils.h:23-50): every second element of the last axis, from element k.
- flip_<D>d_<T>(src, dst) (Vector/Gather/GatherUtils.h:23-30, Flip1D.cpp:21): the last axis
  reversed.
- broadcast_<first|middle|last>_axis_<align|unalign|unknown_align>_<D>d_<T>(src, dst[, tmp])
  (Vector/Broadcast/BrcUtils.h:300-380): src has extent 1 on the broadcast axis, dst the full
  extent; the values repeated along it (the alignment variants differ in how, not in what).
- mma_tile_<A>_to_<C>_tb: mma_tile with B given transposed (the L1 buffer holds B^T, N x K, in the
  NZ layout templates.py reads; its parameters as mma_tile's).  Inferred from the name and checked
  only against torch on whole kernels (the corpus's block-pointer attention, test_hivm_findings).

"""
from __future__ import annotations

import ctypes
import os
import re
import time

import numpy as np

from . import memory as M, templates as T

LOCK_WAIT_S = float(os.environ.get("TRITON_DIST_HIVM_FLAG_TIMEOUT", "60"))
_LOCKS = ("sync_block_lock", "sync_block_unlock", "free_lock_var")

_SHIFTS = {"shls": np.left_shift, "shrs": np.right_shift}     # numpy's >> is arithmetic on signed types


def _lock_word(desc, what):
    v = M.view(desc, 1, 8)
    M.check_gm(M.View(v.aligned, v.offset, (1,), (1,), 8, v.allocated), what, "read")
    return ctypes.c_int64.from_address(v.aligned + v.offset * 8)


def _ticket(s, subblock):
    return s.block * s.sub_blocks + s.sub_block if subblock else s.block


def _acquire(word, me, s, name):
    deadline = time.monotonic() + LOCK_WAIT_S
    while word.value != me:
        if time.monotonic() > deadline:
            raise M.DeviceFault(
                f"kernel {s.kernel}, block {s.block}: {name} waits for the sync-block lock to reach {me} (it holds "
                f"{word.value}) for {LOCK_WAIT_S:g} s: the blocks before it never released it (the compiler's "
                f"block-ordered lock around atomics: SyncBlockLock.cpp); TRITON_DIST_HIVM_FLAG_TIMEOUT sets the wait")
        time.sleep(0.0002)     # releases the GIL for the block that holds the lock


def _lock_template(name):
    kind, subblock = name.replace("_with_subblock", ""), name.endswith("_with_subblock")

    def run(lock_var):
        s = M.state()
        word = _lock_word(lock_var, name)
        me = _ticket(s, subblock)
        if kind == "sync_block_lock":
            _acquire(word, me, s, name)
        elif kind == "sync_block_unlock":
            word.value = me + 1
        elif word.value <= me:       # free_lock_var: this block has not unlocked yet
            _acquire(word, me, s, name)
            word.value = me + 1
    return run


def _with_index(name, op, side, axes, dt):
    rank = len(axes)
    c = T.Call(name, rank, dt)
    axis = 0 if axes in ("r", "ra") else rank - 1

    def reduce(src, dst_value, dst_index, *_rest):
        x = c.ub(src)
        if x.shape[axis] == 0:
            return
        y = np.flip(x, axis) if side == "right" else x
        pick = np.argmax if op == "max" else np.argmin
        i = np.expand_dims(pick(y, axis=axis), axis)
        if side == "right":
            i = x.shape[axis] - 1 - i
        c.ub(dst_value)[...] = np.take_along_axis(x, i, axis)
        c.ub(dst_index, np.int32)[...] = i.astype(np.int32)
    return reduce


def _cumulative(name, op, axes, reverse, dt):
    rank = len(axes)
    c = T.Call(name, rank, dt)
    axis = 1 if axes == "ara" else 0
    f = np.cumsum if op == "sum" else np.cumprod

    def cum(src, dst):
        x = c.ub(src)
        y = f(np.flip(x, axis) if reverse else x, axis=axis, dtype=x.dtype)
        c.ub(dst)[...] = np.flip(y, axis) if reverse else y
    return cum


def _sort(name, rank, dt, with_index):
    c = T.Call(name, rank, dt)

    def sort(src, dst, *rest):
        index, descending = (rest[0] if with_index else None), bool(int(rest[-1]))
        x = c.ub(src)
        key = x.astype(np.float64)
        order = np.argsort(-key if descending else key, axis=-1, kind="stable")
        c.ub(dst)[...] = np.take_along_axis(x, order, -1)
        if with_index:
            c.ub(index, np.int32)[...] = order.astype(np.int32)
    return sort


def _last_axis(name, rank, dt, pick):
    c = T.Call(name, rank, dt)

    def run(src, dst):
        c.ub(dst)[...] = pick(c.ub(src))
    return run


def _mma_tb(name, src_t, dst_t):
    what_a, what_b, what_c = f"{name} A", f"{name} B", f"{name} C"

    def run(a, b, init, m, k, n, dst, *_events):
        a2 = T._math(T.nz_to_2d(T._nz_view(a, src_t, what_a, "cbuf")), src_t)
        bt = T._math(T.nz_to_2d(T._nz_view(b, src_t, what_b, "cbuf")), src_t)       # N x K
        d = T._nz_view(dst, dst_t, what_c, "cc")
        prod = a2[:m, :k].astype(np.float64) @ bt[:n, :k].astype(np.float64).T
        c2 = T.nz_to_2d(d)
        c2[:m, :n] = prod if init else c2[:m, :n] + prod
        T.write_nz(d, c2.astype(T.storage(dst_t), copy=False))
    return run


def handler(name: str, params: list):
    """The Python implementation of template function `name`, or None."""
    m = re.fullmatch(r"broadcast_(first|middle|last)_axis_(?:align|unalign|unknown_align)_(\d)d_" + T._T, name)
    if m:
        c = T.Call(name, int(m[2]), T.DTYPES[m[3]])

        def broadcast(src, dst, *_tmp):
            d = c.ub(dst)
            d[...] = np.broadcast_to(c.ub(src), d.shape)
        return broadcast
    m = re.fullmatch(r"mma_tile_" + T._T + "_to_" + T._T + "_tb", name)
    if m:
        return _mma_tb(name, T.DTYPES[m[1]], T.DTYPES[m[2]])
    m = re.fullmatch(r"sort(_with_index)?_(\d)d_" + T._T, name)
    if m:
        return _sort(name, int(m[2]), T.DTYPES[m[3]], bool(m[1]))
    m = re.fullmatch(r"deinterleave_channel_([01])_from_2_channels_(\d)d_" + T._T, name)
    if m:
        k = int(m[1])
        return _last_axis(name, int(m[2]), T.DTYPES[m[3]], lambda x: x[..., k::2])
    m = re.fullmatch(r"flip_(\d)d_" + T._T, name)
    if m:
        return _last_axis(name, int(m[1]), T.DTYPES[m[2]], lambda x: x[..., ::-1])
    m = re.fullmatch(r"reduce_(max|min)_with_index_(left|right)_(r|ar|ra)_" + T._T, name)
    if m:
        return _with_index(name, m[1], m[2], m[3], T.DTYPES[m[4]])
    m = re.fullmatch(r"cum(sum|prod)_(r|ra|ara)(_reverse)?_" + T._T, name)
    if m:
        return _cumulative(name, m[1], m[2], bool(m[3]), T.DTYPES[m[4]])
    if name.replace("_with_subblock", "") in _LOCKS:
        return _lock_template(name)
    m = re.fullmatch(r"v(shls|shrs)_vs_(\d)d_" + T._T, name)
    if m:
        f, rank, dt = _SHIFTS[m[1]], int(m[2]), T.DTYPES[m[3]]
        c = T.Call(name, rank, dt)
        bits = np.dtype(dt).itemsize * 8

        def shift(a, s, dst, _tmp=None):
            n = int(s)
            x = c.read(a)
            if n >= bits:       # a shift by the width or more: what arith.shli/shrsi leave undefined
                out = np.zeros_like(x) if m[1] == "shls" or x.dtype.kind == "u" else np.where(x < 0, -1, 0)
            else:
                out = f(x, np.array(n, dtype=x.dtype))
            c.write(dst, out.astype(x.dtype))
        return shift
    return None

