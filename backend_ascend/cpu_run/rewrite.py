"""Text rewrites that make a compiled HIVM module lowerable by the CPU-runner passes.

ConvertHIVMToUpstream (AscendNPU-IR v1.2.0, bishengir/lib/ExecutionEngine/ConvertHIVMToUpstream.cpp)
erases the sync ops (set_flag, wait_flag, pipe_barrier, set_mask_norm: lines 1082-1084) and
marks the rest of the HIVM dialect illegal (line 1117) with no pattern for get_block_idx,
get_sub_block_idx, pointer_cast or hivm.hir.custom.  So, before the passes:

- `hivm.hir.get_block_idx` & co. become calls of extern functions the runner defines per
  program (`__hivm_block_idx`, ...);
- `hivm.hir.pointer_cast(%off) : memref<S, #hivm.address_space<X>>` (PlanMemory's placement of an
  on-chip buffer at byte %off of space X) becomes a view at %off of one buffer standing for X,
  so PlanMemory's aliasing (two buffers at one offset) is what runs.  That buffer is a
  memref.global here; after lowering (`per_core_spaces`) its address comes from an extern
  call instead, so that every core running at once has its own UB;
- `func.func private @_mlir_ciface_*` declarations lose llvm.emit_c_interface, which
  convert-func-to-llvm would apply a second time (`_mlir_ciface__mlir_ciface_aclshmem_my_pe`);
- each scalar `memref.load` / `memref.store` of a gm memref (what the compiler emits inline for a
  scalar `tl.load`, or in the per-element loops of an indirect access) is guarded: its byte
  address is checked first, natively, against a table of the launch's live buffers
  (`@__hivm_gm_table`, filled by the runner), and only a miss calls out (`__hivm_gm_fault`,
  memory.gm_scalar_fault), which re-checks against every live buffer and reports the fault; a
  faulting access is skipped (a load yields 0), so the block ends and reports instead of
  touching the address;
- `extension.sync_block_all`'s set/wait pair across blocks becomes `__hivm_sync_block_all(core, flag)`
  (`blocks_sync`), a barrier of the launch's cores in the simulator;
- each `scf.while` condition is and-ed with `__hivm_running()` (`loop_aborts`): a failed call of
  the block returns zeros into native code, and a loop waiting on them ends once the launch has
  failed instead of spinning (runner.py defines the function: a volatile load of its abort word).
"""
from __future__ import annotations

import re

from triton_dist.errors import TritonDistError

# extern functions the runner binds (runner.py): the program's linear block index, the vector
# sub-block (sub_vec_id) and their counts
BLOCK_OPS = {
    "hivm.hir.get_block_idx": "__hivm_block_idx",
    "hivm.hir.get_sub_block_idx": "__hivm_sub_block_idx",
    "hivm.hir.get_block_num": "__hivm_block_num",
    "hivm.hir.get_sub_block_num": "__hivm_sub_block_num",
}

# on-chip spaces, the dlti entry of the module's target spec giving each one's size in bits
# (NPUTargetSpec.td v1.2.0 lines 35-72: "Size of unified buffer in bits", 910B: UB 192 KiB,
# L1 512 KiB, L0A/L0B 64 KiB, L0C 128 KiB)
SPACE_SIZE_KEYS = {"ub": "UB_SIZE", "cbuf": "L1_SIZE", "ca": "L0A_SIZE", "cb": "L0B_SIZE", "cc": "L0C_SIZE"}
DEFAULT_BITS = {"UB_SIZE": 1572864, "L1_SIZE": 4194304, "L0A_SIZE": 524288, "L0B_SIZE": 524288,
                "L0C_SIZE": 1048576, "UB_ALIGN_SIZE": 256}


class RewriteError(TritonDistError):
    """A form of the compiled module the CPU run does not handle (the message names it)."""


def target_sizes(text: str) -> dict:
    """Bytes of each on-chip space, and the UB alignment, from the module's target spec."""
    bits = dict(DEFAULT_BITS)
    for key, value in re.findall(r'#dlti\.dl_entry<"(\w+)", (\d+) : i32>', text):
        bits[key] = int(value)
    out = {space: bits[key] // 8 for space, key in SPACE_SIZE_KEYS.items()}
    out["ub_align"] = bits["UB_ALIGN_SIZE"] // 8
    return out


def _insert_decls(text: str, decls) -> str:
    if not decls:
        return text
    return re.sub(r"(^module[^\n]*\{\n)", lambda m: m.group(1) + "\n".join(sorted(decls)) + "\n", text,
                  count=1, flags=re.M)


def block_ops(text: str) -> str:
    decls = set()
    for op, fn in BLOCK_OPS.items():
        pat = re.compile(r"(%[\w.]+) = " + re.escape(op) + r" -> (i64|i32)\b")
        for m in pat.finditer(text):
            decls.add(f"  func.func private @{fn}_{m.group(2)}() -> {m.group(2)}")
        text = pat.sub(lambda m: f"{m.group(1)} = func.call @{fn}_{m.group(2)}() : () -> {m.group(2)}", text)
    return _insert_decls(text, decls)


_PCAST = re.compile(r"^(\s*)(%[\w.]+) = hivm\.hir\.pointer_cast\(([^)]*)\)(?: \[[^\]]*\])? : "
                    r"memref<([^,>]*), #hivm\.address_space<(\w+)>>\s*$", re.M)


def pointer_casts(text: str, sizes: dict) -> str:
    used = set()
    count = [0]

    def rep(m):
        ind, res, offs, shape, space = m.groups()
        offs = [o.strip() for o in offs.split(",") if o.strip()]
        if len(offs) != 1:
            raise RewriteError(f"a pointer_cast with {len(offs)} addresses (a multi-buffered on-chip buffer) is "
                               f"not handled by the CPU run yet: {m.group(0).strip()}")
        if "?" in shape:
            raise RewriteError(f"a pointer_cast of a dynamic shape is not handled by the CPU run yet: "
                               f"{m.group(0).strip()}")
        if space not in sizes:
            raise RewriteError(f"pointer_cast into address space {space!r}, which the CPU run does not model")
        used.add(space)
        count[0] += 1
        p, n = f"%__hivm_pc{count[0]}", sizes[space]
        t = f"memref<{shape}>"
        return (f"{ind}{p}_g = memref.get_global @__hivm_space_{space} : memref<{n}xi8>\n"
                f"{ind}{p}_o = arith.index_cast {offs[0]} : i64 to index\n"
                f"{ind}{p}_v = memref.view {p}_g[{p}_o][] : memref<{n}xi8> to {t}\n"
                f"{ind}{res} = memref.memory_space_cast {p}_v : {t} to memref<{shape}, "
                f"#hivm.address_space<{space}>>")

    text = _PCAST.sub(rep, text)
    left = re.search(r".*hivm\.hir\.pointer_cast.*", text)
    if left:
        raise RewriteError("a pointer_cast form the CPU run does not handle: " + left.group(0).strip())
    decls = {f'  memref.global "private" @__hivm_space_{sp} : memref<{sizes[sp]}xi8> = uninitialized '
             f'{{alignment = 64 : i64}}' for sp in used}
    return _insert_decls(text, decls)


# mix kernels (hivm-split-mix-kernel: <name>_mix_aic and <name>_mix_aiv): the cross-core flags become
# calls the runner answers per block (runner.BlockFlags); the FFTS base address has no CPU meaning
_SYNC = re.compile(r"^(\s*)hivm\.hir\.sync_block_(set|wait)\[<(CUBE|VECTOR)>, <(\w+)>, <(\w+)>\] flag = (\d+|%[\w.]+)"
                   r"(?: ffts_base_addr = %[\w.]+)?\s*$", re.M)


def _type_of(text: str, value: str, before: int) -> str:
    """The result type of `value` as defined last before offset `before` (SSA names repeat per function)."""
    defs = [m for m in re.finditer(r"^\s*" + re.escape(value) + r" = .*?(\w+)\s*$", text, re.M) if m.start() < before]
    if not defs:
        raise RewriteError(f"the type of the sync_block flag {value} is not found in the compiled module")
    return defs[-1].group(1)


# sync_block_all across blocks: triton-ascend's extension.sync_block_all(mode, id) reaches the module
# as a set/wait pair of one flag with INTER_BLOCK_SYNCHRONIZATION on the set (measured with the 3.2.0
# compilers: <VECTOR> for "all" and "all_vector", <CUBE> for "all_cube"); on the NPU the pair waits for
# the flag set by every core of that kind in the launch (FFTS cross-core sync; inferred from the mode's
# name and AscendNPU-IR's HIVMDecomposeOp.cpp:541-596, which lowers sync_block to it).  Here the pair is
# one call, `__hivm_sync_block_all(core, flag)`, which the runner makes the simulator's barrier.
_SYNC_ALL = re.compile(r"^(\s*)hivm\.hir\.sync_block_set\[<(CUBE|VECTOR)>, <\w+>, <\w+>\] flag = (\d+)"
                       r" ffts_base_addr = %[\w.]+ sync_instr_mode = <INTER_BLOCK_SYNCHRONIZATION>\s*\n"
                       r"\s*hivm\.hir\.sync_block_wait\[<\2>, <\w+>, <\w+>\] flag = \3\s*$", re.M)
SYNC_ALL_FN = "__hivm_sync_block_all"


def blocks_sync(text: str) -> str:
    n = [0]

    def rep(m):
        n[0] += 1
        ind, c = m.group(1), f"%__hivm_sa{n[0]}"
        return (f"{ind}{c}_c = arith.constant {int(m.group(2) == 'VECTOR')} : i64\n"
                f"{ind}{c}_f = arith.constant {m.group(3)} : i64\n"
                f"{ind}func.call @{SYNC_ALL_FN}({c}_c, {c}_f) : (i64, i64) -> ()")

    text = _SYNC_ALL.sub(rep, text)
    return _insert_decls(text, {f"  func.func private @{SYNC_ALL_FN}(i64, i64)"} if n[0] else ())


def cross_core_flags(text: str) -> str:
    text = re.sub(r"^\s*hivm\.hir\.set_ffts_base_addr %[\w.]+\s*\n", "", text, flags=re.M)
    text = blocks_sync(text)
    n = [0]

    def rep(m):
        ind, op, core, _p1, _p2, flag = m.groups()
        n[0] += 1
        c = f"%__hivm_sb{n[0]}"
        if flag.startswith("%"):        # a flag id computed at run time: widened to i64 as the extern takes it
            ty = _type_of(text, flag, m.start())
            conv = {"i64": None, "index": "arith.index_cast"}.get(ty, "arith.extui")
            flag_def = (f"{ind}{c}_f = {conv} {flag} : {ty} to i64\n" if conv else "")
            fval = f"{c}_f" if conv else flag
        else:
            flag_def, fval = f"{ind}{c}_f = arith.constant {flag} : i64\n", f"{c}_f"
        return (f"{flag_def}{ind}{c}_c = arith.constant {int(core == 'VECTOR')} : i64\n"
                f"{ind}func.call @__hivm_sync_block_{op}({c}_c, {fval}) : (i64, i64) -> ()")

    text = _SYNC.sub(rep, text)
    left = re.search(r".*hivm\.hir\.sync_block_(?:set|wait).*", text)
    if left:
        raise RewriteError("a sync_block form the CPU run does not handle: " + left.group(0).strip())
    decls = {f"  func.func private @__hivm_sync_block_{op}(i64, i64)" for op in ("set", "wait")
             if f"@__hivm_sync_block_{op}(" in text}
    return _insert_decls(text, decls)


def c_interface_prefix(text: str) -> str:
    def fix(m):
        line = m.group(0)
        return re.sub(r",?\s*llvm\.emit_c_interface", "", line).replace("attributes {, ", "attributes {")
    return re.sub(r"^\s*func\.func private @_mlir_ciface_[\w.]+\(.*$", fix, text, flags=re.M)


# a scalar access of global memory, as the compiled module holds it after convert-hivm-to-std
# (`%6 = memref.load %rc[%c0] {markDCacheInvalidatePatternVisited = 0 : i32} : memref<1xi32, strided<[1],
# offset: ?>, #hivm.address_space<gm>>`)
_GM_LOAD = re.compile(r"^(\s*)(%[\w.]+) = memref\.load (%[\w.]+)\[([^\]]*)\](?: \{[^{}]*\})? : "
                      r"(memref<([^,>]+)[^\n]*#hivm\.address_space<gm>>)\s*$", re.M)
_GM_STORE = re.compile(r"^(\s*)memref\.store (%[\w.]+), (%[\w.]+)\[([^\]]*)\](?: \{[^{}]*\})? : "
                       r"(memref<([^,>]+)[^\n]*#hivm\.address_space<gm>>)\s*$", re.M)
ELEMENT_BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i1": 1}
GM_TABLE_SLOTS = 64        # buffers the native check knows; more (or a peer's, added later) go to the call-out
GM_LOAD, GM_STORE = 0, 1   # the kind argument of __hivm_gm_fault

# the native check: hit if [addr, addr + bytes) lies inside one [start, end) pair of the table
# (table[0] = pairs in use); a miss asks the runner, whose answer (false: a fault) is final
_GM_CHECK = f"""  memref.global @__hivm_gm_table : memref<{1 + 2 * GM_TABLE_SLOTS}xi64> = uninitialized
  func.func private @__hivm_gm_fault(i64, i64, i64) -> i1
  func.func private @__hivm_gm_check(%addr: i64, %bytes: i64, %kind: i64) -> i1 {{
    %t = memref.get_global @__hivm_gm_table : memref<{1 + 2 * GM_TABLE_SLOTS}xi64>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %false = arith.constant false
    %true = arith.constant true
    %n64 = memref.load %t[%c0] : memref<{1 + 2 * GM_TABLE_SLOTS}xi64>
    %n = arith.index_cast %n64 : i64 to index
    %end = arith.addi %addr, %bytes : i64
    %hit = scf.for %i = %c0 to %n step %c1 iter_args(%h = %false) -> (i1) {{
      %j0 = arith.muli %i, %c2 : index
      %j = arith.addi %j0, %c1 : index
      %k = arith.addi %j, %c1 : index
      %lo = memref.load %t[%j] : memref<{1 + 2 * GM_TABLE_SLOTS}xi64>
      %hi = memref.load %t[%k] : memref<{1 + 2 * GM_TABLE_SLOTS}xi64>
      %a = arith.cmpi ule, %lo, %addr : i64
      %b = arith.cmpi ule, %end, %hi : i64
      %in = arith.andi %a, %b : i1
      %h2 = arith.ori %h, %in : i1
      scf.yield %h2 : i1
    }}
    %ok = scf.if %hit -> (i1) {{
      scf.yield %true : i1
    }} else {{
      %r = func.call @__hivm_gm_fault(%addr, %bytes, %kind) : (i64, i64, i64) -> i1
      scf.yield %r : i1
    }}
    return %ok : i1
  }}"""


def _gm_address(ind: str, p: str, mem: str, ty: str, elem: str, idx: list) -> str:
    """Ops computing `{p}_a` (i64), the byte address of element `idx` of the gm memref `mem`."""
    rank = len(idx)
    if elem not in ELEMENT_BYTES:
        raise RewriteError(f"a scalar global-memory access of element type {elem} the CPU run does not check: {ty}")
    space = "#hivm.address_space<gm>"
    out = [f"{ind}{p}_m:{2 + 2 * rank} = memref.extract_strided_metadata {mem} : {ty} -> memref<{elem}, {space}>, "
           + ", ".join(["index"] * (1 + 2 * rank)),
           f"{ind}{p}_p = memref.extract_aligned_pointer_as_index {mem} : {ty} -> index"]
    acc = f"{p}_m#1"
    for d, i in enumerate(idx):
        out.append(f"{ind}{p}_x{d} = arith.muli {i}, {p}_m#{2 + rank + d} : index")
        out.append(f"{ind}{p}_e{d} = arith.addi {acc}, {p}_x{d} : index")
        acc = f"{p}_e{d}"
    out += [f"{ind}{p}_sz = arith.constant {ELEMENT_BYTES[elem]} : index",
            f"{ind}{p}_by = arith.muli {acc}, {p}_sz : index",
            f"{ind}{p}_ai = arith.addi {p}_p, {p}_by : index",
            f"{ind}{p}_a = arith.index_cast {p}_ai : index to i64",
            f"{ind}{p}_n = arith.constant {ELEMENT_BYTES[elem]} : i64"]
    return "\n".join(out) + "\n"


def _elem(shape: str) -> str:
    return shape.strip().split("x")[-1]


def gm_scalar_accesses(text: str) -> str:
    count = [0]

    def load(m):
        ind, res, mem, idx, ty, shape = m.groups()
        count[0] += 1
        p, elem = f"%__hivm_gs{count[0]}", _elem(shape)
        zero = "0.0" if elem.startswith(("f", "bf")) else "0"
        body = m.group(0).strip().replace(res + " = ", f"{p}_v = ", 1)
        return (_gm_address(ind, p, mem, ty, elem, [i.strip() for i in idx.split(",") if i.strip()]) +
                f"{ind}{p}_k = arith.constant {GM_LOAD} : i64\n"
                f"{ind}{p}_ok = func.call @__hivm_gm_check({p}_a, {p}_n, {p}_k) : (i64, i64, i64) -> i1\n"
                f"{ind}{res} = scf.if {p}_ok -> ({elem}) {{\n{ind}  {body}\n{ind}  scf.yield {p}_v : {elem}\n"
                f"{ind}}} else {{\n{ind}  {p}_z = arith.constant {zero} : {elem}\n{ind}  scf.yield {p}_z : {elem}\n"
                f"{ind}}}")

    def store(m):
        ind, _val, mem, idx, ty, shape = m.groups()
        count[0] += 1
        p, elem = f"%__hivm_gs{count[0]}", _elem(shape)
        return (_gm_address(ind, p, mem, ty, elem, [i.strip() for i in idx.split(",") if i.strip()]) +
                f"{ind}{p}_k = arith.constant {GM_STORE} : i64\n"
                f"{ind}{p}_ok = func.call @__hivm_gm_check({p}_a, {p}_n, {p}_k) : (i64, i64, i64) -> i1\n"
                f"{ind}scf.if {p}_ok {{\n{ind}  {m.group(0).strip()}\n{ind}}}")

    for line in re.findall(r"^.*memref\.(?:load|store|atomic_rmw|generic_atomic_rmw)\b.*#hivm\.address_space<gm>>.*$",
                           text, re.M):
        if not (_GM_LOAD.fullmatch(line) or _GM_STORE.fullmatch(line)):
            raise RewriteError("a global-memory scalar access form the CPU run does not check: " + line.strip())
    text = _GM_STORE.sub(store, _GM_LOAD.sub(load, text))
    return _insert_decls(text, {_GM_CHECK} if count[0] else set())


# `hivm.hir.bitcast %v : memref<S x T1, L, space> -> memref<S x T2, L, space>` (tl.flip's xor trick
# reinterprets float bits as integers and back): the same bytes seen as another element type of the
# same width.  ConvertHIVMToUpstream has no pattern for it (it marks HIVM illegal); an
# unrealized_conversion_cast between the two memref types is exact here because after
# finalize-memref-to-llvm both are the same descriptor struct (LLVM pointers are opaque), so
# reconcile-unrealized-casts folds the cast chain to nothing.  Other bitcasts are refused.
_BITCAST = re.compile(r"^(\s*)(%[\w.]+) = hivm\.hir\.bitcast (%[\w.]+) : (memref<([^,>]+)(.*)) -> "
                      r"(memref<([^,>]+)(.*))\s*$", re.M)


def bitcasts(text: str) -> str:
    def rep(m):
        ind, res, src, t1, shape1, rest1, t2, shape2, rest2 = m.groups()
        dims1, e1 = shape1.rsplit("x", 1) if "x" in shape1 else ("", shape1)
        dims2, e2 = shape2.rsplit("x", 1) if "x" in shape2 else ("", shape2)
        if dims1 != dims2 or rest1 != rest2 or ELEMENT_BYTES.get(e1) is None or \
                ELEMENT_BYTES.get(e1) != ELEMENT_BYTES.get(e2) or "i1" in (e1, e2):
            raise RewriteError("a hivm.hir.bitcast the CPU run does not lower (only a same-shape, same-layout "
                               "reinterpretation between element types of one width): " + m.group(0).strip())
        return f"{ind}{res} = builtin.unrealized_conversion_cast {src} : {t1} to {t2}"

    text = _BITCAST.sub(rep, text)
    left = re.search(r".*hivm\.hir\.bitcast.*", text)
    if left:
        raise RewriteError("a hivm.hir.bitcast form the CPU run does not handle: " + left.group(0).strip())
    return text


# A failed call cannot unwind through native code (runner.py): the block goes on to its return with
# that call's results zeroed.  A `while` loop whose condition depends on them would then spin for
# ever, so each loop's condition also asks whether the launch has failed (`__hivm_running`, a
# volatile load of a word the runner sets at the first failure: runner.abort_word) and the loop
# ends when it has.  A `for` loop ends by itself.
RUNNING_FN = "__hivm_running"
_CONDITION = re.compile(r"^(\s*)scf\.condition\((%[\w.$#-]+)\)", re.M)


def loop_aborts(text: str) -> str:
    """Each scf.while's condition and-ed with `__hivm_running()`."""
    n = [0]

    def rep(m):
        n[0] += 1
        ind, cond, k = m.group(1), m.group(2), n[0]
        return (f"{ind}%__hivm_run{k} = func.call @{RUNNING_FN}() : () -> i1\n"
                f"{ind}%__hivm_go{k} = arith.andi {cond}, %__hivm_run{k} : i1\n"
                f"{ind}scf.condition(%__hivm_go{k})")

    text = _CONDITION.sub(rep, text)
    return _insert_decls(text, {f"  func.func private @{RUNNING_FN}() -> i1"} if n[0] else ())


def rewrite(text: str) -> str:
    """All rewrites, in order."""
    sizes = target_sizes(text)
    return c_interface_prefix(cross_core_flags(pointer_casts(block_ops(bitcasts(gm_scalar_accesses(
        loop_aborts(text)))), sizes)))


# after lowering: each space's global is addressed through an extern call (one buffer per core)
_ADDRESSOF = re.compile(r"^(\s*)(%[\w.]+) = llvm\.mlir\.addressof @__hivm_space_(\w+) : !llvm\.ptr\s*$", re.M)


def per_core_spaces(llvm_dialect: str) -> str:
    spaces = set()

    def rep(m):
        spaces.add(m.group(3))
        return f"{m.group(1)}{m.group(2)} = llvm.call @__hivm_space_base_{m.group(3)}() : () -> !llvm.ptr"

    text = _ADDRESSOF.sub(rep, llvm_dialect)
    if "llvm.mlir.addressof @__hivm_space_" in text:
        raise RewriteError("an on-chip space global is addressed in a form the CPU run does not rewrite: " +
                           re.search(r".*llvm\.mlir\.addressof @__hivm_space_.*", text).group(0).strip())
    # the globals themselves are no longer used
    text = re.sub(r"^(\s*)llvm\.mlir\.global private @__hivm_space_\w+\(.*\{\n(?:.*\n)*?\1\}\n", "", text,
                  flags=re.M)
    text = re.sub(r"^\s*llvm\.mlir\.global private @__hivm_space_\w+\(.*[^{]\n", "", text, flags=re.M)
    decls = {f"  llvm.func @__hivm_space_base_{sp}() -> !llvm.ptr" for sp in spaces}
    return _insert_decls(text, decls)
