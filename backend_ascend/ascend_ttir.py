"""The `ttir` stage's passes run by triton-ascend's own libtriton, for TTIR stock Triton refuses.

triton-ascend lifts Triton's power-of-two rule for tensor sizes in its C++ verifier too
(lib/Dialect/Triton/IR/Traits.cpp:99-103 and :114-118, `verifyTensorSize`, commented out
"FIXME:patched triton community", at triton-lang/triton-ascend a84b1eb5), not only in its Python
frontend (triton_dist/language/ascend_shapes.py).  Stock Triton's libtriton keeps it ("Number of
elements must be power-of-two"), so a kernel with a block of 326 traces here (the frontend follows
triton-ascend's rule) but neither verifies nor survives a pass of stock libtriton.  The PyPI wheel
triton-ascend==3.2.0, whose triton-adapter-opt the pipeline already runs (backend_ascend/
toolchain.py), also ships that libtriton (`triton/_C/libtriton.so`, without the rule: checked, its
binary has no such message), a CPython 3.11 extension.  For such a kernel the TTIR passes of
frontend._ttir_passes run in it, in a child process (it cannot share a process with stock Triton's
libtriton), and verify the module with triton-ascend's own rules.

The file is taken from the same wheel the adapter comes from, on first use (pip download, as
toolchain.fetch_adapter does; toolchain.fetch_libtriton), its sha256 pinned there and checked; a file
with another digest is never loaded.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

from triton_dist.errors import TritonDistError

from . import toolchain

# triton-ascend's `ttir` stage, in order: (pass group, adder) of libtriton's `passes` module; run by
# frontend._ttir_passes on stock libtriton and by run_passes below on triton-ascend's own.  The table
# lives here, below the frontend, which imports run_passes from this module.
TTIR_PASSES = (("common", "add_inliner"), ("ttir", "add_combine"), ("common", "add_canonicalizer"),
               ("ttir", "add_reorder_broadcast"), ("common", "add_cse"), ("common", "add_licm"),
               ("common", "add_symbol_dce"), ("ttir", "add_loop_unroll"))


class Unavailable(TritonDistError):
    """triton-ascend's libtriton cannot be had or run here (the kernel then cannot be compiled)."""


def cached_libtriton() -> str:
    return toolchain.cached_libtriton()


_VERIFIED: dict = {}     # cache path -> the verified file: hashing 130 MB costs ~0.3 s, once a process


def fetch_libtriton() -> str:
    """The verified file (fetched once into the adapter's cache directory, toolchain.fetch_libtriton);
    Unavailable otherwise."""
    path = cached_libtriton()
    if path in _VERIFIED and os.path.exists(_VERIFIED[path]):
        return _VERIFIED[path]
    got, why = toolchain.fetch_libtriton()
    if got is None:
        raise Unavailable(why)
    _VERIFIED[path] = got
    return got


# The child: loads the extension under its own name (its init function is PyInit_libtriton), parses
# the module with triton-ascend's dialects, runs the passes, prints it.
_CHILD = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("libtriton", sys.argv[1])
lt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lt)
ir, passes = lt.ir, lt.passes
ctx = ir.context()
ir.load_dialects(ctx)
mod = ir.parse_mlir_module(sys.argv[2], ctx)
mod.context = ctx
pm = ir.pass_manager(ctx)
for group, adder in json.loads(sys.argv[3]):      # TTIR_PASSES
    getattr(getattr(passes, group), adder)(pm)
pm.run(mod)
sys.stdout.write(mod.str())
"""

_LOC = re.compile(r"\s+loc\((?:[^()]|\([^()]*\))*\)")


def run_passes(ttir: str, name: str) -> str:
    """The TTIR after TTIR_PASSES, run by triton-ascend 3.2.0's libtriton (text, no
    locations); TritonDistError with its diagnostics when it refuses the module."""
    from .ttir_forms import to_320
    lib = fetch_libtriton()
    ttir, _ = to_320(ttir)        # a newer stock Triton's forms, which this 3.2.0 libtriton cannot parse
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, f"{name}.ttir.mlir")
        with open(src, "w") as f:
            f.write(ttir)
        proc = subprocess.run([sys.executable, "-c", _CHILD, lib, src, json.dumps(TTIR_PASSES)],
                              capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()] or proc.stderr.strip().splitlines()[-3:]
        raise TritonDistError(f"cannot lower kernel {name}: triton-ascend's libtriton ({toolchain.TRITON_ASCEND_VERSION}) "
                              f"refuses its TTIR:\n  " + "\n  ".join(errors))
    lines = [ln for ln in proc.stdout.splitlines() if not ln.startswith("#loc")]
    return "\n".join(_LOC.sub("", ln) for ln in lines) + "\n"


class TextModule:
    """What build_ttir returns for such a kernel: the passes' text; walk() visits the traced module
    (the ops module_facts looks for: dots, distributed carriers)."""

    def __init__(self, text: str, traced):
        self._text, self._traced = text, traced

    def str(self) -> str:
        return self._text

    def str_nodebug(self) -> str:
        return self._text

    def walk(self, fn):
        return self._traced.walk(fn)

    def __str__(self) -> str:
        return self._text
