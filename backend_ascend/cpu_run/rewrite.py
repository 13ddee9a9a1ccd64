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
  convert-func-to-llvm would apply a second time (`_mlir_ciface__mlir_ciface_aclshmem_my_pe`).
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


def cross_core_flags(text: str) -> str:
    text = re.sub(r"^\s*hivm\.hir\.set_ffts_base_addr %[\w.]+\s*\n", "", text, flags=re.M)
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


def rewrite(text: str) -> str:
    """All rewrites, in order."""
    sizes = target_sizes(text)
    return c_interface_prefix(cross_core_flags(pointer_casts(block_ops(text), sizes)))


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
