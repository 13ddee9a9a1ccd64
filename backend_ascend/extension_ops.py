"""triton-ascend's extension ops in the form its own frontend gives them, for triton-adapter-opt 3.2.0.

Kernels written for Ascend call `triton.language.extra.cann.extension` (extract_slice, sort,
sync_block_set, ...).  Traced for the NPU by stock Triton (frontend.py), each call arrives as a
group of markers (triton_dist/language/_ext_emit.py says how); `lower()` rewrites each group into
the TTIR op of FORMS below, before triton-adapter-opt runs (carry.carry_ttir, hivm.convert_text).

Which form: the one triton-ascend's frontend emits, read at two commits of triton-lang/triton-ascend:
- MAIN = a84b1eb52b6215e2c171632f2df0892f1003cfc8 (its main line, whose extension module the
  kernels are written against: third_party/ascend/language/cann/extension/*.py, builder methods in
  third_party/ascend/triton_ascend.cc and ascend_ir.cc, ops in
  third_party/ascend/include/Dialect/TritonAscend/IR/TritonAscendOps.td, dialect `ascend`);
- V320 = 8edbaaed2ad70ffae4beb033707d4d52dc15a9b1 (what the 3.2.0 wheel, whose adapter runs here,
  was built from: triton_patch/python/triton_patch/language/semantic.py, builder methods in
  triton_patch/python/src/ir.cc, ops in triton_patch/include/triton/Dialect/Triton/IR/TritonOps.td).
Where the main line's op is the 3.2.0 op under another dialect name with the same operands and
attributes (`ascend.sort` / `tt.sort`), the 3.2.0 name is emitted: that is what the 3.2.0 frontend
gives for the same call and what its adapter parses.  Where the two releases' ops take different
arguments, or 3.2.0 has none, the main line's form is emitted and the adapter's own refusal is
reported as "cannot lower" (CannotLower, exit 2), never as the compiler's verdict on the kernel
(docs/ascend.md, "What the real compilers refuse").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from triton_dist.errors import TritonDistError
from triton_dist.language._ext_emit import EXT_ATTR, EXT_LIBNAME

from . import ttir_text as H      # the reading of the printed module (hivm.convert_text runs lower())

MAIN = "a84b1eb52b6215e2c171632f2df0892f1003cfc8"
V320 = "8edbaaed2ad70ffae4beb033707d4d52dc15a9b1"


@dataclass(frozen=True)
class Form:
    ttir: str          # the TTIR op emitted
    in_320: bool       # whether triton-adapter-opt 3.2.0 takes this form (else: CannotLower)
    source: str        # where triton-ascend's frontend emits it (file:lines at MAIN / V320)
    note: str = ""


# The one table: extension op -> the TTIR op emitted for it.
FORMS = {
    "extract_slice": Form(
        "tensor.extract_slice", True,
        f"MAIN third_party/ascend/triton_ascend.cc:52-90 (create_extract_slice: tensor::ExtractSliceOp, offsets "
        f"dynamic index values, sizes static); V320 triton_patch/python/src/ir.cc:1393-1423 (the same op)",
        "strides printed static: the main line builds them as index constants, which Triton's canonicalizer folds"),
    "insert_slice": Form(
        "tensor.insert_slice", True,
        "MAIN third_party/ascend/triton_ascend.cc:91-131 (create_insert_slice: tensor::InsertSliceOp); "
        "V320 triton_patch/python/src/ir.cc:1424-1458"),
    "get_element": Form(
        "tensor.extract", True,
        "MAIN third_party/ascend/triton_ascend.cc:36-51 (create_extract_scalar: tensor::ExtractOp, indices "
        "index_cast to index); V320 triton_patch/python/src/ir.cc:1377-1392"),
    "sort": Form(
        "tt.sort", True,
        "MAIN third_party/ascend/triton_ascend.cc:276-288 (create_sort: ascend.sort, TritonAscendOps.td:417-438, "
        "dialect name TritonAscendDialect.td:15); V320 triton_patch/python/src/ir.cc:1857-1868 (tt.sort, "
        "TritonOps.td:760-782: the same operand and dim/descending attributes)"),
    "flip": Form(
        "tt.flip", True,
        "MAIN third_party/ascend/triton_ascend.cc:289-300 (ascend.flip, TritonAscendOps.td:394-415); V320 "
        "triton_patch/python/src/ir.cc:1870-1881 (tt.flip, TritonOps.td:737-758: the same operand and dim)"),
    "index_select_simd": Form(
        "tt.index_select_simd", True,
        "MAIN third_party/ascend/triton_ascend.cc:141-199 (ascend.index_select_simd, TritonAscendOps.td:249-297); "
        "V320 triton_patch/python/src/ir.cc:1730-1788 (tt.index_select_simd, TritonOps.td:501-548: the same "
        "operands src, index, dim, src_shape, src_offset, read_shape)"),
    "gather_out_to_ub": Form(
        "ascend.gather_out_to_ub", False,
        "MAIN third_party/ascend/triton_ascend.cc:223-250, TritonAscendOps.td:136-193 (src_stride i64, end_offset "
        "and start_offset i32, index_boundary i64: extension/mem_ops.py:284-300)",
        "V320's tt.gather_out_to_ub (TritonOps.td:444-499) takes (src_stride, index_shape, offsets), another "
        "contract; not translated"),
    "scatter_ub_to_out": Form(
        "ascend.scatter_ub_to_out", False,
        "MAIN third_party/ascend/triton_ascend.cc:251-275, TritonAscendOps.td:195-247 (dst_stride i64, "
        "end/start_offset i32: extension/mem_ops.py:428-445)", "V320 has no such op"),
    "index_put": Form(
        "ascend.index_put", False,
        "MAIN third_party/ascend/triton_ascend.cc:200-222, TritonAscendOps.td:84-134 (offsets and strides i64 when "
        "the index is, else i32: extension/mem_ops.py:141-151)",
        "V320's tt.index_put (TritonOps.td:398-442) takes (dst_shape, dst_offset) and no index_boundary; "
        "not translated"),
    "sync_block_set": Form(
        "hivm.hir.sync_block_set", True,
        "MAIN third_party/ascend/ascend_ir.cc:93-135 (buildSyncBlockOp: core type from the sender, the event id "
        "as an i64 value), default pipes extension/core.py:202-225 (cube: PIPE_FIX -> PIPE_MTE2, vector: "
        "PIPE_MTE3 -> PIPE_MTE2); V320 emits tt.custom \"sync_block_set\" (semantic.py:689-697) which its "
        "TritonToHIVM.cpp:144-150 turns into the same op with the same core type and default pipes",
        "the main line's form: it keeps the pipes a kernel names and an event id computed at run time"),
    "sync_block_wait": Form(
        "hivm.hir.sync_block_wait", True,
        "as sync_block_set (ascend_ir.cc:93-135; V320 TritonToHIVM.cpp:152-158)"),
    "sync_block_all": Form(
        "tt.custom \"sync_block_all\"", True,
        "V320 triton_patch/python/triton_patch/language/semantic.py:689-691, src/ir.cc:1714-1722 (tt.custom with "
        "str_args [mode, event_id]), converted by ascend/triton-adapter/lib/TritonToHIVM/TritonToHIVM.cpp:122-141 "
        "(modes all, all_cube, all_vector; any other: \"Unknown custom operation\")",
        "MAIN emits hivm.hir.sync_block with PIPE_ALL (ascend_ir.cc:138-170, 713-723), which this adapter's HIVM "
        "verifier refuses (\"Cube Pipe is illegal. Cube pipe is PIPE_FIX!\", measured), so the form of the "
        "release the adapter belongs to is emitted; mode all_sub_vector (main line only) cannot be lowered"),
    "annotation_mark": Form(
        "annotation.mark", True,
        "MAIN third_party/ascend/language/cann/extension/aux_ops.py:96-117 (compile_hint_impl -> "
        "create_annotation_mark, ascend_ir.cc:597-603: annotation::MarkOp with the hint as a string attribute), "
        "used by cast(overflow_mode=) (vec_ops.py:536-541); V320 emits tt.annotation (semantic.py:672-686, "
        "src/ir.cc:1790), which its --triton-to-annotation pass turns into the same annotation.mark "
        "(TritonToAnnotation.cpp:54)",
        "measured: the adapter passes it through and bishengir-compile lowers an fp32 -> int8 cast marked "
        "\"saturate\" as fp32 -> f16 -> int8 conversions with a mode, unmarked as fp32 -> int32 -> int8 with "
        "overflow (vcast_*_with_mode / _with_overflow)"),
}


class CannotLower(TritonDistError):
    """An extension op that triton-adapter-opt 3.2.0 cannot parse or convert (not a verdict on the kernel)."""


@dataclass
class _Marker:
    line_no: int
    carrier: object         # hivm.Carrier
    info: dict


def _marker(i, line):
    if EXT_LIBNAME not in line:
        return None
    c = H._parse_carrier(i, line, libname=EXT_LIBNAME)
    if c is None:
        return None
    return _Marker(i, c, json.loads(c.attrs[EXT_ATTR]))


class _Writer:
    """The lines replacing one result marker."""

    def __init__(self, names, indent, operands):
        self.names, self.indent, self.ops = names, indent, operands      # operands: [(name, type)]
        self.lines = []

    def emit(self, text):
        self.lines.append(self.indent + text)

    def operand(self, ref):
        kind, k = ref
        assert kind == "operand", ref
        return self.ops[k]

    def const(self, value, ty):
        name = self.names.fresh("ext_c")
        self.emit(f"{name} = arith.constant {int(value)} : {ty}")
        return name

    def int_value(self, entry, ty):
        """An entry of a list (int or operand ref) as an SSA value of integer type ty."""
        if isinstance(entry, int):
            return self.const(entry, ty)
        name, have = self.operand(entry)
        if have == ty:
            return name
        out = self.names.fresh("ext_x")
        if ty == "index":
            self.emit(f"{out} = arith.index_cast {name} : {have} to index")
        elif _width(have) < _width(ty):
            self.emit(f"{out} = arith.extsi {name} : {have} to {ty}")
        else:
            self.emit(f"{out} = arith.trunci {name} : {have} to {ty}")
        return out

    def mixed(self, entries):
        """A static-or-dynamic index list of tensor.extract_slice / insert_slice: `0, %x` ."""
        return ", ".join(str(e) if isinstance(e, int) else self.int_value(e, "index") for e in entries)


def _width(ty):
    return 64 if ty in ("index", "i64") else int(ty[1:])


def _list(w, entries, ty):
    vals = [w.int_value(e, ty) for e in entries]
    return f"[{', '.join(vals)} : {', '.join([ty] * len(vals))}]"


def _index_elem(index_type):
    return H._tensor_parts(index_type)[1]


def _write(op, st, w: _Writer, result, rtype):
    """Emit the TTIR of one op (FORMS[op].ttir)."""
    if op == "extract_slice":
        src, sty = w.operand(st["src"])
        offs = w.mixed(st["offsets"])
        w.emit(f"{result} = tensor.extract_slice {src}[{offs}] [{', '.join(map(str, st['sizes']))}] "
               f"[{', '.join(map(str, st['strides']))}] : {sty} to {rtype}")
    elif op == "insert_slice":
        dst, dty = w.operand(st["dst"])
        src, sty = w.operand(st["src"])
        offs = w.mixed(st["offsets"])
        w.emit(f"{result} = tensor.insert_slice {src} into {dst}[{offs}] [{', '.join(map(str, st['sizes']))}] "
               f"[{', '.join(map(str, st['strides']))}] : {sty} into {dty}")
    elif op == "get_element":
        src, sty = w.operand(st["src"])
        idx = [w.int_value(e, "index") for e in st["indices"]]
        w.emit(f"{result} = tensor.extract {src}[{', '.join(idx)}] : {sty}")
    elif op == "sort":
        src, sty = w.operand(st["src"])
        w.emit(f"{result} = tt.sort {src}, {st['dim']}, {'true' if st['descending'] else 'false'} : {sty} -> {rtype}")
    elif op == "flip":
        src, sty = w.operand(st["src"])
        w.emit(f"{result} = tt.flip {src}, {st['dim']} : {sty} -> {rtype}")
    elif op == "index_select_simd":
        src, pty = w.operand(st["src"])
        idx, ity = w.operand(st["index"])
        shape = ", ".join(w.int_value(e, "index") for e in st["src_shape"])
        offs = ", ".join(w.int_value(e, "index") for e in st["src_offset"])
        w.emit(f"{result} = tt.index_select_simd {src}, {idx}, {st['dim']}, [{shape}], [{offs}], "
               f"[{', '.join(map(str, st['read_shape']))}] : {pty}, {ity} -> {rtype}")
    elif op == "gather_out_to_ub":
        src, pty = w.operand(st["src"])
        idx, ity = w.operand(st["index"])
        bound, dim = w.const(st["index_boundary"], "i64"), w.const(st["dim"], "i32")
        other = ""
        if st.get("other") is not None:
            o, oty = w.operand(st["other"])
            other = f", {o} : {oty}"
        w.emit(f"{result} = ascend.gather_out_to_ub {src} : {pty}, {idx} : {ity}, {bound} : i64, {dim} : i32, "
               f"{_list(w, st['src_stride'], 'i64')}, {_list(w, st['end_offset'], 'i32')}, "
               f"{_list(w, st['start_offset'], 'i32')}{other} -> {rtype}")
    elif op == "scatter_ub_to_out":
        ptr, pty = w.operand(st["ptr"])
        val, vty = w.operand(st["value"])
        idx, ity = w.operand(st["index"])
        bound, dim = w.const(st["index_boundary"], "i64"), w.const(st["dim"], "i32")
        # the double comma is the op's assembly format (TritonAscendOps.td:236-237 at MAIN)
        w.emit(f"ascend.scatter_ub_to_out {ptr} : {pty}, {val} : {vty}, , {idx} : {ity}, {bound} : i64, "
               f"{dim} : i32, {_list(w, st['dst_stride'], 'i64')}, {_list(w, st['end_offset'], 'i32')}, "
               f"{_list(w, st['start_offset'], 'i32')}")
    elif op == "index_put":
        ptr, pty = w.operand(st["ptr"])
        idx, ity = w.operand(st["index"])
        val, vty = w.operand(st["value"])
        wide = "i64" if _index_elem(ity) == "i64" else "i32"
        bound, dim = w.const(st["index_boundary"], "i64"), w.const(st["dim"], "i32")
        w.emit(f"ascend.index_put {ptr} : {pty}, {idx} : {ity}, {val} : {vty}, {dim} : i32, {bound} : i64, "
               f"{_list(w, st['end_offset'], wide)}, {_list(w, st['start_offset'], wide)}, "
               f"{_list(w, st['dst_stride'], wide)}")
    elif op in ("sync_block_set", "sync_block_wait"):
        cube_side = (st["sender"] == "cube") == (op == "sync_block_set")
        core = "CUBE" if cube_side else "VECTOR"
        default = ("PIPE_FIX", "PIPE_MTE2") if st["sender"] == "cube" else ("PIPE_MTE3", "PIPE_MTE2")
        sp = st.get("sender_pipe") or default[0]
        rp = st.get("receiver_pipe") or default[1]
        flag = w.int_value(st["event_id"], "i64")
        w.emit(f"hivm.hir.{op}[<{core}>, <{sp}>, <{rp}>] flag = {flag}")
    elif op == "sync_block_all":
        # the generic form: after the custom form's attr-dict, an optional operand list follows
        # (TritonOps.td:1648-1661 at V320), which would take the next line's result name for one
        w.emit(f"\"tt.custom\"() <{{op_name = \"sync_block_all\", str_args = [\"{st['mode']}\", "
               f"{int(st['event_id'])} : i32]}}> : () -> ()")
    elif op == "annotation_mark":
        src, sty = w.operand(st["src"])
        w.emit(f"annotation.mark {src} {{{st['key']} = {json.dumps(st['value'])}}} : {sty}")
    else:
        raise H.LoweringError(f"extension op {op!r} has no TTIR form here (backend_ascend/extension_ops.py FORMS)")


def lower(text: str):
    """(text, count): every marker group of the extension ops replaced by its TTIR op."""
    if EXT_LIBNAME not in text:
        return text, 0
    lines = text.split("\n")
    names = H._Names(text)
    pending: dict = {}
    replaced = {}
    for i, line in enumerate(lines):
        m = _marker(i, line)
        if m is None:
            continue
        if m.info["role"] == "operand":
            pending.setdefault(m.info["id"], []).append(m)
            replaced[i] = []
            continue
        group = sorted(pending.pop(m.info["id"], []), key=lambda x: x.info["index"])
        op = m.info["op"]
        if [g.info["index"] for g in group] != list(range(len(group))):
            raise H.LoweringError(f"line {i + 1}: the operand markers of extension op {op} are not all there; "
                                  f"the markers were not made by triton_dist/language/_ext_emit.py")
        w = _Writer(names, m.carrier.indent, [(g.carrier.operands[0], g.carrier.types[0]) for g in group])
        void = op in ("scatter_ub_to_out", "index_put", "sync_block_set", "sync_block_wait", "sync_block_all",
                      "annotation_mark")
        if void and H._used_later(lines, i, m.carrier):
            raise H.LoweringError(f"line {i + 1}: the placeholder result of extension op {op} is used")
        _write(op, m.info["static"], w, m.carrier.result, m.carrier.result_type)
        replaced[i] = w.lines
    if pending:
        raise H.LoweringError(f"extension-op operand markers without their op: {sorted(pending)}")
    out = []
    for i, line in enumerate(lines):
        out.extend(replaced.get(i, [line]))
    return "\n".join(out), sum(1 for v in replaced.values() if v)


_GAPS = {name: form for name, form in FORMS.items() if not form.in_320}
_LOC = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$")


def _gap_on(line: str):
    """The extension op whose 3.2.0-less form is on this line of the adapter's input, or None."""
    for name, form in _GAPS.items():
        if form.ttir in line:
            return name
    if '"tt.custom"() <{op_name = "sync_block_all"' in line:
        mode = re.search(r'str_args = \["([^"]*)"', line)
        if mode and mode.group(1) not in ("all", "all_cube", "all_vector"):
            return f"sync_block_all(\"{mode.group(1)}\")"
    return None


def cannot_lower(kernel: str, adapter_input: str, errors) -> CannotLower | None:
    """The CannotLower for an adapter failure located on an extension op the 3.2.0 adapter does not take."""
    lines = adapter_input.split("\n")
    for e in errors:
        m = _LOC.match(e.strip())
        if not m:
            continue
        k = int(m.group("line")) - 1
        op = _gap_on(lines[k]) if 0 <= k < len(lines) else None
        if op is None:
            continue
        base = op.split("(")[0]
        form = FORMS[base]
        return CannotLower(
            f"cannot lower kernel {kernel}: extension.{op} is not something triton-ascend 3.2.0's triton-adapter-opt "
            f"takes ({form.note or 'its form: ' + form.ttir}); the adapter says:\n  {m.group('msg')}\n"
            f"This is a gap between triton-ascend releases, not the compiler's verdict on the kernel: compile it with "
            f"triton-ascend's main line on an NPU host (docs/ascend.md, \"What the real compilers refuse\")")
    return None
