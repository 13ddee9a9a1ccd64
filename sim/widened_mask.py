"""Masks the NPU compiler widens: every lane of a load, store or atomic add whose mask is not
a contiguous range touches global memory on the NPU.

triton-ascend's adapter pass DiscreteMaskAccessConversion (triton-lang/triton-ascend @ 8edbaaed,
the 3.2.0 wheel: ascend/triton-adapter/lib/DiscreteMaskAccessConversion/
DiscreteMaskAccessConversionPass.cpp) asks MaskAnalysis (MaskState::parse,
ascend/triton-adapter/lib/TritonToLinalg/MaskAnalysis.cpp L46-94) whether a mask is a box of
the tile -- a range per axis -- and, where it is not, rewrites the access without its mask:

  tl.load(p, mask=m, other=o)   ->  select(m, load(p), o)              (L83-123: whole-tile read)
  tl.store(p, v, mask=m)        ->  store(p, select(m, v, load(p)))    (L50-76: whole-tile read
                                     and write-back: also a race with any program writing there)
  tl.atomic_add(p, v, mask=m)   ->  atomic_add(p, select(m, v, 0))     (L126-167: whole tile;
                                     only ADD/FADD: other atomics keep their mask)

so the lanes the mask turned off still read (and write) their addresses: out of the tensor,
the MTE's "The DDR address of the MTE instruction is out of range" (507035), triton-ascend #2332.

Which masks MaskAnalysis keeps (its parse succeeds; MASK_FORMS below): every one it keeps is a
box of the tile, so a mask whose active lanes are not a box was certainly widened.  The
simulator sees mask values, not their expression, so it checks that: a mask that is not a box
at run time has every lane of its tile checked against the pointer's tensor.  A mask the
analysis cannot parse whose lanes happen to form a box at run time (`n > offs`, `offs > a`,
`offs * 2 < n`, a mask loaded from memory) is widened on the NPU too but not reported here
(inferred from the source, not verified on hardware).  Unmasked accesses and masks with every
lane on never come here (sim/access.py: `m is None`).  A widened store whose tile is in bounds
runs as the NPU runs it (sim/access.py): the whole tile, the masked-off lanes written back with
what they hold at the store, so programs storing interleaved lanes of one tile can lose writes.
"""
from __future__ import annotations

import linecache
import re

import numpy as np

from . import context
from .memory import SimMemoryError

SOURCE = ("triton-ascend @ 8edbaaed (the 3.2.0 wheel) ascend/triton-adapter/lib/DiscreteMaskAccessConversion/"
          "DiscreteMaskAccessConversionPass.cpp")

# The one table: a mask's TTIR operations and whether MaskState::parse keeps the mask a
# contiguous (box) access or fails, which makes DiscreteMaskAccessConversion widen the access.
# Lines of MaskAnalysis.cpp @ 8edbaaed.
MASK_FORMS = {
    "tl.arange (make_range)": ("kept", "L479 parseMakeRange"),
    "scalar + range, splat, broadcast, expand_dims, extsi": ("kept", "L269, L503, L531, L582, L89"),
    "range < s, range <= s, range >= s, range == s (s a scalar)": ("kept", "L362-476 parseCmp slt/sle/sge/eq"),
    "a & b of kept masks": ("kept", "L300-321 parseAnd (both sides masks)"),
    "where(cmp, 1, 0) != 0": ("kept", "L323-360 parseSel, L426-432 ne only against a select and 0"),
    "s > range, s < range (the scalar on the left)": ("widened", "L403-407 'Unsupported cmpi scenario'"),
    "range > s (sgt), unsigned compares": ("widened", "L367-376: only slt/sle/sge/eq/ne"),
    "range * k, range % k, range // k": ("widened", "L71-94: no muli/remsi; L284-298 parseDiv disabled"),
    "a cmp over a tensor with two axes > 1 (a flat 2-D index < n)": ("widened", "L409-420"),
    "a | b, ~a, a mask loaded from memory or computed from data": ("widened", "L93 Default: failure"),
}

# What the pass does to each access whose mask it cannot parse (DiscreteMaskAccessConversionPass.cpp).
WIDENED_OPS = {
    "load": "a read of the whole tile followed by a select (L83-123)",
    "store": "a read of the whole tile, a select and a write of the whole tile back (L50-76)",
    "atomic_add": "an atomic add of 0 on every masked-off lane of the tile (L126-167)",
}


_CONTIGUOUS = ("make the mask a contiguous range the compiler can prove (comparisons `offs < n`, `offs >= a`, "
               "`offs == a` of an arange-based offset against a scalar, joined by &)")
# The fix for each widened op: loads may also clamp the offset; a store's write-back of the skipped
# lanes stays (clamped offsets would make masked-off lanes write back onto an active one).
FIXES = {
    "load": _CONTIGUOUS + " and apply the rest of the condition to the loaded values (tl.where), or clamp the "
                          "offset so every lane of the tile is in bounds (offs = tl.minimum(offs, n - 1))",
    "store": _CONTIGUOUS + " and store tl.where(cond, value, old), old loaded under that same mask (the "
                           "write-back of the skipped lanes is then yours to see: no other program may write them "
                           "meanwhile)",
    "atomic_add": _CONTIGUOUS + " and add tl.where(cond, value, 0)",
}


class WidenedMaskError(SimMemoryError):
    """A masked-off lane of an access the NPU compiler widens lies outside the pointer's tensor."""


def is_box(m: np.ndarray, count: int) -> bool:
    """The `count` active lanes of the mask `m` (bool, not all true) form a box of the tile: one
    range per axis.  Every mask MaskAnalysis keeps is one.  The box they would fill runs from the
    first active lane to the last in row-major order: it is theirs iff it holds `count` lanes,
    all active (a few numpy calls, no pass in Python)."""
    if count == 0:
        return True     # nothing on: an empty box
    flat = m.ravel()
    first = int(flat.argmax())
    last = flat.size - 1 - int(flat[::-1].argmax())
    if m.ndim == 1:
        return last - first + 1 == count and bool(flat[first:last + 1].all())
    lo, hi = _coords(first, m.shape), _coords(last, m.shape)
    size = 1
    for l, h in zip(lo, hi):
        if h < l:
            return False
        size *= h - l + 1
    return size == count and bool(m[tuple(slice(l, h + 1) for l, h in zip(lo, hi))].all())


def _coords(i: int, shape) -> list:
    """The row-major index `i` as coordinates (np.unravel_index without its overhead)."""
    out = []
    for n in reversed(shape):
        i, r = divmod(i, n)
        out.append(r)
    return out[::-1]


def check(rt, base, ptrs: np.ndarray, m: np.ndarray, count: int, itemsize: int, op: str, dtype_name: str) -> bool:
    """The access (`op` in WIDENED_OPS) with the partial mask `m` (the pointers' shape), `count`
    lanes of it active: if the
    mask is not a box, every lane of the tile must lie in the pointer's tensor (`base`: lo, hi,
    name) or, with no base known, in one buffer of the address space.  True: the NPU widens this
    access (every lane of the tile is in bounds); False: it keeps the mask."""
    if is_box(m, count):
        return False
    lo, hi = int(ptrs.min()), int(ptrs.max()) + itemsize
    if base is not None:
        if base[0] <= lo and hi <= base[1]:
            return True
        flat = ptrs.ravel()
        out = np.flatnonzero((flat < np.uint64(base[0])) | (flat + np.uint64(itemsize) > np.uint64(base[1])))
        place = lambda a: f"offset {a - base[0]} of {base[2]} (a tensor of {base[1] - base[0]} bytes)"
    else:   # no tensor known: the lanes must share the buffer of the first active lane
        home = rt.space.find(int(ptrs[m].ravel()[0]))
        if home is not None and home.start <= lo and hi <= home.end:
            return True
        flat = ptrs.ravel().tolist()
        out = [i for i, a in enumerate(flat) if home is None or not (home.start <= a and a + itemsize <= home.end)]
        place = lambda a: f"address 0x{a:x} ({rt.space.describe(a)})"
    raise WidenedMaskError(_report(rt, ptrs, m, out, op, dtype_name, place))


def _report(rt, ptrs, m, out, op, dtype_name, place) -> str:
    idx = np.unravel_index(int(out[0]), ptrs.shape)
    lane = int(idx[0]) if len(idx) == 1 else tuple(int(i) for i in idx)
    addr = int(ptrs[idx])
    c = context.core()
    who = f"rank {rt.rank}" + (f" core {c.phys} (program {tuple(c.grid_idx)})" if c is not None else "")
    f = context.kernel_frame(3)
    line = context.kernel_line(3)
    text = linecache.getline(f.f_code.co_filename, f.f_lineno).strip() if f is not None else ""
    named = re.search(r"\bmask=([A-Za-z_][\w.]*)", text)      # the source mask, when it is a name
    mask = f"its mask `{named.group(1)}`" if named else "its mask"
    on = int(np.count_nonzero(m))
    does = {"load": "reads", "store": "reads and writes back", "atomic_add": "adds 0 at"}[op]
    extra = ("; a write-back also races with any other program writing those bytes"
             if op == "store" else "")
    return (
        f"widened mask: {who}: tl.{op} of {dtype_name} at {line}"
        + (f" `{text}`" if text else "")
        + f": {mask} is not a contiguous range ({on} of {m.size} lanes on, not one range per axis), so "
        f"triton-ascend's DiscreteMaskAccessConversion compiles it into {WIDENED_OPS[op]}: masked-off "
        f"lane {lane} {does} {place(addr)}, out of bounds{extra}.  On the NPU this is 'The DDR address of the "
        f"MTE instruction is out of range' (error 507035, triton-ascend #2332), or a silent read of a "
        f"neighbour's bytes.  The simulator honours the mask; the NPU does not.  Fix: {FIXES[op]}.  "
        f"Rule: {SOURCE}.")
