"""The Ascend NPU's dtype and op rules that its compilers do not enforce: one table, checked on the
simulator's program instances.

Each rule is a limit triton-ascend's own documentation states for Atlas A2/A3 (the 910B/910_93
chips the simulator models), at triton-lang/triton-ascend commit
a84b1eb52b6215e2c171632f2df0892f1003cfc8 (files below).  Measured with this repository's tools
(triton-adapter-opt 3.2.0 + bishengir-compile 1.2.0, `triton-dist npu-compile`, Ascend910B4): the
compilers refuse fp64 arithmetic and fp64 atomic_add themselves, and ACCEPT every other twin kernel
below (int64 atomic_add/max, atomic_or/xchg/cas in a for loop, uint32 shifts, permute (2, 1, 0),
gather on axis 0): there the table is what catches the kernel before an NPU does.  What an NPU
does with those accepted kernels is the documentation's word ("not supported"), not measured here;
FlagTree #1121 measured uint16/uint32 `>>` giving sign-extended results on an Ascend910B4-1.

Deliberately not rules (no false alarms; docs/ascend_rules.md says why for each): tl.arange of
int64 (Triton's arange is always int32), dot on int64/fp64 (stock Triton's frontend refuses those
already), tl.cumsum of i1 (stock Triton 3.5+ and triton-ascend's main line promote it to int32
first, standard.py:351, and the compilers accept it), atomics' `sem` (the NPU runs every atomic
as acq_rel and treats other values as acq_rel, outline.md:136: stronger, never wrong), atomics in
a `while` loop (the spin-lock of Triton's own test_core.py; no source says how an NPU runs it).

Per target: the table is A2/A3's, and a rule the docs state differently for another chip takes the
target a kernel is meant for (`targets()`: TRITON_DIST_NPU_TARGET, else the chips npu-compile compiles
it for, TRITON_DIST_NPU_COMPILE_TARGET / pytest --npu-compile-targets; default Ascend910B4).  A comma
list is every chip the kernel must run on: a rule applies when any of them refuses.  Today only the
unsigned-shift rule differs (Ascend 950 shifts uint8: triton-ascend PR #1364's rshift.md table); the
other rules' docs state A2/A3 only, and no source says A5 lifts them, so they hold on every target.

`install(semantic_class, builder_class, active, where)` wraps the few frontend entry points the
rules need; `active()` says whether the calling thread runs a simulated program instance (the
rules are silent elsewhere: a GPU compile, npu-compile's trace, which gets the real compilers'
verdict) and `where()` names the kernel line.  The simulator passes both (sim/interp.py), so
this module imports nothing of it.
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import textwrap
from dataclasses import dataclass

from triton_dist.errors import TritonDistError

TA = "triton-ascend a84b1eb5"


@dataclass(frozen=True)
class Rule:
    name: str
    what: str            # what the NPU does not take
    source: str          # where that is stated
    compilers: str       # what the real 3.2.0/1.2.0 compilers say of the twin kernel (measured)
    fix: str


RULES = {r.name: r for r in (
    Rule("fp64", "fp64 arithmetic (Atlas A2/A3 and Ascend950 have no fp64 vector unit)",
         f"{TA} docs/zh/triton_api/Linear_Algebra_Ops/dot.md:35-37, Indexing_Ops/gather.md:38-40 "
         "('fp64: hardware limitation'); triton-ascend PR #2313's op_dtype_config.py lists fp64 unsupported on "
         "a2 and a5",
         "refused by bishengir-compile: 'hivm.hir.vmul' op failed to verify that operand ... should have element "
         "type ... 32-bit float or 64-bit signless integer",
         "compute in float32 (x.to(tl.float32)), or keep fp64 data on the host"),
    Rule("atomic_int64", "atomic_add, atomic_max and atomic_min on int64/uint64 (and fp64) elements",
         f"{TA} docs/zh/triton_api/Atomic_Ops/atomic_add.md:44-46 ('missing int64, fp64'), "
         "Atomic_Ops/atomic_max.md:44-46, atomic_min.md; docs/sources/python-api/outline.md:95,98-99",
         "int64: accepted by both compilers (the rule catches it); fp64: refused by bishengir-compile "
         "('hivm.hir.atomic_rmw' op failed to verify ... element type)",
         "use an int32 (or float32) counter, or accumulate per program and store once"),
    Rule("atomic_in_loop", "atomic_or/xor/and/xchg/cas inside a for loop",
         f"{TA} docs/sources/python-api/outline.md:138 ('not yet supported in a loop')",
         "accepted by both compilers (the rule catches it)",
         "do the atomic once after the loop (combine the loop's values in a tensor first), or use atomic_add/"
         "max/min, which the docs allow in loops"),
    Rule("unsigned_shift", "<< and >> on unsigned integers (uint8/16/32/64 on Atlas A2/A3; uint16/32/64 on "
         "Ascend 950)",
         f"{TA} docs/zh/triton_api/Logical_Ops/lshift.md:37,54 and rshift.md:37,54; triton-ascend PR #1364 "
         "(A2/A3 lack uint8-uint64 shifts, Ascend 950 uint16-uint64); FlagTree #1121 (uint16/uint32 >> "
         "sign-extends on Ascend910B4-1)",
         "accepted by both compilers (the rule catches it)",
         "shift a signed integer of a wider type and mask (v.to(tl.int64) >> s) & MASK, or bitcast to the signed "
         "type of the same width where the top bit is known clear"),
    Rule("permute_210", "permute/trans of a 3-D tile with dims (2, 1, 0) (a swap of non-adjacent axes)",
         f"{TA} docs/sources/python-api/outline.md:126,128,140,142",
         "accepted by both compilers (the rule catches it)",
         "two adjacent swaps: tl.permute(tl.permute(x, (1, 0, 2)), (0, 2, 1)) then (1, 0, 2) as needed, or load "
         "the tile already in the order wanted"),
    Rule("gather_axis", "tl.gather on an axis other than the last",
         f"{TA} docs/sources/python-api/outline.md:124 ('only axis = n-1')",
         "accepted by both compilers (the rule catches it)",
         "gather along the last axis: permute/trans the tile so the gathered axis is last, gather, permute back"),
)}

_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")

# ---- the target the kernel is meant for --------------------------------------------------------------
TARGET_ENV = "TRITON_DIST_NPU_TARGET"
COMPILE_TARGET_ENV = "TRITON_DIST_NPU_COMPILE_TARGET"      # pytest --npu-compile-targets sets it
DEFAULT_TARGET = "Ascend910B4"
# the A5 family's --target names, as AscendNPU-IR's NPUTargetSpec.td groups them @52f96a13 (the same
# pattern as backend_ascend/targets.py, which the core may not import)
_A5 = re.compile(r"Ascend910_95|Ascend950")
# unsigned tile shifts each family refuses: A2/A3 lshift.md/rshift.md:37 @a84b1eb5 (no uint column
# ticked); Ascend 950 from the table triton-ascend PR #1364 adds to rshift.md (uint8 ticked, uint16/32/64
# not; review thread 2026-08-03, the PR open); lshift.md taken to be the same (inferred, not verified)
SHIFT_REFUSED = {"A2/A3": frozenset(_UNSIGNED), "Ascend 950": frozenset(("uint16", "uint32", "uint64"))}


def targets() -> list:
    """The chips the kernels of this process are meant for: TRITON_DIST_NPU_TARGET, else
    TRITON_DIST_NPU_COMPILE_TARGET (comma lists), else Ascend910B4."""
    raw = os.environ.get(TARGET_ENV, "").strip() or os.environ.get(COMPILE_TARGET_ENV, "").strip()
    return [t.strip() for t in raw.split(",") if t.strip()] or [DEFAULT_TARGET]


def family(target: str) -> str:
    return "Ascend 950" if _A5.match(target) else "A2/A3"


def shift_refused_on(dtype: str) -> list:
    """The targets (of targets()) that refuse a shift of a `dtype` tile."""
    return [t for t in targets() if dtype in SHIFT_REFUSED[family(t)]]

_LOOP_ATOMICS = ("atomic_or", "atomic_xor", "atomic_and", "atomic_xchg", "atomic_cas")
_WIDE_ATOMICS = ("atomic_add", "atomic_max", "atomic_min")
# the interpreter builder's floating-point compute (its fp64 arithmetic): element-wise and math
_FP_BUILDER_OPS = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_frem", "create_fma",
                   "create_exp", "create_exp2", "create_log", "create_log2", "create_sqrt", "create_rsqrt",
                   "create_sin", "create_cos", "create_erf", "create_floor", "create_ceil", "create_precise_sqrt",
                   "create_precise_divf", "create_minimumf", "create_maximumf", "create_minnumf", "create_maxnumf")


class AscendRuleError(TritonDistError):
    """A kernel uses a dtype or op the Ascend NPU does not take (the message names the rule's source)."""


def refusal(rule: str, where: str, detail: str) -> AscendRuleError:
    r = RULES[rule]
    return AscendRuleError(f"{where}: {detail}: the Ascend NPU does not take {r.what} ({r.source}); the real "
                           f"compilers: {r.compilers}.  Fix: {r.fix}")


def _name(dtype) -> str:
    return getattr(dtype, "name", str(dtype))


def _element(ptr):
    ty = getattr(ptr, "type", None)
    scalar = getattr(ty, "scalar", ty)
    return getattr(scalar, "element_ty", None)


@functools.lru_cache(maxsize=None)
def _for_bodies(code) -> tuple:
    """(first, last) source lines of every `for` loop body of a kernel's code object."""
    try:
        lines, start = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return ()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)) and node.body:
            out.append((node.body[0].lineno + start - 1, node.body[-1].end_lineno + start - 1))
    return tuple(out)


def _in_for_loop(frame) -> bool:
    return frame is not None and any(a <= frame.f_lineno <= b for a, b in _for_bodies(frame.f_code))


def _jit_caller(frame):
    """The frame of the @jit function that called `frame`'s @jit helper, or None (`frame` is the launched
    kernel).  Triton's interpreter calls a helper through InterpretedFunction.__call__ (its `self.fn` is
    the helper), right above the helper's frame; the caller is the first frame above that whose code
    names the helper (the glue between, Triton's and the simulator's, calls it as `fn`)."""
    g = frame.f_back
    for _ in range(2):              # the interpreter's __call__, within a frame or two of the helper
        if g is None:
            return None
        me = g.f_locals.get("self") if g.f_code.co_name == "__call__" else None
        code = getattr(getattr(me, "fn", None), "__code__", None)
        # by name and file: the interpreter runs a rewritten copy of the helper's code (not the same object)
        if code is not None and (code.co_name, code.co_filename) == (frame.f_code.co_name, frame.f_code.co_filename):
            break
        g = g.f_back
    else:
        return None
    name = frame.f_code.co_name
    for _ in range(6):
        g = g.f_back
        if g is None:
            return None
        code = g.f_code
        if name in code.co_names or name in code.co_varnames or name in code.co_freevars:
            return g
    return None


def _looping_frame(frame):
    """`frame`, or the frame of the @jit function up the chain that called it, whose line is inside a
    `for` body (an atomic in a helper called inside a loop runs in that loop); None if none is."""
    while frame is not None:
        if _in_for_loop(frame):
            return frame
        frame = _jit_caller(frame)
    return None


@functools.lru_cache(maxsize=None)
def _in_triton(filename: str) -> bool:
    """Whether a kernel frame is Triton's own library (triton/language/...), not the user's kernel."""
    import os
    import triton
    root = os.path.dirname(os.path.abspath(triton.__file__))
    return os.path.abspath(filename).startswith(root + os.sep)


_installed = False


def install(semantic_class, builder_class, active, where, frame=lambda: None) -> None:
    """Check the rules where `active()` (a simulated program instance); `where()` names the kernel line and
    `frame()` gives the kernel's frame (for the loop rule).  Once per process."""
    global _installed
    if _installed:
        return
    S, B = semantic_class, builder_class

    def wrap(owner, name, check):
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def checked(*args, **kwargs):
            if active():
                check(*args, **kwargs)
            return original(*args, **kwargs)
        setattr(owner, name, checked)

    def wide_atomic(op):
        def check(self, ptr, val, *rest, **kw):
            elem = _element(ptr)
            if elem is not None and _name(elem) in ("int64", "uint64", "fp64"):
                raise refusal("atomic_int64", where(), f"tl.{op} on {_name(elem)} elements")
        return check

    def loop_atomic(op):
        def check(self, *args, **kw):
            inner = frame()
            looping = _looping_frame(inner)
            if looping is None:
                return
            detail = f"tl.{op} inside a for loop"
            if looping is not inner:
                detail = (f"tl.{op} in @jit helper {inner.f_code.co_name}, called inside a for loop at "
                          f"{os.path.basename(looping.f_code.co_filename)}:{looping.f_lineno} "
                          f"({looping.f_code.co_name})")
            raise refusal("atomic_in_loop", where(), detail)
        return check

    def shift(op):
        # tiles only: the docs' tables are of the vector ops; a scalar shift runs on the scalar unit, and
        # Triton's own library shifts the uint64 seed of tl.rand (random.py:57 in stock Triton and in
        # triton-ascend a84b1eb5, whose tl.rand the NPU runs: outline.md:104-105), so its frames are skipped
        def check(self, input, other, *rest, **kw):
            for v in (input, other):
                ty = getattr(v, "type", None)
                if ty is None or not ty.is_block() or _name(ty.scalar) not in _UNSIGNED:
                    continue
                f = frame()
                if f is not None and _in_triton(f.f_code.co_filename):
                    return
                refusing = shift_refused_on(_name(ty.scalar))
                if refusing:
                    raise refusal("unsigned_shift", where(), f"{op} of a {_name(ty.scalar)} tile on "
                                  f"{', '.join(refusing)} (the target: {TARGET_ENV} or {COMPILE_TARGET_ENV}, "
                                  f"default {DEFAULT_TARGET})")
        return check

    def permute(self, input, dims, *rest, **kw):
        d = tuple(int(getattr(x, "value", x)) for x in dims)
        if d == (2, 1, 0):
            raise refusal("permute_210", where(), f"permute/trans with dims {d}")

    def gather(self, src, index, axis, *rest, **kw):
        a = int(getattr(axis, "value", axis))
        rank = len(getattr(src.type, "shape", ()) or ())
        if rank and a % rank != rank - 1:
            raise refusal("gather_axis", where(), f"tl.gather on axis {a} of a {rank}-D tile")

    def fp64(*args, **kw):
        for a in args[1:]:
            if _name(getattr(a, "dtype", None)) == "fp64":
                raise refusal("fp64", where(), "fp64 arithmetic")

    for op in _WIDE_ATOMICS:
        wrap(S, op, wide_atomic(op))
    for op in _LOOP_ATOMICS:
        wrap(S, op, loop_atomic(op))
    wrap(S, "shl", shift("<<"))
    wrap(S, "lshr", shift(">>"))
    wrap(S, "ashr", shift(">>"))
    wrap(S, "permute", permute)
    wrap(S, "gather", gather)
    for name in _FP_BUILDER_OPS:
        wrap(B, name, fp64)
    _installed = True
