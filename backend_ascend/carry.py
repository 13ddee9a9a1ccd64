"""The distributed ops through triton-ascend 3.2.0's ttadapter, and back as hivm.hir.custom ops.

Why a detour: the 3.2.0 adapter (`triton-adapter-opt`, the only one on PyPI) cannot parse
`hivm.hir.custom`; its ExternElementwise converter takes only pure `__hmf_` calls
(ascend/triton-adapter/lib/TritonToLinalg/TritonOpConverter.cpp:1261-1270 at triton-lang/
triton-ascend 8edbaaed); a tt.call it leaves unconverted (the callee becomes a func.func, the
call stays a tt.call: "'tt.call' op ... does not reference a valid function"), and a pointer
passed to a call cannot be materialized ("failed to legalize unresolved materialization from
memref<...> to !tt.ptr<...>").  What it does convert faithfully is scalar memory traffic,
in program order, through kernel pointer arguments.  So each op is carried as that:

  before ttadapter (TTIR), op i with lowered operands (hivm.plan: the same symbol and operand
  list as the TTIR lowering gives) becomes
    - a scalar operand v:   tt.store %dist_cI_J, v          (a new kernel argument per operand)
    - a pointer operand p:  %m = tt.load p; tt.store %dist_cI_J, %m
                            (the adapter turns p into the memref it would pass: the kernel's
                            memref<?xT> argument, or a memref.reinterpret_cast of it at p's offset)
    - no operand, no result: tt.store %dist_aI, 0           (an anchor that keeps its place)
    - a scalar result:      %r = tt.load %dist_rI
    - a pointer result:     a new kernel pointer argument %dist_pI stands for it (symm_at,
                            remote_ptr, consume_token of a pointer): every access through it
                            becomes the adapter's memref arithmetic on that argument
  after ttadapter (Linalg), each op becomes one hivm.hir.custom at its marker's place,
  its operands read back from the markers, its result replacing the result load (or the
  pointer argument: the custom op returns the memref<?xT>, as the aclshmem wrapper does,
  `_mlir_ciface_aclshmem_ptr_<type>(memref_t *result, memref_t *ptr, int pe)`); the markers
  and the extra arguments are removed.

Not carried (CarryError, naming the op): a tensor operand or result (consume_token of a
tensor of pointers: the marker would be a tile load, i.e. UB the kernel does not use),
distributed ops in a function other than the kernel.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from triton_dist.errors import TritonDistError

from . import hivm as H

LEADING_ARGS = 2      # the adapter's sync-block lock and workspace (memref<?xi8>), before the kernel's
TRAILING_ARGS = 6     # grid sizes and program ids (i32), after them


class CarryError(TritonDistError):
    """A distributed op that cannot be carried through triton-ascend 3.2.0's ttadapter."""


class CarryBug(RuntimeError):
    """The adapter's output is not what the carrier form leads to: a bug here, not the user's."""


@dataclass
class Operand:
    kind: str               # "scalar" or "pointer"
    ttir_name: str
    ttir_type: str
    chan: str               # the TTIR kernel argument carrying it
    kernel_arg: int | None  # index among the kernel's own arguments, when it is one


@dataclass
class CarriedOp:
    index: int
    symbol: str
    effects: str
    core: str
    gm: list
    operands: list
    result_kind: str        # "void", "scalar", "unused" (a scalar nothing reads), "pointer"
    result_type: str = ""   # TTIR type of the result
    result_chan: str = ""   # scalar result: the argument it is loaded from; pointer: the argument standing for it
    anchor: str = ""        # no operands and no result: the anchor argument
    where: str = ""         # for messages: "@kernel line N (dl.op)"


@dataclass
class Plan:
    kernel: str
    n_args: int                               # the kernel's own arguments
    extra_args: list = field(default_factory=list)    # (name, type) appended, in order
    ops: list = field(default_factory=list)

    @property
    def symbols(self):
        return sorted({op.symbol for op in self.ops})


_SSA = r"%[A-Za-z0-9_$.\-#]+"
_PTR = re.compile(r"^!tt\.ptr<(.*)>$")


def _uses(name):
    return re.compile(re.escape(name) + r"(?![\w$.\-#])")


def _head_args(line):
    """(start, end) of the argument list of a function header line, inside its parentheses."""
    at = line.find("@")
    paren = line.find("(", at)
    close = H._match(line, paren)
    return paren + 1, close - 1


def _indent(line):
    return len(line) - len(line.lstrip())


def _scope(lines, start, end=None):
    """Lines after `start` that its value is visible in: up to where its block closes (a line
    indented less than it, MLIR's printed form)."""
    end = len(lines) - 1 if end is None else end
    depth = _indent(lines[start])
    for k in range(start + 1, end + 1):
        line = lines[k]
        if line.strip() and _indent(line) < depth:
            return
        yield k


# --- before ttadapter ------------------------------------------------------------------------------------
def carry_ttir(text: str, has_dot: bool):
    """(TTIR text with every distributed op carried as markers, Plan).  The carriers of triton-ascend
    builtins that are HIVM ops (sub_vec_id) become those ops: triton-adapter-opt 3.2.0 parses them
    and passes them through; the markers of its extension ops become the ops its frontend emits
    (extension_ops.py)."""
    from .extension_ops import lower as lower_extension_ops
    text, _ = H.lower_builtins(text)
    text, _ = lower_extension_ops(text)     # triton-ascend's extension ops, as its frontend emits them
    lines, names, planned = H.plan(text)
    kernels = [f for f in H._parse_funcs(lines) if " public " in lines[f.start] or "tt.func @" in lines[f.start]]
    if not planned:
        k = kernels[0] if kernels else None
        return text, Plan(k.name if k else "?", len(k.entry_args) if k else 0)
    funcs = {p.func.start for p in planned}
    if len(funcs) > 1 or not (" public " in lines[planned[0].func.start]):
        raise CarryError(f"distributed ops in @{planned[0].func.name}, which is not the kernel: triton-ascend "
                         f"3.2.0's ttadapter converts no tt.call, so ops of a non-inlined helper (noinline=True) "
                         f"cannot be compiled; inline the helper")
    func = planned[0].func
    arg_names = list(func.entry_args)
    plan = Plan(func.name, len(arg_names))
    replaced = {}
    renames = []        # (from line, old name, new name): pointer results
    for i, p in enumerate(planned):
        c, low = p.carrier, p.lowered
        where = H._where(c, func)
        core = H.core_type_of(low.symbol, has_dot)
        op = CarriedOp(i, low.symbol, low.effects, core, H.gm_indices(low.operands, func), [], "void", where=where)
        out = [c.indent + line for line in low.pre]
        for j, (name, ty) in enumerate(low.operands):
            chan = names.fresh(f"c{i}_{j}_")
            karg = arg_names.index(name) if name in func.entry_args else None
            if H.is_scalar_pointer(ty):
                elem = H.pointee(ty)
                plan.extra_args.append((chan, f"!tt.ptr<{elem}>"))
                m = names.fresh("m")
                out.append(f"{c.indent}{m} = tt.load {name} : {ty}")
                out.append(f"{c.indent}tt.store {chan}, {m} : !tt.ptr<{elem}>")
                op.operands.append(Operand("pointer", name, ty, chan, karg))
            elif ty.startswith(("tensor<", "!tt.")):
                raise CarryError(f"{where}: operand {j} is {ty}; only scalars and scalar pointers can be carried "
                                 f"through triton-ascend 3.2.0's ttadapter (a tensor operand would be a tile "
                                 f"load, UB the kernel does not use); pass a scalar pointer")
            else:
                plan.extra_args.append((chan, f"!tt.ptr<{ty}>"))
                out.append(f"{c.indent}tt.store {chan}, {name} : !tt.ptr<{ty}>")
                op.operands.append(Operand("scalar", name, ty, chan, karg))
        if not c.void:
            rt = c.result_type
            op.result_type = rt
            if H.is_scalar_pointer(rt):
                op.result_kind = "pointer"
                op.result_chan = names.fresh(f"p{i}_")
                plan.extra_args.append((op.result_chan, rt))
                renames.append((p.line_no, c.result, op.result_chan))
            elif rt.startswith(("tensor<", "!tt.")):
                raise CarryError(f"{where}: the result is {rt}; only scalar and scalar-pointer results can be "
                                 f"carried through triton-ascend 3.2.0's ttadapter (consume the token on the scalar "
                                 f"pointer the tile is addressed from, then build the tile's pointers)")
            elif not H._used_later(lines, p.line_no, c):
                # nothing reads it: no marker (ttadapter would drop an unused load); the op keeps its
                # result, unused, as the wrapper returns one
                op.result_kind = "unused"
            else:
                op.result_kind = "scalar"
                op.result_chan = names.fresh(f"r{i}_")
                plan.extra_args.append((op.result_chan, f"!tt.ptr<{rt}>"))
                out.append(f"{c.indent}{c.result} = tt.load {op.result_chan} : !tt.ptr<{rt}>")
        if not op.operands and op.result_kind in ("void", "unused"):
            op.anchor = names.fresh(f"a{i}_")
            plan.extra_args.append((op.anchor, "!tt.ptr<i32>"))
            zero = names.fresh("zero")
            out.append(f"{c.indent}{zero} = arith.constant 0 : i32")
            out.append(f"{c.indent}tt.store {op.anchor}, {zero} : !tt.ptr<i32>")
        plan.ops.append(op)
        replaced[p.line_no] = out
    for start, old, new in renames:
        # only in the carrier's scope: MLIR reuses a name in sibling regions
        pattern = _uses(old)
        for k in _scope(lines, start, func.end):
            if k in replaced:
                replaced[k] = [pattern.sub(new, line) for line in replaced[k]]
            else:
                lines[k] = pattern.sub(new, lines[k])
    header = lines[func.start]
    a, b = _head_args(header)
    extra = ", ".join(f"{n}: {t}" for n, t in plan.extra_args)
    inner = header[a:b].strip()
    lines[func.start] = header[:a] + (inner + ", " if inner else "") + extra + header[b:]
    out_lines = []
    for k, line in enumerate(lines):
        out_lines.extend(replaced.get(k, [line]))
    H.check_all_planned(out_lines)
    return "\n".join(out_lines), plan


# --- after ttadapter ---------------------------------------------------------------------------------------
# The printed Linalg module reuses SSA names in sibling regions (two loops may both define
# %reinterpret_cast_4), so every lookup is by line: a name's definition is the nearest one above
# its use, its uses are those in the scope of that definition.
_DEF = re.compile(r"^\s*(" + _SSA + r")(?::\d+)?\s*=\s*")


class _Linalg:
    def __init__(self, text):
        self.lines = text.split("\n")
        heads = [i for i, line in enumerate(self.lines) if H.op_name(line) == "func.func"]
        if len(heads) != 1:
            raise CarryBug(f"expected one func.func after ttadapter, found {len(heads)}")
        self.head = heads[0]
        a, b = _head_args(self.lines[self.head])
        self.args = []
        for entry in H._split_top(self.lines[self.head][a:b]):
            m = re.match(r"(" + _SSA + r")\s*:\s*(.*)$", entry)
            ty = m.group(2)
            if "{" in ty:
                ty = ty[:ty.index("{")]
            self.args.append((m.group(1), ty.strip()))

    def name_at(self, i):
        m = _DEF.match(self.lines[i])
        return m.group(1) if m else None

    def def_of(self, name, at):
        """The line defining `name` as seen from line `at` (None: a function argument)."""
        pat = re.compile(r"^\s*" + re.escape(name) + r"(?::\d+)?\s*=")
        for i in range(at - 1, self.head, -1):
            if pat.match(self.lines[i]):
                return i
        return None

    def uses(self, name, defined_at):
        """Lines using `name` in the scope of its definition at line `defined_at`."""
        pat = _uses(name)
        return [k for k in _scope(self.lines, defined_at) if pat.search(self.lines[k])]

    def indent(self, i):
        return re.match(r"\s*", self.lines[i]).group(0)


def _where_lost(op, what):
    return CarryBug(f"{op.where}: {what} after triton-ascend's ttadapter (the carrier form changed?); this is "
                      f"a bug in triton_dist.backend_ascend.carry")


@dataclass
class _Marker:
    line: int                # the store into the carrier argument
    cast: int                # the reinterpret_cast of the carrier argument
    value: str | None        # the scalar stored, when its definition names it
    tensor: str | None       # the one-element tensor stored
    tensor_type: str | None


def _marker(L: _Linalg, op, chan_name) -> _Marker:
    """The store of op's operand into the carrier argument chan_name."""
    for c in L.uses(chan_name, L.head):
        if "memref.reinterpret_cast" not in L.lines[c]:
            continue
        rc = L.name_at(c)
        for u in L.uses(rc, c):
            line = L.lines[u]
            m = re.search(r"bufferization\.materialize_in_destination\s+(" + _SSA + r")\s+in\s+writable\s+"
                          + re.escape(rc) + r"\s*:\s*\((tensor<[^>]*>)", line)
            if m:
                return _Marker(u, c, _scalar_of(L, m.group(1), u), m.group(1), m.group(2))
            m = re.search(r"memref\.store\s+(" + _SSA + r"),\s*" + re.escape(rc) + r"\[", line)
            if m:
                return _Marker(u, c, m.group(1), None, None)
    raise _where_lost(op, f"the store into the carrier argument {chan_name} was not found")


def _scalar_of(L, tensor, at):
    """The scalar a one-element tensor holds, when its definition says so (tensor.insert / linalg.fill)."""
    i = L.def_of(tensor, at)
    if i is None:
        return None
    line = L.lines[i]
    m = re.search(r"tensor\.insert\s+(" + _SSA + r")\s+into", line)
    if m:
        return m.group(1)
    m = re.search(r"linalg\.fill\s+ins\((" + _SSA + r")\s*:", line)
    if m:
        return m.group(1)
    return None


def insert_custom_ops(linalg: str, plan: Plan) -> str:
    """The Linalg module with every carried op back as its hivm.hir.custom, markers removed."""
    if not plan.ops:
        return linalg
    L = _Linalg(linalg)
    n_ttir = plan.n_args + len(plan.extra_args)
    if len(L.args) != n_ttir + LEADING_ARGS + TRAILING_ARGS:
        raise CarryBug(f"@{plan.kernel}: ttadapter gave {len(L.args)} arguments for {n_ttir} kernel arguments "
                         f"(expected {LEADING_ARGS} before and {TRAILING_ARGS} after them); the adapter's calling "
                         f"convention differs from triton-ascend 3.2.0's")
    ttir_names = [None] * plan.n_args + [n for n, _ in plan.extra_args]
    linalg_of = {name: L.args[LEADING_ARGS + k] for k, name in enumerate(ttir_names) if name is not None}
    kernel_arg = lambda k: L.args[LEADING_ARGS + k]  # noqa: E731
    drop = set()          # lines to delete
    inserts = {}          # line -> [new lines] inserted before it
    renames = []          # (line of the custom op, old name, new name, lines in its scope)
    candidates = set()    # definition lines that may now be dead
    needs_c0 = False
    for op in plan.ops:
        operands, last = [], -1
        for o in op.operands:
            mk = _marker(L, op, linalg_of[o.chan][0])
            drop.update((mk.line, mk.cast))
            last = max(last, mk.line)
            if mk.tensor:
                d = L.def_of(mk.tensor, mk.line)
                if d is not None:
                    candidates.add(d)
            if o.kind == "scalar":
                value = mk.value
                if value is None:
                    value = f"%dist_x{op.index}_{len(operands)}"
                    needs_c0 = True
                    inserts.setdefault(mk.line, []).append(
                        L.indent(mk.line) + f"{value} = tensor.extract {mk.tensor}[%dist_c0] : {mk.tensor_type}")
                operands.append((value, o.ttir_type))
                continue
            # a pointer: the memref the adapter made for it (the kernel's argument itself if it is one)
            d = L.def_of(mk.value, mk.line) if mk.value else None
            m = re.search(r"memref\.load\s+(" + _SSA + r")\[[^\]]*\]\s*:\s*(memref<.*>)\s*$",
                          L.lines[d]) if d is not None else None
            if m is None:
                raise _where_lost(op, f"the memref of pointer operand {o.ttir_name} was not found")
            candidates.add(d)
            if o.kernel_arg is not None:
                operands.append(kernel_arg(o.kernel_arg))
            else:
                operands.append((m.group(1), m.group(2)))
        common = dict(core=op.core, gm=op.gm, effects=op.effects)
        if op.result_kind == "scalar":
            chan = linalg_of[op.result_chan][0]
            loads = []
            for c in L.uses(chan, L.head):
                if "memref.reinterpret_cast" in L.lines[c]:
                    drop.add(c)
                    loads += [u for u in L.uses(L.name_at(c), c) if "memref.load" in L.lines[u]]
            if len(loads) != 1:
                raise _where_lost(op, f"{len(loads)} loads of the result argument {chan}")
            at = loads[0]
            drop.add(at)
            inserts.setdefault(at, []).append(L.indent(at) + H.custom_op(
                op.symbol, operands, result=L.name_at(at), result_type=op.result_type, **common))
            if last > at:
                raise _where_lost(op, "an operand is stored after the result is read")
        elif op.result_kind == "pointer":
            arg, ty = linalg_of[op.result_chan]
            result = f"%dist_ptr{op.index}"
            at = last + 1
            ind = L.indent(last)
            inserts.setdefault(at, []).append(ind + H.custom_op(op.symbol, operands, result=result, result_type=ty,
                                                                **common))
            inserts[at].append(f"{ind}annotation.mark {result} {{address_space = #hivm.address_space<gm>}} : {ty}")
            scope = set(_scope(L.lines, last))
            outside = [u for u in L.uses(arg, L.head) if u not in scope]
            if outside:
                raise _where_lost(op, f"the pointer it returns is used outside its scope (line {outside[0] + 1})")
            renames.append((arg, result, scope))
        else:
            if op.anchor:
                mk = _marker(L, op, linalg_of[op.anchor][0])
                drop.update((mk.line, mk.cast))
                if mk.tensor:
                    d = L.def_of(mk.tensor, mk.line)
                    if d is not None:
                        candidates.add(d)
                last = mk.line
            result = dict(result=f"%dist_unused{op.index}", result_type=op.result_type) \
                if op.result_kind == "unused" else {}
            inserts.setdefault(last + 1, []).append(L.indent(last) + H.custom_op(op.symbol, operands, **result,
                                                                                 **common))
    for arg, result, scope in renames:
        pat = _uses(arg)
        for k in scope:
            L.lines[k] = pat.sub(result, L.lines[k])
    _remove_dead(L, candidates, drop, " ".join(x for v in inserts.values() for x in v))
    out = []
    for i, line in enumerate(L.lines):
        if i == L.head + 1 and needs_c0:
            out.append(L.indent(i) + "%dist_c0 = arith.constant 0 : index")
        out.extend(inserts.get(i, []))
        if i not in drop:
            out.append(line)
    return _drop_args("\n".join(out), {linalg_of[n][0] for n, _ in plan.extra_args})


_PURE = ("tensor.insert", "tensor.empty", "linalg.fill", "memref.load", "memref.reinterpret_cast",
         "arith.constant", "tensor.extract")


def _remove_dead(L: _Linalg, candidates, drop, inserted: str) -> None:
    """Add to `drop` the marker values nothing else uses any more (and what only they used);
    a name the inserted custom ops mention is kept (wherever it is defined: keeping too much is
    harmless, bishengir-compile's canonicalizer removes what is unused)."""
    work = set(candidates)
    while work:
        d = work.pop()
        if d in drop or H.op_name(L.lines[d]) not in _PURE:
            continue
        name = L.name_at(d)
        if name is None or any(u not in drop for u in L.uses(name, d)) or _uses(name).search(inserted):
            continue
        drop.add(d)
        for operand in re.findall(_SSA, L.lines[d].split("=", 1)[1]):
            od = L.def_of(operand, d)
            if od is not None:
                work.add(od)


def _drop_args(text, names):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if H.op_name(line) == "func.func":
            a, b = _head_args(line)
            keep = [e for e in H._split_top(line[a:b]) if re.match(_SSA, e).group(0) not in names]
            lines[i] = line[:a] + ", ".join(keep) + line[b:]
    return "\n".join(lines)
