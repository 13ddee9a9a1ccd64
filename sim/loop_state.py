"""Which locals of a kernel frame can change what its loop does next?  Asked by sim/spin.py.

A poll loop such as

    rounds = 0
    while tl.atomic_add(flag, 0, sem="acquire") == 0:
        rounds += 1

changes `rounds` every round, yet can make no progress until another task writes the
flag: nothing the loop branches on depends on `rounds`.  So when the spin detector
compares two visits of a poll, it leaves out the locals that the loops around the poll
assign but never branch on (issue 26 item 2).

The question is answered once per (code object, line) from the kernel's source (the
AST; Triton's interpreter runs a rewrite of the same source, with the same names):
within the outermost loop enclosing the line, a local is *relevant* when it reaches,
directly or through assignments made inside that loop,
- a branch: an `if`/`while`/`assert`/conditional-expression test, a comprehension's
  iterable or condition, a `for` loop's target or iterable (its iterator is hidden on the
  frame's value stack: the target is how a `for` shows progress), `return`/`raise`/`yield`;
- an index (`x[i]`), or an argument of any call except the value-only functions of
  `triton.language` (`tl.maximum(acc, x)`, `tl.where`, ...): a helper may branch on it,
  and a memory access may fail on a moving address.
The other locals assigned inside the loop are left out.  Uses after the loop do not count:
the loop has to exit before they run.  The outermost loop, not the innermost, because an
inner loop may end and restart between two visits while an outer one branches on the
counter.  When the source is not available every local counts (the conservative answer).

Not covered (inferred, not verified against any kernel seen): an arithmetic error that a
moving counter would raise some round later (`1 // (3 - rounds)`) is not a branch here.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import types

# triton.language functions whose arguments are data only: everything else (loads, stores,
# atomics, asserts, prints, block pointers, anything of triton_dist or a @jit helper) is a
# call whose arguments count as branched on.
_EFFECTFUL_PREFIXES = ("load", "store", "atomic", "device_", "static_", "make_block_ptr", "advance",
                       "make_tensor_descriptor", "inline_asm", "debug_barrier")

_cache: dict = {}


def ignored_locals(code, lineno: int, globals_: dict) -> frozenset:
    """Names of locals of a frame of `code` stopped at `lineno` that no enclosing loop branches
    on (empty: compare every local)."""
    key = (code, lineno)
    out = _cache.get(key)
    if out is None:
        try:
            out = _analyse(code, lineno, globals_)
        except Exception:  # noqa: BLE001 - no source, unusual syntax: compare every local
            out = frozenset()
        _cache[key] = out
    return out


def _analyse(code, lineno: int, globals_: dict) -> frozenset:
    found = _function_node(code)
    if found is None:
        return frozenset()
    fn, first = found
    line = lineno - first + 1                       # file line -> line of the parsed source
    loop = None
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= node.end_lineno:
            if loop is None or node.lineno < loop.lineno:
                loop = node                         # the outermost enclosing loop
    if loop is None:
        return frozenset()
    return _ignorable(loop, globals_)


def _function_node(code):
    """(the function's AST, the file line its source starts at)."""
    lines, first = inspect.getsourcelines(code)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node, max(first, 1)
    return None


def _names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def _target_names(t) -> set:
    """The locals an assignment target rebinds or mutates (x, (a, b), x[i], x.attr -> x)."""
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in t.elts)) if t.elts else set()
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    if isinstance(t, (ast.Subscript, ast.Attribute)):
        return _target_names(t.value)
    return set()


def _value_only_call(call: ast.Call, globals_: dict) -> bool:
    """tl.maximum(...), tl.arange(...): a function of triton.language that only computes."""
    f = call.func
    if not isinstance(f, ast.Attribute):
        return False
    root = f.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    mod = globals_.get(root.id)
    if not isinstance(mod, types.ModuleType) or not mod.__name__.startswith("triton.language"):
        return False
    return not f.attr.startswith(_EFFECTFUL_PREFIXES)


def _ignorable(loop, globals_: dict) -> frozenset:
    relevant: set = set()
    flows = []                  # (targets, value names): assignments inside the loop
    assigned: set = set()
    for node in ast.walk(loop):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            relevant |= _names(node.test)
            if isinstance(node, ast.Assert):
                relevant |= _names(node.msg)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            relevant |= _names(node.iter) | _target_names(node.target)
            assigned |= _target_names(node.target)
        elif isinstance(node, ast.comprehension):
            relevant |= _names(node.iter) | _names(node.target) | set().union(*map(_names, node.ifs))
        elif isinstance(node, (ast.Return, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)):
            relevant |= _names(getattr(node, "value", None) or getattr(node, "exc", None))
        elif isinstance(node, ast.Subscript):
            relevant |= _names(node.slice)
        elif isinstance(node, ast.Call) and not _value_only_call(node, globals_):
            relevant |= set().union(_names(node.func) if isinstance(node.func, ast.Attribute) else set(),
                                    *map(_names, node.args), *(_names(k.value) for k in node.keywords))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            relevant |= set().union(*(_names(i.context_expr) for i in node.items))
        elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.Global, ast.Nonlocal)):
            return frozenset()      # closures and scopes: too clever to follow, compare everything
        if isinstance(node, ast.Assign):
            t = set().union(*map(_target_names, node.targets))
            flows.append((t, _names(node.value)))
            assigned |= t
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            t = _target_names(node.target)
            flows.append((t, _names(node.value) | (t if isinstance(node, ast.AugAssign) else set())))
            assigned |= t
        elif isinstance(node, ast.NamedExpr):
            t = _target_names(node.target)
            flows.append((t, _names(node.value)))
            assigned |= t
    changed = True
    while changed:              # a value that flows into a relevant local is relevant
        changed = False
        for targets, values in flows:
            if targets & relevant and not values <= relevant:
                relevant |= values
                changed = True
    return frozenset(assigned - relevant)
