"""Layout templates of AscendNPU-IR's library (tag v1.2.0 = 8796a8ac) a compiled module calls, in numpy.

`_mlir_ciface_transpose_2d_with_last_axis_<T>(src*, dst*)` (tl.trans / tl.permute of a 2-D
tile; Template/include/Vector/Transpose/TransposeUtils.h:86-90, defined by
lib/Vector/Transpose/Transpose2D.cpp:573-581 as `vnchwconv_2d<T>`, lines 298-395):

- an unaligned call (either start address not 32-byte aligned, either row stride not a whole
  number of 32-byte blocks, or for 4-byte types neither (dst, src) row-stride pair a multiple of
  (8, 16) or (16, 8): `is_unaligned_transpose_2d`, lines 33-56) runs the scalar loop
  `dst[j * dst_stride0 + i] = src[i * src_stride0 + j]` over the m x n sizes (lines 4-30);
- an aligned one runs the vnchwconv instruction over the sizes rounded up to whole 32-byte
  blocks (CEIL_FACTOR(size, 32 / sizeof(T)), lines 342-365), and for 4-byte types, when neither
  16x8 mode fits, src's columns and dst's rows further up to 16 (TransposeUtils.h:38-51): it
  reads and writes those padding rows and columns too, so they must lie in UB;
- a 1x1 call copies one element (lines 318-328).

`_mlir_ciface_transpose_3d_with_last_axis_<T>(src*, dst*)` (permute (2, 1, 0)) is vnchwconv_2d over
(a, c) for each index of the middle axis (Transpose3D.cpp:175-200); `transpose_3d_without_last_axis`
(permute (1, 0, 2), Transpose3D.cpp:107-155) is the scalar loop when unaligned, else a UB-to-UB
copy of every row rounded up to whole blocks.

`_mlir_ciface_reduce_xori_<axes>_<T>(src*, dst*, tmp*, T init)`: the xor reductions stock Triton's
tl.flip compiles to (it swaps halves by xor-summing over 2x2x... reshapes; triton/language/
standard.py flip).  Axes as ReductionUtils.h:1026-1072 names them for a 3-D src: `ra0a1` reduces
dim 0, `ara` dim 1, `aar` dim 2, the reduced dim kept as 1 in dst; `r` (1-D), `ar`, `ra` (2-D)
as templates.py's other reductions.  dst = init ^ (xor of the reduced elements); declared for
int8..int64 (ReductionUtils.h:1653-1656, 1699-1702, 1745-1748).  The operands are vector ones: the
v1.2.0 reductions assert 32-byte alignment (e.g. Reduction/ReduceAAR.cpp:32-34) and take no
scalar path for it here (inferred).

The 8-byte transpose forms (`..._with_tmp`, three operands) are not implemented here: the handler returns
None and the launch names them.  The element values are moved as bytes (a transpose does no
arithmetic), so one implementation serves every element type of a width.
"""
from __future__ import annotations

import re

import numpy as np

from . import memory as M

BLOCK_BYTES = 32          # INTR_BYTES_PER_BLOCK (Vector/VecUtils.h:29) = UB_ALIGN_BYTES (Utils.h:64)
ROWS_PER_REPEAT = 16      # TRANSPOSE_INSTR_ROW_OR_COL_NUM_PER_REPEAT (TransposeUtils.h:25)
WIDTHS = {"uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "half": 2, "bfloat16_t": 2,
          "uint32_t": 4, "int32_t": 4, "float": 4}
_BYTES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _ceil(x: int, f: int) -> int:
    return (x + f - 1) // f * f


def _unaligned(src: M.View, dst: M.View, width: int) -> bool:
    """is_unaligned_transpose_2d (Transpose2D.cpp:33-56)."""
    per_block = BLOCK_BYTES // width
    start = lambda v: M.space_offset(v.aligned + v.offset * width)          # noqa: E731
    s0, d0 = src.strides[0], dst.strides[0]
    if start(src) % BLOCK_BYTES or start(dst) % BLOCK_BYTES or s0 % per_block or d0 % per_block:
        return True
    if width == 4:
        return not ((d0 % 8 == 0 and s0 % 16 == 0) or (d0 % 16 == 0 and s0 % 8 == 0))
    return False


def _region(v: M.View, sizes, strides) -> M.View:
    return M.View(v.aligned, v.offset, tuple(sizes), tuple(strides), v.itemsize, v.allocated)


def _transpose_2d(name: str, width: int):
    def run(src_ptr, dst_ptr):
        vnchwconv_2d(name, width, M.view(src_ptr, 2, width), M.view(dst_ptr, 2, width))
    return run


def vnchwconv_2d(name: str, width: int, src: M.View, dst: M.View) -> None:
    """Transpose2D.cpp:298-395 on two 2-D views."""
    dt = _BYTES[width]
    if src.empty:                                            # is_no_op (VecUtils.h:147)
        return
    m, n = src.sizes
    if _unaligned(src, dst, width):
        # the scalar loop: inner stride 1 whatever the descriptor says (Transpose2D.cpp:22-26)
        s = _region(src, (m, n), (src.strides[0], 1))
        d = _region(dst, (n, m), (dst.strides[0], 1))
        M.check_ub(s, f"{name} source", vector=False)
        M.check_ub(d, f"{name} destination", vector=False)
        d.array(dt)[...] = s.array(dt).T.copy()
        return
    if (m, n) == (1, 1):
        M.check_ub(src, f"{name} source", vector=False)
        M.check_ub(dst, f"{name} destination", vector=False)
        dst.array(dt)[...] = src.array(dt)
        return
    per_block = BLOCK_BYTES // width
    sm, sn = _ceil(m, per_block), _ceil(n, per_block)        # Transpose2D.cpp:342-345
    dm, dn = _ceil(dst.sizes[0], per_block), _ceil(dst.sizes[1], per_block)
    s0 = _ceil(n, per_block) if m == 1 else src.strides[0]   # lines 346-355
    d0 = _ceil(dst.sizes[1], per_block) if dst.sizes[0] == 1 else dst.strides[0]
    if width == 4:                                           # gen_transpose_mode (TransposeUtils.h:38-51)
        mode1 = sm % ROWS_PER_REPEAT == 0 and sn % per_block == 0
        mode2 = sm % per_block == 0 and sn % ROWS_PER_REPEAT == 0
        if not mode1 and not mode2:
            sn, dm = _ceil(sn, ROWS_PER_REPEAT), _ceil(dm, ROWS_PER_REPEAT)
    s = _region(src, (sm, sn), (s0, 1))
    d = _region(dst, (dm, dn), (d0, 1))
    # the vnchwconv instruction's operands: vector accesses, 32-byte aligned by the check above
    M.check_ub(s, f"{name} source (rounded up to whole blocks)")
    M.check_ub(d, f"{name} destination (rounded up to whole blocks)")
    rows, cols = min(sn, dm), min(sm, dn)
    d.array(dt)[:rows, :cols] = s.array(dt)[:cols, :rows].T.copy()


def _transpose_3d_last(name: str, width: int):
    """transpose_3d_with_last_axis: src (a, b, c) -> dst (c, b, a), one vnchwconv_2d per index of
    the middle axis (Transpose3D.cpp:175-200)."""
    def run(src_ptr, dst_ptr):
        src, dst = M.view(src_ptr, 3, width), M.view(dst_ptr, 3, width)
        if src.empty:
            return
        for i in range(src.sizes[1]):
            s2 = M.View(src.aligned, src.offset + i * src.strides[1], (src.sizes[0], src.sizes[2]),
                        (src.strides[0], src.strides[2]), width, src.allocated)
            d2 = M.View(dst.aligned, dst.offset + i * dst.strides[1], (dst.sizes[0], dst.sizes[2]),
                        (dst.strides[0], dst.strides[2]), width, dst.allocated)
            vnchwconv_2d(name, width, s2, d2)
    return run


def _transpose_3d_nlast(name: str, width: int):
    """transpose_3d_without_last_axis: src (a, b, c) -> dst (b, a, c) (Transpose3D.cpp:107-155).
    Unaligned (a start address, a stride of the first two axes not whole blocks, or the last axis
    not contiguous: lines 58-75): the scalar loop over a x b x c (lines 24-54).  Aligned: a UB-to-UB
    copy of each row rounded up to whole 32-byte blocks (size2_align, lenBurst), so the padding
    past c is copied too."""
    dt = _BYTES[width]
    per_block = BLOCK_BYTES // width

    def run(src_ptr, dst_ptr):
        src, dst = M.view(src_ptr, 3, width), M.view(dst_ptr, 3, width)
        if src.empty:
            return
        a, b, c = src.sizes
        start = lambda v: M.space_offset(v.aligned + v.offset * width)          # noqa: E731
        unaligned = (start(src) % BLOCK_BYTES or start(dst) % BLOCK_BYTES
                     or any(x % per_block for x in (src.strides[0], src.strides[1], dst.strides[0], dst.strides[1]))
                     or src.strides[2] != 1 or dst.strides[2] != 1)
        cols = c if unaligned else _ceil(c, per_block)
        # the innermost index steps by one element in both paths (lines 45-46: `+ k`)
        s = _region(src, (a, b, cols), (src.strides[0], src.strides[1], 1))
        d = _region(dst, (b, a, cols), (dst.strides[0], dst.strides[1], 1))
        M.check_ub(s, f"{name} source", vector=False)
        M.check_ub(d, f"{name} destination", vector=False)
        d.array(dt)[...] = s.array(dt).transpose(1, 0, 2).copy()
    return run


XOR_AXES = {"r": (1, None), "ar": (2, 1), "ra": (2, 0), "ra0a1": (3, 0), "ara": (3, 1), "aar": (3, 2)}
INTS = {"int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32, "int64_t": np.int64}


def _reduce_xor(name: str, axes: str, dt):
    rank, axis = XOR_AXES[axes]

    def run(src_ptr, dst_ptr, _tmp, init):
        width = np.dtype(dt).itemsize
        src, dst = M.view(src_ptr, rank, width), M.view(dst_ptr, rank, width)
        M.check_ub(src, f"{name} operand")
        M.check_ub(dst, f"{name} result")
        r = np.bitwise_xor.reduce(src.array(dt), axis=axis, keepdims=axis is not None)
        dst.array(dt)[...] = np.bitwise_xor(r, dt(init))
    return run


def handler(name: str, params: list):
    """The implementation of layout template `name` (without _mlir_ciface_), or None."""
    m = re.fullmatch(r"transpose_([23])d_with_last_axis_(\w+)", name)
    if m and m[2] in WIDTHS and len(params) == 2:
        return (_transpose_2d if m[1] == "2" else _transpose_3d_last)(name, WIDTHS[m[2]])
    m = re.fullmatch(r"transpose_3d_without_last_axis_(\w+)", name)
    if m and m[1] in WIDTHS:
        return _transpose_3d_nlast(name, WIDTHS[m[1]])
    m = re.fullmatch(r"reduce_xori_(r|ar|ra|ra0a1|ara|aar)_(\w+)", name)
    if m and m[2] in INTS:
        return _reduce_xor(name, m[1], INTS[m[2]])
    return None
