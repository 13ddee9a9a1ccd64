"""Reading MLIR's printed form of a TTIR module: a bracket- and string-aware scanner, attribute
dictionaries, types, the carriers of the distributed and extension ops, the tt.func headers.

Shared by the passes over the printed module: hivm.py (the distributed carriers to HIVM ops),
extension_ops.py (triton-ascend's extension ops to their TTIR forms, which hivm.convert_text runs
first), carry.py and wrappers.py.  It sits below all of them: it was part of hivm.py, whose
convert_text calls extension_ops, which needed this reading back from hivm (an import cycle).
hivm re-exports every name, so `hivm.LoweringError`, `hivm._split_top`, ... are these.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from triton_dist.errors import TritonDistError
from triton_dist.language._emit import CARRIER_LIBNAME, CARRIER_OP, OP_ATTR, VOID_ATTR


class LoweringError(TritonDistError):
    """The module cannot be lowered to HIVM (an op the NPU has no symbol for, ...)."""


# --- a small scanner for MLIR's printed form ------------------------------------------------

_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSE = {v: k for k, v in _OPEN.items()}


def _scan_string(s, i):
    """Index just past the string literal starting at s[i] == '"'."""
    i += 1
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == '"':
            return i + 1
        i += 1
    raise ValueError(f"unterminated string in {s!r}")


def _match(s, i):
    """Index just past the bracket group opening at s[i]."""
    depth = []
    while i < len(s):
        c = s[i]
        if c == '"':
            i = _scan_string(s, i)
            continue
        if c == "-" and i + 1 < len(s) and s[i + 1] == ">":    # '->' is not a bracket
            i += 2
            continue
        if c in _OPEN:
            depth.append(_OPEN[c])
        elif c in _CLOSE:
            if not depth or depth.pop() != c:
                raise ValueError(f"unbalanced {c!r} at {i} in {s!r}")
            if not depth:
                return i + 1
        i += 1
    raise ValueError(f"unclosed bracket in {s!r}")


def _split_top(s, sep=","):
    """Split s at top-level separators (outside brackets and strings)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c == '"':
            i = _scan_string(s, i)
            continue
        if c == "-" and i + 1 < len(s) and s[i + 1] == ">":
            i += 2
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(s[start:i].strip())
            start = i + 1
        i += 1
    tail = s[start:].strip()
    if tail or parts:
        parts.append(tail)
    return [p for p in parts if p]


_ESC = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}


def _unescape(body):
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESC:
                out.append(_ESC[nxt])
                i += 2
                continue
            out.append(chr(int(body[i + 1:i + 3], 16)))
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _escape(text):
    return "".join(c if c.isprintable() and c not in '"\\' else f"\\{ord(c):02X}" for c in text)


def parse_attr_dict(body):
    """`a = "x", b = 1 : i32, c = true, d` -> {'a': 'x', 'b': 1, 'c': True, 'd': True}."""
    attrs = {}
    for entry in _split_top(body):
        if "=" not in entry.split('"', 1)[0]:
            attrs[entry.strip()] = True            # unit attribute
            continue
        key, value = entry.split("=", 1)
        key, value = key.strip().strip('"'), value.strip()
        if value.startswith('"'):
            attrs[key] = _unescape(value[1:_scan_string(value, 0) - 1])
        elif value in ("true", "false"):
            attrs[key] = value == "true"
        elif re.fullmatch(r"-?\d+(\s*:\s*\w+)?", value):
            attrs[key] = int(value.split(":")[0])
        else:
            attrs[key] = value
    return attrs


# --- types ------------------------------------------------------------------------------------

def is_scalar_pointer(ty: str) -> bool:
    return ty.startswith("!tt.ptr<")


def pointee(ty: str) -> str:
    """'!tt.ptr<f32>' -> 'f32' (an address space, if printed, is dropped)."""
    inner = ty[len("!tt.ptr<"):-1]
    return _split_top(inner)[0]


def _tensor_parts(ty: str):
    """'tensor<16x8x!tt.ptr<f32>>' -> ([16, 8], '!tt.ptr<f32>')."""
    inner = ty[len("tensor<"):-1]
    if "," in inner:                               # an encoding; TTIR has none
        inner = _split_top(inner)[0]
    dims = []
    while True:
        m = re.match(r"(\d+|\?)x", inner)
        if not m:
            break
        dims.append(m.group(1))
        inner = inner[m.end():]
    return dims, inner


@dataclass
class Carrier:
    line_no: int
    indent: str
    result: str
    operands: list
    types: list
    result_type: str
    attrs: dict
    loc: str = ""

    @property
    def op(self):
        return self.attrs.get(OP_ATTR)

    @property
    def void(self):
        return VOID_ATTR in self.attrs


@dataclass
class Func:
    name: str
    start: int
    end: int
    entry_args: dict = field(default_factory=dict)   # name -> type


_OP_NAME = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([A-Za-z_][\w$]*\.[\w$.]+)"?')
_CARRIER_HEAD = re.compile(r"^(\s*)(%[A-Za-z0-9_$.\-#]+)\s*=\s*" + re.escape(CARRIER_OP) + r"\b(.*)$")
_LOC_TAIL = re.compile(r"\s+(loc\(.*\))\s*$")


def op_name(line: str):
    m = _OP_NAME.match(line)
    return m.group(1) if m else None


def _parse_carrier(line_no, line, libname=CARRIER_LIBNAME):
    """The carrier on this line (of library `libname`: the distributed ops', or the extension ops'
    markers, backend_ascend/extension_ops.py), or None."""
    m = _CARRIER_HEAD.match(line)
    if not m:
        return None
    indent, result, rest = m.groups()
    loc = ""
    lm = _LOC_TAIL.search(rest)
    if lm:
        loc, rest = lm.group(1), rest[:lm.start()]
    brace = rest.find("{")
    if brace < 0:
        raise LoweringError(f"line {line_no + 1}: cannot read the attributes of {CARRIER_OP}: {line.strip()}")
    operands = [o.strip() for o in rest[:brace].split(",") if o.strip()]
    end = _match(rest, brace)
    attrs = parse_attr_dict(rest[brace + 1:end - 1])
    if attrs.get("libname") != libname:
        return None
    sig = rest[end:].strip()
    if not sig.startswith(":"):
        raise LoweringError(f"line {line_no + 1}: cannot read the type of {CARRIER_OP}: {line.strip()}")
    sig = sig[1:].strip()
    close = _match(sig, 0)
    types = _split_top(sig[1:close - 1])
    after = sig[close:].strip()
    if not after.startswith("->"):
        raise LoweringError(f"line {line_no + 1}: cannot read the result type of {CARRIER_OP}: {line.strip()}")
    result_type = after[2:].strip()
    if len(types) != len(operands):
        raise LoweringError(f"line {line_no + 1}: {len(operands)} operands but {len(types)} types: {line.strip()}")
    return Carrier(line_no, indent, result, operands, types, result_type, attrs, loc)


def _parse_funcs(lines):
    funcs = []
    for i, line in enumerate(lines):
        if op_name(line) != "tt.func":
            continue
        at = line.find("@")
        m = re.match(r"@([\w$.\-]+|\"[^\"]*\")", line[at:])
        name = m.group(1)
        paren = line.find("(", at)
        close = _match(line, paren)
        args = {}
        for entry in _split_top(line[paren + 1:close - 1]):
            am = re.match(r"(%[A-Za-z0-9_$.\-#]+)\s*:\s*(.*)$", entry)
            if am:
                ty = am.group(2)
                ty = _LOC_TAIL.sub("", ty)
                if "{" in ty:                              # argument attributes
                    ty = ty[:ty.index("{")]
                args[am.group(1)] = ty.strip()
        indent = line[:len(line) - len(line.lstrip())]
        end = i
        if line.rstrip().endswith("{"):
            closing = indent + "}"
            end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == closing
                        or lines[j].startswith(closing + " loc(")), len(lines) - 1)
        funcs.append(Func(name, i, end, args))
    return funcs


class _Names:
    """Fresh SSA names that collide with nothing in the module."""

    def __init__(self, text):
        self.used = set(re.findall(r"%[A-Za-z0-9_$.\-]+", text))
        self.n = 0

    def fresh(self, hint):
        while True:
            name = f"%dist_{hint}{self.n}"
            self.n += 1
            if name not in self.used:
                self.used.add(name)
                return name


def _used_later(lines, i, c: Carrier) -> bool:
    """Is c's result used?  Uses can only follow it in its block (same or deeper indentation);
    a sibling region may print an unrelated value under the same name, so look no further."""
    pattern = re.compile(re.escape(c.result) + r"(?![\w$.\-])")
    for line in lines[i + 1:]:
        if line.strip() and not line.startswith(c.indent):
            return False
        if pattern.search(line):
            return True
    return False
