"""The module bishengir-compile holds after a chosen top-level pass, for a kernel and signature.

The npu-compile pipeline (backend_ascend/pipeline.py) already prints the module after
convert-hivm-to-std (the one hivmc gets) into its kept files; this runs the same compile
(`pipeline._compile` with a work directory) and reads it, or, for another stop point (e.g.
one-shot-bufferize for the cube path), reruns the same bishengir-compile command printing
after that pass.  Not cached here: stages.py caches what it derives.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

from triton_dist.errors import TritonDistError


def compiled_ir(fn, signature, constexprs=None, *, after=None, target=None, options=None, tools=None):
    """(Outcome, module text); the text is None when the NPU compilers refuse the kernel."""
    from .. import pipeline, toolchain
    from ..frontend import as_jit_function
    after = after or pipeline.STOP_PASS
    target = target or pipeline.DEFAULT_TARGET
    tools = tools or toolchain.find()
    if tools.missing:
        raise pipeline.ToolsMissing("the NPU compile pipeline needs " + "; ".join(tools.missing))
    name = as_jit_function(fn).__name__
    with tempfile.TemporaryDirectory(prefix="triton-dist-ir-") as work:
        outcome = pipeline._compile(fn, name, signature, constexprs, target, options, work, tools)
        if not outcome.accepted:
            return outcome, None
        if after == pipeline.STOP_PASS:
            with open(os.path.join(work, f"kernel.{pipeline.STOP_PASS}.mlir")) as f:
                return outcome, module_only(f.read())
        with open(os.path.join(work, "bishengir-compile.cmd")) as f:
            cmd = f.read().split()
        cmd = [c if not c.startswith("--mlir-print-ir-after=") else f"--mlir-print-ir-after={after}" for c in cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=pipeline.TIMEOUT_S, cwd=work)
        text = pipeline._ir_after(proc.stderr, after)
        if text is None:
            raise TritonDistError(f"bishengir-compile printed no module after pass {after!r} for kernel {name} "
                                  f"(rc={proc.returncode}); its last lines: {proc.stderr.strip().splitlines()[-3:]}")
        return outcome, module_only(text)


def module_only(text: str) -> str:
    """The printed module without what bishengir writes after it (its hivmc complaint)."""
    end = text.rfind("\n}\n")
    return text[:end + 3] if end >= 0 else text
