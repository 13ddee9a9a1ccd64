"""The simulated device's physical cores (issue 15 §2; evidence B and C in docs/device_model.md).

An Atlas A2 has a fixed number of AI cores: 910B1/B2/B2C 24 cube (AIC) + 48 vector (AIV),
910B3/B4/B4-1 20 + 40 (AscendNPU-IR NPUTargetSpec.td).  A launch of G programs is one
rtKernelLaunch of G blocks; the runtime runs one block per physical core and hands the
remaining blocks to cores as they free up ("delivered in a new round"): programs are
dispatched in order onto free cores, each core running one program at a time.  A kernel
without tl.dot ("aiv") runs a block on one vector core; a kernel with tl.dot ("mix") runs a
block on one AI core = 1 cube + 2 vector cores, so its blocks are bounded by the cube count.

The profile: TRITON_DIST_SIM_DEVICE names a part (default 910B2); TRITON_DIST_SIM_CORES
overrides the counts: "V" (V vector cores, V//2 cube cores, at least 1) or "C:V".
"""
from __future__ import annotations

import dis
import os
import types
from dataclasses import dataclass

from triton_dist.ascend_parts import CORES
from triton_dist.errors import TritonDistError

# name -> (cube cores, vector cores): the one table, in the core (backend_ascend/lint.py reads it too)
PROFILES = CORES
DEFAULT = "910B2"


@dataclass(frozen=True)
class Device:
    name: str
    cube: int
    vector: int

    @property
    def ai_cores(self) -> int:
        """AI cores = 1 cube + 2 vector cores each (NPUTargetSpec.td: 24 + 48, 20 + 40); a
        profile with fewer than 2 vector cores per cube core has only as many AI cores as
        its vector cores make pairs (at least 1; inferred, not verified: no such part)."""
        return max(1, min(self.cube, self.vector // 2))

    def split_cores(self, split_vec: int) -> int:
        """Cores a kernel handing cube<->vector flags runs on at once: each block takes one AI
        core whole (its cube instance and `split_vec` vector instances, sim/core_split.py), so
        as many blocks as AI cores are resident, each on 1 + split_vec of its cores."""
        return self.ai_cores * (1 + split_vec)

    @property
    def max_cores(self) -> int:
        """Board / schedule slots a rank needs: the most program instances that can run at
        once (a split kernel's blocks: every core of every AI core, 72 on a 910B2)."""
        return max(self.cube, self.vector, self.split_cores(2))

    def cores_for(self, mix: bool) -> tuple[int, str]:
        return (self.cube, "AI (cube)") if mix else (self.vector, "vector")


def current() -> Device:
    """The profile the environment selects (read at every call: tests override it)."""
    name = os.environ.get("TRITON_DIST_SIM_DEVICE", "").strip() or DEFAULT
    key = name.upper().replace("ASCEND", "")
    if key not in PROFILES:
        raise TritonDistError(f"TRITON_DIST_SIM_DEVICE={name!r} is not a known part; known: "
                              f"{', '.join(PROFILES)} (or set TRITON_DIST_SIM_CORES=C:V)")
    cube, vector = PROFILES[key]
    spec = os.environ.get("TRITON_DIST_SIM_CORES", "").strip()
    if spec:
        try:
            parts = [int(p) for p in spec.split(":")]
            if len(parts) == 1:
                vector = parts[0]
                cube = max(1, vector // 2)
            elif len(parts) == 2:
                cube, vector = parts
            else:
                raise ValueError
            if cube < 1 or vector < 1:
                raise ValueError
        except ValueError:
            raise TritonDistError(
                f"TRITON_DIST_SIM_CORES={spec!r}: give the vector core count (e.g. 48) or "
                f"cube:vector (e.g. 24:48), positive integers") from None
        name = f"{key} with {cube} cube + {vector} vector cores"
    return Device(name, cube, vector)


# ---- which cores a kernel runs on ---------------------------------------------------------------

_MIX: dict = {}


def uses_dot(fn, constexprs: dict | None = None) -> bool:
    """Whether a kernel (or a @jit helper it calls) runs tl.dot: a mix kernel on Ascend.
    Branches on the kernel's constexpr arguments are decided as the compiler does (a dot under
    `if USE_DOT:` with USE_DOT=False is compiled out); everything else is taken as reachable."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    env = {k: v for k, v in (constexprs or {}).items() if isinstance(v, (bool, int, float, str, type(None)))}
    key = (code, tuple(sorted(env.items())))
    if key not in _MIX:
        _MIX[key] = _scan_source(fn, env)
    return _MIX[key]


def _scan_source(fn, env) -> bool:
    import ast
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return _scan(fn, set())

    def decided(test):
        names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
        if not names or not names <= env.keys():
            return None
        try:
            return bool(eval(compile(ast.Expression(test), "<constexpr>", "eval"), {"__builtins__": {}}, dict(env)))
        except Exception:  # noqa: BLE001 - not decidable here: both branches count
            return None

    live = []

    def visit(node):
        if isinstance(node, ast.If):
            d = decided(node.test)
            if d is not None:
                for n in (node.body if d else node.orelse):
                    visit(n)
                return
        if isinstance(node, ast.Attribute) and node.attr in ("dot", "dot_scaled"):
            live.append(True)
        if isinstance(node, (ast.Name, ast.Attribute)):
            live.append(node.id if isinstance(node, ast.Name) else node.attr)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    if True in live:
        return True
    g = getattr(fn, "__globals__", {})
    names = {x for x in live if isinstance(x, str)}
    seen = {fn.__code__}
    for name in names:
        t = g.get(name)
        cands = [t] if t is not None else [getattr(m, name, None) for m in g.values()
                                           if isinstance(m, types.ModuleType)]
        for c in cands:
            inner = getattr(c, "fn", None)            # JITFunction / InterpretedFunction
            if inner is not None and callable(inner) and _scan(inner, seen):
                return True
    return False


def _codes(code):
    yield code
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            yield from _codes(k)


def _scan(fn, seen) -> bool:
    """Helpers: any tl.dot in their code (their arguments are not followed)."""
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return False
    seen.add(code)
    g = getattr(fn, "__globals__", {})
    for c in _codes(code):
        names = set(c.co_names)
        if names & {"dot", "dot_scaled"}:
            return True
        for ins in dis.get_instructions(c):       # helpers: globals, and attributes of modules
            if ins.opname not in ("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "LOAD_NAME"):
                continue
            target = g.get(ins.argval)
            cands = [target] if target is not None else []
            if target is None:
                cands = [getattr(m, ins.argval, None) for m in g.values() if isinstance(m, types.ModuleType)]
            for t in cands:
                inner = getattr(t, "fn", None)           # JITFunction / InterpretedFunction
                if inner is not None and callable(inner) and _scan(inner, seen):
                    return True
    return False
