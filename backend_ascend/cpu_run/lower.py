"""Rewritten HIVM module -> LLVM IR: AscendNPU-IR's CPU-runner passes run by bishengir-opt, then
Triton's bundled MLIR (libtriton) as mlir-translate (no translation code ships in the
ascendnpu-ir wheel: evidence/NPU_PIPELINE_ON_CPU.md §1).

The pass list is `buildCPURunnerPipeline` (AscendNPU-IR v1.2.0,
bishengir/lib/ExecutionEngine/ExecutionEnginePipelines.cpp) without its first pass,
execution-engine-create-host-main, which needs a HOST entry with tensor/memref-only arguments
and refuses every Triton kernel ("didn't find host functions.", CreateHostMain.cpp:312).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

from triton_dist.errors import TritonDistError

CPU_RUNNER_PASSES = (
    "--execution-engine-convert-hfusion-to-upstream",
    "--execution-engine-convert-hivm-to-upstream",
    "--decompose-tensor-concat",
    "--empty-tensor-to-alloc-tensor",
    "--one-shot-bufferize=bufferize-function-boundaries allow-return-allocs-from-loops "
    "function-boundary-type-conversion=identity-layout-map",
    "--buffer-deallocation-pipeline",
    "--convert-bufferization-to-memref",
    "--finalizing-bufferize",
    "--annotation-lowering",
    "--expand-strided-metadata",
    "--convert-linalg-to-loops",
    "--canonicalize-ext=disable-patterns=ReinterpretCastConstantArgumentFolder",
    "--convert-scf-to-cf", "--lower-affine", "--arith-expand",
    "--convert-vector-to-llvm", "--convert-math-to-llvm", "--finalize-memref-to-llvm",
    "--convert-func-to-llvm", "--convert-cf-to-llvm", "--convert-index-to-llvm", "--convert-arith-to-llvm",
    "--reconcile-unrealized-casts",
)
TIMEOUT_S = 600


class LoweringFailed(TritonDistError):
    """The CPU lowering of a compiled module failed (the message carries bishengir-opt's lines)."""


def bishengir_opt(compiler: str) -> str:
    """bishengir-opt beside the bishengir-compile the pipeline uses (same wheel or CANN)."""
    path = os.path.join(os.path.dirname(compiler), "bishengir-opt")
    if os.access(path, os.X_OK):
        return path
    found = shutil.which("bishengir-opt")
    if found:
        return found
    raise LoweringFailed(f"no bishengir-opt beside {compiler} nor on PATH: the CPU run needs AscendNPU-IR's "
                         f"bishengir-opt (the ascendnpu-ir wheel ships it)")


def to_llvm_dialect(text: str, opt: str) -> str:
    with tempfile.TemporaryDirectory(prefix="triton-dist-hivm-") as work:
        src, dst = os.path.join(work, "in.mlir"), os.path.join(work, "out.mlir")
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run([opt, src, *CPU_RUNNER_PASSES, "-o", dst], capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        if proc.returncode != 0 or not os.path.exists(dst):
            lines = [ln for ln in proc.stderr.splitlines() if "error" in ln or "LLVM ERROR" in ln][:6]
            raise LoweringFailed("AscendNPU-IR's CPU-runner passes (bishengir-opt) could not lower the compiled "
                                 "module:\n  " + "\n  ".join(lines or proc.stderr.strip().splitlines()[-6:]))
        with open(dst) as f:
            return f.read()


_FOREIGN = r"(?:hacc|hivm|hfusion|annotation|mathExt|memref_ext|tt|dlti)"


def _strip_module_attrs(text: str) -> str:
    i = text.find("module attributes {")
    if i < 0:
        return text
    j, depth = i + len("module attributes {"), 1
    while depth:
        depth += (text[j] == "{") - (text[j] == "}")
        j += 1
    return text[:i] + "module" + text[j:]


_ARG_ATTRS = re.compile(r"(:\s*[^,(){}]+?)\s*\{([^{}]*)\}(?=[,)])")


def _drop_foreign_attrs(text: str) -> str:
    """Discardable attributes of dialects Triton's MLIR does not register (hacc.entry, ...)."""
    def args(m):
        kept = [a.strip() for a in _split_top(m.group(2)) if not re.match(r"\s*" + _FOREIGN + r"\.", a)]
        return m.group(1) + (" {" + ", ".join(kept) + "}" if kept else "")
    text = _ARG_ATTRS.sub(args, text)
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("llvm.mlir.global") and line.rstrip().endswith("}") and " {" in line:
            # a global's trailing attribute dict (a device_print prefix string: hivm.func_core_type)
            head, _, body = line.rstrip()[:-1].rpartition(" {")
            kept = [a.strip() for a in _split_top(body) if not re.match(r"\s*" + _FOREIGN + r"\.", a)]
            out.append(head + (" {" + ", ".join(kept) + "}" if kept else ""))
            continue
        if "attributes {" in line and re.search(_FOREIGN + r"\.", line):
            head, _, rest = line.partition("attributes {")
            body, close, tail = rest.rpartition("}")
            kept = [a for a in _split_top(body) if not re.match(r"\s*" + _FOREIGN + r"\.", a)]
            line = head + ("attributes {" + ", ".join(k.strip() for k in kept) + close + tail if kept
                           else tail.lstrip())
        out.append(line)
    return "\n".join(out)


def _split_top(s: str) -> list:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "<{[(":
            depth += 1
        elif ch in ">}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


def to_llvm_ir(llvm_dialect: str) -> str:
    """LLVM-dialect MLIR -> LLVM IR text through Triton's libtriton (parse_mlir_module, llvm.to_module)."""
    from triton._C.libtriton import ir, llvm
    text = _drop_foreign_attrs(_strip_module_attrs(llvm_dialect))
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        ctx = ir.context()
        ir.load_dialects(ctx)
        mod = ir.parse_mlir_module(path, ctx)
        mod.context = ctx
        return str(llvm.to_module(mod, llvm.context()))
    except Exception as e:  # noqa: BLE001 - the parser's own words are the message
        raise LoweringFailed(f"Triton's MLIR could not translate the CPU-lowered module to LLVM IR: {e}") from e
    finally:
        os.unlink(path)
