"""ConvertTritonDistributedToHIVM, as a Python pass over the printed TTIR module.

The pass is one unit (collect the module-wide facts, rewrite each carrier); its reading of
MLIR's printed form (the scanner, carriers, tt.func headers) is ttir_text.py, below this module
and extension_ops.py, which both use it.

Input: a TTIR module (text) in which the distributed ops are carried as
`tt.extern_elementwise` ops of library CARRIER_LIBNAME (triton_dist/language/_emit.py
says how).  Output: the same text in which every carrier became one `hivm.hir.custom`
op named "dist.<symbol>" (docs/semantics.md §6); every other line is left exactly as it was,
apart from the few `arith` / `tensor.empty` lines a conversion needs, inserted just
before the custom op.

Why text: stock Triton's Python bindings can walk a module but cannot create an op of
an unregistered dialect (hivm is not in stock Triton), so the pass reads the facts it
needs (operand types, entry-block arguments of the enclosing tt.func, whether the module
holds a dot) from the printed module, and writes the HIVM ops as text.  The printed form
is MLIR's generic-free pretty form, one op per line; only carrier lines and tt.func
headers are parsed, with a bracket- and string-aware scanner.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from triton_dist import symbols as S
from triton_dist.language._emit import CARRIER_LIBNAME, CARRIER_OP, CARRIER_OPS

# The reading of the printed module, shared with extension_ops.py (which convert_text runs, so it
# cannot import this module back), carry.py and wrappers.py; every name stays reachable as hivm.<name>.
from .ttir_text import (_CARRIER_HEAD, _CLOSE, _ESC, _LOC_TAIL, _OP_NAME, _OPEN, Carrier, Func,  # noqa: F401
                        LoweringError, _escape, _match, _Names, _parse_carrier, _parse_funcs, _scan_string,
                        _split_top, _tensor_parts, _unescape, _used_later, is_scalar_pointer, op_name,
                        parse_attr_dict, pointee)

CUSTOM_OP = "hivm.hir.custom"
CUSTOM_PREFIX = "dist."
PIPE = "PIPE_S"          # the per-symbol pipe table is empty: every op runs on PIPE_S
VF_MODE = "SIMD"
DOT_OPS = ("tt.dot", "tt.dot_scaled")

# Carriers of triton-ascend builtins that are HIVM ops of their own, not aclshmem calls: the op
# triton-ascend's main line emits for each, and the module attribute it sets with it
# (third_party/ascend/ascend_ir.cc:703-712 at triton-lang/triton-ascend a84b1eb5:
# create_get_sub_vec_id builds hivm::GetSubBlockIdxOp and marks the module
# hivm.disable_auto_tile_and_bind_subblock, "NPU compiler will parse this attribute and disable
# auto tile and bind subblock pass").
HIVM_BUILTINS = {"sub_vec_id": ("hivm.hir.get_sub_block_idx", "i64", "hivm.disable_auto_tile_and_bind_subblock")}


# --- symbol type names --------------------------------------------------------------------------

def type_name(elem: str, what: str) -> str:
    """The symbol type name of an MLIR element type (docs/semantics.md §6), or a LoweringError."""
    name = S.IR_TYPE_NAMES.get(elem)
    if name is None:
        raise LoweringError(
            f"{what}: the aclshmem device library has no symbol for element type {elem}; "
            f"supported: {', '.join(f'{k} ({v})' for k, v in S.IR_TYPE_NAMES.items())}")
    return name


def consume_token_type_name(ty: str) -> str:
    """`<type>` for a scalar, `<type>_ptr_<rank>d` for a pointer (a scalar pointer is 1d)."""
    what = "consume_token"
    if is_scalar_pointer(ty):
        return type_name(pointee(ty), what) + "_ptr_1d"
    if ty.startswith("tensor<"):
        dims, elem = _tensor_parts(ty)
        if is_scalar_pointer(elem):
            if len(dims) > S.CONSUME_TOKEN_MAX_RANK:
                raise LoweringError(
                    f"consume_token on a tensor of pointers of rank {len(dims)} ({ty}): the aclshmem device "
                    f"library defines aclshmem_consume_token_<type>_ptr_<r>d for r = 1..{S.CONSUME_TOKEN_MAX_RANK} "
                    f"only; reshape the pointers to at most {S.CONSUME_TOKEN_MAX_RANK} dimensions")
            return type_name(pointee(elem), what) + f"_ptr_{len(dims)}d"
        raise LoweringError(
            f"consume_token on a tensor of values ({ty}) has no aclshmem symbol: consume the token on "
            f"the pointer (or tensor of pointers) you load through, then load")
    return type_name(ty, what)


# --- the module ---------------------------------------------------------------------------------

def module_has_dot(text: str) -> bool:
    return any(op_name(line) in DOT_OPS for line in text.splitlines())


def core_type_of(symbol: str, has_dot: bool) -> str:
    """Prefix table first (asked with the symbol, then with its untyped family, so that
    aclshmem_float_putmem reads as aclshmem_putmem), then the dot rule."""
    for candidate in dict.fromkeys((symbol, S.family_of(symbol))):
        for prefix, core in S.CORE_TYPE_PREFIXES:
            if candidate.startswith(prefix):
                return core
    return S.CUBE_AND_VECTOR if has_dot else S.VECTOR


@dataclass
class Lowered:
    symbol: str
    operands: list          # [(name, type)]
    pre: list               # lines inserted before the custom op (without indent)
    effects: str


def _where(c: Carrier, func: Func):
    return f"@{func.name} line {c.line_no + 1} ({c.op})"


def _lower_one(c: Carrier, func: Func, names: _Names) -> Lowered:
    op = c.op
    ops = list(zip(c.operands, c.types))
    where = _where(c, func)
    if op not in CARRIER_OPS:
        raise LoweringError(f"{where}: unknown distributed op {op!r} in a {CARRIER_LIBNAME} carrier; "
                            f"known: {', '.join(CARRIER_OPS)}")
    if op in ("rank", "num_ranks"):
        spec = S.DL_OPS[op]
        return Lowered(spec.symbol, [], [], spec.effects)
    if op in ("symm_at", "wait"):
        ptr_ty = c.types[0]
        if not is_scalar_pointer(ptr_ty):
            raise LoweringError(f"{where}: expected a scalar pointer first, got {ptr_ty}")
        spec = S.DL_OPS[op]
        if op == "wait":
            return _lower_wait(c, where, names)
        return Lowered(spec.symbol_for(type_name(pointee(ptr_ty), f"{where}")), ops, [], spec.effects)
    if op == "consume_token":
        spec = S.DL_OPS[op]
        try:
            tn = consume_token_type_name(c.types[0])
        except LoweringError as e:
            raise LoweringError(f"{where}: {e}") from None
        return Lowered(spec.symbol_for(tn), ops, [], spec.effects)
    if op == "notify":
        return _lower_notify(c, where, names)
    # extern_call
    symbol = c.attrs.get("symbol")
    if not symbol:
        raise LoweringError(f"{where}: extern_call without a symbol")
    return Lowered(symbol, ops, [], S.NONE if c.attrs.get("pure") else S.READ_WRITE)


_IR_INT_DTYPES = {"i32": ("int32",), "i64": ("int64", "uint64")}
_SIGNAL_IR_TYPE = {"int32": "i32", "int64": "i64", "uint64": "i64"}


def _cast_int(value, src, dst, names, what="notify: the signal value"):
    if src == dst:
        return value, []
    new = names.fresh("sig")
    width = lambda t: int(t[1:])  # noqa: E731
    if not (re.fullmatch(r"i\d+", src) and re.fullmatch(r"i\d+", dst)):
        raise LoweringError(f"{what} must be an integer, got {src}")
    op = "arith.trunci" if width(src) > width(dst) else "arith.extsi"
    return new, [f"{new} = {op} {value} : {src} to {dst}"]


# TTIR integers are signless: the signed dtype of each width stands for both signs (the
# wait compares for equality).
_WAIT_IR_DTYPES = {"i32": "int32", "i64": "int64"}


def _lower_wait(c: Carrier, where, names) -> Lowered:
    """aclshmem_wait_<int32|int64>(sig, n as i64, value): the wrapper's slot count is int64_t
    (Shmem.cpp, ACLSHMEM_WAIT_WRAPPER); the carrier carries it as i32."""
    (sig, sig_ty), (n, n_ty), (value, value_ty) = zip(c.operands, c.types)
    elem = pointee(sig_ty)
    dtype = _WAIT_IR_DTYPES.get(elem, S.IR_TYPE_NAMES.get(elem, elem))
    try:
        symbol = S.wait_symbol(dtype)
    except ValueError as e:
        raise LoweringError(f"{where}: {e}") from None
    count, pre = _cast_int(n, n_ty, "i64", names, "wait: the slot count")
    return Lowered(symbol, [(sig, sig_ty), (count, "i64"), (value, value_ty)], pre, S.DL_OPS["wait"].effects)


def _lower_notify(c: Carrier, where, names) -> Lowered:
    (sig, sig_ty), (rank, rank_ty), (signal, signal_ty) = zip(c.operands, c.types)
    if not is_scalar_pointer(sig_ty):
        raise LoweringError(f"{where}: the signal must be a scalar pointer, got {sig_ty}")
    elem = pointee(sig_ty)
    dtype = c.attrs.get("triton_dist.signal_dtype")
    if dtype is None:                       # not made by triton_dist: the IR type decides
        dtype = _IR_INT_DTYPES.get(elem, (S.IR_TYPE_NAMES.get(elem, elem),))[0]
    elif dtype in _SIGNAL_IR_TYPE and _SIGNAL_IR_TYPE[dtype] != elem:
        raise LoweringError(f"{where}: signal_dtype {dtype} does not match the signal pointer type {sig_ty}")
    sig_op = c.attrs.get("triton_dist.sig_op", "set")
    try:
        symbol = S.notify_symbol(dtype, sig_op)
    except ValueError as e:
        raise LoweringError(f"{where}: {e}") from None
    spec = S.DL_OPS["notify"]
    if symbol == "aclshmemx_signal_op":
        value, pre = _cast_int(signal, signal_ty, "i32", names)
        code = names.fresh("sigop")
        pre.append(f"{code} = arith.constant {S.SIG_OPS[sig_op]} : i32")
        operands = [(sig, sig_ty), (value, "i32"), (code, "i32"), (rank, rank_ty)]
    else:
        value, pre = _cast_int(signal, signal_ty, "i64", names)
        operands = [(sig, sig_ty), (value, "i64"), (rank, rank_ty)]
    return Lowered(symbol, operands, pre, spec.effects)


def custom_op(symbol, operands, *, core, gm, effects, bitcode=None, result=None, result_type=None,
              outs=None, loc=""):
    """One `hivm.hir.custom` op as text (the form docs/semantics.md §6 gives), on either side of
    ttadapter: operands [(name, type)], gm the indices of the operands that are kernel arguments,
    result/result_type the SSA name and type it defines (None: no result), outs the init tensor
    of a tensor result."""
    attrs = {}
    if bitcode is not None:
        attrs["bitcode"] = f'"{_escape(bitcode)}"'
    attrs["gm_addr_args_indices"] = "array<i32" + (": " + ", ".join(map(str, gm)) if gm else "") + ">"
    attrs["hivm.is_distributed"] = None
    attrs["hivm.pipe"] = f"#hivm.pipe<{PIPE}>"
    attrs["hivm.tcore_type"] = f"#hivm.tcore_type<{core}>"
    attrs["hivm.vf_mode"] = f"#hivm.vf_mode<{VF_MODE}>"
    if effects == S.NONE:
        attrs["no_side_effect"] = None
    attrs["symbol"] = f'"{_escape(symbol)}"'
    attr_text = ", ".join(k if v is None else f"{k} = {v}" for k, v in sorted(attrs.items()))
    text = f'{CUSTOM_OP} {{{attr_text}}} "{CUSTOM_PREFIX}{_escape(symbol)}"'
    if operands:
        text += (" ins(" + ", ".join(n for n, _ in operands) + " : "
                 + ", ".join(t for _, t in operands) + ")")
    head = ""
    if result is not None:
        head = f"{result} = "
        if outs is not None:
            text += f" outs({outs} : {result_type})"
        text += f" -> {result_type}"
    if loc:
        text += " " + loc
    return head + text


def gm_indices(operands, func: Func) -> list:
    """Indices of the scalar-pointer operands that are arguments of the enclosing kernel."""
    return [i for i, (name, ty) in enumerate(operands) if is_scalar_pointer(ty) and name in func.entry_args]


def _custom_line(c: Carrier, low: Lowered, func: Func, has_dot, names, bitcode):
    indent = c.indent
    lines = [indent + p for p in low.pre]
    core = core_type_of(low.symbol, has_dot)
    if callable(bitcode):                  # chosen by the op's core type (npu_compile.bitcode_selector)
        bitcode = bitcode(core, has_dot)
    outs = None
    if not c.void and c.result_type.startswith("tensor<"):
        outs = names.fresh("init")
        lines.append(f"{indent}{outs} = tensor.empty() : {c.result_type}")
    lines.append(indent + custom_op(low.symbol, low.operands, core=core, gm=gm_indices(low.operands, func),
                                    effects=low.effects, bitcode=bitcode,
                                    result=None if c.void else c.result,
                                    result_type=None if c.void else c.result_type, outs=outs, loc=c.loc))
    return lines


def module_facts(module):
    """(holds a dot, number of distributed carriers) of an ir.module, by walking it."""
    facts = {"dot": False, "carriers": 0}

    def visit(op):
        name = op.get_name()
        if name in DOT_OPS:
            facts["dot"] = True
        elif name == CARRIER_OP and op.get_str_attr("libname") == CARRIER_LIBNAME:
            facts["carriers"] += 1

    module.walk(visit)
    return facts["dot"], facts["carriers"]


@dataclass
class Planned:
    """One distributed op of a module: where it is, what it is, and what it lowers to."""
    line_no: int
    func: Func
    carrier: Carrier
    lowered: Lowered


def lower_builtins(text: str):
    """(text, count): the carriers of HIVM_BUILTINS replaced by their HIVM ops, the module attributes
    they need added."""
    lines = text.split("\n")
    attrs = set()
    count = 0
    for i, line in enumerate(lines):
        if op_name(line) != CARRIER_OP:
            continue
        c = _parse_carrier(i, line)
        if c is None or c.op not in HIVM_BUILTINS:
            continue
        op, ty, attr = HIVM_BUILTINS[c.op]
        lines[i] = f"{c.indent}{c.result} = {op} -> {ty}" + (f" {c.loc}" if c.loc else "")
        attrs.add(attr)
        count += 1
    for k, line in enumerate(lines):
        if attrs and line.startswith("module"):
            if line.startswith("module attributes {"):
                lines[k] = "module attributes {" + ", ".join(sorted(attrs)) + ", " + line[len("module attributes {"):]
            else:
                lines[k] = line.replace("module", "module attributes {" + ", ".join(sorted(attrs)) + "}", 1)
            break
    return "\n".join(lines), count


def plan(text: str):
    """(lines, names, [Planned]) of every distributed carrier of a printed TTIR module (the
    HIVM_BUILTINS carriers must have been lowered first, lower_builtins)."""
    lines = text.split("\n")
    funcs = _parse_funcs(lines)
    names = _Names(text)
    planned = []
    for f in funcs:
        for i in range(f.start + 1, f.end):
            if op_name(lines[i]) != CARRIER_OP:
                continue
            c = _parse_carrier(i, lines[i])
            if c is None:
                continue
            if c.void and _used_later(lines, i, c):
                raise LoweringError(f"{_where(c, f)}: the placeholder result {c.result} of an op without a "
                                    f"result is used; the carrier was not made by triton_dist")
            planned.append(Planned(i, f, c, _lower_one(c, f, names)))
    return lines, names, planned


def check_all_planned(out_lines):
    left = [j + 1 for j, line in enumerate(out_lines) if op_name(line) == CARRIER_OP
            and f'libname = "{CARRIER_LIBNAME}"' in line]
    if left:
        raise LoweringError(f"distributed ops outside any tt.func were left unlowered (lines {left})")


def convert_text(text: str, *, has_dot: bool | None = None, bitcode=None):
    """Lower every distributed carrier of a printed TTIR module.  Returns (text, count).

    bitcode: the aclshmem device-library bitcode each op links (its `bitcode` attribute):
    None for none, a path for all, or a function (core type, module has a dot) -> path."""
    if has_dot is None:
        has_dot = module_has_dot(text)
    from .extension_ops import lower as lower_extension_ops
    text, builtins = lower_builtins(text)
    text, _ = lower_extension_ops(text)        # not counted: the count is of the carriers module_facts sees
    lines, names, planned = plan(text)
    replaced = {p.line_no: _custom_line(p.carrier, p.lowered, p.func, has_dot, names, bitcode) for p in planned}
    out = []
    for i, line in enumerate(lines):
        out.extend(replaced.get(i, [line]))
    check_all_planned(out)
    return "\n".join(out), len(replaced) + builtins
