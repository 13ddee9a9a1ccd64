"""What to say when the real compiler reports a UB overflow: which blocks are large, and the fixes.

bishengir-compile's PlanMemory says only `ub overflow, requires N bits while M bits available!`
(M = 1572864 bits = 192 KiB on Atlas A2/A3).  Which of the kernel's blocks take that room is
read from its TTIR: every tensor type of the module, a tensor of pointers counting as the block
of data it loads or stores.  The fixes are the usual ones triton-ascend users apply (issues 302,
1638, 1640, 2246 of triton-lang/triton-ascend): a smaller block constexpr, a loop over
sub-blocks, and `multibuffer=False` (the NPUOptions field that feeds --enable-auto-multi-buffer).
"""
from __future__ import annotations

import re
from collections import Counter

# bytes per element of TTIR element types
ELEM_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
              "f8E4M3FN": 1, "f8E5M2": 1}

_TENSOR = re.compile(r"tensor<((?:\d+x)+)(!tt\.ptr<([\w]+)>|[\w]+)>")
_OVERFLOW = re.compile(r"ub overflow, requires (\d+) bits while (\d+) bits available")


def _kib(n_bytes):
    return f"{n_bytes / 1024:g} KiB"


def blocks(ttir: str):
    """[(shape, elem, bytes, count of ops touching it)] of the module's blocks, largest first."""
    seen = Counter()
    for line in ttir.splitlines():
        found = set()
        for m in _TENSOR.finditer(line):
            dims = tuple(int(d) for d in m.group(1).rstrip("x").split("x"))
            elem = m.group(3) or m.group(2)
            found.add((dims, elem))
        for f in found:
            seen[f] += 1
    out = []
    for (dims, elem), count in seen.items():
        n = 1
        for d in dims:
            n *= d
        out.append((dims, elem, n * ELEM_BYTES.get(elem, 4), count))
    return sorted(out, key=lambda b: (-b[2], b[0]))


def _size_constexprs(constexprs, shapes):
    """Integer constexprs equal to a dimension of a large block: the ones that size it."""
    dims = {d for s in shapes for d in s}
    return [(k, v) for k, v in (constexprs or {}).items()
            if type(getattr(v, "value", v)) is int and getattr(v, "value", v) in dims and getattr(v, "value", v) > 1]


def overflow_hint(ttir: str, errors, log: str = "", constexprs=None) -> str:
    m = next((_OVERFLOW.search(e) for e in errors if _OVERFLOW.search(e)), None)
    need = have = None
    if m:
        need, have = int(m.group(1)) // 8, int(m.group(2)) // 8
    bl = blocks(ttir)
    budget = have or 196608
    large = [b for b in bl if b[2] * 8 >= budget] or bl[:3]
    lines = ["What is large (the kernel's blocks, from its TTIR):"]
    for dims, elem, nbytes, count in large[:5]:
        shape = "x".join(map(str, dims))
        lines.append(f"  {shape} x {elem}: {_kib(nbytes)} per block ({count} ops on blocks of this shape)")
    if need:
        lines.append(f"  the compiler needs {_kib(need)} of Unified Buffer; the target has {_kib(have)}")
    sizes = _size_constexprs(constexprs, [b[0] for b in large])
    fixes = ["Usual fixes:"]
    if sizes:
        names = ", ".join(f"{k}={getattr(v, 'value', v)}" for k, v in sizes)
        est = ""
        if need and have and need > have:
            k, v = sizes[0]
            v = getattr(v, "value", v)
            guess = 1 << max(0, int(v * have / need).bit_length() - 1)
            est = f" (about {k}={guess} fits, scaling by {_kib(have)}/{_kib(need)}: an estimate)"
        fixes.append(f"  - a smaller block: {names}{est}")
    else:
        fixes.append("  - smaller blocks (the tl.constexpr that sizes the tiles above)")
    fixes.append("  - sub-blocks: keep the block per program but loop over it in smaller pieces "
                 "(for s in range(0, BLOCK, SUB): offs = base + s + tl.arange(0, SUB))")
    retried = "enable-auto-multi-buffer to false" in log
    fixes.append("  - multibuffer=False (triton-ascend's compile option, kernel[grid](..., multibuffer=False)): no "
                 "double buffers for loads in loops" + ("; bishengir-compile already retried without multi-buffering "
                                                        "here, so the blocks themselves must shrink" if retried else ""))
    return "\n".join(lines + fixes)
