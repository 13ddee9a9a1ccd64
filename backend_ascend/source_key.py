"""What identifies a kernel's code for the verdict cache: the kernel and every function it reaches.

Triton's own JITFunction.cache_key covers the kernel and the @jit helpers it calls, but it is
computed once per JITFunction and kept (triton/runtime/jit.py, `cache_key`, 3.6.0), and it does not
see a @jit function passed as a constexpr argument (`kernel[grid](..., ACT=act)`: a parameter,
not a global).  A verdict keyed by it is served after `act` is redefined with a tile that no
longer fits, or after a helper the kernel calls is rebound.  So each call walks, from the
kernel and from every constexpr value that is a function, the code as it is *now*:

- a function's compiled code (marshal of its code object: bytecode, constants, names, nested
  code), its defaults;
- every global or closure name its code (and nested code) uses, resolved now: a @jit function
  (or anything wrapping one in `.fn`, e.g. an Autotuner) is walked in turn; a module is looked
  into for the code's other names (`helpers.act`, `flags.HAS_X`); a constant (tl.constexpr, int,
  float, bool, str), global or a module's, is keyed by its value.
Triton's own modules are left out (the triton version is part of the key).  Over-inclusion only
makes the key change more often; it never serves a stale verdict.  Cheap: no source files are
read, nothing is parsed.
"""
from __future__ import annotations

import hashlib
import inspect
import marshal
import types

_SCALARS = (bool, int, float, str, type(None))


def _own(module_name) -> bool:
    """Code of Triton itself (tl.sum, ...) is covered by the triton version in the key."""
    mod = module_name or ""
    return not (mod in ("triton", "torch") or mod.startswith("triton.") or mod.startswith("torch."))


def _unwrap(obj):
    """The Python function under a JITFunction, InterpretedFunction, Autotuner, Heuristics, ..."""
    seen = 0
    while not inspect.isfunction(obj) and seen < 8:
        inner = getattr(obj, "fn", None)
        if inner is None or inner is obj:
            return None
        obj, seen = inner, seen + 1
    return obj if inspect.isfunction(obj) else None


def _names(code) -> set:
    out = set(code.co_names) | set(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


_facts: dict = {}      # code object (immutable) -> (digest of its marshal, the names it uses, sorted)


def _code_facts(code):
    facts = _facts.get(code)
    if facts is None:
        facts = _facts[code] = (hashlib.sha256(marshal.dumps(code)).hexdigest(), tuple(sorted(_names(code))))
    return facts


def _value_key(v):
    inner = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    if isinstance(inner, _SCALARS):
        return repr(inner)
    if isinstance(inner, tuple) and all(isinstance(x, _SCALARS) for x in inner):
        return repr(inner)
    import triton.language as tl
    if isinstance(inner, tl.dtype):         # a global dtype (DTYPE = tl.float16); by its name, a stable text
        return f"dtype:{inner}"
    return None                             # anything else: no stable text (a default repr holds an address)


class _Walk:
    def __init__(self):
        self.h = hashlib.sha256()
        self.seen = set()

    def function(self, fn):
        if fn is None or id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        code = fn.__code__
        digest, names = _code_facts(code)
        self.h.update(f"fn {fn.__module__}.{fn.__qualname__} {digest}\n".encode())
        self.h.update(repr((fn.__defaults__, fn.__kwdefaults__)).encode())
        scope = dict(fn.__globals__)
        if fn.__closure__:
            for name, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:          # an empty cell
                    pass
        for name in names:
            if name in scope:
                self.value(name, scope[name], names)

    def value(self, name, v, names):
        if isinstance(v, types.ModuleType):
            if not _own(v.__name__):
                return
            members = vars(v)         # not getattr: a module's lazy __getattr__ (triton_dist.language.extra) costs
            for attr in names:
                member = members.get(attr)
                if member is None or isinstance(member, types.ModuleType) or inspect.isfunction(member):
                    continue
                fn = _unwrap(member)          # a @jit function reached as module.attr
                if fn is not None:
                    if _own(fn.__module__):
                        self.h.update(f"{name}.{attr}\n".encode())
                        self.function(fn)
                    continue
                key = _value_key(member)      # a constant reached as module.attr (flags.HAS_X)
                if key is not None:
                    self.h.update(f"{name}.{attr} = {key}\n".encode())
            return
        if inspect.isfunction(v):
            return        # a plain Python helper: Triton does not trace it
        fn = _unwrap(v)
        if fn is not None:
            if _own(fn.__module__):
                self.h.update(f"{name} ->\n".encode())
                self.function(fn)
            return
        key = _value_key(v)
        if key is not None:
            self.h.update(f"{name} = {key}\n".encode())


def source_key(kernel, constexprs=None) -> str:
    """A digest of the kernel's code and of every @jit function it reaches, as they are now."""
    w = _Walk()
    w.function(_unwrap(kernel))
    for name, v in sorted((constexprs or {}).items()):
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            fn = _unwrap(item)
            if fn is not None and _own(fn.__module__):
                w.h.update(f"constexpr {name} ->\n".encode())
                w.function(fn)
    return w.h.hexdigest()
