"""Newer stock Triton's TTIR in the form triton-ascend 3.2.0's frontend prints it.

triton-adapter-opt 3.2.0 parses the TTIR of its own frontend (Triton 3.2 with triton-ascend's
triton_patch).  Stock Triton 3.5-3.7 prints the same forms for what the kernels here use; 3.8
and 3.9 print four of them differently, and the adapter then fails to *parse* the module,
which is no verdict on the kernel.  Each form is rewritten to what 3.2's frontend emits for
the same source, read in triton-lang/triton-ascend at commit 8edbaaed2ad70ffae4beb033707d4d52dc15a9b1
(what the 3.2.0 wheel was built from; docs/ascend.md):

- cache modifier / eviction policy of tt.load, tt.store, tt.descriptor_load.  3.9 prints them as
  one attribute, `{cachePolicy = #tt.cache_policy<cache_modifier = cg, eviction_policy = evict_last>}`
  (the adapter: "dialect 'tt' provides no attribute parsing hook").  3.2 prints them as keywords
  between the operands and the attribute dictionary, defaults (`none`, `evict_normal`) left out:
  `tt.load %p cacheModifier = cg evictionPolicy = evict_last : ...`
  (triton_patch/include/triton/Dialect/Triton/IR/TritonOps.td, TT_LoadOp's assemblyFormat,
  `oilist(cacheModifier = $cache | evictionPolicy = $evict)`; TT_StoreOp and TT_DescriptorLoadOp
  alike; the enum spellings in TritonAttrDefs.td:10-16, 35-37).
- tensor descriptors.  3.8/3.9 print the block type bare, `!tt.tensordesc<16x16xf32>` and
  `tt.make_tensor_descriptor ... : <f32>, <16x16xf32>` (the adapter: "failed to parse
  TT_TensorDescType parameter 'blockType' which is to be a `RankedTensorType`"); 3.2's
  TT_TensorDescType is `<` $blockType `>` with a RankedTensorType parameter, printed
  `!tt.tensordesc<tensor<16x16xf32>>` (TritonTypes.td:145-153).
- bf16 <-> fp16 casts.  3.9 makes them one `tt.fp_to_fp %x, rounding = rtne` (the adapter leaves it
  unconverted and bishengir-compile fails: "Dialect `tt' not found for custom op 'tt.fp_to_fp'");
  3.2's semantic.cast goes through fp32 for a 16-bit float source with a destination other than
  fp32 (triton_patch/python/triton_patch/language/semantic.py:121-124): `arith.extf` to f32, then
  `arith.truncf` (rtne, the default rounding) to the destination.  Other rounding modes stay
  tt.fp_to_fp, as 3.2 emits them too (semantic.py:115-119).
- tl.debug_barrier.  3.9 prints `ttg.barrier all` (the adapter: "Dialect `ttg' not found for custom op
  'ttg.barrier'"); 3.2's builder makes `gpu.barrier` (triton_patch/python/src/ir.cc:1696-1697,
  create_barrier -> mlir::gpu::BarrierOp), as stock 3.5-3.7 print it.

Whatever else of a newer Triton the adapter cannot parse is caught by the pipeline (a parse of
the module with no passes) and reported as "cannot lower" (exit 2), never as a refusal.
"""
from __future__ import annotations

import re

_CACHE_OPS = ("tt.load", "tt.store", "tt.descriptor_load")     # the ops with the oilist in 3.2
_DEFAULTS = {"cache_modifier": "none", "eviction_policy": "evict_normal"}
_CACHE_POLICY = re.compile(r"cachePolicy\s*=\s*#tt\.cache_policy<\s*cache_modifier\s*=\s*(?P<cache>\w+)\s*,\s*"
                           r"eviction_policy\s*=\s*(?P<evict>\w+)\s*>")
_OP = re.compile(r"^\s*(?:%[\w.$-]+(?::\d+)?\s*=\s*)?(?P<op>\"?[\w.]+\"?)")
# a bare block type inside tensordesc< >: dims x element type, no `tensor<`
_BARE_DESC = re.compile(r"!tt\.tensordesc<(?!tensor<)(?P<body>(?:\d+x)+[\w]+)>")
_MAKE_DESC_TYPES = re.compile(r"(?P<head>\btt\.make_tensor_descriptor\b.*:\s*<[^<>]+>\s*,\s*)<(?!tensor<)"
                              r"(?P<body>(?:\d+x)+\w+)>")
_FP_TO_FP = re.compile(r"^(?P<indent>\s*)(?P<res>%[\w.$-]+)\s*=\s*tt\.fp_to_fp\s+(?P<src>%[\w.$#-]+)\s*,\s*"
                       r"rounding\s*=\s*rtne\s*:\s*(?P<st>\S+)\s*->\s*(?P<dt>\S+?)(?P<tail>\s+loc\(.*\))?\s*$")
_HALF = ("f16", "bf16")
_TTG_BARRIER_ALL = re.compile(r"^(?P<indent>\s*)ttg\.barrier\s+all(?P<tail>\s+loc\(.*\))?\s*$")


def _cache_policy(line: str) -> str:
    m = _CACHE_POLICY.search(line)
    if m is None:
        return line
    op = _OP.match(line)
    keywords = []
    if m["cache"] != _DEFAULTS["cache_modifier"]:
        keywords.append(f"cacheModifier = {m['cache']}")
    if m["evict"] != _DEFAULTS["eviction_policy"]:
        keywords.append(f"evictionPolicy = {m['evict']}")
    if keywords and (op is None or op["op"] not in _CACHE_OPS):
        return line            # an op 3.2 has no such keywords for: left for the parse check to report
    # take the entry out of its attribute dictionary (with one separating comma), drop an empty {}
    start, end = m.span()
    before, after = line[:start], line[end:]
    if re.search(r",\s*$", before):
        before = re.sub(r",\s*$", "", before)
    elif re.match(r"\s*,", after):
        after = re.sub(r"^\s*,\s*", "", after)
    line = before + after
    line = re.sub(r"\s*\{\s*\}", "", line, count=1)
    if not keywords:
        return line
    # the keywords go right before the attribute dictionary or, without one, before the ` : types`
    brace = line.find(" {")
    colon = line.rfind(" : ")
    at = brace if 0 <= brace < (colon if colon >= 0 else len(line)) else colon
    if at < 0:
        return line
    return line[:at] + " " + " ".join(keywords) + line[at:]


def _element(ty: str) -> str:
    """bf16 of `tensor<16x8xbf16>` or of `bf16`."""
    return re.sub(r"^tensor<(?:\d+x)*", "", ty).rstrip(">")


def _fp_to_fp(line: str):
    m = _FP_TO_FP.match(line)
    if m is None:
        return None
    st, dt = m["st"], m["dt"]
    se, de = _element(st), _element(dt)
    if se not in _HALF or de not in _HALF or se == de:
        return None
    mid = st[:len(st) - len(se) - st.endswith(">")] + "f32" + (">" if st.endswith(">") else "")
    tmp = f"%td_fp32_{m['res'][1:].replace('#', '_').replace('.', '_').replace('-', '_').replace('$', '_')}"
    tail = m["tail"] or ""
    return (f"{m['indent']}{tmp} = arith.extf {m['src']} : {st} to {mid}{tail}\n"
            f"{m['indent']}{m['res']} = arith.truncf {tmp} : {mid} to {dt}{tail}")


def to_320(ttir: str) -> tuple:
    """(text, forms rewritten: a list of names) of a TTIR module, in triton-ascend 3.2.0's forms."""
    out, done = [], []
    for line in ttir.split("\n"):
        new = line
        if "cachePolicy" in new:
            new = _cache_policy(new)
            if new != line:
                done.append("cache_policy")
        if "tensordesc<" in new or "make_tensor_descriptor" in new:
            prev = new
            new = _MAKE_DESC_TYPES.sub(lambda m: f"{m['head']}<tensor<{m['body']}>>", new)
            new = _BARE_DESC.sub(lambda m: f"!tt.tensordesc<tensor<{m['body']}>>", new)
            if new != prev:
                done.append("tensordesc")
        if "ttg.barrier" in new:
            m = _TTG_BARRIER_ALL.match(new)
            if m is not None:
                new = f"{m['indent']}gpu.barrier{m['tail'] or ''}"
                done.append("barrier")
        if "tt.fp_to_fp" in new:
            cast = _fp_to_fp(new)
            if cast is not None:
                new = cast
                done.append("fp_to_fp")
        out.append(new)
    return "\n".join(out), sorted(set(done))


# --- calls no triton-ascend frontend emits --------------------------------------------------------------------
_CUDA_LIBDEVICE = re.compile(r'tt\.extern_elementwise\b[^\n]*\bsymbol\s*=\s*"(?P<sym>__nv_\w+)"')


def cuda_libdevice_calls(ttir: str) -> list:
    """The CUDA libdevice symbols (`__nv_tanhf`) a TTIR module calls.  Stock Triton's tl.extra.libdevice
    resolves to CUDA's library for the frontend's stand-in target; triton-ascend's resolves the same call
    to its own (`__hmf_*`, ascend/language/ascend/libdevice.py at 8edbaaed, e.g. tanh of fp32 ->
    "__hmf_tanhf", lines 79-83), the only extern calls the 3.2.0 adapter converts
    (TritonOpConverter.cpp:1261-1270).  A module with `__nv_` calls is not what triton-ascend would
    compile: no verdict can be had for it here."""
    return sorted({m["sym"] for m in _CUDA_LIBDEVICE.finditer(ttir)})

