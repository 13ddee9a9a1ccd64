"""The aclshmem calls a compiled kernel makes, checked against the wrappers the library defines.

After bishengir-compile's convert-hivm-to-std every hivm.hir.custom op of a distributed op is
an external call (HIVMToStandard.cpp, CustomOpToLibraryCallPattern, AscendNPU-IR v1.2.0): a
`func.func private @<symbol>(...)` declaration with `llvm.emit_c_interface`, i.e. the C symbol
`_mlir_ciface_<symbol>` (scalar-only ones are declared under that name already).  Each is
checked against aclshmem_wrappers.txt (this package's data; the C signatures of AscendNPU-IR's
bishengir/lib/Template/lib/Shmem/Shmem.cpp): the name must be a wrapper, and its argument form
must be the wrapper's under MLIR's C-interface convention (a memref result is the first,
pointer, parameter of a void function; memrefs are descriptors of the same rank and element
type; scalars of the same width).

A wrapper that takes its descriptor by value (signal_op, wait, signal_wait_until, wait_until)
is called through a pointer by MLIR's C interface: the form matches, the passing convention
differs.  Whether that links and runs as intended is for an NPU to show; it is reported as a
note, not a mismatch.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from . import hivm as H

PREFIX = "_mlir_ciface_"
# In a mix kernel (a dot: hivm-split-mix-kernel makes a cube and a vector function), a custom op's
# call name gets the suffix of the half it is in (callNameMangleSuffix,
# bishengir/lib/Dialect/HIVM/IR/LibraryFunctionOpInterface/LibraryFunctionOpInterfaceImpl.cpp:248-272 and
# 1158-1172 at v1.2.0).  The wrapper bitcode of mix kernels is built with -cce-enable-mix
# (bishengir/lib/Template/CMakeLists.txt:104-107, compile_shmem_to_bc), which is expected to
# define those names; inferred, not verified (no bitcode of that build is published).
MIX_SUFFIXES = (".cube", ".vector")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aclshmem_wrappers.txt")

# C type of the wrapper library -> MLIR type.  int is 32-bit on the NPU's ABI (bisheng, LP64); the
# signedness of C types has no MLIR counterpart (signless integers).
C_TYPES = {
    "int": "i32", "int32_t": "i32", "uint32_t": "i32", "aclshmem_team_t": "i32",
    "int64_t": "i64", "uint64_t": "i64", "int16_t": "i16", "uint16_t": "i16",
    "int8_t": "i8", "uint8_t": "i8", "char": "i8",
    "half": "f16", "float": "f32", "bfloat16_t": "bf16",
}


@dataclass(frozen=True)
class Param:
    kind: str           # "memref" or "scalar"
    type: str           # MLIR element type (memref) or type (scalar)
    rank: int = 0
    by_value: bool = False

    def __str__(self):
        return f"memref<{self.rank}d {self.type}>" if self.kind == "memref" else self.type


@dataclass(frozen=True)
class Form:
    result: str | None        # MLIR scalar type returned, None for void
    params: tuple

    def __str__(self):
        return f"{self.result or 'void'}({', '.join(map(str, self.params))})"

    def same_as(self, other) -> bool:
        strip = lambda f: (f.result, tuple((p.kind, p.type, p.rank) for p in f.params))  # noqa: E731
        return strip(self) == strip(other)


@dataclass(frozen=True)
class Wrapper:
    name: str
    line: int
    c_signature: str
    form: Form


def _c_form(sig: str) -> Form:
    m = re.fullmatch(r"(\w+)\((.*)\)", sig.strip())
    ret, body = m.group(1), m.group(2).strip()
    params = []
    for part in re.findall(r"memref<[^>]*>\*?|[\w]+", body):
        mm = re.fullmatch(r"memref<(\w+),(\d+)>(\*?)", part)
        if mm:
            params.append(Param("memref", C_TYPES[mm.group(1)], int(mm.group(2)), by_value=not mm.group(3)))
        else:
            params.append(Param("scalar", C_TYPES[part]))
    return Form(None if ret == "void" else C_TYPES[ret], tuple(params))


@functools.lru_cache(maxsize=None)
def wrappers() -> dict:
    """name (without _mlir_ciface_) -> Wrapper, from aclshmem_wrappers.txt."""
    out = {}
    with open(DATA) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, where, sig = line.split(None, 2)
            out[name] = Wrapper(name, int(where), sig.strip(), _c_form(sig))
    return out


def _mlir_param(ty: str) -> Param:
    ty = ty.strip()
    if ty.startswith("memref<"):
        inner = H._split_top(ty[len("memref<"):-1])[0]
        dims = inner.split("x")
        return Param("memref", dims[-1], len(dims) - 1)
    return Param("scalar", ty)


def mlir_form(params: list, results: list) -> Form:
    """The C-interface form of an MLIR function type: a memref result becomes the leading pointer
    parameter of a void function (mlir/lib/Conversion/FuncToLLVM, the C wrapper convention)."""
    ps = [_mlir_param(p) for p in params]
    rs = [_mlir_param(r) for r in results]
    if len(rs) == 1 and rs[0].kind == "memref":
        return Form(None, (rs[0], *ps))
    if len(rs) > 1:
        return Form("(" + ", ".join(map(str, rs)) + ")", tuple(ps))
    return Form(rs[0].type if rs else None, tuple(ps))


@dataclass(frozen=True)
class ExternCall:
    symbol: str             # bare: aclshmem_wait_int32
    form: Form
    problem: str = ""       # "" when it matches a wrapper
    note: str = ""


_DECL = re.compile(r"func\.func\s+private\s+@([\w$.]+)\(")


def _declaration(line):
    """(name, [param types], [result types]) of a `func.func private` line, or None."""
    m = _DECL.search(line)
    if not m:
        return None
    close = H._match(line, m.end() - 1)
    params = H._split_top(line[m.end():close - 1])
    rest = line[close:].strip()
    results = []
    if rest.startswith("->"):
        rest = rest[2:].strip()
        end = rest.find(" attributes")
        rest = (rest if end < 0 else rest[:end]).strip()
        results = H._split_top(rest[1:-1]) if rest.startswith("(") else [rest]
    return m.group(1), params, results


def extern_calls(module_text: str) -> list:
    """Every external aclshmem function the module declares, checked against the wrappers."""
    out = {}
    table = wrappers()
    for line in module_text.split("\n"):
        decl = _declaration(line)
        if decl is None or "aclshmem" not in decl[0]:
            continue
        name, params, results = decl
        bare = name[len(PREFIX):] if name.startswith(PREFIX) else name
        for suffix in MIX_SUFFIXES:
            if bare.endswith(suffix):
                bare = bare[:-len(suffix)]
        form = mlir_form(params, results)
        w = table.get(bare)
        problem = note = ""
        if w is None:
            problem = (f"{PREFIX}{bare} is not a wrapper of the aclshmem library (AscendNPU-IR Shmem.cpp); it "
                       f"would not link on an NPU")
        elif not form.same_as(w.form):
            problem = (f"{PREFIX}{bare} is called as {form} but the wrapper is {w.c_signature} "
                       f"(Shmem.cpp line {w.line}), i.e. {w.form}")
        elif any(p.by_value for p in w.form.params):
            note = (f"{PREFIX}{bare} takes its memref descriptor by value (Shmem.cpp line {w.line}); MLIR's C "
                    f"interface passes a pointer to it")
        if bare not in out or problem:
            out[bare] = ExternCall(bare, form, problem, note)
    return [out[k] for k in sorted(out)]
