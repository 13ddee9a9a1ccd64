"""Performance cliffs of a kernel on the NPU, as a report (never an error): `triton-dist
npu-compile --lint [--grid G]`.

Each finding is read from what the real compilers made of the kernel (npu-compile's stages:
the TTIR and bishengir-compile's module after convert-hivm-to-std, where every vector op is a
call of a template and scalar code is plain scf.for loops over UB memrefs), so a rule the docs
state but the installed compiler does not show is not reported.  The sources (triton-ascend @
a84b1eb5, its docs) are cited on each finding:

  grid      more blocks than physical cores: the launcher's own warning, `WARNING: Grid %u >
            physical limit N, performance maybe reduced.` (third_party/ascend/backend/driver.py
            L816-821); the blocks run in rounds.
  scalar    a scf.for over UB elements doing arithmetic the vector unit does not take: int64 add
            and int64/int32 compare (docs/en/migration_guide/performance_guidelines.md L131-146,
            L168; docs/en/debug_guide/profiling.md L115-117).  Measured with bishengir-compile
            1.2.0 (Ascend910B4): i64 add and i64 compare become scalar loops; an i32 compare is a
            vcmp (vectorised), so only what the module shows is reported.  A loop of a vector
            dtype (an fp32 tl.cumsum: 255 scalar addf) is reported with its own words.
  padding   a tile whose tail axis is not a multiple of 32 bytes kept in UB with the tail padded
            (docs/en/programming_guide.md L109-111: "(2048,3) and (2048,1) ... deteriorate
            significantly due to automatic padding"); measured: a strided (256, 2) fp32 load is
            a memref<256x8x1xf32> in UB, 4x its bytes.  A contiguous one is collapsed to 1-D and
            not padded, and is not reported.

Two more kinds are read from the TTIR alone (what the kernel's source asks for, before the NPU
compilers), reported where the compiled module is not there to read (the compilers missing, or a
kernel they refuse); where it is, the module decides (source_findings says why), except for the
512-byte rule, which the module check does not read:
  int64     a tensor add/subtract/compare of int64 elements (performance_guidelines.md L131-146:
            the vector Add and Cmp take no int64, so the op falls back to scalar code).
  align     a loaded or stored tile of rank >= 2 whose tail axis is not a multiple of 32 bytes, or
            of 512 bytes in a kernel with tl.dot (a cube+vector operator): programming_guide.md
            L111, migrate_from_gpu.md L10.  That the 512-byte round-up of cube+vector kernels shows
            in the compiled module is not measured here (inferred from the docs).
"""
from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass

TA = "triton-ascend @ a84b1eb5"
GRID_SOURCE = f"{TA} third_party/ascend/backend/driver.py L816-821"
SCALAR_SOURCE = (f"{TA} docs/en/migration_guide/performance_guidelines.md L131-146, L168 (Vector Add: no int64; "
                 f"Vector Cmp: no int64/int32)")
PAD_SOURCE = f"{TA} docs/en/programming_guide.md L109-111 (tail axis divisible by 32 bytes, else padded)"
VECTOR_ALIGN = 32       # bytes (programming_guide.md L111)
CUBE_VECTOR_ALIGN = 512     # bytes, a kernel using the cube and vector cores (programming_guide.md L111)
ALIGN_SOURCE = (f"{TA} docs/en/programming_guide.md L111 (tail axis divisible by 32 bytes for vector operators, by "
                f"512 bytes for cube+vector operators, else padded; (2048,3) and (2048,1) named as slow), "
                f"docs/en/migration_guide/migrate_from_gpu.md L10")
INT64_SOURCE = (f"{TA} docs/en/migration_guide/performance_guidelines.md L131-146 (Vector Add and Vector Cmp "
                f"take no int64: scalar fallback); docs/en/debug_guide/profiling.md L115-117")

# The fix for arithmetic found in a scalar loop, by op (what the docs advise).
SCALAR_FIX = {
    "arith.addi": "compute in int32 where the values fit (x.to(tl.int32)): the vector add takes int32",
    "arith.subi": "compute in int32 where the values fit (x.to(tl.int32))",
    "arith.cmpi": "compare in float32 where the values are exact there (a.to(tl.float32) < b.to(tl.float32)), "
                  "or in int32 (the installed compiler vectorises an int32 compare)",
}
_CASTS = ("arith.extui", "arith.extsi", "arith.trunci", "arith.index_cast", "arith.extf", "arith.truncf")


@dataclass(frozen=True)
class Finding:
    kind: str       # grid, scalar, padding
    text: str
    fix: str
    source: str

    def line(self) -> str:
        return f"{self.kind}: {self.text}.  Fix: {self.fix}.  ({self.source})"


# ---- the grid against the cores ---------------------------------------------------------------------

def cores_of(target: str, mix: bool):
    """(cores a block of this kernel occupies one of, their kind) for an Ascend target, or None
    when the part's core count is not known here (triton_dist/ascend_parts.py's table, from
    AscendNPU-IR's NPUTargetSpec.td)."""
    from triton_dist.ascend_parts import CORES
    counts = CORES.get(target[len("Ascend"):] if target.startswith("Ascend") else target)
    if counts is None:
        return None
    cube, vector = counts
    return (cube, "AI (cube+vector)") if mix else (vector, "vector")


def grid_findings(grid, target: str, mix: bool) -> list:
    if not grid:
        return []
    blocks = math.prod(grid)
    cores = cores_of(target, mix)
    if cores is None or blocks <= cores[0]:
        return []
    n, kind = cores
    return [Finding(
        "grid", f"grid {tuple(grid)} is {blocks} blocks on {n} {kind} cores of {target}: the launcher prints "
        f"'WARNING: Grid {blocks} > physical limit {n}, performance maybe reduced.' and the blocks run in "
        f"{-(-blocks // n)} rounds, each paying a block's start-up",
        f"launch {n} blocks and loop over the work inside the kernel "
        f"(for i in range(tl.program_id(0), {blocks}, {n}))", GRID_SOURCE)]


# ---- scalar loops in the compiled module ----------------------------------------------------------

_FOR = re.compile(r"scf\.for %\w+ = (%\w+) to (%\w+) step (%\w+)")
_CONST = re.compile(r"(%\w+) = arith\.constant (-?\d+) : index")
_OP = re.compile(r"= (arith\.\w+)(?: \w+,)? [^:]*: (\w+)\s*$")


def _loops(text: str):
    """(trip count or None, body lines) of each innermost scf.for of the module."""
    consts = dict(_CONST.findall(text))
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = _FOR.search(line)
        if not m or not line.rstrip().endswith("{"):
            continue
        depth, body = 1, []
        for inner in lines[i + 1:]:
            depth += inner.count("{") - inner.count("}")
            if depth <= 0:
                break
            body.append(inner)
        if any(_FOR.search(b) for b in body):
            continue        # only innermost loops
        lo, hi, step = (consts.get(g) for g in m.groups())
        trips = (int(hi) - int(lo)) // int(step) if None not in (lo, hi, step) and int(step) else None
        out.append((trips, body))
    return out


def scalar_findings(final: str) -> list:
    """Innermost loops that read UB element by element and compute with arith ops: scalar code
    where the kernel's tensor op would have been a vector instruction."""
    found = []
    for trips, body in _loops(final):
        if any("call @" in b for b in body) or not any("memref.load" in b and "address_space<ub>" in b
                                                       for b in body):
            continue
        ops = []
        for b in body:
            m = _OP.search(b)
            if m and m.group(2) != "index" and m.group(1) not in _CASTS and (m.group(1), m.group(2)) not in ops:
                ops.append((m.group(1), m.group(2)))
        if not ops:
            continue
        what = ", ".join(f"{op} on {t}" for op, t in ops)
        n = f"{trips} iterations" if trips is not None else "a loop"
        text = f"the compiled module computes {what} in a scalar loop ({n}, one element each)"
        if all(op in SCALAR_FIX and t in ("i64", "i32") for op, t in ops):     # the dtype table's cases
            fixes = "; ".join(dict.fromkeys(SCALAR_FIX[op] for op, _ in ops))
            found.append(Finding("scalar", text + " where a vector instruction was expected", fixes,
                                 SCALAR_SOURCE))
        else:       # an op of a vector dtype with no vector form here (a scan is one element after another)
            found.append(Finding("scalar", text + ": the installed compiler has no vector form for this op (a scan "
                                 "such as tl.cumsum runs element by element)",
                                 "keep the loop short (a smaller tile) or off the hot path",
                                 "measured in the module after convert-hivm-to-std; inferred, not verified on "
                                 "hardware"))
    return found


# ---- tail axes padded in UB -------------------------------------------------------------------------

_TENSOR = re.compile(r"tensor<((?:\d+x)+)(i\d+|f\d+|bf16)>")
_UB = re.compile(r"memref<((?:\d+x)+)(i\d+|f\d+|bf16), #hivm\.address_space<ub>>")


def _bytes(t: str) -> int:
    return max(1, int(re.sub(r"\D", "", t) or 16) // 8)


def padding_findings(ttir: str, final: str) -> list:
    """A TTIR tile of rank >= 2 whose tail axis is not a multiple of 32 bytes and that the module
    keeps in UB with that axis rounded up (leading axes the same)."""
    ub = {(tuple(int(d) for d in s.rstrip("x").split("x")), t) for s, t in _UB.findall(final)}
    found, seen = [], set()
    for s, t in _TENSOR.findall(ttir):
        dims = tuple(int(d) for d in s.rstrip("x").split("x"))
        size = _bytes(t)
        if len(dims) < 2 or (dims, t) in seen or dims[-1] * size % VECTOR_ALIGN == 0:
            continue
        seen.add((dims, t))
        padded = -(-dims[-1] * size // VECTOR_ALIGN) * VECTOR_ALIGN // size
        want = dims[:-1] + (padded,)
        if (want, t) in ub or (want + (1,), t) in ub:
            found.append(Finding(
                "padding", f"tensor<{'x'.join(map(str, dims))}x{t}>'s tail axis is {dims[-1] * size} bytes, not a "
                f"multiple of {VECTOR_ALIGN}: the module keeps it in UB as {'x'.join(map(str, want))} "
                f"({padded // dims[-1]}x its bytes, the tail padded)",
                "make the tail axis a multiple of 32 bytes (a wider tile, or load the tile flat as one 1-D range "
                "and reshape, or transpose so the long axis is last)", PAD_SOURCE))
    return found


# ---- from the TTIR alone: int64 tensor arithmetic and tail-axis alignment ----------------------------

_I64_OP = re.compile(r"= (arith\.(?:addi|subi|cmpi))\b[^:\n]*: (tensor<(?:\d+x)+i64>)")
_ACCESS = re.compile(r"\btt\.(load|store)\b[^\n]*: tensor<((?:\d+x)+)!tt\.ptr<(\w+)>>")


def int64_findings(ttir: str) -> list:
    """int64 add/subtract/compare of tiles in the TTIR: the docs' scalar fallbacks, not yet confirmed by
    a compiled module (see source_findings)."""
    found, seen = [], set()
    for op, ty in _I64_OP.findall(ttir):
        if op in seen:
            continue
        seen.add(op)
        word = "compare" if op == "arith.cmpi" else "add/subtract"
        found.append(Finding(
            "int64", f"the kernel's TTIR has an int64 {word} of tiles ({op} on {ty}): the docs say the NPU's vector "
            f"unit takes no int64 {word}, so it runs as scalar code, one element at a time (read from the TTIR; "
            f"the compiled module, not examined, may show the compiler avoided it)", SCALAR_FIX[op], INT64_SOURCE))
    return found


def align_findings(ttir: str) -> list:
    mix = "tt.dot" in ttir
    need = CUBE_VECTOR_ALIGN if mix else VECTOR_ALIGN
    kind = "cube+vector (the kernel uses tl.dot)" if mix else "vector"
    found, seen = [], set()
    for _, s, t in _ACCESS.findall(ttir):
        dims = tuple(int(d) for d in s.rstrip("x").split("x"))
        tail = dims[-1] * _bytes(t)
        if len(dims) < 2 or (dims, t) in seen or tail % need == 0:
            continue
        seen.add((dims, t))
        found.append(Finding(
            "align", f"tile tensor<{'x'.join(map(str, dims))}x{t}> is loaded or stored with a tail axis of "
            f"{tail} bytes, not a multiple of {need} ({kind} operators): the compiler pads the tail axis in UB (up to "
            f"{-(-tail // need) * need} bytes a row)",
            f"make the tail axis a multiple of {need} bytes (a wider tile along it), load the data flat as one "
            f"1-D range and reshape, or transpose so the long axis is last (the docs' shapes (2048, 3) and "
            f"(2048, 1))", ALIGN_SOURCE))
    return found


def source_findings(ttir: str, compiled=None) -> list:
    """The TTIR-level findings.  `compiled`: the compiled module's findings, or None when the module was
    not examined (the compilers missing, or they refused the kernel).  Where it was, the module is the
    authority for int64 and 32-byte padding: measured, an int64 offset add and its mask compare
    (`o < n` of an int64 `o`) leave no scalar loop in the module, and a contiguous (8, 3) tile is
    collapsed to 1-D, not padded; so only the 512-byte rule of cube+vector kernels, which the module
    check does not read, is added then."""
    if compiled is None:
        return int64_findings(ttir) + align_findings(ttir)
    shown = " ".join(f.text for f in compiled)
    return [f for f in align_findings(ttir) if f"multiple of {CUBE_VECTOR_ALIGN}" in f.text
            and f"{f.text.split()[1]}'s tail axis" not in shown]


# ---- a kernel ---------------------------------------------------------------------------------------

def from_stages(ttir: str, final, grid=None, target: str = "Ascend910B4") -> list:
    """Every finding for one compiled kernel: its TTIR, the module after convert-hivm-to-std
    (None when the compilers did not get there: only the grid is judged then)."""
    mix = "tt.dot" in ttir
    found = grid_findings(grid, target, mix)
    if not final:
        return found + source_findings(ttir)
    compiled = scalar_findings(final) + padding_findings(ttir, final)
    return found + compiled + source_findings(ttir, compiled)


def read_stages(keep: str):
    """(TTIR, final module or None) from an npu-compile --keep directory."""
    def read(name):
        path = os.path.join(keep, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()
    return read("kernel.ttir.mlir") or "", read("kernel.convert-hivm-to-std.mlir")


def lint_kernel(fn, signature, constexprs=None, *, grid=None, target: str = "Ascend910B4", options=None,
                keep=None):
    """(the npu-compile Outcome, its findings): the kernel compiled with its stages kept (in
    `keep`, or a temporary directory)."""
    from . import pipeline
    with tempfile.TemporaryDirectory() as tmp:
        where = keep or tmp
        out = pipeline.compile_kernel(fn, signature, constexprs, target=target, options=options, keep=where)
        ttir, final = read_stages(where)
    return out, from_stages(ttir, final, grid, target)


def report(kernel: str, findings) -> str:
    """The lint section of one kernel: nothing when there is no finding."""
    if not findings:
        return ""
    return "\n".join([f"lint: kernel {kernel}: {len(findings)} performance finding(s)"]
                     + [f"  {f.line()}" for f in findings])
